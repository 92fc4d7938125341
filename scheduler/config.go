package scheduler

import (
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// ErrInvalidConfig is wrapped by every [ConfigError].
var ErrInvalidConfig = errors.New("invalid configuration")

// ConfigError reports a bad [Config] field. Field is the Go path of the
// field under Config, such as "Dispatch.AckTimeout".
type ConfigError struct {
	Field  string
	Reason string
}

// Error returns "scheduler: Config.<field>: <reason>".
func (e *ConfigError) Error() string { return "scheduler: Config." + e.Field + ": " + e.Reason }

// Unwrap returns [ErrInvalidConfig].
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

func fieldErr(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: field, Reason: fmt.Sprintf(format, args...)}
}

// Config configures one instance of the dispatch plane. A zero field means
// the default named on it; [Config.WithDefaults] fills them in and
// [Config.Validate] checks the result.
type Config struct {
	// InstanceID names this instance: its presence, its owner bindings and
	// its inbox. Required by [NewDispatcher], [NewHeartbeat] and
	// [NewBindings]; keep it stable across restarts so that a restarted
	// instance finds its inbox again. No braces or white space.
	InstanceID string
	// OwnerTTL is the TTL of the instance's presence and of its node and
	// session owner bindings; they are renewed every third of it, and an
	// instance that stops renewing is taken for dead after it. Default 45s.
	OwnerTTL time.Duration
	// Inbox tunes the reading of this instance's inbox.
	Inbox InboxConfig
	// Fleet tunes the shared view of every instance's nodes.
	Fleet FleetConfig
	// Storm are the windows of the MODEL_NOT_AVAILABLE protection; the
	// stores that implement [StormGuard] read them.
	Storm StormWindows
	// Dispatch tunes the [Dispatcher]'s deadlines, retries and selection.
	Dispatch DispatchConfig

	// Logger receives the runtime loops' warnings. Default: discard.
	Logger *slog.Logger
	// Hooks are the metric sources. Default: none.
	Hooks Hooks
}

// InboxConfig tunes a [Deliverer]: how it reads an inbox, takes over the
// entries of a dead consumer and moves poison entries to the dead-letter
// queue.
type InboxConfig struct {
	// Block bounds one wait for new entries, and so how long a reader
	// takes to notice that it should stop. Default 1s.
	Block time.Duration
	// Count is the number of entries read or taken over at once. Default 64.
	Count int
	// ClaimMinIdle is how long an entry stays with a consumer, unacknowledged,
	// before another consumer of the group takes it over. Default 30s.
	ClaimMinIdle time.Duration
	// NoDeadLetters turns the dead-letter queue off: poison entries stay
	// pending. Default false (the queue is on).
	NoDeadLetters bool
	// MaxDeliveries: an entry delivered more often than this is dead.
	// Default 10.
	MaxDeliveries int64
	// DeadMinIdle: only entries idle at least this long are moved to the
	// dead-letter queue. Default 60s.
	DeadMinIdle time.Duration
	// ScanInterval is the period of the dead-letter scan and of the
	// InboxPending hook. Default 5s.
	ScanInterval time.Duration
	// ScanCount bounds the pending entries looked at by one scan. Default 100.
	ScanCount int
}

// FleetConfig tunes the shared fleet view ([SnapshotSync]).
type FleetConfig struct {
	// Off turns the shared view off: an instance sees only its own nodes.
	// Default false.
	Off bool
	// PresenceTTL: a node is online while its instance refreshes its
	// presence within this TTL. Default 45s.
	PresenceTTL time.Duration
	// RefreshInterval is how often an instance publishes its nodes and
	// reads the fleet. Default 2s.
	RefreshInterval time.Duration
	// RemoveStaleAfter removes a node not seen for this long from the
	// fleet. Default 10m.
	RemoveStaleAfter time.Duration
}

// Selection strategies of [DispatchConfig].Selection.
const (
	// SelectRandom picks uniformly at random among the eligible nodes.
	SelectRandom = "random"
	// SelectTwoChoices draws two eligible nodes at random and takes the one
	// with fewer reservations per slot (the power of two choices): a little
	// more work per job for a much flatter load.
	SelectTwoChoices = "two_choices"
)

// MaxCapacity bounds a node's capacity.
const MaxCapacity = 10000

// MaxQueueLimit bounds [DispatchConfig].QueueLimit.
const MaxQueueLimit = 1_000_000

// DispatchConfig tunes a [Dispatcher]: its deadlines, its retries and its
// node selection. A zero field means the default named on it.
type DispatchConfig struct {
	// AckTimeout: a node that does not acknowledge (job_ack or
	// job_started) a job within this time after it was dispatched loses
	// it: the job goes to another node with its attempt incremented.
	// Default 10s.
	AckTimeout time.Duration
	// RunTimeout bounds an attempt from dispatch to result, within
	// SweepInterval plus the time of one sweep. Past it the job is taken off
	// its node as after an ack timeout. Default 5m.
	RunTimeout time.Duration
	// Lease: once acknowledged, a job is held by a lease that the instance
	// holding its node's connection renews every third of it, so that if
	// that instance dies another one rescues the job within Lease.
	// Default 15s.
	Lease time.Duration
	// QueueTimeout: how long a job may wait for an eligible node (online,
	// in its pool, with its model and a free slot) before it fails with
	// "no_node", within RetryInterval after it. Default 10s.
	QueueTimeout time.Duration
	// QueueLimit bounds the jobs of one pool that wait on this instance
	// for a node (a free slot on an eligible node). A request that arrives
	// while its pool has QueueLimit jobs waiting here is not queued: its
	// session gets job_failed with "queue_full" at once, and nothing is
	// stored, so that the same request id may be sent again later. Jobs
	// that already wait (a failover, an undeliverable job_assign) join
	// the queue whatever its length. Default 1000, at most
	// [MaxQueueLimit].
	QueueLimit int
	// RetryInterval: how often the jobs waiting on this instance look for
	// a node again when nothing woke them sooner (a slot freed here or a
	// node attached or showed more room). Default 200ms.
	RetryInterval time.Duration
	// SweepInterval: how often an instance looks for jobs whose deadline
	// passed. Default 500ms.
	SweepInterval time.Duration
	// MaxAttempts is how many nodes a job is tried on before it fails.
	// Default 3, at most 100.
	MaxAttempts int
	// DefaultCapacity is the number of jobs a node runs at once when it
	// registers without a capacity. Default 4, at most [MaxCapacity].
	DefaultCapacity int
	// Selection is [SelectRandom] (the default) or [SelectTwoChoices].
	Selection string
	// TurnTTL is how long a turn's affinity is kept after it was last
	// written, so that turns never ended by a finalize do not stay in the
	// store for ever. It is far longer than any turn. Default 24h.
	TurnTTL time.Duration
	// JobTTL is how long a job's record is kept after its last change (so
	// that a late duplicate request still finds its answer). Default 24h.
	JobTTL time.Duration
	// RequestTimeout: a session that got no answer to a request within
	// this time gets job_failed from its instance, whatever happened to the
	// job. Default QueueTimeout + MaxAttempts × (AckTimeout + RunTimeout) +
	// Lease.
	RequestTimeout time.Duration
}

// WithDefaults returns c with every zero field set to its default.
func (c Config) WithDefaults() Config {
	def(&c.OwnerTTL, 45*time.Second)
	in := &c.Inbox
	def(&in.Block, time.Second)
	def(&in.Count, 64)
	def(&in.ClaimMinIdle, 30*time.Second)
	def(&in.MaxDeliveries, 10)
	def(&in.DeadMinIdle, time.Minute)
	def(&in.ScanInterval, 5*time.Second)
	def(&in.ScanCount, 100)
	f := &c.Fleet
	def(&f.PresenceTTL, 45*time.Second)
	def(&f.RefreshInterval, 2*time.Second)
	def(&f.RemoveStaleAfter, 10*time.Minute)
	c.Storm = c.Storm.withDefaults()
	d := &c.Dispatch
	def(&d.AckTimeout, 10*time.Second)
	def(&d.RunTimeout, 5*time.Minute)
	def(&d.Lease, 15*time.Second)
	def(&d.QueueTimeout, 10*time.Second)
	def(&d.QueueLimit, 1000)
	def(&d.RetryInterval, 200*time.Millisecond)
	def(&d.SweepInterval, 500*time.Millisecond)
	def(&d.MaxAttempts, 3)
	def(&d.DefaultCapacity, 4)
	if d.Selection == "" {
		d.Selection = SelectRandom
	}
	def(&d.TurnTTL, 24*time.Hour)
	def(&d.JobTTL, 24*time.Hour)
	def(&d.RequestTimeout, d.QueueTimeout+time.Duration(d.MaxAttempts)*(d.AckTimeout+d.RunTimeout)+d.Lease)
	return c
}

func (w StormWindows) withDefaults() StormWindows {
	def(&w.Debounce, 5*time.Second)
	def(&w.Cooldown, 30*time.Second)
	def(&w.ActionsPerSecond, 20)
	return w
}

func def[T int | int64 | time.Duration](p *T, v T) {
	if *p == 0 {
		*p = v
	}
}

// Validate checks c as given (call [Config.WithDefaults] first to check the
// effective configuration): no negative number or duration, an instance id
// and selection of the right form, bounds where they exist. The error is a
// [*ConfigError] naming the field.
func (c Config) Validate() error {
	if strings.ContainsAny(c.InstanceID, "{} \t\r\n") {
		return fieldErr("InstanceID", "%q may not contain braces or white space", c.InstanceID)
	}
	d := c.Dispatch
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"OwnerTTL", int64(c.OwnerTTL)},
		{"Inbox.Block", int64(c.Inbox.Block)},
		{"Inbox.Count", int64(c.Inbox.Count)},
		{"Inbox.ClaimMinIdle", int64(c.Inbox.ClaimMinIdle)},
		{"Inbox.MaxDeliveries", c.Inbox.MaxDeliveries},
		{"Inbox.DeadMinIdle", int64(c.Inbox.DeadMinIdle)},
		{"Inbox.ScanInterval", int64(c.Inbox.ScanInterval)},
		{"Inbox.ScanCount", int64(c.Inbox.ScanCount)},
		{"Fleet.PresenceTTL", int64(c.Fleet.PresenceTTL)},
		{"Fleet.RefreshInterval", int64(c.Fleet.RefreshInterval)},
		{"Fleet.RemoveStaleAfter", int64(c.Fleet.RemoveStaleAfter)},
		{"Storm.Debounce", int64(c.Storm.Debounce)},
		{"Storm.Cooldown", int64(c.Storm.Cooldown)},
		{"Storm.ActionsPerSecond", int64(c.Storm.ActionsPerSecond)},
		{"Dispatch.AckTimeout", int64(d.AckTimeout)},
		{"Dispatch.RunTimeout", int64(d.RunTimeout)},
		{"Dispatch.Lease", int64(d.Lease)},
		{"Dispatch.QueueTimeout", int64(d.QueueTimeout)},
		{"Dispatch.QueueLimit", int64(d.QueueLimit)},
		{"Dispatch.RetryInterval", int64(d.RetryInterval)},
		{"Dispatch.SweepInterval", int64(d.SweepInterval)},
		{"Dispatch.MaxAttempts", int64(d.MaxAttempts)},
		{"Dispatch.DefaultCapacity", int64(d.DefaultCapacity)},
		{"Dispatch.TurnTTL", int64(d.TurnTTL)},
		{"Dispatch.JobTTL", int64(d.JobTTL)},
		{"Dispatch.RequestTimeout", int64(d.RequestTimeout)},
	} {
		if f.v < 0 {
			return fieldErr(f.name, "must not be negative")
		}
	}
	if d.Lease != 0 && d.Lease < 3*time.Millisecond {
		return fieldErr("Dispatch.Lease", "must be at least 3ms, got %v", d.Lease)
	}
	if d.MaxAttempts > 100 {
		return fieldErr("Dispatch.MaxAttempts", "%d is more than 100", d.MaxAttempts)
	}
	if d.QueueLimit > MaxQueueLimit {
		return fieldErr("Dispatch.QueueLimit", "%d is more than %d", d.QueueLimit, MaxQueueLimit)
	}
	if d.DefaultCapacity > MaxCapacity {
		return fieldErr("Dispatch.DefaultCapacity", "%d is more than %d", d.DefaultCapacity, MaxCapacity)
	}
	switch d.Selection {
	case "", SelectRandom, SelectTwoChoices:
	default:
		return fieldErr("Dispatch.Selection", "unknown strategy %q (random|two_choices)", d.Selection)
	}
	return nil
}

// checkInstanceID is used by the constructors that need an instance id.
func checkInstanceID(id string) error {
	if id == "" {
		return fieldErr("InstanceID", "required")
	}
	if strings.ContainsAny(id, "{} \t\r\n") {
		return fieldErr("InstanceID", "%q may not contain braces or white space", id)
	}
	return nil
}
