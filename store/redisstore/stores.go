package redisstore

import (
	"fmt"
	"strings"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// StoresConfig configures [NewStores]: what belongs to Redis rather than
// to the plane. A zero field means the default named on it.
type StoresConfig struct {
	// KeyPrefix starts every key. Default [DefaultPrefix]; use one per
	// environment. No braces or white space.
	KeyPrefix string
	// Group is the consumer group that reads each inbox. Default
	// "scheduler".
	Group string
	// InboxMaxLen bounds each inbox: a message to an inbox holding this
	// many unhandled entries is refused ([scheduler.ErrInboxFull]) rather
	// than an unhandled entry trimmed (the length is read with the
	// appends while the inbox is over a quarter full, and at least every
	// 100 ms otherwise: see [StreamsConfig].MaxLen). Default
	// [DefaultInboxMaxLen].
	InboxMaxLen int64
	// DLQMaxLen trims each dead-letter stream. Default [DefaultInboxMaxLen].
	DLQMaxLen int64
	// OpHook, when not nil, observes every Redis operation of every store:
	// the source of scheduler_phase2_redis_op_total{op,result}.
	OpHook OpHook
}

// NewStores returns every store a [scheduler.Dispatcher] needs, on c. plane
// gives what the stores enforce for the plane (defaults applied): the
// attempts, the job and turn TTLs and the storm windows; cfg the key
// prefix, the consumer group, the inbox bounds and the operation hook.
func NewStores(c rueidis.Client, plane scheduler.Config, cfg StoresConfig) (scheduler.Stores, error) {
	plane = plane.WithDefaults()
	if err := plane.Validate(); err != nil {
		return scheduler.Stores{}, err
	}
	if strings.ContainsAny(cfg.KeyPrefix, "{} \t\r\n") {
		return scheduler.Stores{}, fmt.Errorf("redisstore: StoresConfig.KeyPrefix: %q may not contain braces or white space", cfg.KeyPrefix)
	}
	if strings.ContainsAny(cfg.Group, " \t\r\n") {
		return scheduler.Stores{}, fmt.Errorf("redisstore: StoresConfig.Group: %q may not contain white space", cfg.Group)
	}
	if cfg.Group == "" {
		cfg.Group = "scheduler"
	}
	prefix, hook := cfg.KeyPrefix, cfg.OpHook
	dc := plane.Dispatch
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
	streams, err := NewStreams(c, StreamsConfig{Prefix: prefix, MaxLen: cfg.InboxMaxLen, DLQMaxLen: cfg.DLQMaxLen, OpHook: hook})
	if err != nil {
		return st, wrap("streams", err)
	}
	group := cfg.Group
	st.Sender = streams
	st.Inbox = func(id string) scheduler.Inbox { return streams.Inbox(id, group) }
	jobs, err := NewJobs(c, JobsConfig{Prefix: prefix, MaxAttempts: dc.MaxAttempts, TTL: dc.JobTTL, OpHook: hook})
	if err != nil {
		return st, wrap("jobs", err)
	}
	due, err := NewDue(c, DueConfig{Prefix: prefix, OpHook: hook})
	if err != nil {
		return st, wrap("due", err)
	}
	jobs.due = due
	st.Jobs, st.Due = jobs, due
	if st.Reservations, err = NewReservations(c, ReservationsConfig{Prefix: prefix, OpHook: hook}); err != nil {
		return st, wrap("reservations", err)
	}
	if st.Turns, err = NewTurns(c, TurnsConfig{Prefix: prefix, TTL: dc.TurnTTL, OpHook: hook}); err != nil {
		return st, wrap("turns", err)
	}
	if st.Storm, err = NewStorm(c, StormConfig{Prefix: prefix, Windows: plane.Storm, OpHook: hook}); err != nil {
		return st, wrap("storm", err)
	}
	return st, nil
}
