package main

import (
	"errors"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
)

// envOf returns a getenv over m.
func envOf(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// summary is the comparable part of a runConfig.
type summary struct {
	DataDir, DatabaseURL string
	DefaultDB            bool
	LogLevel             slog.Level
	LogJSON              bool
	Interval, TTL        time.Duration
	Address, Listen      string
	UsageURL             string
	Policy               string
	LostAfter            time.Duration
	MaxClaims            int
	Rebalance, SelfFence bool
	ProbeFailure         claim.ProbeFailure
	Trusted              string
	StopGrace            time.Duration
}

func summarize(c runConfig) summary {
	s := summary{
		DataDir: c.DataDir, DatabaseURL: c.DatabaseURL, DefaultDB: c.DefaultDB,
		LogLevel: c.LogLevel, LogJSON: c.LogJSON, Interval: c.Interval, TTL: c.ttl(),
		Address: c.Address, Listen: c.Listen, UsageURL: c.UsageURL, LostAfter: c.LostAfter,
		MaxClaims: c.MaxClaims, Rebalance: c.Rebalance, SelfFence: c.SelfFence,
		ProbeFailure: c.ProbeFailure, StopGrace: c.StopGrace,
	}
	if c.Policy != nil {
		s.Policy = c.Policy.Name()
	}
	if c.Trusted != nil {
		s.Trusted = c.Trusted.String()
	}
	return s
}

func TestLoadRun(t *testing.T) {
	t.Parallel()
	defaults := summary{
		DataDir: "data", DatabaseURL: "sqlite:data/nodeunit.db", DefaultDB: true,
		LogLevel: slog.LevelInfo, Interval: 5 * time.Second, TTL: 15 * time.Second,
		Listen: "127.0.0.1:0", Policy: "deployment_count", MaxClaims: 1, StopGrace: 10 * time.Second,
	}
	tests := []struct {
		name string
		env  map[string]string
		want func(s *summary)
	}{
		{name: "defaults", env: nil, want: func(*summary) {}},
		{
			name: "everything set",
			env: map[string]string{
				"DATABASE_URL":                     "postgres://u:p@db:5432/x",
				"NODE_UNIT_DATA":                   "/var/lib/nu",
				"NODE_UNIT_ADDRESS":                "node-a",
				"NODE_UNIT_LISTEN":                 "0.0.0.0:7070",
				"NODE_UNIT_USAGE_URL":              "http://node-a:7070/NodeUnit/InspectResourceUsage",
				"NODE_UNIT_CLAIM_POLICY":           "Resource_Usage",
				"NODE_UNIT_SCHEDULER_INTERVAL_MS":  "250",
				"NODE_UNIT_CPU_WEIGHT":             "1",
				"NODE_UNIT_MEMORY_WEIGHT":          "0",
				"NODE_UNIT_MEMBERSHIP_TTL_MS":      "2000",
				"NODE_UNIT_LOST_AFTER_MS":          "3000",
				"NODE_UNIT_MAX_CLAIMS_PER_CYCLE":   "8",
				"NODE_UNIT_REBALANCE":              "true",
				"NODE_UNIT_SELF_FENCE":             "yes",
				"NODE_UNIT_PROBE_FAILURE":          "not_eligible",
				"NODE_UNIT_TRUSTED_COMMAND_REGEXP": "/opt/apps/.*",
				"NODE_UNIT_STOP_GRACE_MS":          "1500",
				"LOG_LEVEL":                        "DEBUG",
				"LOG_FORMAT":                       "json",
			},
			want: func(s *summary) {
				*s = summary{
					DataDir: "/var/lib/nu", DatabaseURL: "postgres://u:p@db:5432/x",
					LogLevel: slog.LevelDebug, LogJSON: true, Interval: 250 * time.Millisecond, TTL: 2 * time.Second,
					Address: "node-a", Listen: "0.0.0.0:7070", UsageURL: "http://node-a:7070/NodeUnit/InspectResourceUsage",
					Policy: "resource_usage", LostAfter: 3 * time.Second, MaxClaims: 8, Rebalance: true, SelfFence: true,
					ProbeFailure: claim.ProbeFailureNotEligible, Trusted: "/opt/apps/.*", StopGrace: 1500 * time.Millisecond,
				}
			},
		},
		{
			name: "data directory moves the default database",
			env:  map[string]string{"NODE_UNIT_DATA": "/srv/nu"},
			want: func(s *summary) { s.DataDir, s.DatabaseURL = "/srv/nu", "sqlite:/srv/nu/nodeunit.db" },
		},
		{
			name: "interval sets the default ttl",
			env:  map[string]string{"NODE_UNIT_SCHEDULER_INTERVAL_MS": "1000", "NODE_UNIT_CLAIM_POLICY": "NONE"},
			want: func(s *summary) { s.Interval, s.TTL, s.Policy = time.Second, 3*time.Second, "none" },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := loadRun(envOf(tt.env))
			if err != nil {
				t.Fatalf("loadRun: %v", err)
			}
			want := defaults
			tt.want(&want)
			if diff := cmp.Diff(want, summarize(c)); diff != "" {
				t.Errorf("config (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadRunBadValue(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, value string
		extra       map[string]string
	}{
		{"NODE_UNIT_ADDRESS", "has space", nil},
		{"NODE_UNIT_ADDRESS", strings.Repeat("a", 201), nil},
		{"NODE_UNIT_LISTEN", "7070", nil},
		{"NODE_UNIT_LISTEN", "host:http", nil},
		{"NODE_UNIT_LISTEN", ":70000", nil},
		{"NODE_UNIT_USAGE_URL", "node-a:7070", nil},
		{"NODE_UNIT_USAGE_URL", "ftp://node-a/x", nil},
		{"NODE_UNIT_CLAIM_POLICY", "round_robin", nil},
		{"NODE_UNIT_SCHEDULER_INTERVAL_MS", "5s", nil},
		{"NODE_UNIT_SCHEDULER_INTERVAL_MS", "0", nil},
		{"NODE_UNIT_CPU_WEIGHT", "half", nil},
		{"NODE_UNIT_MEMORY_WEIGHT", "-1", nil},
		{"NODE_UNIT_MEMBERSHIP_TTL_MS", "x", nil},
		{"NODE_UNIT_MEMBERSHIP_TTL_MS", "5000", nil}, // not above the 5000 ms interval
		{"NODE_UNIT_LOST_AFTER_MS", "-1", nil},
		{"NODE_UNIT_MAX_CLAIMS_PER_CYCLE", "0", nil},
		{"NODE_UNIT_REBALANCE", "maybe", nil},
		{"NODE_UNIT_SELF_FENCE", "2", nil},
		{"NODE_UNIT_SELF_FENCE", "true", map[string]string{"NODE_UNIT_MEMBERSHIP_TTL_MS": "10000"}},
		{"NODE_UNIT_PROBE_FAILURE", "ignore", nil},
		{"NODE_UNIT_TRUSTED_COMMAND_REGEXP", "(", nil},
		{"NODE_UNIT_STOP_GRACE_MS", "0", nil},
		{"LOG_LEVEL", "verbose", nil},
		{"LOG_FORMAT", "xml", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name+"="+tt.value, func(t *testing.T) {
			env := map[string]string{tt.name: tt.value}
			for k, v := range tt.extra {
				env[k] = v
			}
			_, err := loadRun(envOf(env))
			if err == nil {
				t.Fatalf("loadRun accepted %s=%q", tt.name, tt.value)
			}
			if !strings.Contains(err.Error(), tt.name) {
				t.Errorf("error %q does not name %s", err, tt.name)
			}
			var ee *EnvError
			var ce *claim.ConfigError
			if !errors.As(err, &ee) && !errors.As(err, &ce) {
				t.Errorf("error %v is neither an *EnvError nor a *claim.ConfigError", err)
			}
		})
	}
}

// TestEnvDocumented checks that every variable is in the help, in the
// package documentation and in docs/nodeunit.md.
func TestEnvDocumented(t *testing.T) {
	t.Parallel()
	var help strings.Builder
	printUsage(&help)
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	guide, err := os.ReadFile("../../docs/nodeunit.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range envVars {
		for name, text := range map[string]string{"help": help.String(), "doc.go": string(doc), "docs/nodeunit.md": string(guide)} {
			if !strings.Contains(text, v.Name) {
				t.Errorf("%s does not mention %s", name, v.Name)
			}
		}
	}
}

func FuzzLoadRun(f *testing.F) {
	f.Add("NODE_UNIT_LISTEN", "127.0.0.1:0")
	f.Add("NODE_UNIT_MEMBERSHIP_TTL_MS", "99999999999999999999")
	f.Add("NODE_UNIT_ADDRESS", "a\x00b")
	f.Fuzz(func(t *testing.T, name, value string) {
		c, err := loadRun(envOf(map[string]string{name: value}))
		if err != nil {
			return
		}
		if c.Interval <= 0 || c.ttl() <= c.Interval || c.MaxClaims < 1 || c.StopGrace <= 0 || c.Listen == "" || c.Policy == nil {
			t.Errorf("loadRun(%s=%q) = %+v: out of range without error", name, value, summarize(c))
		}
	})
}
