package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// JobsConfig configures [Jobs].
type JobsConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// MaxAttempts is [fsm.Machine].MaxAttempts. Default (0):
	// [fsm.DefaultMaxAttempts].
	MaxAttempts int
	// TTL is how long a job's hash lives at least after its last change:
	// a step pushes the expiry to TTL and a sixteenth on (kept in the
	// field expires_at_ms) when less than TTL is left, so a job's steps
	// that follow each other within a sixteenth of TTL renew it once.
	// Default (0): [scheduler.DefaultJobTTL].
	TTL time.Duration
	// OpHook observes every Redis operation ("job_open", "reserve" and
	// "release" (OpenOnSlot on a cluster), "fsm_get", "fsm_release",
	// "fsm_apply", "job_finish", "book_entry", "book_watch"). Default
	// (nil): none.
	OpHook OpHook
}

// Jobs is the Redis [scheduler.JobStore]: one hash per job,
// {prefix}:v1:jobs:{due:<n>}:{job:<job_id>}:fsm, with the lifecycle fields state,
// attempt, node_id, created_at_ms, updated_at_ms, dispatched_at_ms and
// queued_at_ms (milliseconds of the
// server's clock), the book fields spec (JSON), tried and waiters (ids
// separated by newlines, which ids never hold) and outcome (JSON), and a
// TTL of at least JobsConfig.TTL after every change (expires_at_ms). Every step is one Lua script call on that
// key: transitions run the static step of lua/fsm_step.lua after the
// tables generated from package fsm's table ([GenerateFSMLua]), so they
// are atomic and obey exactly the rules of
// [fsm.Machine.Apply]. The scripts touch only the job's key and, to open
// it, its deadline shard, which lies in the job's slot on a Redis Cluster
// ([Keys.JobFSM]): each step is one script there too.
type Jobs struct {
	c     rueidis.Client
	keys  Keys
	maxN  int    // fsm.Machine.Max
	max   string // maxN, formatted once
	ttlMS string
	hook  OpHook
	// due, when set (by NewStores), learns of the deadlines Open writes.
	due *Due
}

var _ scheduler.JobStore = (*Jobs)(nil)

var (
	fsmApplyScript = newLuaScript(fsmApplyLua)
	fsmBatchScript = newLuaScript(fsmBatchLua)
	jobOpenScript  = rueidis.NewLuaScript(jobOpenLua)
	// jobGetScript reads the lifecycle fields, or nothing when the key
	// does not exist (in one step: a key without them is corrupt).
	jobGetScript = rueidis.NewLuaScript(`
local h = redis.call('HMGET', KEYS[1], 'state', 'attempt', 'node_id', 'created_at_ms', 'updated_at_ms', 'dispatched_at_ms', 'queued_at_ms')
if not (h[1] or h[2] or h[3] or h[4] or h[5] or h[6] or h[7]) and redis.call('EXISTS', KEYS[1]) == 0 then return {} end
return h`)
)

// NewJobs returns the job store on c.
func NewJobs(c rueidis.Client, cfg JobsConfig) (*Jobs, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewJobs: nil client")
	}
	if cfg.MaxAttempts < 0 {
		return nil, fmt.Errorf("redisstore: JobsConfig.MaxAttempts: %d is negative", cfg.MaxAttempts)
	}
	if cfg.TTL < 0 || (cfg.TTL > 0 && cfg.TTL < time.Millisecond) {
		return nil, fmt.Errorf("redisstore: JobsConfig.TTL: %v is not a positive number of milliseconds", cfg.TTL)
	}
	if cfg.TTL == 0 {
		cfg.TTL = scheduler.DefaultJobTTL
	}
	return &Jobs{
		c: c, keys: NewKeys(cfg.Prefix), hook: cfg.OpHook,
		maxN:  fsm.Machine{MaxAttempts: cfg.MaxAttempts}.Max(),
		max:   strconv.Itoa(fsm.Machine{MaxAttempts: cfg.MaxAttempts}.Max()),
		ttlMS: strconv.FormatInt(cfg.TTL.Milliseconds(), 10),
	}, nil
}

var _ scheduler.AttemptLimit = (*Jobs)(nil)

// MaxAttempts implements [scheduler.AttemptLimit]: JobsConfig.MaxAttempts
// with its default applied.
func (s *Jobs) MaxAttempts() int { return s.maxN }

// Job implements [scheduler.JobStore] with one read-only script.
func (s *Jobs) Job(ctx context.Context, jobID string) (scheduler.JobRecord, error) {
	if jobID == "" {
		return scheduler.JobRecord{}, &scheduler.ArgumentError{Name: "job_id", Reason: "empty"}
	}
	key := s.keys.JobFSM(jobID)
	start := time.Now()
	vals, err := jobGetScript.Exec(ctx, s.c, []string{key}, nil).ToArray()
	f, _ := strs(vals, 7)
	if err == nil && len(vals) == 0 {
		err = rueidis.Nil
	}
	s.hook.observe("fsm_get", start, err)
	switch {
	case isNil(err):
		return scheduler.JobRecord{}, notFound(jobID)
	case err != nil:
		return scheduler.JobRecord{}, fmt.Errorf("redisstore: get job %q: %w", jobID, err)
	}
	return decodeJob(jobID, key, f)
}

// strs returns the first n strings of vals ("" for nil), and whether all
// of them were nil.
func strs(vals []rueidis.RedisMessage, n int) ([]string, bool) {
	f, none := make([]string, n), true
	for i := range f {
		if i < len(vals) {
			if v, err := vals[i].ToString(); err == nil {
				f[i], none = v, false
			}
		}
	}
	return f, none
}

// CorruptError reports a stored value that does not decode. It wraps the
// sentinel of the kind of record ([scheduler.ErrJobCorrupt],
// [scheduler.ErrBindingCorrupt]).
type CorruptError struct {
	Key   string // the Redis key
	Field string // the hash field, "" for a string key
	Value string // the stored value
	Err   error  // the sentinel
}

// Error names the key, the field and the stored value.
func (e *CorruptError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("redisstore: %s: %v: %q", e.Key, e.Err, e.Value)
	}
	return fmt.Sprintf("redisstore: %s field %s: %v: %q", e.Key, e.Field, e.Err, e.Value)
}

// Unwrap returns the sentinel.
func (e *CorruptError) Unwrap() error { return e.Err }

// decodeJob decodes state, attempt, node_id, created_at_ms, updated_at_ms
// and, when f has a sixth field, dispatched_at_ms ("" for none), and when
// it has a seventh, queued_at_ms ("" for none: the job waits in its first
// attempt, since its creation).
func decodeJob(id, key string, f []string) (scheduler.JobRecord, error) {
	bad := func(field, v string) (scheduler.JobRecord, error) {
		return scheduler.JobRecord{}, &CorruptError{Key: key, Field: field, Value: v, Err: scheduler.ErrJobCorrupt}
	}
	st, err := fsm.ParseState(f[0])
	if err != nil {
		return bad("state", f[0])
	}
	att, err := strconv.Atoi(f[1])
	if err != nil || att < 1 {
		return bad("attempt", f[1])
	}
	created, err := strconv.ParseInt(f[3], 10, 64)
	if err != nil {
		return bad("created_at_ms", f[3])
	}
	var disp string
	if len(f) > 5 {
		disp = f[5]
	}
	updated, err := strconv.ParseInt(f[4], 10, 64)
	if err != nil {
		return bad("updated_at_ms", f[4])
	}
	rec := scheduler.JobRecord{
		ID: id, Job: fsm.Job{State: st, Attempt: att}, NodeID: f[2],
		CreatedAt: time.UnixMilli(created), UpdatedAt: time.UnixMilli(updated),
	}
	if disp != "" {
		ms, err := strconv.ParseInt(disp, 10, 64)
		if err != nil {
			return bad("dispatched_at_ms", disp)
		}
		rec.DispatchedAt = time.UnixMilli(ms)
	}
	if len(f) > 6 {
		rec.QueuedAt = rec.CreatedAt
		if f[6] != "" {
			ms, err := strconv.ParseInt(f[6], 10, 64)
			if err != nil {
				return bad("queued_at_ms", f[6])
			}
			rec.QueuedAt = time.UnixMilli(ms)
		}
	}
	return rec, nil
}

// ApplyJob implements [scheduler.JobStore] with one EVALSHA of the
// transition script (lua/fsm_apply.lua).
func (s *Jobs) ApplyJob(ctx context.Context, jobID string, ev fsm.Event, attempt int, nodeID string) (scheduler.JobTransition, error) {
	if err := scheduler.CheckJobEvent(jobID, ev, nodeID); err != nil {
		return scheduler.JobTransition{}, err
	}
	key := s.keys.JobFSM(jobID)
	start := time.Now()
	vals, err := fsmApplyScript.Exec(ctx, s.c, []string{key},
		[]string{string(ev), strconv.Itoa(attempt), nodeID, s.max, s.ttlMS, ""}).ToArray()
	s.hook.observe("fsm_apply", start, err)
	if err != nil {
		return scheduler.JobTransition{}, fmt.Errorf("redisstore: apply %s to job %q: %w", ev, jobID, err)
	}
	return decodeApply(jobID, key, ev, attempt, replyStrings(vals))
}

// replyStrings returns the strings of a script's array reply; an element
// that is not a string is "" (decodeApply refuses what does not fit).
func replyStrings(vals []rueidis.RedisMessage) []string {
	f := make([]string, len(vals))
	for i := range vals {
		f[i], _ = vals[i].ToString()
	}
	return f
}

// ReleaseJobs implements [scheduler.JobStore] with the batch script
// (lua/fsm_batch.lua): on a standalone Redis one call for all the jobs; on
// a cluster one call per deadline shard that holds any of them (the jobs
// of a shard share its slot, [Keys.JobFSM]), in one pipeline.
func (s *Jobs) ReleaseJobs(ctx context.Context, jobs []scheduler.JobAttempt) ([]scheduler.JobTransition, []error) {
	trs, errs := make([]scheduler.JobTransition, len(jobs)), make([]error, len(jobs))
	shards := dueShards(s.c)
	// The jobs of each shard, in order: their index in jobs and their key.
	type batch struct {
		at   []int
		keys []string
		args []string
	}
	var batches []*batch
	byShard := map[int]*batch{}
	for i, j := range jobs {
		if errs[i] = scheduler.CheckJobEvent(j.ID, fsm.Release, ""); errs[i] != nil {
			continue
		}
		n := dueShardOf(j.ID, shards)
		b := byShard[n]
		if b == nil {
			b = &batch{args: []string{string(fsm.Release), s.max, s.ttlMS}}
			byShard[n] = b
			batches = append(batches, b)
		}
		b.at, b.keys, b.args = append(b.at, i), append(b.keys, s.keys.JobFSM(j.ID)), append(b.args, strconv.Itoa(j.Attempt))
	}
	if len(batches) == 0 {
		return trs, errs
	}
	execs := make([]rueidis.LuaExec, len(batches))
	for k, b := range batches {
		execs[k] = rueidis.LuaExec{Keys: b.keys, Args: b.args}
	}
	start := time.Now()
	var first error
	for k, r := range fsmBatchScript.execMulti(ctx, s.c, execs...) {
		b := batches[k]
		lines, err := r.ToArray()
		if err == nil && len(lines) != len(b.keys) {
			err = fmt.Errorf("reply of %d elements for %d jobs", len(lines), len(b.keys))
		}
		for x, i := range b.at {
			j := jobs[i]
			var vals []rueidis.RedisMessage
			rerr := err
			if rerr == nil {
				vals, rerr = lines[x].ToArray()
			}
			if rerr != nil {
				first = cmpErr(first, rerr)
				errs[i] = fmt.Errorf("redisstore: apply %s to job %q: %w", fsm.Release, j.ID, rerr)
				continue
			}
			trs[i], errs[i] = decodeApply(j.ID, b.keys[x], fsm.Release, j.Attempt, replyStrings(vals))
		}
	}
	s.hook.observe("fsm_release", start, first)
	return trs, errs
}

// decodeApply decodes the reply of the transition step (lua/fsm_step.lua),
// as strings, to ev with attempt on the job jobID at key: {status, state,
// attempt, node_id, free_node, created_at_ms, updated_at_ms,
// dispatched_at_ms}, {"not_found"} or {"corrupt", field, value}.
func decodeApply(jobID, key string, ev fsm.Event, attempt int, f []string) (scheduler.JobTransition, error) {
	bad := func() (scheduler.JobTransition, error) {
		return scheduler.JobTransition{}, fmt.Errorf("redisstore: apply %s to job %q: malformed reply %q", ev, jobID, f)
	}
	if len(f) == 0 {
		return bad()
	}
	switch status := f[0]; {
	case status == fsmNotFound && len(f) == 1:
		return scheduler.JobTransition{}, fmt.Errorf("job %q: %w", jobID, scheduler.ErrJobNotFound)
	case status == fsmCorrupt && len(f) == 3:
		return scheduler.JobTransition{}, &CorruptError{Key: key, Field: f[1], Value: f[2], Err: scheduler.ErrJobCorrupt}
	case len(f) != 8:
		return bad()
	}
	rec, err := decodeJob(jobID, key, []string{f[1], f[2], f[3], f[5], f[6], f[7]})
	if err != nil {
		return scheduler.JobTransition{}, err
	}
	free := f[4]
	switch status := f[0]; status {
	case fsmOK:
		return scheduler.JobTransition{Job: rec, FreeNode: free}, nil
	case fsmDup:
		return scheduler.JobTransition{Job: rec, Duplicate: true, FreeNode: free}, nil
	case fsmWrongNode:
		return scheduler.JobTransition{Job: rec}, fmt.Errorf("job %q is on node %q: %w", jobID, rec.NodeID, scheduler.ErrWrongNode)
	default:
		if sentinel, ok := fsmRefusals[status]; ok {
			return scheduler.JobTransition{Job: rec}, &fsm.TransitionError{Job: rec.Job, Event: ev, Attempt: attempt, Err: sentinel}
		}
		return bad()
	}
}
