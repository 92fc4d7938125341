package scheduler_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ksana-dev/ksana/scheduler"
)

func TestConfigWithDefaults(t *testing.T) {
	got := scheduler.Config{}.WithDefaults()
	want := scheduler.Config{
		Redis:                scheduler.RedisConfig{Mode: "single", KeyPrefix: "ksana"},
		OwnerTTLSeconds:      45,
		StreamGroup:          "scheduler",
		StreamBlockMS:        1000,
		StreamCount:          64,
		StreamMaxLen:         10000,
		StreamClaimMinIdleMS: 30000,
		DLQEnabled:           scheduler.Bool(true),
		DLQMaxLen:            10000,
		DLQMaxDeliveries:     10,
		DLQMinIdleMS:         60000,
		DLQScanIntervalMS:    5000,
		DLQScanCount:         100,
		NodeSnapshot: scheduler.NodeSnapshotConfig{Enabled: scheduler.Bool(true), PresenceTTLSeconds: 45,
			RefreshIntervalMS: 2000, RemoveStaleAfterSeconds: 600},
		Storm: scheduler.StormConfig{DebounceWindowMS: 5000, CooldownMS: 30000, MaxActionsPerSecond: 20},
		Dispatch: scheduler.DispatchConfig{
			AckTimeoutMS: 10000, RunTimeoutMS: 300000, LeaseMS: 15000, QueueTimeoutMS: 10000,
			RetryIntervalMS: 200, SweepIntervalMS: 500, MaxAttempts: 3, DefaultCapacity: 4,
			Selection: "random", TurnTTLSeconds: 86400, JobTTLSeconds: 86400,
			// queue + 3 × (ack + run) + lease
			RequestTimeoutMS: 10000 + 3*(10000+300000) + 15000,
		},
	}
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(scheduler.Config{}, "InstanceID", "Hooks")); d != "" {
		t.Errorf("WithDefaults of the zero Config (-want +got):\n%s", d)
	}
	for _, id := range []string{"", "auto"} {
		got := scheduler.Config{InstanceID: id}.WithDefaults().InstanceID
		if got == "" || got == "auto" || strings.ContainsAny(got, "{} ") {
			t.Errorf("WithDefaults resolved instance_id %q to %q, want a generated id", id, got)
		}
	}
	// Set fields are kept, including an explicit false.
	set := scheduler.Config{InstanceID: "a", StreamCount: 7, DLQEnabled: scheduler.Bool(false),
		NodeSnapshot: scheduler.NodeSnapshotConfig{Enabled: scheduler.Bool(false)}}.WithDefaults()
	if set.InstanceID != "a" || set.StreamCount != 7 || set.DLQOn() || set.SnapshotsOn() {
		t.Errorf("WithDefaults changed set fields: %+v", set)
	}
	d := scheduler.Config{}.WithDefaults()
	if d.OwnerTTL().Seconds() != 45 || d.StreamBlock().Milliseconds() != 1000 || d.Storm.Windows().ActionsPerSecond != 20 {
		t.Errorf("duration helpers: owner %v block %v storm %+v", d.OwnerTTL(), d.StreamBlock(), d.Storm.Windows())
	}
}

func TestConfigValidate(t *testing.T) {
	ok := func() scheduler.Config {
		return scheduler.Config{Enabled: true, InstanceID: "i1", Redis: scheduler.RedisConfig{URL: "redis://127.0.0.1:6379"}}
	}
	tests := []struct {
		name    string
		edit    func(c *scheduler.Config)
		wantErr string // "" means valid
	}{
		{"valid single", func(c *scheduler.Config) {}, ""},
		{"valid cluster", func(c *scheduler.Config) {
			c.Redis = scheduler.RedisConfig{Mode: "cluster", ClusterURLs: []string{"redis://h1:7000", "rediss://h2:7000"}}
		}, ""},
		{"disabled needs no URL", func(c *scheduler.Config) { c.Enabled = false; c.Redis.URL = "" }, ""},
		{"unknown mode", func(c *scheduler.Config) { c.Redis.Mode = "x" },
			`scheduler.phase2.redis.mode: unknown mode "x" (single|cluster)`},
		{"unknown mode while disabled", func(c *scheduler.Config) { c.Enabled = false; c.Redis.Mode = "sentinel" },
			`scheduler.phase2.redis.mode: unknown mode "sentinel" (single|cluster)`},
		{"missing url", func(c *scheduler.Config) { c.Redis.URL = "" },
			"scheduler.phase2.redis.url: required in single mode"},
		{"bad scheme", func(c *scheduler.Config) { c.Redis.URL = "http://h:1" },
			`scheduler.phase2.redis.url: "http://h:1": scheme must be redis or rediss`},
		{"missing cluster urls", func(c *scheduler.Config) { c.Redis.Mode = "cluster" },
			"scheduler.phase2.redis.cluster_urls: required in cluster mode"},
		{"bad cluster url", func(c *scheduler.Config) {
			c.Redis = scheduler.RedisConfig{Mode: "cluster", ClusterURLs: []string{"redis://h:1", "redis://"}}
		}, `scheduler.phase2.redis.cluster_urls[1]: "redis://" has no host`},
		{"braces in prefix", func(c *scheduler.Config) { c.Redis.KeyPrefix = "a{b}" },
			`scheduler.phase2.redis.key_prefix: "a{b}" may not contain braces or white space`},
		{"braces in instance id", func(c *scheduler.Config) { c.InstanceID = "a}b" },
			`scheduler.phase2.instance_id: "a}b" may not contain braces or white space`},
		{"negative count", func(c *scheduler.Config) { c.StreamCount = -1 },
			"scheduler.phase2.stream_count: must not be negative, got -1"},
		{"negative stale", func(c *scheduler.Config) { c.NodeSnapshot.RemoveStaleAfterSeconds = -5 },
			"scheduler.phase2.node_snapshot.remove_stale_after_seconds: must not be negative, got -5"},
		{"negative storm", func(c *scheduler.Config) { c.Storm.CooldownMS = -1 },
			"scheduler.phase2.storm.cooldown_ms: must not be negative, got -1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok()
			tc.edit(&c)
			err := c.Validate()
			got := ""
			if err != nil {
				got = err.Error()
				var ce *scheduler.ConfigError
				if !errors.As(err, &ce) || !errors.Is(err, scheduler.ErrInvalidConfig) {
					t.Errorf("error %v is not a *ConfigError wrapping ErrInvalidConfig", err)
				}
			}
			if got != tc.wantErr {
				t.Errorf("Validate() = %q, want %q", got, tc.wantErr)
			}
		})
	}
}

func TestConstructorsNeedResolvedInstanceID(t *testing.T) {
	for _, id := range []string{"", "auto"} {
		cfg := scheduler.Config{InstanceID: id}
		if _, err := scheduler.NewHeartbeat(scheduler.NewMemPresence(), cfg); !errors.Is(err, scheduler.ErrInvalidConfig) {
			t.Errorf("NewHeartbeat with instance_id %q: err = %v, want ErrInvalidConfig", id, err)
		}
		if _, err := scheduler.NewBindings(scheduler.NewMemOwners(), cfg, nil); !errors.Is(err, scheduler.ErrInvalidConfig) {
			t.Errorf("NewBindings with instance_id %q: err = %v, want ErrInvalidConfig", id, err)
		}
	}
}
