package redisstore

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

func TestLoadConfigExample(t *testing.T) {
	got, err := LoadConfig("testdata/config.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := scheduler.Config{
		Enabled:    true,
		InstanceID: "dispatcher-a",
		Redis:      scheduler.RedisConfig{Mode: "single", URL: "redis://127.0.0.1:6379", KeyPrefix: "ksana-dev"},
	}.WithDefaults()
	if d := cmp.Diff(want, got, cmpopts.IgnoreFields(scheduler.Config{}, "Hooks")); d != "" {
		t.Errorf("LoadConfig(testdata/config.toml) (-want +got):\n%s", d)
	}
}

func TestParseConfig(t *testing.T) {
	tests := []struct {
		name    string
		toml    string
		check   func(c scheduler.Config) string // returns a mismatch, or ""
		wantErr string                          // substring of the error; "" means success
	}{
		{
			name: "cluster with other tables around",
			toml: `
[server]
port = 8080
[scheduler.phase2]
enabled = true
instance_id = "auto"
dlq_enabled = false
[scheduler.phase2.redis]
mode = "cluster"
cluster_urls = ["redis://a:7000", "redis://b:7000"]
[scheduler.phase2.node_snapshot]
enabled = false
`,
			check: func(c scheduler.Config) string {
				if c.Redis.Mode != "cluster" || len(c.Redis.ClusterURLs) != 2 || c.DLQOn() || c.SnapshotsOn() ||
					c.InstanceID == "auto" || c.InstanceID == "" || c.StreamCount != scheduler.DefaultStreamCount {
					return "unexpected config"
				}
				return ""
			},
		},
		{
			name: "no phase2 table: disabled defaults",
			toml: `[scheduler]` + "\n" + `other = 1`,
			check: func(c scheduler.Config) string {
				if c.Enabled || c.Redis.Mode != "single" {
					return "want disabled single-mode defaults"
				}
				return ""
			},
		},
		{
			name:    "unknown mode",
			toml:    "[scheduler.phase2]\nenabled = true\n[scheduler.phase2.redis]\nmode = \"x\"\nurl = \"redis://h:1\"\n",
			wantErr: `scheduler.phase2.redis.mode: unknown mode "x" (single|cluster)`,
		},
		{
			name:    "missing url",
			toml:    "[scheduler.phase2]\nenabled = true\n",
			wantErr: "scheduler.phase2.redis.url: required in single mode",
		},
		{
			name:    "missing cluster urls",
			toml:    "[scheduler.phase2]\nenabled = true\n[scheduler.phase2.redis]\nmode = \"cluster\"\n",
			wantErr: "scheduler.phase2.redis.cluster_urls: required in cluster mode",
		},
		{
			name:    "unknown field",
			toml:    "[scheduler.phase2]\nstream_cnt = 5\n",
			wantErr: "scheduler.phase2.stream_cnt: unknown field",
		},
		{
			name:    "wrong type names the key",
			toml:    "[scheduler.phase2]\nstream_count = \"many\"\n",
			wantErr: "scheduler.phase2.stream_count",
		},
		{
			name:    "negative",
			toml:    "[scheduler.phase2.node_snapshot]\nrefresh_interval_ms = -1\n",
			wantErr: "scheduler.phase2.node_snapshot.refresh_interval_ms: must not be negative, got -1",
		},
		{
			name:    "syntax error names the line",
			toml:    "[scheduler.phase2]\nenabled = \n",
			wantErr: "config.toml line 2",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseConfig([]byte(tc.toml))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ParseConfig error = %v, want one containing %q", err, tc.wantErr)
				}
				if !errors.Is(err, scheduler.ErrInvalidConfig) {
					t.Errorf("ParseConfig error %v does not wrap ErrInvalidConfig", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParseConfig: %v", err)
			}
			if msg := tc.check(got); msg != "" {
				t.Errorf("%s: got %+v", msg, got)
			}
		})
	}
	if _, err := LoadConfig("testdata/missing.toml"); err == nil {
		t.Errorf("LoadConfig of a missing file = nil error")
	}
}

// FuzzParseConfig: any input either fails with ErrInvalidConfig or yields
// a configuration that validates.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte("[scheduler.phase2]\nenabled = true\n[scheduler.phase2.redis]\nurl = \"redis://h:1\"\n"))
	f.Add([]byte("[scheduler.phase2.redis]\nmode = \"cluster\"\ncluster_urls = [\"redis://a:1\"]\n"))
	f.Add([]byte("[scheduler.phase2]\nstream_count = -3\n"))
	f.Add([]byte("[scheduler.phase2]\ndlq_enabled = 1\n"))
	f.Add([]byte("x = [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := ParseConfig(data)
		if err != nil {
			if !errors.Is(err, scheduler.ErrInvalidConfig) {
				t.Fatalf("error %v does not wrap ErrInvalidConfig", err)
			}
			return
		}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("ParseConfig accepted a configuration that does not validate: %v", err)
		}
	})
}

func TestClientOption(t *testing.T) {
	tests := []struct {
		name      string
		cfg       scheduler.RedisConfig
		wantAddrs []string
		wantForce bool
		wantErr   string
	}{
		{"single", scheduler.RedisConfig{URL: "redis://u:p@h1:6380/2"}, []string{"h1:6380"}, true, ""},
		{"cluster", scheduler.RedisConfig{Mode: "cluster", ClusterURLs: []string{"redis://a:7000", "redis://b:7001"}}, []string{"a:7000", "b:7001"}, false, ""},
		{"unknown mode", scheduler.RedisConfig{Mode: "x", URL: "redis://h:1"}, nil, false, `scheduler.phase2.redis.mode: unknown mode "x"`},
		{"missing url", scheduler.RedisConfig{}, nil, false, "scheduler.phase2.redis.url: required"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.wantErr != "" {
				_, err := NewClient(tc.cfg)
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("NewClient error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			opt, err := ClientOption(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.wantAddrs, opt.InitAddress); d != "" {
				t.Errorf("InitAddress (-want +got):\n%s", d)
			}
			if opt.ForceSingleClient != tc.wantForce {
				t.Errorf("ForceSingleClient = %v, want %v", opt.ForceSingleClient, tc.wantForce)
			}
		})
	}
}

func TestNewClientConnects(t *testing.T) {
	tests := []struct {
		name string
		cfg  scheduler.RedisConfig
		want rueidis.ClientMode
	}{
		{"single", scheduler.RedisConfig{Mode: "single", URL: testenv.RedisURL(t)}, rueidis.ClientModeStandalone},
		{"cluster", scheduler.RedisConfig{Mode: "cluster", ClusterURLs: testenv.RedisClusterURLs(t)}, rueidis.ClientModeCluster},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
				t.Fatalf("ping: %v", err)
			}
			if got := c.Mode(); got != tc.want {
				t.Errorf("Mode() = %v, want %v", got, tc.want)
			}
		})
	}
}
