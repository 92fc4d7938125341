package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestKillDuringCompaction runs the built binary over 50,000 jobs, changes
// some through the API, then sends SIGTERM, whose clean stop rewrites
// jobs.json whole (the compaction of the journal), and SIGKILL a little
// later, at a different moment each round: before, during or after the
// rewrite. After each kill the store starts, holds every acknowledged
// change, and no jobs.bad file appears. Rounds where the kill caught the
// rewrite in the middle (a rotated journal or jobs.json.tmp left behind)
// are counted; at least one must.
func TestKillDuringCompaction(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL")
	}
	if testing.Short() {
		t.Skip("builds the binary and writes 50,000 jobs")
	}
	runAs(t, heavyTest)
	bin := buildKsana(t)
	dir := t.TempDir()
	const n = 50_000
	start := time.Now().UTC().Truncate(time.Second)
	var buf bytes.Buffer
	buf.WriteString(`{"version":1,"updated_at":"","jobs":[`)
	for i := range n {
		if i > 0 {
			buf.WriteString(",\n")
		}
		j := cron.Job{ID: fmt.Sprintf("k%06d", i), Name: "seed", Type: "http",
			HTTP:     cron.HTTPConfig{Method: "POST", URL: "http://127.0.0.1:9/hook"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour), StartAt: start},
			Timeout:  cron.Duration(10 * time.Second), RetryBackoff: cron.Duration(time.Second), NextRunAt: start.Add(time.Hour)}
		enc, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		buf.Write(enc)
	}
	buf.WriteString("]}")
	if err := os.WriteFile(filepath.Join(dir, "jobs.json"), buf.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}

	names := map[string]string{} // acknowledged names
	client := &http.Client{Timeout: 10 * time.Second}
	caught := 0
	const rounds = 8
	for round := range rounds {
		c := startChild(t, bin, dir)
		// Every acknowledged change is there.
		for id, name := range names {
			var j cron.Job
			if code := call(t, "GET", c.url+"/jobs/"+id, "", &j); code != 200 || j.Name != name {
				t.Fatalf("round %d: job %s: status %d, name %q, want the acknowledged %q; logs:\n%s", round, id, code, j.Name, name, c.logs.String())
			}
		}
		// Some changes, each acknowledged before the stop.
		for k := range 50 {
			id := fmt.Sprintf("k%06d", (round*50+k)*97%n)
			name := fmt.Sprintf("r%d-%d", round, k)
			req, _ := http.NewRequest("PATCH", c.url+"/jobs/"+id, strings.NewReader(fmt.Sprintf(`{"name":%q}`, name)))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Fatalf("PATCH %s: %d", id, resp.StatusCode)
			}
			names[id] = name
		}
		// SIGTERM starts the final rewrite. SIGKILL comes, in odd rounds,
		// as soon as the rewrite shows (a rotated journal or
		// jobs.json.tmp), in even rounds 0 to 210 ms later.
		if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		if round%2 == 1 {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
				if rewriting(dir) {
					break
				}
				time.Sleep(100 * time.Microsecond)
			}
		} else {
			time.Sleep(time.Duration(round) * 30 * time.Millisecond)
		}
		c.kill(t)
		if rewriting(dir) {
			caught++
		}
		if bad := badFiles(t, dir); len(bad) > 0 {
			t.Fatalf("round %d: %v appeared", round, bad)
		}
	}
	c := startChild(t, bin, dir)
	for id, name := range names {
		var j cron.Job
		if code := call(t, "GET", c.url+"/jobs/"+id, "", &j); code != 200 || j.Name != name {
			t.Fatalf("at the end: job %s: status %d, name %q, want %q", id, code, j.Name, name)
		}
	}
	c.kill(t)
	t.Logf("%d rounds, %d killed in the middle of the rewrite", rounds, caught)
	if caught == 0 {
		t.Errorf("no kill caught the rewrite in the middle: the test did not test it")
	}
}

// rewriting reports whether dir shows a rewrite of jobs.json under way: a
// rotated journal or jobs.json.tmp.
func rewriting(dir string) bool {
	files, _ := filepath.Glob(filepath.Join(dir, "jobs.journal.*"))
	_, err := os.Stat(filepath.Join(dir, "jobs.json.tmp"))
	return err == nil || len(files) > 0
}
