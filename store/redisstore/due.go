package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
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
//
// A claim does not read every shard every time. It reads a shard when
// this process wrote a deadline to it since its last read (through this
// Due, or the open step of the [Jobs] that [NewStores] made with it), when
// the earliest deadline that read saw is due, and at least every
// [DueRefresh]: a deadline that another process wrote, and that process
// did not sweep because it died, is found within DueRefresh of the sweep
// that would have found it. An idle instance's sweeps cost the server one
// command per shard every DueRefresh.
type Due struct {
	c     rueidis.Client
	keys  Keys
	hook  OpHook
	all   []string
	marks []dueMark // what this process knows of each shard of all
}

// DueRefresh is how often a [Due] reads every shard of the deadline index
// even when it knows of no deadline there that is due.
const DueRefresh = 2 * time.Second

// dueMark is what a Due knows of one shard.
type dueMark struct {
	// written is set when this process wrote a deadline to the shard
	// since the last read.
	written atomic.Bool
	// next is the earliest deadline the last read saw (Unix ms;
	// math.MaxInt64 for an empty shard), and readAt when it read.
	next, readAt atomic.Int64
}

// wrote notes that this process wrote a deadline of jobID. It is called
// once the write is done (or failed), never before: a claim clears the
// mark before it reads, so a claim under way while the deadline was
// written either reads it or leaves this mark for the next claim.
func (d *Due) wrote(jobID string) {
	if d != nil {
		d.marks[dueShardOf(jobID, len(d.all))].written.Store(true)
	}
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
	d.marks = make([]dueMark, len(d.all))
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
	d.wrote(jobID)
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

// Claim implements [scheduler.DueIndex]: a pipeline of one read of the
// earliest entry (ZRANGE ... 0 0 WITHSCORES) of each shard that needs it
// (see [Due]), then, for the shards whose earliest entry is due, one
// script each taking up to n over the number of shards (at least one)
// jobs, in a second pipeline. A sweep that reads nothing costs the server
// nothing; one that finds nothing due costs one command per shard read and
// no script.
func (d *Due) Claim(ctx context.Context, now time.Time, lease time.Duration, n int) ([]string, error) {
	if n <= 0 {
		return nil, nil
	}
	nowMS := now.UnixMilli()
	var read []int
	for i := range d.marks {
		m := &d.marks[i]
		// Swap first: a write noted after the read is read next time.
		if m.written.Swap(false) || m.next.Load() <= nowMS || nowMS-m.readAt.Load() >= DueRefresh.Milliseconds() {
			read = append(read, i)
		}
	}
	if len(read) == 0 {
		return nil, nil
	}
	start := time.Now()
	peeks := make(rueidis.Commands, len(read))
	for k, i := range read {
		peeks[k] = d.c.B().Zrange().Key(d.all[i]).Min("0").Max("0").Withscores().Build()
	}
	per := strconv.Itoa(max(1, (n+len(d.all)-1)/len(d.all)))
	args := []string{strconv.FormatInt(nowMS, 10), strconv.FormatInt(now.Add(lease).UnixMilli(), 10), per}
	var execs []rueidis.LuaExec
	var firstErr error
	for k, r := range d.c.DoMulti(ctx, peeks...) {
		m := &d.marks[read[k]]
		zs, err := r.AsZScores()
		switch {
		case err != nil:
			// Read again next time.
			m.written.Store(true)
			firstErr = cmpErr(firstErr, err)
		case len(zs) == 0:
			m.next.Store(math.MaxInt64)
			m.readAt.Store(nowMS)
		default:
			next := int64(zs[0].Score)
			m.next.Store(next)
			m.readAt.Store(nowMS)
			if next <= nowMS {
				execs = append(execs, rueidis.LuaExec{Keys: d.all[read[k] : read[k]+1], Args: args})
				// The claim moves what it takes: read the shard again.
				m.written.Store(true)
			}
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
