package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// DueConfig configures [Due].
type DueConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// OpHook observes every Redis operation ("due_set",
	// "due_remove", "due_claim", "due_get"). Default (nil): none.
	OpHook OpHook
}

// Due is the Redis [scheduler.DueIndex]: sorted sets
// {prefix}:v1:jobs:due:{due:<n>} of job ids scored by Unix milliseconds:
// on a cluster [DueShards] of them, a job's set chosen by [DueShard], so
// that the index's load is spread over the masters; on a standalone server
// one, shard 0.
type Due struct {
	c    rueidis.Client
	keys Keys
	hook OpHook
	all  []string
}

var _ scheduler.DueIndex = (*Due)(nil)

// NewDue returns the deadline index on c.
func NewDue(c rueidis.Client, cfg DueConfig) (*Due, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewDue: nil client")
	}
	d := &Due{c: c, keys: NewKeys(cfg.Prefix), hook: cfg.OpHook}
	for i := range dueShards(c) {
		d.all = append(d.all, d.keys.Due(i))
	}
	return d, nil
}

// dueClaimScript takes up to ARGV[3] members of KEYS[1] scored at most
// ARGV[1] and scores them ARGV[2].
var dueClaimScript = newLuaScript(`
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(ids) do redis.call('ZADD', KEYS[1], ARGV[2], id) end
return ids`)

func (d *Due) key(jobID string) string { return d.all[dueShardOf(jobID, len(d.all))] }

func checkJob(jobID string) error {
	if jobID == "" {
		return &scheduler.ArgumentError{Name: "job_id", Reason: "empty"}
	}
	return nil
}

// Set implements [scheduler.DueIndex] with ZADD.
func (d *Due) Set(ctx context.Context, jobID string, at time.Time) error {
	if err := checkJob(jobID); err != nil {
		return err
	}
	start := time.Now()
	err := d.c.Do(ctx, d.c.B().Zadd().Key(d.key(jobID)).ScoreMember().ScoreMember(float64(at.UnixMilli()), jobID).Build()).Error()
	d.hook.observe("due_set", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: set deadline of job %q: %w", jobID, err)
	}
	return nil
}

// Remove implements [scheduler.DueIndex]: one ZREM per shard that holds
// any of the jobs, in one pipeline.
func (d *Due) Remove(ctx context.Context, jobIDs ...string) error {
	byShard := map[string][]string{}
	for _, id := range jobIDs {
		if err := checkJob(id); err != nil {
			return err
		}
		byShard[d.key(id)] = append(byShard[d.key(id)], id)
	}
	if len(byShard) == 0 {
		return nil
	}
	cmds := make(rueidis.Commands, 0, len(byShard))
	for k, ids := range byShard {
		cmds = append(cmds, d.c.B().Zrem().Key(k).Member(ids...).Build())
	}
	start := time.Now()
	var err error
	for _, r := range d.c.DoMulti(ctx, cmds...) {
		err = cmpErr(err, r.Error())
	}
	d.hook.observe("due_remove", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: remove deadlines of %d jobs: %w", len(jobIDs), err)
	}
	return nil
}

// Due returns the job's due time and whether it is in the index (ZSCORE;
// for tests and inspection: the Dispatcher never asks).
func (d *Due) Due(ctx context.Context, jobID string) (time.Time, bool, error) {
	if err := checkJob(jobID); err != nil {
		return time.Time{}, false, err
	}
	start := time.Now()
	ms, err := d.c.Do(ctx, d.c.B().Zscore().Key(d.key(jobID)).Member(jobID).Build()).AsFloat64()
	d.hook.observe("due_get", start, err)
	if isNil(err) {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, fmt.Errorf("redisstore: deadline of job %q: %w", jobID, err)
	}
	return time.UnixMilli(int64(ms)), true, nil
}

// Claim implements [scheduler.DueIndex]: a pipeline of one read per shard
// (ZRANGEBYSCORE ... LIMIT 0 1: is anything due?), then, for the shards
// that hold a due job, one script each taking up to n over the number of
// shards (at least one) jobs, in a second pipeline. A sweep that finds nothing due,
// which is what an idle instance's sweeps find, costs the server one
// command per shard and no script.
func (d *Due) Claim(ctx context.Context, now time.Time, lease time.Duration, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	nowMS := strconv.FormatInt(now.UnixMilli(), 10)
	start := time.Now()
	peeks := make(rueidis.Commands, len(d.all))
	for i, k := range d.all {
		peeks[i] = d.c.B().Zrangebyscore().Key(k).Min("-inf").Max(nowMS).Limit(0, 1).Build()
	}
	per := strconv.Itoa(max(1, (n+len(d.all)-1)/len(d.all)))
	args := []string{nowMS, strconv.FormatInt(now.Add(lease).UnixMilli(), 10), per}
	var execs []rueidis.LuaExec
	var firstErr error
	for i, r := range d.c.DoMulti(ctx, peeks...) {
		ids, err := r.AsStrSlice()
		switch {
		case err != nil:
			firstErr = cmpErr(firstErr, err)
		case len(ids) > 0:
			execs = append(execs, rueidis.LuaExec{Keys: d.all[i : i+1], Args: args})
		}
	}
	var out []string
	for _, r := range dueClaimScript.execMulti(ctx, d.c, execs...) {
		ids, err := r.AsStrSlice()
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		out = append(out, ids...)
	}
	d.hook.observe("due_claim", start, firstErr)
	if firstErr != nil {
		return out, fmt.Errorf("redisstore: claim due jobs: %w", firstErr)
	}
	return out, nil
}
