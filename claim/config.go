package claim

import (
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// ProbeFailure says how the resource_usage policy treats a node whose usage
// probe failed or timed out.
type ProbeFailure int

const (
	// ProbeFailureZero (the default): the node's
	// score is 0, which makes it look least loaded.
	ProbeFailureZero ProbeFailure = iota
	// ProbeFailureNotEligible (opt-in): the node is left out of the
	// eligibility decision for that cycle; it still counts as active, so
	// its deployments are not taken over.
	ProbeFailureNotEligible
)

// Rebalance configures the rebalance opt-in: a node that holds at least
// Threshold more deployments than the least loaded active node, for Cycles
// consecutive cycles in which nothing is waiting to be claimed, stops one of
// its deployments and releases it (at most one per cycle), so that a node
// that joins late gets work. Off by default.
type Rebalance struct {
	// Enabled turns rebalancing on. Default false.
	Enabled bool
	// Threshold is the difference in deployment count that triggers it.
	// Default 2; it must be at least 2 (1 would move deployments back and
	// forth).
	Threshold int
	// Cycles is how many consecutive cycles the difference must last.
	// Default 3.
	Cycles int
}

// Config tunes a [Loop]. Zero fields mean the documented defaults; only
// Address is required. There is no clock to configure: the loop reads
// package time (its decisions, such as LostAfter, self-fencing and report
// times, use time.Now; Run's ticker is a time.Ticker), and tests drive it
// with testing/synctest.
type Config struct {
	// Address is this node-unit's address, the value claims write into
	// deployment.address. Required.
	Address string
	// UsageEndpoint is published in the membership for [UsageProbe]s.
	// Default "".
	UsageEndpoint string
	// StartedAt is published in the membership. Default: the time of New.
	StartedAt time.Time
	// Policy decides eligibility. Default [DeploymentCountPolicy].
	// [ParsePolicy] turns a policy name into one.
	Policy Policy
	// Interval is the cycle period. Default 5s ([DefaultInterval]).
	Interval time.Duration
	// MembershipTTL is how long a node-unit stays active after its last
	// heartbeat. Default 3 * Interval. It must exceed Interval. Each
	// membership call is bounded by the longer of Interval and
	// MembershipTTL/2.
	MembershipTTL time.Duration
	// ProbeTimeout bounds the usage probes of one cycle (resource_usage
	// only). Default Interval / 2.
	ProbeTimeout time.Duration
	// ProbeFailure is how a failed probe counts. Default [ProbeFailureZero].
	ProbeFailure ProbeFailure
	// LostAfter (opt-in) is how long a node must be missing from the
	// membership, as seen by this loop, before its deployments are taken
	// over. Default 0: taken over as soon as it is missing.
	LostAfter time.Duration
	// MaxClaimsPerCycle (opt-in above 1) is the most deployments this node
	// claims in one cycle, in one statement, up to its fair share. Default 1:
	// one claim per cycle, so that load spreads one deployment at a time.
	MaxClaimsPerCycle int
	// Rebalance is the rebalance opt-in. Default off.
	Rebalance Rebalance
	// SelfFence (opt-in): when this node has not renewed its membership for
	// MembershipTTL / 2, it stops its deployment processes (daemons keep
	// running), because other nodes may take them over. It requires
	// MembershipTTL > 2 * Interval. It does nothing under the none policy,
	// where no node takes deployments over. Default false.
	SelfFence bool
	// Logger receives the loop's logs. Default: discard.
	Logger *slog.Logger
	// Observer receives a [Report] per cycle. Default none.
	Observer Observer
}

// withDefaults validates c and fills in defaults.
func (c Config) withDefaults() (Config, error) {
	bad := func(name string, v any, msg string) (Config, error) {
		return Config{}, &ConfigError{Name: "Config." + name, Value: fmt.Sprint(v), Err: errors.New(msg)}
	}
	if c.Address == "" {
		return bad("Address", c.Address, "required")
	}
	if c.Policy == nil {
		c.Policy = DeploymentCountPolicy()
	}
	if c.Interval < 0 {
		return bad("Interval", c.Interval, "must be >= 0")
	}
	if c.Interval == 0 {
		c.Interval = DefaultInterval
	}
	if c.MembershipTTL < 0 {
		return bad("MembershipTTL", c.MembershipTTL, "must be >= 0")
	}
	if c.MembershipTTL == 0 {
		c.MembershipTTL = 3 * c.Interval
	}
	if c.MembershipTTL <= c.Interval {
		return bad("MembershipTTL", c.MembershipTTL, "must exceed Interval "+c.Interval.String())
	}
	if c.SelfFence && c.MembershipTTL <= 2*c.Interval {
		return bad("MembershipTTL", c.MembershipTTL, "must exceed 2 * Interval with SelfFence, so that a node stops its deployments before its membership expires")
	}
	if c.ProbeTimeout < 0 {
		return bad("ProbeTimeout", c.ProbeTimeout, "must be >= 0")
	}
	if c.ProbeTimeout == 0 {
		c.ProbeTimeout = c.Interval / 2
	}
	if c.ProbeFailure != ProbeFailureZero && c.ProbeFailure != ProbeFailureNotEligible {
		return bad("ProbeFailure", int(c.ProbeFailure), "unknown mode")
	}
	if c.LostAfter < 0 {
		return bad("LostAfter", c.LostAfter, "must be >= 0")
	}
	if c.MaxClaimsPerCycle < 0 {
		return bad("MaxClaimsPerCycle", c.MaxClaimsPerCycle, "must be >= 0")
	}
	if c.MaxClaimsPerCycle == 0 {
		c.MaxClaimsPerCycle = 1
	}
	if c.Rebalance.Threshold == 0 {
		c.Rebalance.Threshold = 2
	}
	if c.Rebalance.Threshold < 2 {
		return bad("Rebalance.Threshold", c.Rebalance.Threshold, "must be at least 2")
	}
	if c.Rebalance.Cycles == 0 {
		c.Rebalance.Cycles = 3
	}
	if c.Rebalance.Cycles < 1 {
		return bad("Rebalance.Cycles", c.Rebalance.Cycles, "must be at least 1")
	}
	if c.StartedAt.IsZero() {
		c.StartedAt = time.Now()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c, nil
}
