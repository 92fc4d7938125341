package main

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/jsonstore"
)

func TestLoadConfigDefaults(t *testing.T) {
	got, err := loadConfig(func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	want := config{Port: 7100, DataDir: "./data", Workers: 4, DefaultTimeout: 10 * time.Second, MaxRetries: 3,
		RetryBackoff: 5 * time.Second, DrainTimeout: 30 * time.Second, MinInterval: time.Second, LogLevel: slog.LevelInfo, LogFormat: "text", LeaseTTL: 6 * time.Second, RunHistory: 50,
		AlertHorizon: 24 * time.Hour}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestLoadConfig(t *testing.T) {
	tests := []struct {
		env     map[string]string
		check   func(c config) bool
		wantErr string // the start of the message, naming the variable
	}{
		{env: map[string]string{"PORT": "8080", "WORKERS": "16", "MAX_RETRIES": "0", "DEFAULT_TIMEOUT": "1m", "RETRY_BACKOFF": "250ms", "LOG_LEVEL": "DEBUG"},
			check: func(c config) bool {
				return c.Port == 8080 && c.Workers == 16 && c.MaxRetries == 0 && c.DefaultTimeout == time.Minute &&
					c.RetryBackoff == 250*time.Millisecond && c.LogLevel == slog.LevelDebug
			}},
		{env: map[string]string{"DATA_DIR": "/d"}, check: func(c config) bool { return c.DataDir == "/d" }},
		{env: map[string]string{"DATA_DIR": "/d", "KSANA_DATA": "/k"}, check: func(c config) bool { return c.DataDir == "/k" }},
		{env: map[string]string{"KSANA_API_TOKEN": "t-secret-0000001", "KSANA_CALLBACK_ALLOW": "*.internal, a.com"},
			check: func(c config) bool {
				return c.Token == "t-secret-0000001" && cmp.Equal(c.CallbackAllow, []string{"*.internal", "a.com"})
			}},
		{env: map[string]string{"PORT": "http"}, wantErr: `PORT="http": must be an integer from 0 to 65535`},
		{env: map[string]string{"PORT": "70000"}, wantErr: `PORT="70000"`},
		{env: map[string]string{"WORKERS": "0"}, wantErr: `WORKERS="0": must be an integer from 1`},
		{env: map[string]string{"MAX_RETRIES": "-1"}, wantErr: `MAX_RETRIES="-1"`},
		{env: map[string]string{"KSANA_RUN_HISTORY": "0"}, wantErr: `KSANA_RUN_HISTORY="0": must be an integer from 1 to 100000`},
		{env: map[string]string{"KSANA_RUN_HISTORY": "7"}, check: func(c config) bool { return c.RunHistory == 7 }},
		{env: map[string]string{"DEFAULT_TIMEOUT": "10"}, wantErr: `DEFAULT_TIMEOUT="10": must be a positive duration`},
		{env: map[string]string{"RETRY_BACKOFF": "-5s"}, wantErr: `RETRY_BACKOFF="-5s"`},
		{env: map[string]string{"DRAIN_TIMEOUT": "x"}, wantErr: `DRAIN_TIMEOUT="x"`},
		{env: map[string]string{"MIN_INTERVAL": "0s"}, wantErr: `MIN_INTERVAL="0s": must be a positive duration`},
		{env: map[string]string{"MIN_INTERVAL": "10ms"}, check: func(c config) bool { return c.MinInterval == 10*time.Millisecond }},
		{env: map[string]string{"LOG_LEVEL": "loud"}, wantErr: `LOG_LEVEL="loud": must be debug, info, warn or error`},
		{env: map[string]string{"LOG_FORMAT": "xml"}, wantErr: `LOG_FORMAT="xml"`},
		{env: map[string]string{"KSANA_CALLBACK_ALLOW": "http://a.com"}, wantErr: `KSANA_CALLBACK_ALLOW="http://a.com": host pattern`},
		{env: map[string]string{"LISTEN_ADDR": "127.0.0.1"}, check: func(c config) bool { return c.Listen == "127.0.0.1" }},
		{env: map[string]string{"LISTEN_ADDR": "[::1]"}, check: func(c config) bool { return c.Listen == "::1" }},
		{env: map[string]string{"LISTEN_ADDR": "localhost"}, check: func(c config) bool { return c.Listen == "localhost" }},
		{env: map[string]string{"DATABASE_URL": " sqlite:/tmp/k.db ", "KSANA_INSTANCE": "k1", "KSANA_LEASE_TTL": "2s"},
			check: func(c config) bool {
				return c.DatabaseURL == "sqlite:/tmp/k.db" && c.Instance == "k1" && c.LeaseTTL == 2*time.Second
			}},
		{env: map[string]string{"KSANA_LEASE_TTL": "soon"}, wantErr: `KSANA_LEASE_TTL="soon": must be a positive duration`},
		{env: map[string]string{"LISTEN_ADDR": "127.0.0.1:80"}, wantErr: `LISTEN_ADDR="127.0.0.1:80": must be a host name or an IP address`},
		{env: map[string]string{"LISTEN_ADDR": "a b"}, wantErr: `LISTEN_ADDR="a b"`},
		{env: map[string]string{"KSANA_CALLBACK_ALLOW": "*.internal", "KSANA_ALERT_URL": "http://evil.example/hook"},
			wantErr: `KSANA_ALERT_URL="http://evil.example/hook": host "evil.example" is not in KSANA_CALLBACK_ALLOW`},
		{env: map[string]string{"KSANA_CALLBACK_ALLOW": "*.internal", "KSANA_ALERT_URL": "http://hooks.internal/hook"},
			check: func(c config) bool { return c.Alert.URL == "http://hooks.internal/hook" }},
		{env: map[string]string{"KSANA_API_TOKEN": " "}, wantErr: `KSANA_API_TOKEN (a secret of 1 bytes, not shown): must not be blank`},
		{env: map[string]string{"KSANA_CONSOLE": "off", "KSANA_CONSOLE_READONLY": "true", "KSANA_CONSOLE_SECRET": strings.Repeat("k", 32)},
			check: func(c config) bool {
				return c.ConsoleOff && c.ConsoleReadOnly && string(c.ConsoleSecret) == strings.Repeat("k", 32)
			}},
		{env: map[string]string{"KSANA_CONSOLE": "maybe"}, wantErr: `KSANA_CONSOLE="maybe": must be on or off`},
		{env: map[string]string{"KSANA_CONSOLE_READONLY": "yes"}, wantErr: `KSANA_CONSOLE_READONLY="yes": must be true or false`},
		{env: map[string]string{"KSANA_CONSOLE_SECRET": "short-console-secret"}, wantErr: `KSANA_CONSOLE_SECRET (a secret of 20 bytes, not shown): must hold at least 32 bytes`},
		// The token is a secret: the error gives its length, never the value.
		{env: map[string]string{"KSANA_API_TOKEN": "s3cret-value\n"}, wantErr: `KSANA_API_TOKEN (a secret of 13 bytes, not shown): must not be blank nor start or end with white space`},
		{env: map[string]string{"KSANA_API_TOKEN": "s3cret-value-01"}, wantErr: `KSANA_API_TOKEN (a secret of 15 bytes, not shown): must be at least 16 bytes`},
	}
	for _, tt := range tests {
		c, err := loadConfig(func(k string) string { return tt.env[k] })
		if tt.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantErr) {
				t.Errorf("loadConfig(%v) error = %v, want one starting %q", tt.env, err, tt.wantErr)
			}
			for _, k := range []string{"KSANA_API_TOKEN", "KSANA_CONSOLE_SECRET"} {
				if tok := strings.TrimSpace(tt.env[k]); err != nil && tok != "" && strings.Contains(err.Error(), tok) {
					t.Errorf("loadConfig: the error %q shows %s", err, k)
				}
			}
			continue
		}
		if err != nil {
			t.Errorf("loadConfig(%v): %v", tt.env, err)
			continue
		}
		if !tt.check(c) {
			t.Errorf("loadConfig(%v) = %+v", tt.env, c)
		}
	}
}

func TestRunExitCodes(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantCode   int
		wantStdout []string
		wantStderr []string
	}{
		{"help", []string{"-h"}, nil, 0, []string{"PORT", "KSANA_DATA", "DATA_DIR", "WORKERS", "DEFAULT_TIMEOUT", "MAX_RETRIES",
			"RETRY_BACKOFF", "LOG_LEVEL", "KSANA_API_TOKEN", "KSANA_CALLBACK_ALLOW", "DRAIN_TIMEOUT", "LOG_FORMAT",
			"DATABASE_URL", "KSANA_INSTANCE", "KSANA_LEASE_TTL", "GET /openapi.json", "2 for a bad configuration"}, nil},
		{"bad flag", []string{"-x"}, nil, 2, nil, []string{"flag provided but not defined: -x", "Environment:"}},
		{"argument", []string{"serve"}, nil, 2, nil, []string{`unexpected argument "serve"`}},
		{"bad variable", nil, map[string]string{"WORKERS": "many"}, 2, nil, []string{`ksana: bad configuration: WORKERS="many"`}},
		{"database url scheme", nil, map[string]string{"DATABASE_URL": "mysql://db/ksana"}, 2, nil,
			[]string{`ksana: bad configuration: DATABASE_URL="mysql://db/ksana": sqlstore: invalid database url: unsupported scheme "mysql"`}},
		{"database unreachable", nil, map[string]string{"DATABASE_URL": "postgres://nobody:pw@127.0.0.1:1/ksana?connect_timeout=1"}, 2, nil,
			[]string{`ksana: bad configuration: DATABASE_URL="postgres://nobody:xxxxx@127.0.0.1:1/ksana?connect_timeout=1": sqlstore: connect postgres`}},
		{"lease ttl", nil, map[string]string{"KSANA_LEASE_TTL": "1500ms"}, 2, nil, []string{`KSANA_LEASE_TTL="1500ms": must be at least 2s`}},
		{"instance", nil, map[string]string{"KSANA_INSTANCE": "a b"}, 2, nil, []string{`KSANA_INSTANCE="a b": must not contain white space`}},
		{"console secret", nil, map[string]string{"KSANA_CONSOLE_SECRET": "short"}, 2, nil, []string{`KSANA_CONSOLE_SECRET (a secret of 5 bytes, not shown): must hold at least 32 bytes`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := run(context.Background(), tt.args, func(k string) string { return tt.env[k] }, &out, &errOut)
			if code != tt.wantCode {
				t.Errorf("exit %d, want %d (stderr %s)", code, tt.wantCode, errOut.String())
			}
			for _, w := range tt.wantStdout {
				if !strings.Contains(out.String(), w) {
					t.Errorf("stdout lacks %q:\n%s", w, out.String())
				}
			}
			for _, w := range tt.wantStderr {
				if !strings.Contains(errOut.String(), w) {
					t.Errorf("stderr lacks %q:\n%s", w, errOut.String())
				}
			}
		})
	}
}

// TestRunServesAndStops runs main's body with a context that ends, as a
// signal would end it: exit 0.
func TestRunServesAndStops(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int, 1)
	var out, errOut syncBuffer
	go func() {
		done <- run(ctx, nil, func(k string) string {
			return map[string]string{"KSANA_DATA": dir, "PORT": "0", "LOG_FORMAT": "json"}[k]
		}, &out, &errOut)
	}()
	waitFor(t, "listening", func() bool { return strings.Contains(errOut.String(), `"msg":"ksana: listening"`) })
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d after the signal, want 0; logs:\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
	if !strings.Contains(errOut.String(), `"msg":"ksana: stopped"`) {
		t.Errorf("no clean stop in the logs:\n%s", errOut.String())
	}
	readJobsFile(t, dir)
}

// TestRunRefusesDataDirInUse: a second service on the data directory of a
// running one exits 1 at once with a message naming the directory, and
// leaves the first one and its files alone.
func TestRunRefusesDataDirInUse(t *testing.T) {
	t.Parallel()
	probe := t.TempDir()
	if s, err := jsonstore.New(probe, jsonstore.Config{}); err == nil {
		s2, err := jsonstore.New(probe, jsonstore.Config{})
		if err == nil {
			s2.Close()
			s.Close()
			t.Skip("no data directory lock on this platform")
		}
		s.Close()
	}

	dir := t.TempDir()
	first := startService(t, dir, nil)
	first.create(t, `{"id":"a","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"}}`)
	if err := first.svc.store.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	before, err := os.ReadFile(filepath.Join(dir, "jobs.json"))
	if err != nil {
		t.Fatal(err)
	}

	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(context.Background(), nil, func(k string) string {
			return map[string]string{"KSANA_DATA": dir, "PORT": "0"}[k]
		}, &out, &errOut)
	}()
	select {
	case code := <-done:
		if code != 1 {
			t.Errorf("second service exit %d, want 1; stderr:\n%s", code, errOut.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a second service on a data directory in use did not exit")
	}
	logs := errOut.String()
	for _, want := range []string{"data directory is in use by another process", "KSANA_DATA", "data_dir=" + dir} {
		if !strings.Contains(logs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, logs)
		}
	}
	if strings.Contains(logs, "listening") {
		t.Errorf("the second service listened:\n%s", logs)
	}
	after, err := os.ReadFile(filepath.Join(dir, "jobs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("jobs.json changed by the refused start:\nbefore %s\nafter  %s", before, after)
	}
	if got := first.jobs(t); len(got) != 1 || got[0].ID != "a" {
		t.Errorf("first service lists %+v after the refused start, want job a", got)
	}
	first.stop()
	// Once the first is stopped the directory is free again.
	startService(t, dir, nil).stop()
}

// TestExposureReport: the start-up log says whether the token and the
// allow-list are on, and warns when the API is served beyond loopback
// without a token.
func TestExposureReport(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		env      map[string]string
		wantWarn bool
		access   string // the "ksana: access" record's fields
	}{
		{"every interface, no token", nil, true, `"token":"off","callback_allow":"any host"`},
		{"loopback, no token", map[string]string{"LISTEN_ADDR": "127.0.0.1"}, false, `"token":"off","callback_allow":"any host"`},
		{"every interface, token", map[string]string{"KSANA_API_TOKEN": "s3cret-token-0001", "KSANA_CALLBACK_ALLOW": "*.internal"}, false,
			`"token":"required","callback_allow":"*.internal"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := map[string]string{"KSANA_DATA": t.TempDir(), "PORT": "0", "LOG_FORMAT": "json"}
			for k, v := range tt.env {
				env[k] = v
			}
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan int, 1)
			var out, errOut syncBuffer
			go func() { done <- run(ctx, nil, func(k string) string { return env[k] }, &out, &errOut) }()
			waitFor(t, "listening", func() bool { return strings.Contains(errOut.String(), `"msg":"ksana: access"`) })
			cancel()
			<-done
			logs := errOut.String()
			if got := strings.Contains(logs, "served beyond this machine with no token"); got != tt.wantWarn {
				t.Errorf("warning logged = %v, want %v; logs:\n%s", got, tt.wantWarn, logs)
			}
			if !strings.Contains(logs, `"msg":"ksana: access",`+tt.access) {
				t.Errorf("no access record with %s; logs:\n%s", tt.access, logs)
			}
		})
	}
}

func TestDataDir(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{nil, "./data"},
		{map[string]string{"DATA_DIR": "/d"}, "/d"},
		{map[string]string{"KSANA_DATA": "/k"}, "/k"},
		{map[string]string{"KSANA_DATA": "/k", "DATA_DIR": "/d"}, "/k"},
	}
	for _, tt := range tests {
		if got := dataDir(func(k string) string { return tt.env[k] }); got != tt.want {
			t.Errorf("dataDir(%v) = %q, want %q", tt.env, got, tt.want)
		}
	}
}

// TestRunHistorySetting: KSANA_RUN_HISTORY bounds the runs each job
// keeps in the JSON file.
func TestRunHistorySetting(t *testing.T) {
	ts := startService(t, t.TempDir(), map[string]string{"KSANA_RUN_HISTORY": "3"})
	cb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	defer cb.Close()
	body := fmt.Sprintf(`{"id":"h","schedule":{"kind":"every","every":"50ms"},"http":{"url":%q}}`, cb.URL)
	if code := call(t, "POST", ts.url+"/jobs", body, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	var runs []cron.Run
	waitFor(t, "more runs than the history keeps", func() bool {
		var j cron.Job
		call(t, "GET", ts.url+"/jobs/h", "", &j)
		return !j.LastRunAt.IsZero() && j.LastRunAt.Sub(j.Schedule.StartAt) > 400*time.Millisecond
	})
	if code := call(t, "GET", ts.url+"/jobs/h/runs?limit=100", "", &runs); code != 200 || len(runs) != 3 {
		t.Fatalf("GET runs: %d, %d runs; want the 3 newest", code, len(runs))
	}
}
