package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// The book of a job: its spec, tried nodes, waiters and outcome, in the
// job's hash beside its lifecycle.

var bookWatchScript = rueidis.NewLuaScript(`
local h = redis.call('HMGET', KEYS[1], 'spec', 'waiters', 'outcome')
if not h[1] then return {-1} end
if h[3] then return {1, h[3]} end
local w = h[2] or ''
for n in string.gmatch(w, '[^\n]+') do if n == ARGV[1] then return {0} end end
if w == '' then w = ARGV[1] else w = w .. '\n' .. ARGV[1] end
redis.call('HSET', KEYS[1], 'waiters', w)
return {0}`)

func splitIDs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func notFound(jobID string) error {
	return fmt.Errorf("job %q: %w", jobID, scheduler.ErrJobNotFound)
}

func (s *Jobs) corrupt(jobID, field, v string) error {
	return &CorruptError{Key: s.keys.JobFSM(jobID), Field: field, Value: v, Err: scheduler.ErrJobCorrupt}
}

func (s *Jobs) entry(jobID string, spec, tried, waiters, outcome string) (scheduler.BookEntry, error) {
	var e scheduler.BookEntry
	if err := json.Unmarshal([]byte(spec), &e.Spec); err != nil {
		return e, s.corrupt(jobID, "spec", spec)
	}
	return s.rest(e, jobID, tried, waiters, outcome)
}

// specHead is a job's spec without its payload: decoding it skips the
// payload's bytes instead of decoding them.
type specHead struct {
	RequestID string `json:"request_id"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id"`
	Pool      string `json:"pool"`
	Model     string `json:"model"`
	Reason    string `json:"reason"`
	Instance  string `json:"instance"`
}

// endEntry is entry with the spec's payload left out, for Finish.
func (s *Jobs) endEntry(jobID string, spec, tried, waiters, outcome string) (scheduler.BookEntry, error) {
	h, ok := scanSpecHead(spec)
	if !ok {
		if err := json.Unmarshal([]byte(spec), &h); err != nil {
			return scheduler.BookEntry{}, s.corrupt(jobID, "spec", spec)
		}
	}
	e := scheduler.BookEntry{Spec: scheduler.JobSpec{RequestID: h.RequestID, SessionID: h.SessionID, TurnID: h.TurnID,
		Pool: h.Pool, Model: h.Model, Reason: h.Reason, Instance: h.Instance}}
	return s.rest(e, jobID, tried, waiters, outcome)
}

// scanSpecHead reads a spec as json.Marshal writes it, a flat object of
// string fields, without reflection: the fields of specHead, skipping the
// others. It gives up (false) on anything else, such as an escape in a
// string, for encoding/json to decode.
func scanSpecHead(spec string) (specHead, bool) {
	var h specHead
	str := func(i int) (string, int, bool) { // the string starting at spec[i] == '"'
		if i >= len(spec) || spec[i] != '"' {
			return "", 0, false
		}
		j := strings.IndexByte(spec[i+1:], '"')
		if j < 0 {
			return "", 0, false
		}
		v := spec[i+1 : i+1+j]
		if strings.IndexByte(v, '\\') >= 0 {
			return "", 0, false
		}
		return v, i + 2 + j, true
	}
	if len(spec) < 2 || spec[0] != '{' || spec[len(spec)-1] != '}' {
		return h, false
	}
	i := 1
	if spec[i] == '}' {
		return h, i == len(spec)-1
	}
	for {
		k, next, ok := str(i)
		if !ok || next >= len(spec) || spec[next] != ':' {
			return h, false
		}
		v, next, ok := str(next + 1)
		if !ok || next >= len(spec) {
			return h, false
		}
		switch k {
		case "request_id":
			h.RequestID = v
		case "session_id":
			h.SessionID = v
		case "turn_id":
			h.TurnID = v
		case "pool":
			h.Pool = v
		case "model":
			h.Model = v
		case "reason":
			h.Reason = v
		case "instance":
			h.Instance = v
		}
		switch spec[next] {
		case ',':
			i = next + 1
		case '}':
			return h, next == len(spec)-1
		default:
			return h, false
		}
	}
}

// rest decodes the tried nodes, the waiters and the outcome into e.
func (s *Jobs) rest(e scheduler.BookEntry, jobID, tried, waiters, outcome string) (scheduler.BookEntry, error) {
	e.Tried, e.Waiters = splitIDs(tried), splitIDs(waiters)
	if outcome != "" {
		var o scheduler.Outcome
		if err := json.Unmarshal([]byte(outcome), &o); err != nil {
			return e, s.corrupt(jobID, "outcome", outcome)
		}
		e.Outcome = &o
	}
	return e, nil
}

// Open implements [scheduler.JobStore] with one call of the open script,
// which adds the job's deadline to the due shard that [Due] of the same
// prefix reads ({prefix}:v1:jobs:due:{due:<n>}) and creates the job in one
// atomic step. On a cluster the job's record lies in its deadline shard's
// slot ([Keys.JobFSM]), so the step is one script there too.
func (s *Jobs) Open(ctx context.Context, jobID string, spec scheduler.JobSpec, nodeID string, due time.Time) (scheduler.JobRecord, scheduler.BookEntry, bool, error) {
	return s.open(ctx, jobID, spec, nodeID, due, nil)
}

// OpenOnSlot implements [scheduler.SlotOpener]. On a standalone Redis the
// open script takes the slot in the node's reserved ZSET
// ({prefix}:v1:nodes:{node:<node_id>}:reserved, as [Reservations] keeps
// it) and creates the job with its deadline in one call. On a cluster the
// ZSET lies in the node's slot, which a job's slot cannot share (a node
// serves jobs of every deadline shard and pool, and its capacity is one
// count over all of them): the slot is reserved first (one script on the
// node's key), then the job opened with its deadline (one script on the
// job's slot), and the slot given back when the job existed or the open
// failed. A crash between the two leaves a slot that no job holds until
// the reservation expires, at most the ttl passed after the reserve
// script ran (the server's clock); no sweeper is needed for it.
func (s *Jobs) OpenOnSlot(ctx context.Context, jobID string, spec scheduler.JobSpec, nodeID string, capacity int, ttl time.Duration, due time.Time) (scheduler.JobRecord, scheduler.BookEntry, bool, error) {
	if err := scheduler.CheckReserve(nodeID, jobID, capacity, ttl); err != nil {
		return scheduler.JobRecord{}, scheduler.BookEntry{}, false, err
	}
	sl := &slotReq{key: s.keys.NodeReserved(nodeID), capacity: strconv.Itoa(capacity), ttlMS: strconv.FormatInt(ttl.Milliseconds(), 10)}
	if s.c.Mode() != rueidis.ClientModeCluster {
		return s.open(ctx, jobID, spec, nodeID, due, sl)
	}
	start := time.Now()
	n, err := reserveScript.Exec(ctx, s.c, []string{sl.key}, []string{jobID, sl.capacity, sl.ttlMS}).AsInt64()
	s.hook.observe("reserve", start, err)
	if err == nil && n <= 0 {
		err = fmt.Errorf("node %q: %d of %d slots reserved: %w", nodeID, -n, capacity, scheduler.ErrNodeFull)
	}
	if err != nil {
		return scheduler.JobRecord{}, scheduler.BookEntry{}, false, fmt.Errorf("redisstore: reserve node %q for job %q: %w", nodeID, jobID, err)
	}
	rec, e, created, err := s.open(ctx, jobID, spec, nodeID, due, nil)
	if err != nil || (!created && !(rec.NodeID == nodeID && rec.State.Active())) {
		start := time.Now()
		rerr := s.c.Do(ctx, s.c.B().Zrem().Key(sl.key).Member(jobID).Build()).Error()
		s.hook.observe("release", start, rerr)
	}
	return rec, e, created, err
}

var _ scheduler.SlotOpener = (*Jobs)(nil)

// slotReq is the node slot an open step takes.
type slotReq struct{ key, capacity, ttlMS string }

func (s *Jobs) open(ctx context.Context, jobID string, spec scheduler.JobSpec, nodeID string, due time.Time, sl *slotReq) (scheduler.JobRecord, scheduler.BookEntry, bool, error) {
	if err := scheduler.CheckSpec(jobID, spec); err != nil {
		return scheduler.JobRecord{}, scheduler.BookEntry{}, false, err
	}
	if err := scheduler.CheckID("session_id", spec.SessionID); err != nil {
		return scheduler.JobRecord{}, scheduler.BookEntry{}, false, err
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return scheduler.JobRecord{}, scheduler.BookEntry{}, false, err
	}
	key := s.keys.JobFSM(jobID)
	init := fsm.New()
	if nodeID != "" {
		// The state of a first dispatch, from package fsm's table.
		out, err := fsm.Machine{}.Apply(init, fsm.Dispatch, init.Attempt)
		if err != nil {
			return scheduler.JobRecord{}, scheduler.BookEntry{}, false, err
		}
		init = out.Job
	}
	keys := make([]string, 2, 3)
	keys[0], keys[1] = key, s.keys.Due(dueShardOf(jobID, dueShards(s.c)))
	dueMS := strconv.FormatInt(due.UnixMilli(), 10)
	args := append(make([]string, 0, 10), string(init.State), strconv.Itoa(init.Attempt), s.ttlMS, string(data), spec.SessionID, nodeID, dueMS, jobID)
	if sl != nil {
		keys, args = append(keys, sl.key), append(args, sl.capacity, sl.ttlMS)
	}
	start := time.Now()
	vals, err := jobOpenScript.Exec(ctx, s.c, keys, args).ToArray()
	s.due.wrote(jobID)
	s.hook.observe("job_open", start, err)
	if err != nil {
		return scheduler.JobRecord{}, scheduler.BookEntry{}, false, fmt.Errorf("redisstore: open job %q: %w", jobID, err)
	}
	if len(vals) == 1 {
		n, _ := vals[0].AsInt64()
		return scheduler.JobRecord{}, scheduler.BookEntry{}, false, fmt.Errorf("node %q: %d of %s slots reserved: %w", nodeID, -n, sl.capacity, scheduler.ErrNodeFull)
	}
	if len(vals) == 2 {
		// Opened now: the record is what was passed, stamped with the
		// server's time.
		now, _ := vals[1].ToString()
		f := []string{string(init.State), strconv.Itoa(init.Attempt), nodeID, now, now, "", ""}
		if nodeID != "" {
			f[5] = now
		}
		rec, err := decodeJob(jobID, key, f)
		e := scheduler.BookEntry{Spec: spec, Waiters: []string{spec.SessionID}}
		if nodeID != "" {
			e.Tried = []string{nodeID}
		}
		return rec, e, true, err
	}
	if len(vals) != 12 {
		return scheduler.JobRecord{}, scheduler.BookEntry{}, false, fmt.Errorf("redisstore: open job %q: reply of %d elements", jobID, len(vals))
	}
	created, _ := vals[0].AsInt64()
	f, _ := strs(vals[1:], 11)
	rec, err := decodeJob(jobID, key, f[:7])
	if err != nil {
		return rec, scheduler.BookEntry{}, false, err
	}
	e, err := s.entry(jobID, f[7], f[8], f[9], f[10])
	return rec, e, created == 1, err
}

// Entry implements [scheduler.JobStore] with HMGET.
func (s *Jobs) Entry(ctx context.Context, jobID string) (scheduler.BookEntry, error) {
	if jobID == "" {
		return scheduler.BookEntry{}, &scheduler.ArgumentError{Name: "job_id", Reason: "empty"}
	}
	start := time.Now()
	vals, err := s.c.Do(ctx, s.c.B().Hmget().Key(s.keys.JobFSM(jobID)).Field("spec", "tried", "waiters", "outcome").Build()).ToArray()
	f, none := strs(vals, 4)
	if err == nil && none {
		err = rueidis.Nil
	}
	s.hook.observe("book_entry", start, err)
	switch {
	case isNil(err):
		return scheduler.BookEntry{}, notFound(jobID)
	case err != nil:
		return scheduler.BookEntry{}, fmt.Errorf("redisstore: book of job %q: %w", jobID, err)
	}
	return s.entry(jobID, f[0], f[1], f[2], f[3])
}

// Watch implements [scheduler.JobStore].
func (s *Jobs) Watch(ctx context.Context, jobID, sessionID string) (scheduler.Outcome, bool, error) {
	if jobID == "" {
		return scheduler.Outcome{}, false, &scheduler.ArgumentError{Name: "job_id", Reason: "empty"}
	}
	if err := scheduler.CheckID("session_id", sessionID); err != nil {
		return scheduler.Outcome{}, false, err
	}
	start := time.Now()
	vals, err := bookWatchScript.Exec(ctx, s.c, []string{s.keys.JobFSM(jobID)}, []string{sessionID}).ToArray()
	s.hook.observe("book_watch", start, err)
	if err != nil {
		return scheduler.Outcome{}, false, fmt.Errorf("redisstore: watch job %q: %w", jobID, err)
	}
	if len(vals) == 0 {
		return scheduler.Outcome{}, false, fmt.Errorf("redisstore: watch job %q: empty reply", jobID)
	}
	switch st, _ := vals[0].AsInt64(); {
	case st < 0:
		return scheduler.Outcome{}, false, notFound(jobID)
	case st == 0:
		return scheduler.Outcome{}, false, nil
	}
	v, _ := vals[1].ToString()
	var o scheduler.Outcome
	if err := json.Unmarshal([]byte(v), &o); err != nil {
		return o, false, s.corrupt(jobID, "outcome", v)
	}
	return o, true, nil
}

// Finish implements [scheduler.JobStore] with one call of the generated
// transition script, given the outcome.
func (s *Jobs) Finish(ctx context.Context, jobID string, ev fsm.Event, attempt int, nodeID string, out scheduler.Outcome) (scheduler.JobTransition, scheduler.BookEntry, error) {
	if err := scheduler.CheckJobEvent(jobID, ev, nodeID); err != nil {
		return scheduler.JobTransition{}, scheduler.BookEntry{}, err
	}
	if err := scheduler.CheckOutcome(out); err != nil {
		return scheduler.JobTransition{}, scheduler.BookEntry{}, err
	}
	data, err := json.Marshal(out)
	if err != nil {
		return scheduler.JobTransition{}, scheduler.BookEntry{}, err
	}
	key := s.keys.JobFSM(jobID)
	start := time.Now()
	vals, err := fsmApplyScript.Exec(ctx, s.c, []string{key},
		[]string{string(ev), strconv.Itoa(attempt), nodeID, s.max, s.ttlMS, string(data)}).ToArray()
	s.hook.observe("job_finish", start, err)
	if err != nil {
		return scheduler.JobTransition{}, scheduler.BookEntry{}, fmt.Errorf("redisstore: apply %s to job %q: %w", ev, jobID, err)
	}
	if len(vals) != 5 {
		return scheduler.JobTransition{}, scheduler.BookEntry{}, fmt.Errorf("redisstore: apply %s to job %q: reply of %d elements", ev, jobID, len(vals))
	}
	step, err := vals[0].ToArray()
	if err != nil {
		return scheduler.JobTransition{}, scheduler.BookEntry{}, fmt.Errorf("redisstore: apply %s to job %q: %w", ev, jobID, err)
	}
	f, _ := strs(vals, 5)
	tr, err := decodeApply(jobID, key, ev, attempt, replyStrings(step))
	if err != nil {
		return tr, scheduler.BookEntry{}, err
	}
	if f[4] != "=" {
		e, err := s.endEntry(jobID, f[1], f[2], f[3], f[4])
		return tr, e, err
	}
	// This step stored out: it is the job's outcome as it would decode.
	e, err := s.endEntry(jobID, f[1], f[2], f[3], "")
	if len(out.Payload) == 0 {
		out.Payload = nil
	}
	e.Outcome = &out
	return tr, e, err
}
