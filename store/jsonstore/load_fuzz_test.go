package jsonstore

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// fuzzOpen opens dir for a fuzz input: it must open, whatever the file
// holds.
func fuzzOpen(t *testing.T, dir string, cfg Config) *Store {
	t.Helper()
	s, err := New(dir, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return s
}

// FuzzJournalReplay feeds arbitrary jobs.journal contents (beside a
// jobs.json of one job) to New: it opens, never panics, holds unique ids,
// and what it replayed is durable: a second opening finds the same jobs.
func FuzzJournalReplay(f *testing.F) {
	a, b := testJob("a"), testJob("b")
	save := appendJournalSave(nil, 1, &b)
	f.Add(save)
	f.Add(append(append([]byte(nil), save...), appendJournalDelete(nil, 2, "a")...))
	f.Add(append(appendJournalDelete(nil, 5, "a"), appendJournalSave(nil, 3, &a)...))
	f.Add(save[:len(save)/2]) // cut short by a crash
	f.Add([]byte("\n{\"seq\":1,\"op\":\"save\",\"job\":{\"id\":\"x\",\"timeout\":\"zz\"}}\n"))
	f.Add([]byte("\n{\"seq\":1,\"op\":\"drop\",\"id\":\"a\"}\n{}\n[]\nnull\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		cfg := Config{Journal: true, FlushInterval: time.Hour}
		s := fuzzOpen(t, dir, Config{}) // job a in jobs.json
		if err := s.Save(context.Background(), testJob("a")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, JournalFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s = fuzzOpen(t, dir, cfg)
		first := load(t, s)
		seen := map[string]bool{}
		for _, j := range first {
			if seen[j.ID] {
				t.Errorf("job %q loaded twice", j.ID)
			}
			seen[j.ID] = true
		}
		// The model: the whole records, in sequence order, over job a.
		var recs []journalRecord
		for _, line := range bytes.Split(data, []byte("\n")) {
			var r journalRecord
			if line = bytes.TrimSpace(line); len(line) > 0 && json.Unmarshal(line, &r) == nil && (r.Op == "save" || r.Op == "delete") {
				recs = append(recs, r)
			}
		}
		slices.SortStableFunc(recs, func(x, y journalRecord) int { return cmp.Compare(x.Seq, y.Seq) })
		want := map[string]bool{"a": true}
		for i, r := range recs {
			if r.Op == "delete" {
				delete(want, r.ID)
			} else if j, ee := decodeEntry(i, r.Job); ee == nil {
				want[j.ID] = true
			}
		}
		if diff := gocmp.Diff(want, seen); diff != "" {
			t.Errorf("job ids after replay (-model +store):\n%s", diff)
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		s = fuzzOpen(t, dir, cfg)
		defer s.Close()
		if diff := gocmp.Diff(first, load(t, s)); diff != "" {
			t.Errorf("jobs after a second opening (-first +second):\n%s", diff)
		}
	})
}

// FuzzLoadRuns feeds arbitrary runs.jsonl contents (beside a jobs.json of
// one job) to New: it opens, never panics, keeps only runs of known jobs
// within RunHistory, and a second opening finds the same runs.
func FuzzLoadRuns(f *testing.F) {
	run := cron.Run{ID: "r1", JobID: "a", ScheduledAt: t0, TriggeredAt: t0, FinishedAt: t0.Add(time.Second),
		Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200, Latency: cron.Duration(time.Second)}
	line, err := appendRunLines(nil, []cron.Run{run})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(line)
	f.Add(append(append([]byte(nil), line...), line[:len(line)/2]...)) // the last line cut short
	f.Add([]byte(`{"run_id":"r2","job_id":"gone","status":"failed"}` + "\n"))
	f.Add([]byte(`{"run_id":"r3","job_id":"a","latency":"zz"}` + "\n\n  \n" + `{"job_id":"a","scheduled_at":"0001-01-01T00:00:00Z"}`))
	f.Add([]byte("null\n[]\n{}\n"))
	var four []byte
	for i := range 4 {
		r := run
		r.ID = fmt.Sprint("r", i)
		four, _ = appendRunLines(four, []cron.Run{r})
	}
	f.Add(four) // more than RunHistory
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		const history = 3
		cfg := Config{RunHistory: history}
		s := fuzzOpen(t, dir, cfg)
		if err := s.Save(context.Background(), testJob("a")); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, RunsFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s = fuzzOpen(t, dir, cfg)
		ctx := context.Background()
		first, err := s.Runs(ctx, "a", 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(first) > history {
			t.Errorf("%d runs kept, want at most %d", len(first), history)
		}
		for _, r := range first {
			if r.JobID != "a" {
				t.Errorf("run %+v of job %q kept for job a", r, r.JobID)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
		s = fuzzOpen(t, dir, cfg)
		defer s.Close()
		again, err := s.Runs(ctx, "a", 100)
		if err != nil {
			t.Fatal(err)
		}
		if diff := gocmp.Diff(first, again); diff != "" {
			t.Errorf("runs after a second opening (-first +second):\n%s", diff)
		}
	})
}
