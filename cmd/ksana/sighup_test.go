package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestSighupNeverEnds starts the built binary and sends it SIGHUP from
// its first instant on (as soon as the runtime reports, through
// GODEBUG=inittrace=1, that the package catching it is initialized, before
// the other packages and main), every millisecond until it listens and a
// few times after: with or without KSANA_API_TOKENS_FILE it lives, serves,
// says what it did with the signal, and stops cleanly on SIGTERM.
func TestSighupNeverEnds(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("SIGHUP")
	}
	bin := buildKsana(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte("admin admin-secret-00001\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, file, log string
	}{
		{"no tokens file", "", "ksana: SIGHUP ignored: there is nothing to reload without KSANA_API_TOKENS_FILE"},
		{"tokens file", tokens, "ksana: SIGHUP: tokens reloaded"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd := exec.Command(bin)
			cmd.Env = append(os.Environ(), "KSANA_DATA="+t.TempDir(), "PORT=0", "LISTEN_ADDR=127.0.0.1", "LOG_FORMAT=json",
				"LOG_LEVEL=info", "KSANA_API_TOKENS_FILE="+tc.file, "KSANA_API_TOKEN=", "GODEBUG=inittrace=1")
			logs := &syncBuffer{}
			cmd.Stderr = logs
			if err := startProcess(cmd); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			gone := make(chan struct{})
			go func() { exited <- cmd.Wait(); close(gone) }()
			defer func() {
				cmd.Process.Kill()
				<-gone
			}()
			// Any Go program ends on a SIGHUP that comes before it asks for
			// the signal; ksana asks in the init of package sighup.
			waitFor(t, "package sighup initialized", func() bool {
				return strings.Contains(logs.String(), "init github.com/ksana-dev/ksana/cmd/ksana/internal/sighup @")
			})
			sent := 0
			addr := ""
			for tries := 0; addr == "" || tries < 3; sent++ {
				select {
				case err := <-exited:
					t.Fatalf("ksana ended (%v) after %d SIGHUPs; logs:\n%s", err, sent, logs.String())
				default:
				}
				if err := cmd.Process.Signal(syscall.SIGHUP); err != nil {
					t.Fatal(err)
				}
				time.Sleep(time.Millisecond)
				if addr == "" {
					addr = listenAddr(logs.String())
				} else {
					tries++
				}
				if sent > 30_000 {
					t.Fatalf("ksana did not listen; logs:\n%s", logs.String())
				}
			}
			if body, err := httpGet("http://" + addr + "/health"); err != nil || !strings.Contains(body, `"status":"ok"`) {
				t.Fatalf("after %d SIGHUPs, GET /health: %q %v", sent, body, err)
			}
			waitFor(t, "the SIGHUP in the log", func() bool { return strings.Contains(logs.String(), tc.log) })
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("after SIGTERM: %v; logs:\n%s", err, logs.String())
				}
			case <-time.After(30 * time.Second):
				t.Fatal("ksana did not stop on SIGTERM")
			}
		})
	}
}

// listenAddr is the address of the "ksana: listening" record of a JSON
// log, or "".
func listenAddr(logs string) string {
	for line := range strings.Lines(logs) {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "ksana: listening" {
			return rec.Addr
		}
	}
	return ""
}
