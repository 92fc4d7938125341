package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ksana-dev/ksana/scheduler"
)

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := parseConfig(nil)
	if err != nil {
		t.Fatalf("parseConfig(nil): %v", err)
	}
	if cfg.Redis != nil {
		t.Errorf("Redis = %+v without a file, want nil (in memory)", cfg.Redis)
	}
	want := ServerConfig{
		Listen: defaultListen, MaxFrameBytes: defaultMaxFrameBytes, SendQueue: defaultSendQueue,
		WriteTimeoutMS: defaultWriteTimeoutMS, DrainTimeoutMS: defaultDrainTimeoutMS, Workers: defaultWorkers,
		PingIntervalMS: defaultPingIntervalMS, ReadHeaderTimeoutMS: defaultReadHeaderMS,
		IdleTimeoutMS: defaultIdleTimeoutMS, MaxPendingConns: defaultMaxPending,
		LogLevel: "info", LogFormat: "text",
	}
	if diff := cmp.Diff(want, cfg.Server); diff != "" {
		t.Errorf("server defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(scheduler.Config{}.WithDefaults(), cfg.Plane, cmpopts.IgnoreFields(scheduler.Config{}, "Hooks")); diff != "" {
		t.Errorf("plane defaults (-want +got):\n%s", diff)
	}
}

func TestParseConfigExample(t *testing.T) {
	b, err := os.ReadFile("config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := parseConfig(b)
	if err != nil {
		t.Fatalf("config.example.toml: %v", err)
	}
	if cfg.Redis == nil || cfg.Redis.Client.URL != "redis://127.0.0.1:6379" || cfg.Redis.Stores.KeyPrefix != "ksana" || cfg.Plane.Dispatch.Selection != "random" {
		t.Errorf("config.example.toml decoded to %+v %+v", cfg.Redis, cfg.Plane)
	}
	if cfg.Plane.InstanceID != "auto" {
		t.Errorf("instance_id = %q, want auto (resolved by loadConfig)", cfg.Plane.InstanceID)
	}
}

// TestParseConfigQueueLimit: dispatcher.queue_limit sets
// Dispatch.QueueLimit; absent, the default applies.
func TestParseConfigQueueLimit(t *testing.T) {
	for _, tc := range []struct {
		name, toml string
		want       int
	}{
		{"absent", "", 1000},
		{"zero is the default", "[dispatcher]\nqueue_limit = 0\n", 1000},
		{"set", "[dispatcher]\nqueue_limit = 50\n", 50},
		{"largest", "[dispatcher]\nqueue_limit = 1000000\n", scheduler.MaxQueueLimit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseConfig([]byte(tc.toml))
			if err != nil {
				t.Fatalf("parseConfig(%q): %v", tc.toml, err)
			}
			if got := cfg.Plane.Dispatch.QueueLimit; got != tc.want {
				t.Errorf("Dispatch.QueueLimit = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSettingsComplete checks that -h and config.example.toml name every
// key a config.toml may hold, and nothing else.
func TestSettingsComplete(t *testing.T) {
	b, err := os.ReadFile("config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if _, err := toml.Decode(string(b), &doc); err != nil {
		t.Fatal(err)
	}
	var inFile []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, v := range m {
			if sub, ok := v.(map[string]any); ok {
				walk(prefix+k+".", sub)
				continue
			}
			inFile = append(inFile, prefix+k)
		}
	}
	walk("", doc)
	// Keys commented out in the file: cluster_urls (single mode),
	// request_timeout_ms (a computed default) and node_credentials (secrets).
	inFile = append(inFile, "scheduler.phase2.redis.cluster_urls", "dispatcher.request_timeout_ms", "dispatcher.node_credentials")
	sort.Strings(inFile)
	var inHelp []string
	for _, s := range settings {
		inHelp = append(inHelp, s.key)
	}
	sort.Strings(inHelp)
	if diff := cmp.Diff(inHelp, inFile); diff != "" {
		t.Errorf("settings of -h (-) against keys of config.example.toml (+):\n%s", diff)
	}
	// Every key must also be accepted: a file with every key set parses.
	var help bytes.Buffer
	if code := run(context.Background(), []string{"-h"}, os.Getenv, &help, &help); code != 0 {
		t.Fatalf("dispatcher -h: exit %d", code)
	}
	for _, k := range inHelp {
		if !strings.Contains(help.String(), k+" = ") {
			t.Errorf("dispatcher -h does not list %s", k)
		}
	}
}

// TestSettingsDefaults checks that the defaults -h shows are the
// library's: a file setting every key to its documented default decodes to
// the configuration of an empty file.
func TestSettingsDefaults(t *testing.T) {
	var b strings.Builder
	table := ""
	for _, s := range settings {
		i := strings.LastIndexByte(s.key, '.')
		if s.def == "" || s.def == "computed" || s.key == "scheduler.phase2.instance_id" {
			continue
		}
		if t := s.key[:i]; t != table {
			fmt.Fprintf(&b, "[%s]\n", t)
			table = t
		}
		v := s.def
		if _, err := strconv.ParseFloat(v, 64); err != nil && v != "true" && v != "false" && v != "[]" {
			v = strconv.Quote(v)
		}
		fmt.Fprintf(&b, "%s = %s\n", s.key[i+1:], v)
	}
	got, err := parseConfig([]byte(b.String()))
	if err != nil {
		t.Fatalf("%v in\n%s", err, b.String())
	}
	want, err := parseConfig(nil)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got, cmpopts.IgnoreFields(scheduler.Config{}, "Hooks"), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("defaults of -h against the library's (-library +help):\n%s", diff)
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, toml, key, reason string
	}{
		{"unknown dispatcher key", "[dispatcher]\nlisten_addr = \":1\"\n", "dispatcher.listen_addr", "unknown key"},
		{"unknown phase2 key", "[scheduler.phase2]\nenable = true\n", "scheduler.phase2.enable", "unknown key"},
		{"misspelled table", "[scheduler.phase_2]\nenabled = true\n", "scheduler.phase_2", "unknown table"},
		{"misspelled dispatcher", "[dispatchr]\nlisten = \":1\"\n", "dispatchr", "unknown table"},
		{"unknown top-level key", "enabled = true\n", "enabled", "unknown top-level key"},
		{"bad listen", "[dispatcher]\nlisten = \"7200\"\n", "dispatcher.listen", ""},
		{"bad selection", "[dispatcher]\nselection = \"best\"\n", "dispatcher.selection", `unknown strategy "best" (random|two_choices)`},
		{"negative timeout", "[dispatcher]\nack_timeout_ms = -1\n", "dispatcher.ack_timeout_ms", "must not be negative"},
		{"negative queue limit", "[dispatcher]\nqueue_limit = -1\n", "dispatcher.queue_limit", "must not be negative"},
		{"queue limit too large", "[dispatcher]\nqueue_limit = 1000001\n", "dispatcher.queue_limit", "1000001 is more than 1000000"},
		{"negative stale", "[scheduler.phase2.node_snapshot]\nremove_stale_after_seconds = -5\n", "scheduler.phase2.node_snapshot.remove_stale_after_seconds", "must not be negative"},
		{"braces in instance id", "[scheduler.phase2]\ninstance_id = \"a{b}\"\n", "scheduler.phase2.instance_id", ""},
		{"tiny frames", "[dispatcher]\nmax_frame_bytes = 10\n", "dispatcher.max_frame_bytes", ""},
		{"bad workers", "[dispatcher]\nworkers = 5000\n", "dispatcher.workers", ""},
		{"bad log level", "[dispatcher]\nlog_level = \"loud\"\n", "dispatcher.log_level", ""},
		{"bad log format", "[dispatcher]\nlog_format = \"xml\"\n", "dispatcher.log_format", ""},
		{"redis without url", "[scheduler.phase2]\nenabled = true\n", "scheduler.phase2.redis.url", "required in single mode"},
		{"bad url", "[scheduler.phase2]\nenabled = true\n[scheduler.phase2.redis]\nurl = \"redis://\"\n", "scheduler.phase2.redis.url", `"redis://" has no host`},
		{"cluster without urls", "[scheduler.phase2]\nenabled = true\n[scheduler.phase2.redis]\nmode = \"cluster\"\n", "scheduler.phase2.redis.cluster_urls", "required in cluster mode"},
		{"bad mode", "[scheduler.phase2.redis]\nmode = \"ring\"\n", "scheduler.phase2.redis.mode", `unknown mode "ring" (single|cluster)`},
		{"braces in prefix", "[scheduler.phase2.redis]\nkey_prefix = \"a{b\"\n", "scheduler.phase2.redis.key_prefix", ""},
		{"short credential", "[[dispatcher.node_credentials]]\ntoken = \"short\"\nnode_ids = [\"n1\"]\n", "dispatcher.node_credentials[0].token", "must be at least 16 bytes"},
		{"credential without nodes", "[[dispatcher.node_credentials]]\ntoken = \"0123456789abcdef\"\n", "dispatcher.node_credentials[0].node_ids", "must name at least one node id"},
		{"credential bad node", "[[dispatcher.node_credentials]]\ntoken = \"0123456789abcdef\"\nnode_ids = [\"a b\"]\n", "dispatcher.node_credentials[0].node_ids[0]", ""},
		{"credential twice", "[[dispatcher.node_credentials]]\ntoken = \"0123456789abcdef\"\nnode_ids = [\"n1\"]\n[[dispatcher.node_credentials]]\ntoken = \"0123456789abcdef\"\nnode_ids = [\"n2\"]\n", "dispatcher.node_credentials[1].token", "is used twice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig([]byte(tc.toml))
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("parseConfig = %v, want a *ConfigError naming %s", err, tc.key)
			}
			if ce.Key != tc.key || (tc.reason != "" && ce.Reason != tc.reason) {
				t.Errorf("error = %q, want key %q and reason %q", err, tc.key, tc.reason)
			}
		})
	}
}

// TestRunBadConfigExits2 runs the built binary on bad files: each is
// refused with exit status 2 and a message naming the file and the key.
func TestRunBadConfigExits2(t *testing.T) {
	bin, _ := binaries(t)
	dir := t.TempDir()
	for _, tc := range []struct{ name, toml, want string }{
		{"selection", "[dispatcher]\nselection = \"best\"\n", "dispatcher.selection"},
		{"misspelled table", "[scheduler.phase_2]\nenabled = true\n", "scheduler.phase_2: unknown table"},
		{"misspelled dispatcher", "[dispatchr]\nlisten = \":1\"\n", "dispatchr: unknown table"},
		{"top-level key", "enabled = true\n", "enabled: unknown top-level key"},
		{"syntax", "[dispatcher\n", "to end table name"},
		{"type", "[dispatcher]\nworkers = \"many\"\n", "dispatcher.workers"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-")+".toml")
			if err := os.WriteFile(path, []byte(tc.toml), 0o600); err != nil {
				t.Fatal(err)
			}
			var out, errOut bytes.Buffer
			cmd := exec.Command(bin, "-config", path)
			cmd.Stdout, cmd.Stderr = &out, &errOut
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("dispatcher -config %s: %v, want exit status 2; stderr %q", path, err, errOut.String())
			}
			if msg := errOut.String(); !strings.Contains(msg, path+": ") || !strings.Contains(msg, tc.want) {
				t.Errorf("stderr %q does not name %s and %q", msg, path, tc.want)
			}
		})
	}
	var out, errOut bytes.Buffer
	if code := run(context.Background(), []string{"-nope"}, os.Getenv, &out, &errOut); code != 2 {
		t.Errorf("run(-nope) = %d, want 2", code)
	}
}

// TestReadmeConfig checks that docs/dispatcher.md shows config.example.toml as it
// is.
func TestReadmeConfig(t *testing.T) {
	example, err := os.ReadFile("config.example.toml")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../../docs/dispatcher.md")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(readme, append([]byte("```toml\n"), example...)) {
		t.Errorf("docs/dispatcher.md does not hold config.example.toml verbatim in a toml block")
	}
}
