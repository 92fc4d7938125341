package scheduler

import (
	"fmt"
	"time"
)

// Selection strategies of [DispatchConfig.Selection].
const (
	// SelectRandom picks uniformly at random among the eligible nodes.
	SelectRandom = "random"
	// SelectTwoChoices draws two eligible nodes at random and takes the one
	// with fewer reservations (the power of two choices): a little more
	// work per job for a much flatter load.
	SelectTwoChoices = "two_choices"
)

// Defaults of [DispatchConfig]; a zero field means the default.
const (
	DefaultAckTimeoutMS     = 10000
	DefaultRunTimeoutMS     = 300000
	DefaultLeaseMS          = 15000
	DefaultQueueTimeoutMS   = 10000
	DefaultRetryIntervalMS  = 200
	DefaultSweepIntervalMS  = 500
	DefaultCapacity         = 4
	DefaultTurnTTLSeconds   = 86400
	DefaultJobTTLSeconds    = 86400
	DefaultSweepBatch       = 256
	DefaultAnsweredMemoryMS = 600000
)

// DispatchConfig tunes a [Dispatcher]: its deadlines, its retries and its
// node selection. In cmd/dispatcher it is the [dispatcher] table of
// config.toml. A zero field means the default named on it.
type DispatchConfig struct {
	// AckTimeoutMS: a node that does not acknowledge (job_ack or
	// job_started) a job within this time after it was dispatched loses it:
	// the job goes to another node with its attempt incremented. Default
	// 10000.
	AckTimeoutMS int `toml:"ack_timeout_ms"`
	// RunTimeoutMS bounds an attempt from dispatch to result. Past it the
	// job is taken off its node as after an ack timeout. Default 300000.
	RunTimeoutMS int `toml:"run_timeout_ms"`
	// LeaseMS: once acknowledged, a job is held by a lease that the
	// instance holding its node's connection renews every third of it, so
	// a long job is never rescued early; if that instance dies, the job is
	// rescued by another one within LeaseMS. Default 15000.
	LeaseMS int `toml:"lease_ms"`
	// QueueTimeoutMS: how long a job may wait for an eligible node (online,
	// in its pool, with its model and a free slot) before it fails with
	// "no node". Default 10000.
	QueueTimeoutMS int `toml:"queue_timeout_ms"`
	// RetryIntervalMS: how often a waiting job looks for a node again.
	// Default 200.
	RetryIntervalMS int `toml:"retry_interval_ms"`
	// SweepIntervalMS: how often an instance looks for jobs whose deadline
	// passed. Default 500.
	SweepIntervalMS int `toml:"sweep_interval_ms"`
	// MaxAttempts is how many nodes a job is tried on before it fails.
	// Default 3.
	MaxAttempts int `toml:"max_attempts"`
	// DefaultCapacity is the number of jobs a node runs at once when it
	// registers without a capacity. Default 4.
	DefaultCapacity int `toml:"default_capacity"`
	// Selection is "random" (the default) or "two_choices".
	Selection string `toml:"selection"`
	// TurnTTLSeconds is how long a turn's affinity and a session's current
	// turn are kept after they were last written, so that turns never ended
	// by a finalize do not stay in the store for ever. It is far longer than
	// any turn: a turn's affinity never times out while the turn goes on.
	// Default 86400 (a day).
	TurnTTLSeconds int `toml:"turn_ttl_seconds"`
	// JobTTLSeconds is how long a job's records are kept after their last
	// change (so a late duplicate request still finds its answer). Default
	// 86400.
	JobTTLSeconds int `toml:"job_ttl_seconds"`
	// RequestTimeoutMS: a session that got no answer to a request within
	// this time gets job_failed from its instance, whatever happened to the
	// job (a lost Redis, say). Default: QueueTimeoutMS + MaxAttempts ×
	// (AckTimeoutMS + RunTimeoutMS) + LeaseMS.
	RequestTimeoutMS int `toml:"request_timeout_ms"`
}

// ConfigPathDispatch is the TOML table of [DispatchConfig] in cmd/dispatcher.
const ConfigPathDispatch = "dispatcher"

func dispatchErr(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: ConfigPathDispatch + "." + field, Reason: fmt.Sprintf(format, args...)}
}

// WithDefaults returns c with every zero field set to its default.
func (c DispatchConfig) WithDefaults() DispatchConfig {
	def(&c.AckTimeoutMS, DefaultAckTimeoutMS)
	def(&c.RunTimeoutMS, DefaultRunTimeoutMS)
	def(&c.LeaseMS, DefaultLeaseMS)
	def(&c.QueueTimeoutMS, DefaultQueueTimeoutMS)
	def(&c.RetryIntervalMS, DefaultRetryIntervalMS)
	def(&c.SweepIntervalMS, DefaultSweepIntervalMS)
	def(&c.MaxAttempts, 3)
	def(&c.DefaultCapacity, DefaultCapacity)
	if c.Selection == "" {
		c.Selection = SelectRandom
	}
	def(&c.TurnTTLSeconds, DefaultTurnTTLSeconds)
	def(&c.JobTTLSeconds, DefaultJobTTLSeconds)
	def(&c.RequestTimeoutMS, c.QueueTimeoutMS+c.MaxAttempts*(c.AckTimeoutMS+c.RunTimeoutMS)+c.LeaseMS)
	return c
}

// Validate checks c as given: no negative numbers, a known selection, and
// a lease of at least 3 ms (it is renewed every third). The error is a
// [*ConfigError] naming the field under [dispatcher].
func (c DispatchConfig) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{
		{"ack_timeout_ms", c.AckTimeoutMS}, {"run_timeout_ms", c.RunTimeoutMS}, {"lease_ms", c.LeaseMS},
		{"queue_timeout_ms", c.QueueTimeoutMS}, {"retry_interval_ms", c.RetryIntervalMS},
		{"sweep_interval_ms", c.SweepIntervalMS}, {"max_attempts", c.MaxAttempts},
		{"default_capacity", c.DefaultCapacity}, {"turn_ttl_seconds", c.TurnTTLSeconds},
		{"job_ttl_seconds", c.JobTTLSeconds}, {"request_timeout_ms", c.RequestTimeoutMS},
	} {
		if f.v < 0 {
			return dispatchErr(f.name, "must not be negative, got %d", f.v)
		}
	}
	if c.LeaseMS != 0 && c.LeaseMS < 3 {
		return dispatchErr("lease_ms", "must be at least 3, got %d", c.LeaseMS)
	}
	if c.MaxAttempts > 100 {
		return dispatchErr("max_attempts", "%d is more than 100", c.MaxAttempts)
	}
	if c.DefaultCapacity > MaxCapacity {
		return dispatchErr("default_capacity", "%d is more than %d", c.DefaultCapacity, MaxCapacity)
	}
	switch c.Selection {
	case "", SelectRandom, SelectTwoChoices:
	default:
		return dispatchErr("selection", "unknown strategy %q (random|two_choices)", c.Selection)
	}
	return nil
}

// MaxCapacity bounds a node's capacity.
const MaxCapacity = 10000

func msd(v int) time.Duration { return time.Duration(v) * time.Millisecond }
