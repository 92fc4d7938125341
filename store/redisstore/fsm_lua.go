package redisstore

import (
	"fmt"
	"slices"
	"strings"

	"github.com/ksana-dev/ksana/fsm"
)

// Status words of the generated script's reply; the Go side maps each
// refusal back to the sentinel of package fsm.
const (
	fsmOK        = "ok"
	fsmDup       = "dup"
	fsmNotFound  = "not_found"
	fsmCorrupt   = "corrupt"
	fsmUnknownEv = "unknown_event"
	fsmBadAtt    = "invalid_attempt"
	fsmStale     = "stale_attempt"
	fsmFuture    = "future_attempt"
	fsmInvalid   = "invalid_transition"
	fsmWrongNode = "wrong_node"
)

// fsmRefusals maps the script's refusals to fsm's sentinels.
var fsmRefusals = map[string]error{
	fsmUnknownEv: fsm.ErrUnknownEvent,
	fsmBadAtt:    fsm.ErrInvalidAttempt,
	fsmStale:     fsm.ErrStaleAttempt,
	fsmFuture:    fsm.ErrFutureAttempt,
	fsmInvalid:   fsm.ErrInvalidTransition,
}

// fsmApplyLua is the transition script, generated from fsm.Table and
// fsm.Duplicates when the package loads: the rules exist only in package
// fsm. Its checks run in the order of fsm.Machine.Apply.
//
// A dispatch adds its node to the field tried; a step (or duplicate) that
// leaves the job in FINISHED or FAILED stores the outcome given, unless
// the job has one.
//
//	KEYS[1] = {prefix}:v1:jobs:{job:<id>}:fsm
//	ARGV    = event, attempt, node_id (for dispatch), max_attempts, ttl_ms,
//	          outcome (JSON; optional)
//	reply   = without an outcome: "status state attempt created_at_ms stamp " + nodes,
//	          "not_found", or "corrupt field value": one bulk string, which
//	          costs the server less than an array. stamp is updated_at_ms,
//	          followed by "/" dispatched_at_ms once the job was dispatched.
//	          nodes is the job's
//	          node_id and the node whose reservation the transition frees:
//	          "-" node_id (none freed), "=" node_id (node_id freed), "0"
//	          freed (node_id now empty), or "#" len(node_id) " " node_id
//	          freed (any other pair); with an outcome: {that line, spec,
//	          tried, waiters, outcome}, where outcome is "=" when this step
//	          stored the one passed (which need not travel back).
var fsmApplyLua = GenerateFSMLua()

// fsmBatchLua is the transition script applying one event to several jobs
// at once (a standalone Redis only, where a script may touch keys of any
// slot): the same functions, called once per key.
//
//	KEYS    = the jobs' fsm keys
//	ARGV    = event, max_attempts, ttl_ms, then the attempt of each job
//	reply   = one line per job, as fsmApplyLua's without an outcome
var fsmBatchLua = func() string {
	src := fsmApplyLua
	head, rest, ok := strings.Cut(src, fsmArgsLua)
	body, _, ok2 := strings.Cut(rest, fsmCallLua)
	if !ok || !ok2 {
		panic("redisstore: the transition script lost its argument or call lines")
	}
	return head + `local key, attempt, node, outcome
local ev, max, ttl = ARGV[1], tonumber(ARGV[2]), ARGV[3]
node, outcome = '', ''
` + body + `local out = {}
for i = 1, #KEYS do
  key, attempt = KEYS[i], tonumber(ARGV[3 + i])
  out[i] = step()
end
return out
`
}()

// The lines of the transition script that fsmBatchLua replaces: the
// arguments of one job, and the call of its step.
const (
	fsmArgsLua = "local key = KEYS[1]\nlocal ev, attempt, node, max, ttl, outcome = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6] or ''\n"
	fsmCallLua = "local line = step()\n"
)

// GenerateFSMLua returns the Lua source of the transition script, built
// from the table of package fsm. It is deterministic.
func GenerateFSMLua() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	q := func(s string) string { return fmt.Sprintf("%q", s) } // state and event names are plain ASCII

	w("-- Generated from package fsm's transition table by redisstore.GenerateFSMLua. Do not edit.\n")
	// Known states and events.
	var states, events []string
	for _, s := range fsm.States() {
		states = append(states, "s == "+q(string(s)))
	}
	for _, e := range fsm.Events() {
		events = append(events, "e == "+q(string(e)))
	}
	w("local function known_state(s) return %s end\n", strings.Join(states, " or "))
	w("local function known_event(e) return %s end\n", strings.Join(events, " or "))

	// Moves: move(s, e) returns to, retry, free (nil when the table has no move).
	w("local function move(s, e)\n")
	byFrom := map[fsm.State][]fsm.Transition{}
	for _, t := range fsm.Table() {
		byFrom[t.From] = append(byFrom[t.From], t)
	}
	kw := "if"
	for _, s := range fsm.States() {
		ts := byFrom[s]
		if len(ts) == 0 {
			continue
		}
		w("  %s s == %s then\n", kw, q(string(s)))
		kw2 := "if"
		for _, t := range ts {
			w("    %s e == %s then return %s, %t, %t\n", kw2, q(string(t.Event)), q(string(t.To)), t.Retry, t.FreeReservation)
			kw2 = "elseif"
		}
		w("    end\n")
		kw = "elseif"
	}
	if kw == "elseif" {
		w("  end\n")
	}
	w("  return nil\nend\n")

	// frees(e): a duplicate of such an event names the node again.
	var frees []string
	for _, e := range fsm.Events() {
		if e.Frees() {
			frees = append(frees, "e == "+q(string(e)))
		}
	}
	if len(frees) == 0 {
		frees = []string{"false"}
	}
	w("local function frees(e) return %s end\n", strings.Join(frees, " or "))

	// Duplicates: dup(s, e).
	w("local function dup(s, e)\n")
	dups := fsm.Duplicates()
	kw = "if"
	for _, s := range fsm.States() {
		evs := dups[s]
		if len(evs) == 0 {
			continue
		}
		slices.Sort(evs)
		var c []string
		for _, e := range evs {
			c = append(c, "e == "+q(string(e)))
		}
		w("  %s s == %s then return %s\n", kw, q(string(s)), strings.Join(c, " or "))
		kw = "elseif"
	}
	if kw == "elseif" {
		w("  end\n")
	}
	w("  return false\nend\n")

	// The reply and the stored fields are built from strings only: Lua
	// formats a number with sprintf, which costs more than the rest of the
	// script's arithmetic together. The attempt is passed through as
	// stored (it must be decimal digits) and formatted only when it grows;
	// the time in milliseconds is TIME's seconds followed by the first
	// three of its six digits of microseconds.
	w(`local key = KEYS[1]
local ev, attempt, node, max, ttl, outcome = ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5], ARGV[6] or ''
-- keep stores the outcome of a duplicate that leaves the job ended, unless
-- one is stored (a move stores it with its other fields).
local stored = false
local function keep(s)
  if outcome ~= '' and (s == %[14]q or s == %[9]q) and redis.call('HEXISTS', key, 'outcome') == 0 then
    redis.call('HSET', key, 'outcome', outcome)
    stored = true
  end
end
local function step()
local h = redis.call('HMGET', key, 'state', 'attempt', 'node_id', 'created_at_ms', 'updated_at_ms', 'dispatched_at_ms')
local state, cur, curnode, created, updated, dsp = h[1], h[2], h[3] or '', h[4], h[5], h[6]
if not state and not cur and not created then
  if redis.call('EXISTS', key) == 0 then return %[1]q end
end
if not state or not known_state(state) then return %[2]q .. ' state ' .. tostring(state) end
if not cur or not string.find(cur, '^%%d+$') then return %[2]q .. ' attempt ' .. tostring(cur) end
local a = tonumber(cur)
if a < 1 then return %[2]q .. ' attempt ' .. cur end
if not tonumber(created) then return %[2]q .. ' created_at_ms ' .. tostring(created) end
if not tonumber(updated) then return %[2]q .. ' updated_at_ms ' .. tostring(updated) end
if dsp and not tonumber(dsp) then return %[2]q .. ' dispatched_at_ms ' .. dsp end
-- The reply's time stamp: updated_at_ms, and /dispatched_at_ms once dispatched.
local upd = updated
if dsp then upd = updated .. '/' .. dsp end
local err
if not known_event(ev) then err = %[3]q
elseif attempt < 1 then err = %[4]q
elseif attempt < a then err = %[5]q
elseif attempt > a then err = %[6]q
end
if err then return err .. ' ' .. state .. ' ' .. cur .. ' ' .. created .. ' ' .. upd .. ' -' .. curnode end
if node ~= '' and ev ~= %[10]q and node ~= curnode then
  return %[13]q .. ' ' .. state .. ' ' .. cur .. ' ' .. created .. ' ' .. upd .. ' -' .. curnode
end
local to, retry, free = move(state, ev)
if not to then
  if dup(state, ev) then
    local t = ' -'
    if frees(ev) and curnode ~= '' then t = ' =' end
    keep(state)
    return %[7]q .. ' ' .. state .. ' ' .. cur .. ' ' .. created .. ' ' .. upd .. t .. curnode
  end
  return %[8]q .. ' ' .. state .. ' ' .. cur .. ' ' .. created .. ' ' .. upd .. ' -' .. curnode
end
if retry then
  if a < max then cur = tostring(a + 1) else to = %[9]q end
end
local newnode = curnode
if ev == %[10]q then newnode = node elseif to == %[11]q then newnode = '' end
local freenode = ''
if free then freenode = curnode end
local t = redis.call('TIME')
local now = t[1] .. string.sub('00000' .. t[2], -6, -4)
if outcome ~= '' and (to == %[14]q or to == %[9]q) and redis.call('HEXISTS', key, 'outcome') == 0 then
  redis.call('HSET', key, 'state', to, 'attempt', cur, 'node_id', newnode, 'updated_at_ms', now, 'outcome', outcome)
  stored = true
else
  redis.call('HSET', key, 'state', to, 'attempt', cur, 'node_id', newnode, 'updated_at_ms', now)
end
if ev == %[10]q then
  dsp = now
  redis.call('HSET', key, 'dispatched_at_ms', now)
  local tried = redis.call('HGET', key, 'tried') or ''
  local seen = false
  for n in string.gmatch(tried, '[^\n]+') do if n == node then seen = true end end
  if not seen then
    if tried == '' then tried = node else tried = tried .. '\n' .. node end
    redis.call('HSET', key, 'tried', tried)
  end
end
if to == %[11]q and ev ~= %[15]q then redis.call('HSET', key, 'queued_at_ms', now) end
redis.call('PEXPIRE', key, ttl)
local tail
if freenode == '' then tail = '-' .. newnode
elseif freenode == newnode then tail = '=' .. newnode
elseif newnode == '' then tail = '0' .. freenode
else tail = '#' .. #newnode .. ' ' .. newnode .. freenode end
local stamp = now
if dsp then stamp = now .. '/' .. dsp end
return %[12]q .. ' ' .. to .. ' ' .. cur .. ' ' .. created .. ' ' .. stamp .. ' ' .. tail
end
local line = step()
if outcome == '' then return line end
if stored then
  local b = redis.call('HMGET', key, 'spec', 'tried', 'waiters')
  return {line, b[1] or '', b[2] or '', b[3] or '', '='}
end
local b = redis.call('HMGET', key, 'spec', 'tried', 'waiters', 'outcome')
return {line, b[1] or '', b[2] or '', b[3] or '', b[4] or ''}
`, fsmNotFound, fsmCorrupt, fsmUnknownEv, fsmBadAtt, fsmStale, fsmFuture, fsmDup, fsmInvalid,
		string(fsm.Failed), string(fsm.Dispatch), string(fsm.Created), fsmOK, fsmWrongNode, string(fsm.Finished),
		string(fsm.Undelivered))
	return b.String()
}

// jobOpenLua opens a job unless it exists: its lifecycle in the initial
// state, its spec and its first waiter, and, given a node, its first
// dispatch to it (the state is then fsm's state after a dispatch, passed
// by the caller). It returns the stored fields either way. Given a second
// key (a standalone Redis, where a script may touch keys of any slot), it
// first adds the job's deadline to that due shard unless the job has one,
// in the same atomic step: the record never exists without its deadline.
//
// Given a third key (the node's reserved ZSET; standalone only as well),
// a job it creates first takes one of the node's slots, as the reserve
// script does; when the node is full it stores nothing and returns {1 -
// the count}.
//
//	KEYS[1] = the job's fsm key; KEYS[2] = its due shard (optional);
//	KEYS[3] = the node's reserved ZSET (optional)
//	ARGV    = state, attempt, ttl_ms, spec (JSON), session_id, node_id ("" for none),
//	          due (Unix ms), job_id, capacity and reservation ttl_ms (with KEYS[3])
//	reply   = {0, state, attempt, node_id, created_at_ms, updated_at_ms,
//	          dispatched_at_ms, queued_at_ms, spec, tried, waiters, outcome} for a job that
//	          exists, {1, created_at_ms} for one opened now (the rest is
//	          what the caller passed)
const jobOpenLua = reserveFn + `
local key = KEYS[1]
if redis.call('EXISTS', key) == 1 then
  if KEYS[2] then redis.call('ZADD', KEYS[2], 'NX', ARGV[7], ARGV[8]) end
  local h = redis.call('HMGET', key, 'state', 'attempt', 'node_id', 'created_at_ms', 'updated_at_ms', 'dispatched_at_ms', 'queued_at_ms', 'spec', 'tried', 'waiters', 'outcome')
  return {0, h[1], h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11]}
end
local now
if KEYS[3] then
  local r
  r, now = reserve(KEYS[3], ARGV[8], tonumber(ARGV[9]), tonumber(ARGV[10]))
  if r <= 0 then return {r} end
else
  local t = redis.call('TIME')
  now = t[1] .. string.sub('00000' .. t[2], -6, -4)
end
if KEYS[2] then redis.call('ZADD', KEYS[2], 'NX', ARGV[7], ARGV[8]) end
if ARGV[6] ~= '' then
  redis.call('HSET', key, 'state', ARGV[1], 'attempt', ARGV[2], 'node_id', ARGV[6], 'created_at_ms', now, 'updated_at_ms', now, 'spec', ARGV[4], 'waiters', ARGV[5], 'tried', ARGV[6], 'dispatched_at_ms', now)
else
  redis.call('HSET', key, 'state', ARGV[1], 'attempt', ARGV[2], 'node_id', ARGV[6], 'created_at_ms', now, 'updated_at_ms', now, 'spec', ARGV[4], 'waiters', ARGV[5])
end
redis.call('PEXPIRE', key, ARGV[3])
return {1, now}
`
