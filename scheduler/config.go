package scheduler

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"time"
)

// Redis modes accepted in [RedisConfig.Mode].
const (
	ModeSingle  = "single"  // one standalone server at redis.url
	ModeCluster = "cluster" // a Redis Cluster reached through redis.cluster_urls
)

// InstanceIDAuto asks for a generated instance id (see [NewInstanceID]).
const InstanceIDAuto = "auto"

// ConfigPath is the TOML table the configuration lives in; every
// [ConfigError] names its field under it.
const ConfigPath = "scheduler.phase2"

// Defaults of [Config]; a zero field means the default below.
const (
	DefaultKeyPrefix              = "ksana"
	DefaultOwnerTTLSeconds        = 45
	DefaultStreamGroup            = "scheduler"
	DefaultStreamBlockMS          = 1000
	DefaultStreamCount            = 64
	DefaultStreamMaxLen           = 10000
	DefaultStreamClaimMinIdleMS   = 30000
	DefaultDLQMaxLen              = 10000
	DefaultDLQMaxDeliveries       = 10
	DefaultDLQMinIdleMS           = 60000
	DefaultDLQScanIntervalMS      = 5000
	DefaultDLQScanCount           = 100
	DefaultPresenceTTLSeconds     = 45
	DefaultRefreshIntervalMS      = 2000
	DefaultRemoveStaleAfterSecond = 600
	DefaultStormDebounceWindowMS  = 5000
	DefaultStormCooldownMS        = 30000
	DefaultStormMaxActionsPerSec  = 20
)

// ErrInvalidConfig is wrapped by every [ConfigError].
var ErrInvalidConfig = errors.New("invalid configuration")

// ConfigError reports a bad configuration field. Field is the full TOML path
// of the field, such as "scheduler.phase2.redis.mode".
type ConfigError struct {
	Field  string
	Reason string
}

// Error returns "<field>: <reason>".
func (e *ConfigError) Error() string { return e.Field + ": " + e.Reason }

// Unwrap returns [ErrInvalidConfig].
func (e *ConfigError) Unwrap() error { return ErrInvalidConfig }

func fieldErr(field, format string, args ...any) *ConfigError {
	return &ConfigError{Field: ConfigPath + "." + field, Reason: fmt.Sprintf(format, args...)}
}

// Config configures the multi-instance dispatch plane. Its TOML shape is the
// [scheduler.phase2] table of a config.toml, with the sub-tables
// [scheduler.phase2.redis], [scheduler.phase2.node_snapshot] and
// [scheduler.phase2.storm]. A zero field means its documented default;
// [Config.WithDefaults] fills them in and [Config.Validate] checks the result.
type Config struct {
	// Enabled switches the plane on. Default false.
	Enabled bool `toml:"enabled"`
	// InstanceID names this instance: its presence key, its owner bindings
	// and its inbox. "auto" (the default, also for "") generates one with
	// [NewInstanceID] in [Config.WithDefaults]; configure a stable id in
	// production so that a restarted instance finds its inbox again.
	InstanceID string `toml:"instance_id"`
	// Redis says where the server is.
	Redis RedisConfig `toml:"redis"`
	// OwnerTTLSeconds is the TTL of the instance presence key and of the
	// node and session owner bindings; they are renewed every third of it.
	// Default 45.
	OwnerTTLSeconds int `toml:"owner_ttl_seconds"`
	// StreamGroup is the consumer group that reads an inbox. Default "scheduler".
	StreamGroup string `toml:"stream_group"`
	// StreamBlockMS is the BLOCK of each XREADGROUP, which bounds how long
	// a consumer takes to notice that it should stop. Default 1000.
	StreamBlockMS int `toml:"stream_block_ms"`
	// StreamCount is the COUNT of each XREADGROUP and XAUTOCLAIM. Default 64.
	StreamCount int `toml:"stream_count"`
	// StreamMaxLen bounds the inbox: a message to an inbox holding this
	// many unhandled entries is refused ([ErrInboxFull]) rather than an
	// unhandled entry trimmed. Default 10000.
	StreamMaxLen int64 `toml:"stream_maxlen"`
	// StreamClaimMinIdleMS is how long an entry stays pending with a
	// consumer before another consumer of the group takes it over with
	// XAUTOCLAIM. Default 30000.
	StreamClaimMinIdleMS int `toml:"stream_claim_min_idle_ms"`
	// DLQEnabled turns the dead-letter scan on or off. Default true (nil).
	DLQEnabled *bool `toml:"dlq_enabled"`
	// DLQMaxLen trims the dead-letter stream with MAXLEN ~. Default 10000.
	DLQMaxLen int64 `toml:"dlq_maxlen"`
	// DLQMaxDeliveries: an entry delivered more often than this is dead. Default 10.
	DLQMaxDeliveries int64 `toml:"dlq_max_deliveries"`
	// DLQMinIdleMS: only entries idle at least this long are moved. Default 60000.
	DLQMinIdleMS int `toml:"dlq_min_idle_ms"`
	// DLQScanIntervalMS is the period of the dead-letter scan (and of the
	// inbox pending gauge). Default 5000.
	DLQScanIntervalMS int `toml:"dlq_scan_interval_ms"`
	// DLQScanCount bounds the XPENDING page of one scan. Default 100.
	DLQScanCount int `toml:"dlq_scan_count"`
	// NodeSnapshot configures the shared fleet view.
	NodeSnapshot NodeSnapshotConfig `toml:"node_snapshot"`
	// Storm configures protection against MODEL_NOT_AVAILABLE storms.
	Storm StormConfig `toml:"storm"`
	// Dispatch tunes the [Dispatcher]. It is not part of the
	// [scheduler.phase2] table: cmd/dispatcher reads it from [dispatcher].
	Dispatch DispatchConfig `toml:"-"`

	// Logger receives the runtime loops' warnings. Default: discard.
	Logger *slog.Logger `toml:"-"`
	// Hooks are the metric sources. Default: none.
	Hooks Hooks `toml:"-"`
}

// RedisConfig is [scheduler.phase2.redis].
type RedisConfig struct {
	// Mode is "single" (the default, also for "") or "cluster".
	Mode string `toml:"mode"`
	// URL is the redis:// or rediss:// URL of the server in single mode.
	// Required in single mode when the plane is enabled.
	URL string `toml:"url"`
	// ClusterURLs are seed URLs of the cluster in cluster mode. Required in
	// cluster mode when the plane is enabled.
	ClusterURLs []string `toml:"cluster_urls"`
	// KeyPrefix starts every key. Default "ksana"; use one per environment.
	KeyPrefix string `toml:"key_prefix"`
}

// NodeSnapshotConfig is [scheduler.phase2.node_snapshot].
type NodeSnapshotConfig struct {
	// Enabled switches the fleet view on. Default true (nil).
	Enabled *bool `toml:"enabled"`
	// PresenceTTLSeconds is the TTL of a node's presence key: a node is
	// online while its owner keeps refreshing it. Default 45.
	PresenceTTLSeconds int `toml:"presence_ttl_seconds"`
	// RefreshIntervalMS is how often an instance upserts its own nodes and
	// reads the fleet. Default 2000.
	RefreshIntervalMS int `toml:"refresh_interval_ms"`
	// RemoveStaleAfterSeconds removes a node not seen for this long from
	// nodes:all, nodes:last_seen and its keys; it is also the TTL of a
	// node's snapshot. Default 600.
	RemoveStaleAfterSeconds int `toml:"remove_stale_after_seconds"`
}

// StormConfig is [scheduler.phase2.storm]: the windows of [StormGuard].
type StormConfig struct {
	// DebounceWindowMS: after the first MODEL_NOT_AVAILABLE report of a
	// node and model, later reports within this window are only counted.
	// Default 5000.
	DebounceWindowMS int `toml:"debounce_window_ms"`
	// CooldownMS is how long an acted-on model stays unavailable on that
	// node. Default 30000.
	CooldownMS int `toml:"cooldown_ms"`
	// MaxActionsPerSecond bounds how many nodes per second may have one
	// model marked unavailable. Default 20.
	MaxActionsPerSecond int `toml:"max_actions_per_second"`
}

// Bool returns a pointer to v, for [Config.DLQEnabled] and
// [NodeSnapshotConfig.Enabled].
func Bool(v bool) *bool { return &v }

// NewInstanceID returns a generated instance id: the host name and 8 random
// hex digits, such as "web-1-3fa2c09b".
func NewInstanceID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "scheduler"
	}
	var b [4]byte
	rand.Read(b[:])
	return host + "-" + hex.EncodeToString(b[:])
}

// WithDefaults returns c with every zero field set to its default, and an
// "auto" or empty instance id replaced by [NewInstanceID].
func (c Config) WithDefaults() Config {
	if c.InstanceID == "" || c.InstanceID == InstanceIDAuto {
		c.InstanceID = NewInstanceID()
	}
	if c.Redis.Mode == "" {
		c.Redis.Mode = ModeSingle
	}
	if c.Redis.KeyPrefix == "" {
		c.Redis.KeyPrefix = DefaultKeyPrefix
	}
	def(&c.OwnerTTLSeconds, DefaultOwnerTTLSeconds)
	if c.StreamGroup == "" {
		c.StreamGroup = DefaultStreamGroup
	}
	def(&c.StreamBlockMS, DefaultStreamBlockMS)
	def(&c.StreamCount, DefaultStreamCount)
	def(&c.StreamMaxLen, DefaultStreamMaxLen)
	def(&c.StreamClaimMinIdleMS, DefaultStreamClaimMinIdleMS)
	if c.DLQEnabled == nil {
		c.DLQEnabled = Bool(true)
	}
	def(&c.DLQMaxLen, DefaultDLQMaxLen)
	def(&c.DLQMaxDeliveries, DefaultDLQMaxDeliveries)
	def(&c.DLQMinIdleMS, DefaultDLQMinIdleMS)
	def(&c.DLQScanIntervalMS, DefaultDLQScanIntervalMS)
	def(&c.DLQScanCount, DefaultDLQScanCount)
	if c.NodeSnapshot.Enabled == nil {
		c.NodeSnapshot.Enabled = Bool(true)
	}
	def(&c.NodeSnapshot.PresenceTTLSeconds, DefaultPresenceTTLSeconds)
	def(&c.NodeSnapshot.RefreshIntervalMS, DefaultRefreshIntervalMS)
	def(&c.NodeSnapshot.RemoveStaleAfterSeconds, DefaultRemoveStaleAfterSecond)
	def(&c.Storm.DebounceWindowMS, DefaultStormDebounceWindowMS)
	def(&c.Storm.CooldownMS, DefaultStormCooldownMS)
	def(&c.Storm.MaxActionsPerSecond, DefaultStormMaxActionsPerSec)
	c.Dispatch = c.Dispatch.WithDefaults()
	return c
}

func def[T int | int64](p *T, v T) {
	if *p == 0 {
		*p = v
	}
}

// Validate checks c as given (call [Config.WithDefaults] first to check the
// effective configuration). Negative numbers are rejected everywhere; the
// Redis connection fields are checked when the plane is enabled (see
// [RedisConfig.Validate]). The error is a [*ConfigError] naming the field.
func (c Config) Validate() error {
	if strings.ContainsAny(c.InstanceID, "{} \t\r\n") {
		return fieldErr("instance_id", "%q may not contain braces or white space", c.InstanceID)
	}
	if c.Enabled {
		if err := c.Redis.Validate(); err != nil {
			return err
		}
	} else if c.Redis.Mode != "" && c.Redis.Mode != ModeSingle && c.Redis.Mode != ModeCluster {
		return fieldErr("redis.mode", "unknown mode %q (single|cluster)", c.Redis.Mode)
	}
	if strings.ContainsAny(c.StreamGroup, " \t\r\n") {
		return fieldErr("stream_group", "%q may not contain white space", c.StreamGroup)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"owner_ttl_seconds", int64(c.OwnerTTLSeconds)},
		{"stream_block_ms", int64(c.StreamBlockMS)},
		{"stream_count", int64(c.StreamCount)},
		{"stream_maxlen", c.StreamMaxLen},
		{"stream_claim_min_idle_ms", int64(c.StreamClaimMinIdleMS)},
		{"dlq_maxlen", c.DLQMaxLen},
		{"dlq_max_deliveries", c.DLQMaxDeliveries},
		{"dlq_min_idle_ms", int64(c.DLQMinIdleMS)},
		{"dlq_scan_interval_ms", int64(c.DLQScanIntervalMS)},
		{"dlq_scan_count", int64(c.DLQScanCount)},
		{"node_snapshot.presence_ttl_seconds", int64(c.NodeSnapshot.PresenceTTLSeconds)},
		{"node_snapshot.refresh_interval_ms", int64(c.NodeSnapshot.RefreshIntervalMS)},
		{"node_snapshot.remove_stale_after_seconds", int64(c.NodeSnapshot.RemoveStaleAfterSeconds)},
		{"storm.debounce_window_ms", int64(c.Storm.DebounceWindowMS)},
		{"storm.cooldown_ms", int64(c.Storm.CooldownMS)},
		{"storm.max_actions_per_second", int64(c.Storm.MaxActionsPerSecond)},
	} {
		if f.v < 0 {
			return fieldErr(f.name, "must not be negative, got %d", f.v)
		}
	}
	return c.Dispatch.Validate()
}

// Validate checks the connection fields: the mode, and the URL (single) or
// the seed URLs (cluster), which must be redis:// or rediss:// URLs with a
// host. The error is a [*ConfigError] naming the field.
func (r RedisConfig) Validate() error {
	switch r.Mode {
	case "", ModeSingle:
		if r.URL == "" {
			return fieldErr("redis.url", "required in single mode")
		}
		if err := checkRedisURL(r.URL); err != nil {
			return fieldErr("redis.url", "%v", err)
		}
	case ModeCluster:
		if len(r.ClusterURLs) == 0 {
			return fieldErr("redis.cluster_urls", "required in cluster mode")
		}
		for i, u := range r.ClusterURLs {
			if err := checkRedisURL(u); err != nil {
				return fieldErr(fmt.Sprintf("redis.cluster_urls[%d]", i), "%v", err)
			}
		}
	default:
		return fieldErr("redis.mode", "unknown mode %q (single|cluster)", r.Mode)
	}
	if strings.ContainsAny(r.KeyPrefix, "{} \t\r\n") {
		return fieldErr("redis.key_prefix", "%q may not contain braces or white space", r.KeyPrefix)
	}
	return nil
}

func checkRedisURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return fmt.Errorf("%q is not a URL", raw)
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return fmt.Errorf("%q: scheme must be redis or rediss", raw)
	}
	if u.Host == "" {
		return fmt.Errorf("%q has no host", raw)
	}
	return nil
}

// DLQOn reports whether the dead-letter scan runs (dlq_enabled, default true).
func (c Config) DLQOn() bool { return c.DLQEnabled == nil || *c.DLQEnabled }

// SnapshotsOn reports whether the fleet view runs (node_snapshot.enabled, default true).
func (c Config) SnapshotsOn() bool { return c.NodeSnapshot.Enabled == nil || *c.NodeSnapshot.Enabled }

// OwnerTTL is owner_ttl_seconds as a duration (default applied).
func (c Config) OwnerTTL() time.Duration {
	return secs(c.OwnerTTLSeconds, DefaultOwnerTTLSeconds)
}

// StreamBlock is stream_block_ms as a duration (default applied).
func (c Config) StreamBlock() time.Duration { return ms(c.StreamBlockMS, DefaultStreamBlockMS) }

// ClaimMinIdle is stream_claim_min_idle_ms as a duration (default applied).
func (c Config) ClaimMinIdle() time.Duration {
	return ms(c.StreamClaimMinIdleMS, DefaultStreamClaimMinIdleMS)
}

// DLQMinIdle is dlq_min_idle_ms as a duration (default applied).
func (c Config) DLQMinIdle() time.Duration { return ms(c.DLQMinIdleMS, DefaultDLQMinIdleMS) }

// DLQScanInterval is dlq_scan_interval_ms as a duration (default applied).
func (c Config) DLQScanInterval() time.Duration {
	return ms(c.DLQScanIntervalMS, DefaultDLQScanIntervalMS)
}

// PresenceTTL is node_snapshot.presence_ttl_seconds (default applied).
func (n NodeSnapshotConfig) PresenceTTL() time.Duration {
	return secs(n.PresenceTTLSeconds, DefaultPresenceTTLSeconds)
}

// RefreshInterval is node_snapshot.refresh_interval_ms (default applied).
func (n NodeSnapshotConfig) RefreshInterval() time.Duration {
	return ms(n.RefreshIntervalMS, DefaultRefreshIntervalMS)
}

// RemoveStaleAfter is node_snapshot.remove_stale_after_seconds (default applied).
func (n NodeSnapshotConfig) RemoveStaleAfter() time.Duration {
	return secs(n.RemoveStaleAfterSeconds, DefaultRemoveStaleAfterSecond)
}

// DebounceWindow is storm.debounce_window_ms (default applied).
func (s StormConfig) DebounceWindow() time.Duration {
	return ms(s.DebounceWindowMS, DefaultStormDebounceWindowMS)
}

// Cooldown is storm.cooldown_ms (default applied).
func (s StormConfig) Cooldown() time.Duration { return ms(s.CooldownMS, DefaultStormCooldownMS) }

// ActionsPerSecond is storm.max_actions_per_second (default applied).
func (s StormConfig) ActionsPerSecond() int {
	if s.MaxActionsPerSecond <= 0 {
		return DefaultStormMaxActionsPerSec
	}
	return s.MaxActionsPerSecond
}

func secs(v, d int) time.Duration {
	if v <= 0 {
		v = d
	}
	return time.Duration(v) * time.Second
}

func ms(v, d int) time.Duration {
	if v <= 0 {
		v = d
	}
	return time.Duration(v) * time.Millisecond
}

// checkInstanceID is used by the constructors: the id must be resolved.
func checkInstanceID(id string) error {
	if id == "" || id == InstanceIDAuto {
		return fieldErr("instance_id", "%q must be resolved first (Config.WithDefaults generates one)", id)
	}
	if strings.ContainsAny(id, "{} \t\r\n") {
		return fieldErr("instance_id", "%q may not contain braces or white space", id)
	}
	return nil
}
