package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// ReservationsConfig configures [Reservations].
type ReservationsConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// OpHook observes every Redis operation ("reserve", "release",
	// "reserve_count"). Default (nil): none.
	OpHook OpHook
}

// Reservations is the Redis [scheduler.ReservationStore]: per node the ZSET
// {prefix}:v1:nodes:{node:<node_id>}:reserved of job ids scored by expiry
// in milliseconds of the server's clock (TIME), so that instances with
// skewed clocks agree. Reserve is one script on the node's key alone; the
// key expires with its last reservation.
type Reservations struct {
	c    rueidis.Client
	keys Keys
	hook OpHook
}

var _ scheduler.ReservationStore = (*Reservations)(nil)

// reserveLua: KEYS[1] = the node's reserved ZSET; ARGV = job id, capacity,
// ttl_ms. Reply: 1 when reserved, or minus the count when the node is full.
//
// The job is added with its new expiry unless it is a member (ZADD NX). A
// new member's count is checked against the capacity. Expired members stay
// in the set until they are in the way: only when the count with them
// exceeds the capacity are they removed (ZREMRANGEBYSCORE) and the count
// taken again, and the new member is removed when it still does not fit.
// A job that is a member already renews its reservation when it is live
// (its score is after now), whatever the count; an expired one counts as
// gone and is taken anew, as a new member, once the expired members are
// removed. A new reservation costs four commands with TIME and PEXPIREAT,
// a renewal five, a refusal up to six; the script is atomic, so no one
// sees the member that did not fit. The key's expiry follows its latest
// reservation: set on a new key, only ever pushed later (GT) on an
// existing one. Times are built as strings, and the expiry is formatted
// once: Lua formats numbers with sprintf, the dearest step of a script
// this short.
//
// reserveFn is the function; the open step of [Jobs.OpenOnSlot] calls it too.
const reserveLua = reserveFn + `
return (reserve(KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])))
`

// reserve returns the reply of the reserve script and the server's time
// in milliseconds that it read.
const reserveFn = `
local function reserve(key, job, cap, ttl)
local t = redis.call('TIME')
local nowms = t[1] .. string.sub('00000' .. t[2], -6, -4)
local exp = string.format('%d', tonumber(nowms) + ttl)
local purged = false
if redis.call('ZADD', key, 'NX', exp, job) == 0 then
  if tonumber(redis.call('ZSCORE', key, job)) > tonumber(nowms) then
    redis.call('ZADD', key, exp, job)
    redis.call('PEXPIREAT', key, exp, 'GT')
    return 1, nowms
  end
  redis.call('ZREMRANGEBYSCORE', key, '-inf', nowms)
  redis.call('ZADD', key, exp, job)
  purged = true
end
local n = redis.call('ZCARD', key)
if n > cap and not purged then
  n = n - redis.call('ZREMRANGEBYSCORE', key, '-inf', nowms)
end
if n > cap then
  redis.call('ZREM', key, job)
  return 1 - n, nowms
end
if n == 1 then
  redis.call('PEXPIREAT', key, exp)
else
  redis.call('PEXPIREAT', key, exp, 'GT')
end
return 1, nowms
end
`

// countLua: KEYS[1] = the node's reserved ZSET. Reply: unexpired members.
const countLua = `
local t = redis.call('TIME')
return redis.call('ZCOUNT', KEYS[1], '(' .. t[1] .. string.sub('00000' .. t[2], -6, -4), '+inf')
`

var (
	reserveScript = rueidis.NewLuaScript(reserveLua)
	countScript   = rueidis.NewLuaScriptReadOnly(countLua)
)

// NewReservations returns the reservation store on c.
func NewReservations(c rueidis.Client, cfg ReservationsConfig) (*Reservations, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewReservations: nil client")
	}
	return &Reservations{c: c, keys: NewKeys(cfg.Prefix), hook: cfg.OpHook}, nil
}

// Reserve implements [scheduler.ReservationStore] with one EVALSHA.
func (s *Reservations) Reserve(ctx context.Context, nodeID, jobID string, capacity int, ttl time.Duration) error {
	if err := scheduler.CheckReserve(nodeID, jobID, capacity, ttl); err != nil {
		return err
	}
	start := time.Now()
	n, err := reserveScript.Exec(ctx, s.c, []string{s.keys.NodeReserved(nodeID)},
		[]string{jobID, strconv.Itoa(capacity), strconv.FormatInt(ttl.Milliseconds(), 10)}).AsInt64()
	s.hook.observe("reserve", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: reserve node %q for job %q: %w", nodeID, jobID, err)
	}
	if n <= 0 {
		return fmt.Errorf("node %q: %d of %d slots reserved: %w", nodeID, -n, capacity, scheduler.ErrNodeFull)
	}
	return nil
}

// Release implements [scheduler.ReservationStore] with ZREM.
func (s *Reservations) Release(ctx context.Context, nodeID, jobID string) (bool, error) {
	if err := scheduler.CheckRelease(nodeID, jobID); err != nil {
		return false, err
	}
	start := time.Now()
	n, err := s.c.Do(ctx, s.c.B().Zrem().Key(s.keys.NodeReserved(nodeID)).Member(jobID).Build()).AsInt64()
	s.hook.observe("release", start, err)
	if err != nil {
		return false, fmt.Errorf("redisstore: release node %q job %q: %w", nodeID, jobID, err)
	}
	return n == 1, nil
}

// ReleaseSlots implements [scheduler.ReservationStore]: one ZREM per node,
// in one pipeline.
func (s *Reservations) ReleaseSlots(ctx context.Context, slots []scheduler.Slot) error {
	byNode := map[string][]string{}
	var order []string
	for _, sl := range slots {
		if err := scheduler.CheckRelease(sl.NodeID, sl.JobID); err != nil {
			return err
		}
		if byNode[sl.NodeID] == nil {
			order = append(order, sl.NodeID)
		}
		byNode[sl.NodeID] = append(byNode[sl.NodeID], sl.JobID)
	}
	if len(order) == 0 {
		return nil
	}
	cmds := make(rueidis.Commands, 0, len(order))
	for _, n := range order {
		cmds = append(cmds, s.c.B().Zrem().Key(s.keys.NodeReserved(n)).Member(byNode[n]...).Build())
	}
	start := time.Now()
	var err error
	for _, r := range s.c.DoMulti(ctx, cmds...) {
		err = cmpErr(err, r.Error())
	}
	s.hook.observe("release", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: release %d slots: %w", len(slots), err)
	}
	return nil
}

// Count implements [scheduler.ReservationStore]: the members whose expiry
// is after the server's now.
func (s *Reservations) Count(ctx context.Context, nodeID string) (int, error) {
	if err := scheduler.CheckNodeID(nodeID); err != nil {
		return 0, err
	}
	start := time.Now()
	n, err := countScript.Exec(ctx, s.c, []string{s.keys.NodeReserved(nodeID)}, nil).AsInt64()
	s.hook.observe("reserve_count", start, err)
	if err != nil {
		return 0, fmt.Errorf("redisstore: count reservations of node %q: %w", nodeID, err)
	}
	return int(n), nil
}

// Jobs implements [scheduler.ReservationStore] with ZRANGE.
func (s *Reservations) Jobs(ctx context.Context, nodeID string) ([]string, error) {
	if err := scheduler.CheckNodeID(nodeID); err != nil {
		return nil, err
	}
	start := time.Now()
	ids, err := s.c.Do(ctx, s.c.B().Zrange().Key(s.keys.NodeReserved(nodeID)).Min("0").Max("-1").Build()).AsStrSlice()
	s.hook.observe("reserve_jobs", start, err)
	if err != nil {
		return nil, fmt.Errorf("redisstore: jobs of node %q: %w", nodeID, err)
	}
	sort.Strings(ids)
	return ids, nil
}
