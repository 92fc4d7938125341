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
// ttl_ms. Reply: the count after reserving (> 0), or minus the count when
// the node is full. The key's expiry follows its latest reservation: set
// on a new key, only ever pushed later (GT) on an existing one.
const reserveLua = `
local key, job, cap, ttl = KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
local n = redis.call('ZCARD', key)
if n >= cap and not redis.call('ZSCORE', key, job) then return -n end
local exp = now + ttl
local added = redis.call('ZADD', key, exp, job)
if n == 0 then
  redis.call('PEXPIREAT', key, exp)
else
  redis.call('PEXPIREAT', key, exp, 'GT')
end
return n + added
`

// countLua: KEYS[1] = the node's reserved ZSET. Reply: unexpired members.
const countLua = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
return redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')
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
