package scheduler_test

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ksana-dev/ksana/scheduler"
)

func TestConfigWithDefaults(t *testing.T) {
	got := scheduler.Config{}.WithDefaults()
	want := scheduler.Config{
		OwnerTTL: 45 * time.Second,
		Inbox: scheduler.InboxConfig{Block: time.Second, Count: 64, ClaimMinIdle: 30 * time.Second,
			MaxDeliveries: 10, DeadMinIdle: time.Minute, ScanInterval: 5 * time.Second, ScanCount: 100},
		Fleet: scheduler.FleetConfig{PresenceTTL: 45 * time.Second, RefreshInterval: 2 * time.Second, RemoveStaleAfter: 10 * time.Minute},
		Storm: scheduler.StormWindows{Debounce: 5 * time.Second, Cooldown: 30 * time.Second, ActionsPerSecond: 20},
		Dispatch: scheduler.DispatchConfig{
			AckTimeout: 10 * time.Second, RunTimeout: 5 * time.Minute, Lease: 15 * time.Second,
			QueueTimeout: 10 * time.Second, QueueLimit: 1000, RetryInterval: 200 * time.Millisecond, SweepInterval: 500 * time.Millisecond,
			MaxAttempts: 3, DefaultCapacity: 4, Selection: "random", TurnTTL: 24 * time.Hour, JobTTL: 24 * time.Hour,
			// queue + 3 × (ack + run) + lease
			RequestTimeout: 10*time.Second + 3*(10*time.Second+5*time.Minute) + 15*time.Second,
		},
	}
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(scheduler.Config{}, "Hooks")); d != "" {
		t.Errorf("WithDefaults of the zero Config (-want +got):\n%s", d)
	}
	// Set fields are kept.
	set := scheduler.Config{InstanceID: "a", Inbox: scheduler.InboxConfig{Count: 7, NoDeadLetters: true}, Fleet: scheduler.FleetConfig{Off: true}}.WithDefaults()
	if set.InstanceID != "a" || set.Inbox.Count != 7 || !set.Inbox.NoDeadLetters || !set.Fleet.Off {
		t.Errorf("WithDefaults changed set fields: %+v", set)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(c *scheduler.Config)
		wantErr string // "" means valid
	}{
		{"valid", func(c *scheduler.Config) {}, ""},
		{"braces in instance id", func(c *scheduler.Config) { c.InstanceID = "a}b" },
			`scheduler: Config.InstanceID: "a}b" may not contain braces or white space`},
		{"negative count", func(c *scheduler.Config) { c.Inbox.Count = -1 },
			"scheduler: Config.Inbox.Count: must not be negative"},
		{"negative stale", func(c *scheduler.Config) { c.Fleet.RemoveStaleAfter = -5 },
			"scheduler: Config.Fleet.RemoveStaleAfter: must not be negative"},
		{"negative storm", func(c *scheduler.Config) { c.Storm.Cooldown = -1 },
			"scheduler: Config.Storm.Cooldown: must not be negative"},
		{"negative ack", func(c *scheduler.Config) { c.Dispatch.AckTimeout = -time.Second },
			"scheduler: Config.Dispatch.AckTimeout: must not be negative"},
		{"short lease", func(c *scheduler.Config) { c.Dispatch.Lease = time.Millisecond },
			"scheduler: Config.Dispatch.Lease: must be at least 3ms, got 1ms"},
		{"attempts", func(c *scheduler.Config) { c.Dispatch.MaxAttempts = 101 },
			"scheduler: Config.Dispatch.MaxAttempts: 101 is more than 100"},
		{"capacity", func(c *scheduler.Config) { c.Dispatch.DefaultCapacity = scheduler.MaxCapacity + 1 },
			"scheduler: Config.Dispatch.DefaultCapacity: 10001 is more than 10000"},
		{"queue limit", func(c *scheduler.Config) { c.Dispatch.QueueLimit = scheduler.MaxQueueLimit + 1 },
			"scheduler: Config.Dispatch.QueueLimit: 1000001 is more than 1000000"},
		{"negative queue limit", func(c *scheduler.Config) { c.Dispatch.QueueLimit = -1 },
			"scheduler: Config.Dispatch.QueueLimit: must not be negative"},
		{"selection", func(c *scheduler.Config) { c.Dispatch.Selection = "best" },
			`scheduler: Config.Dispatch.Selection: unknown strategy "best" (random|two_choices)`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := scheduler.Config{InstanceID: "i1"}
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

func TestConstructorsNeedInstanceID(t *testing.T) {
	cfg := scheduler.Config{}
	if _, err := scheduler.NewHeartbeat(scheduler.NewMemPresence(), cfg); !errors.Is(err, scheduler.ErrInvalidConfig) {
		t.Errorf("NewHeartbeat without an instance id: err = %v, want ErrInvalidConfig", err)
	}
	if _, err := scheduler.NewBindings(scheduler.NewMemOwners(), cfg, nil); !errors.Is(err, scheduler.ErrInvalidConfig) {
		t.Errorf("NewBindings without an instance id: err = %v, want ErrInvalidConfig", err)
	}
	st, err := scheduler.NewMemStores(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := scheduler.NewDispatcher(st, cfg); err == nil || err.Error() != "scheduler: Config.InstanceID: required" {
		t.Errorf("NewDispatcher without an instance id: err = %v", err)
	}
}

// TestDispatcherMaxAttemptsOnce: the number of attempts is given once. A
// Dispatcher whose Config.Dispatch.MaxAttempts differs from what its job
// store enforces is refused, naming the field, instead of the store's
// number silently winning.
func TestDispatcherMaxAttemptsOnce(t *testing.T) {
	cfg := scheduler.Config{InstanceID: "a", Dispatch: scheduler.DispatchConfig{MaxAttempts: 3}}
	st, err := scheduler.NewMemStores(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Dispatch.MaxAttempts = 5
	_, err = scheduler.NewDispatcher(st, cfg)
	var ce *scheduler.ConfigError
	if !errors.As(err, &ce) || ce.Field != "Dispatch.MaxAttempts" {
		t.Fatalf("NewDispatcher with 5 attempts over a store of 3 = %v, want a ConfigError naming Dispatch.MaxAttempts", err)
	}
	// The defaults agree: a zero MaxAttempts is 3 on both sides.
	cfg.Dispatch.MaxAttempts = 0
	if _, err := scheduler.NewDispatcher(st, cfg); err != nil {
		t.Errorf("NewDispatcher with the default attempts over a store of 3: %v", err)
	}
}
