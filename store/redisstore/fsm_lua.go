package redisstore

import (
	_ "embed"
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

// The transition scripts are the static Lua of lua/fsm_step.lua (the step
// of one job) with lua/fsm_apply.lua (one job) or lua/fsm_batch.lua
// (several jobs, on a standalone Redis), after lines generated from
// package fsm's table ([GenerateFSMLua]): the rules exist only in package
// fsm, and the Lua a reviewer reads is the Lua that runs. The whole
// scripts are kept in testdata/ as golden files (go test -run
// TestFSMLuaGolden -update refreshes them).
var (
	//go:embed lua/fsm_step.lua
	fsmStepLua string
	//go:embed lua/fsm_apply.lua
	fsmApplyMainLua string
	//go:embed lua/fsm_batch.lua
	fsmBatchMainLua string
)

// fsmApplyLua is the transition script of one job: see lua/fsm_apply.lua.
var fsmApplyLua = GenerateFSMLua()

// fsmBatchLua applies one event to several jobs at once: see
// lua/fsm_batch.lua.
var fsmBatchLua = fsmTablesLua() + fsmStepLua + fsmBatchMainLua

// GenerateFSMLua returns the Lua source of the transition script: the
// tables generated from package fsm's table and duplicates, followed by
// the static step and its entry (lua/fsm_step.lua, lua/fsm_apply.lua). It
// is deterministic.
func GenerateFSMLua() string { return fsmTablesLua() + fsmStepLua + fsmApplyMainLua }

// fsmTablesLua returns the generated lines: the known states and events,
// the moves, the replays, the events that free a node, and the names the
// static step uses.
func fsmTablesLua() string {
	var b strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&b, format, args...) }
	q := func(s string) string { return fmt.Sprintf("%q", s) } // state and event names are plain ASCII
	w("-- Generated from package fsm's transition table by redisstore.GenerateFSMLua.\n")
	w("-- Do not edit: change fsm's table, or the static Lua below it (store/redisstore/lua).\n")
	var states, events []string
	for _, s := range fsm.States() {
		states = append(states, fmt.Sprintf("[%s] = true", q(string(s))))
	}
	for _, e := range fsm.Events() {
		events = append(events, fmt.Sprintf("[%s] = true", q(string(e))))
	}
	w("local STATES = {%s}\n", strings.Join(states, ", "))
	w("local EVENTS = {%s}\n", strings.Join(events, ", "))
	// MOVES[state][event] = {to, retry, frees}.
	w("-- MOVES[state][event] = {to, starts a new attempt, takes the job off its node}\n")
	w("local MOVES = {\n")
	byFrom := map[fsm.State][]fsm.Transition{}
	for _, t := range fsm.Table() {
		byFrom[t.From] = append(byFrom[t.From], t)
	}
	for _, s := range fsm.States() {
		ts := byFrom[s]
		if len(ts) == 0 {
			continue
		}
		var ms []string
		for _, t := range ts {
			ms = append(ms, fmt.Sprintf("[%s] = {%s, %t, %t}", q(string(t.Event)), q(string(t.To)), t.Retry, t.FreeReservation))
		}
		w("  [%s] = {%s},\n", q(string(s)), strings.Join(ms, ", "))
	}
	w("}\n")
	// DUPS[state][event]: a replay in the same attempt.
	w("-- DUPS[state][event]: an event the job has seen in its attempt (a replay)\n")
	w("local DUPS = {\n")
	dups := fsm.Duplicates()
	for _, s := range fsm.States() {
		evs := dups[s]
		if len(evs) == 0 {
			continue
		}
		slices.Sort(evs)
		var ds []string
		for _, e := range evs {
			ds = append(ds, fmt.Sprintf("[%s] = true", q(string(e))))
		}
		w("  [%s] = {%s},\n", q(string(s)), strings.Join(ds, ", "))
	}
	w("}\n")
	var frees []string
	for _, e := range fsm.Events() {
		if e.Frees() {
			frees = append(frees, fmt.Sprintf("[%s] = true", q(string(e))))
		}
	}
	w("-- FREES[event]: some move of the event takes the job off its node\n")
	w("local FREES = {%s}\n", strings.Join(frees, ", "))
	w("local CREATED, FINISHED, FAILED = %s, %s, %s\n", q(string(fsm.Created)), q(string(fsm.Finished)), q(string(fsm.Failed)))
	w("local DISPATCH, UNDELIVERED = %s, %s\n", q(string(fsm.Dispatch)), q(string(fsm.Undelivered)))
	w("local OK, DUP, NOT_FOUND, CORRUPT, WRONG_NODE = %s, %s, %s, %s, %s\n", q(fsmOK), q(fsmDup), q(fsmNotFound), q(fsmCorrupt), q(fsmWrongNode))
	w("local UNKNOWN_EVENT, INVALID_ATTEMPT, STALE_ATTEMPT, FUTURE_ATTEMPT, INVALID_TRANSITION = %s, %s, %s, %s, %s\n",
		q(fsmUnknownEv), q(fsmBadAtt), q(fsmStale), q(fsmFuture), q(fsmInvalid))
	return b.String()
}

// jobOpenLua opens a job unless it exists: its lifecycle in the initial
// state, its spec and its first waiter, and, given a node, its first
// dispatch to it (the state is then fsm's state after a dispatch, passed
// by the caller), with its expiry, ttl and a sixteenth on, in the field
// expires_at_ms and as the key's (see lua/fsm_step.lua). It returns the
// stored fields either way. It first adds
// the job's deadline to its due shard (KEYS[2]) unless the job has one, in
// the same atomic step: the record never exists without its deadline. On
// a cluster the shard lies in the job's slot ([Keys.JobFSM]).
//
// Given a third key (the node's reserved ZSET; standalone only, where a
// script may touch keys of any slot), a job it creates first takes one of
// the node's slots, as the reserve script does; when the node is full it
// stores nothing and returns {1 - the count}.
//
//	KEYS[1] = the job's fsm key; KEYS[2] = its due shard;
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
  redis.call('ZADD', KEYS[2], 'NX', ARGV[7], ARGV[8])
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
redis.call('ZADD', KEYS[2], 'NX', ARGV[7], ARGV[8])
local ttl = tonumber(ARGV[3])
local exp = string.format('%d', tonumber(now) + ttl + math.floor(ttl / 16))
if ARGV[6] ~= '' then
  redis.call('HSET', key, 'state', ARGV[1], 'attempt', ARGV[2], 'node_id', ARGV[6], 'created_at_ms', now, 'updated_at_ms', now, 'spec', ARGV[4], 'waiters', ARGV[5], 'expires_at_ms', exp, 'tried', ARGV[6], 'dispatched_at_ms', now)
else
  redis.call('HSET', key, 'state', ARGV[1], 'attempt', ARGV[2], 'node_id', ARGV[6], 'created_at_ms', now, 'updated_at_ms', now, 'spec', ARGV[4], 'waiters', ARGV[5], 'expires_at_ms', exp)
end
redis.call('PEXPIREAT', key, exp)
return {1, now}
`
