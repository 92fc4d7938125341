package redisstore

import (
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// NewStores returns every store a [scheduler.Dispatcher] needs, on c,
// configured from cfg (the [scheduler.phase2] tables and the dispatcher's
// tunables, defaults applied): the key prefix (redis.key_prefix), the inbox
// bounds, the consumer group, the storm windows, the attempts, the job and
// turn TTLs. hook, when not nil, observes every Redis operation of every
// store: the source of scheduler_phase2_redis_op_total{op,result}.
func NewStores(c rueidis.Client, cfg scheduler.Config, hook OpHook) (scheduler.Stores, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return scheduler.Stores{}, err
	}
	prefix := cfg.Redis.KeyPrefix
	dc := cfg.Dispatch
	var st scheduler.Stores
	var err error
	wrap := func(what string, e error) error { return fmt.Errorf("redisstore: NewStores: %s: %w", what, e) }
	if st.Presence, err = NewPresence(c, PresenceConfig{Prefix: prefix, OpHook: hook}); err != nil {
		return st, wrap("presence", err)
	}
	if st.Owners, err = NewOwners(c, OwnersConfig{Prefix: prefix, OpHook: hook}); err != nil {
		return st, wrap("owners", err)
	}
	if st.Snapshots, err = NewNodeSnapshots(c, SnapshotsConfig{Prefix: prefix, OpHook: hook}); err != nil {
		return st, wrap("snapshots", err)
	}
	streams, err := NewStreams(c, StreamsConfig{Prefix: prefix, MaxLen: cfg.StreamMaxLen, DLQMaxLen: cfg.DLQMaxLen, OpHook: hook})
	if err != nil {
		return st, wrap("streams", err)
	}
	group := cfg.StreamGroup
	st.Sender = streams
	st.Inbox = func(id string) scheduler.Inbox { return streams.Inbox(id, group) }
	jobTTL := time.Duration(dc.JobTTLSeconds) * time.Second
	if st.Jobs, err = NewJobs(c, JobsConfig{Prefix: prefix, MaxAttempts: dc.MaxAttempts, TTL: jobTTL, OpHook: hook}); err != nil {
		return st, wrap("jobs", err)
	}
	if st.Book, err = NewBook(c, BookConfig{Prefix: prefix, OpHook: hook}); err != nil {
		return st, wrap("book", err)
	}
	if st.Due, err = NewDue(c, DueConfig{Prefix: prefix, OpHook: hook}); err != nil {
		return st, wrap("due", err)
	}
	if st.Reservations, err = NewReservations(c, ReservationsConfig{Prefix: prefix, OpHook: hook}); err != nil {
		return st, wrap("reservations", err)
	}
	if st.Turns, err = NewTurns(c, TurnsConfig{Prefix: prefix, TTL: time.Duration(dc.TurnTTLSeconds) * time.Second, OpHook: hook}); err != nil {
		return st, wrap("turns", err)
	}
	if st.Storm, err = NewStorm(c, StormConfig{Prefix: prefix, Windows: cfg.Storm.Windows(), OpHook: hook}); err != nil {
		return st, wrap("storm", err)
	}
	return st, nil
}
