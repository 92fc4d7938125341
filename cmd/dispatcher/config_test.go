package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/BurntSushi/toml"
	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
)

func TestParseConfigDefaults(t *testing.T) {
	cfg, err := parseConfig(nil)
	if err != nil {
		t.Fatalf("parseConfig(nil): %v", err)
	}
	if cfg.Plane.Enabled {
		t.Errorf("Enabled = true without a file, want false (in memory)")
	}
	want := ServerConfig{
		Listen: defaultListen, MaxFrameBytes: defaultMaxFrameBytes, SendQueue: defaultSendQueue,
		WriteTimeoutMS: defaultWriteTimeoutMS, DrainTimeoutMS: defaultDrainTimeoutMS, Workers: defaultWorkers,
		PingIntervalMS: defaultPingIntervalMS,
		LogLevel:       "info", LogFormat: "text",
	}
	if diff := cmp.Diff(want, cfg.Server); diff != "" {
		t.Errorf("server defaults (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(scheduler.DispatchConfig{}.WithDefaults(), cfg.Plane.Dispatch); diff != "" {
		t.Errorf("dispatch defaults (-want +got):\n%s", diff)
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
	if !cfg.Plane.Enabled || cfg.Plane.Redis.URL != "redis://127.0.0.1:6379" || cfg.Plane.Dispatch.Selection != "random" {
		t.Errorf("config.example.toml decoded to %+v", cfg.Plane)
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
	// Two keys are commented out in the file: cluster_urls (single mode)
	// and request_timeout_ms (a computed default).
	inFile = append(inFile, "scheduler.phase2.redis.cluster_urls", "dispatcher.request_timeout_ms")
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
	if code := run(context.Background(), []string{"-h"}, &help, &help); code != 0 {
		t.Fatalf("dispatcher -h: exit %d", code)
	}
	for _, k := range inHelp {
		if !strings.Contains(help.String(), k+" = ") {
			t.Errorf("dispatcher -h does not list %s", k)
		}
	}
}

func TestParseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		name, toml, field string
	}{
		{"unknown dispatcher key", "[dispatcher]\nlisten_addr = \":1\"\n", "dispatcher.listen_addr"},
		{"unknown phase2 key", "[scheduler.phase2]\nenable = true\n", "scheduler.phase2.enable"},
		{"bad listen", "[dispatcher]\nlisten = \"7200\"\n", "dispatcher.listen"},
		{"bad selection", "[dispatcher]\nselection = \"best\"\n", "dispatcher.selection"},
		{"negative timeout", "[dispatcher]\nack_timeout_ms = -1\n", "dispatcher.ack_timeout_ms"},
		{"tiny frames", "[dispatcher]\nmax_frame_bytes = 10\n", "dispatcher.max_frame_bytes"},
		{"bad workers", "[dispatcher]\nworkers = 5000\n", "dispatcher.workers"},
		{"bad log level", "[dispatcher]\nlog_level = \"loud\"\n", "dispatcher.log_level"},
		{"bad log format", "[dispatcher]\nlog_format = \"xml\"\n", "dispatcher.log_format"},
		{"redis without url", "[scheduler.phase2]\nenabled = true\n", "scheduler.phase2.redis.url"},
		{"bad mode", "[scheduler.phase2.redis]\nmode = \"ring\"\n", "scheduler.phase2.redis.mode"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseConfig([]byte(tc.toml))
			var ce *scheduler.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("parseConfig = %v, want a *scheduler.ConfigError naming %s", err, tc.field)
			}
			if ce.Field != tc.field {
				t.Errorf("error names %q (%v), want %q", ce.Field, err, tc.field)
			}
		})
	}
}

func TestRunBadConfigExits2(t *testing.T) {
	path := t.TempDir() + "/config.toml"
	if err := os.WriteFile(path, []byte("[dispatcher]\nselection = \"best\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := run(context.Background(), []string{"-config", path}, &out, &errOut)
	if code != 2 || !strings.Contains(errOut.String(), "dispatcher.selection") {
		t.Errorf("run = %d, stderr %q; want 2 and a message naming dispatcher.selection", code, errOut.String())
	}
	if code := run(context.Background(), []string{"-nope"}, &out, &errOut); code != 2 {
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
