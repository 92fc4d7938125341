package jsonstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestQueryRunsAfterReopen: the first history query after a start builds
// the index from runs.jsonl while runs are still appended and flushed;
// every run is then found once, the new ones included, and a deleted
// and re-created job shows only its new runs.
func TestQueryRunsAfterReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := Config{RunHistory: 10_000, FlushInterval: time.Millisecond}
	s, err := New(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		if err := s.Save(ctx, testJob(id)); err != nil {
			t.Fatal(err)
		}
	}
	run := func(i int) cron.Run {
		return cron.Run{ID: fmt.Sprintf("%032x", i), JobID: ids[i%3], ScheduledAt: t0.Add(time.Duration(i) * time.Second), Status: cron.StatusSuccess}
	}
	for i := range 6000 {
		if err := s.AppendRun(ctx, run(i)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if s, err = New(dir, cfg); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 6000; i < 9000; i++ {
			if err := s.AppendRun(ctx, run(i)); err != nil {
				t.Error(err)
				return
			}
		}
		if err := s.Flush(ctx); err != nil {
			t.Error(err)
		}
	})
	if _, _, err := s.QueryRuns(ctx, cron.RunQuery{}); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	// Job c, deleted and created again, with one new run.
	if err := s.Delete(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	if err := s.Save(ctx, testJob("c")); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendRun(ctx, run(9002)); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	q := cron.RunQuery{Limit: cron.MaxRunQueryLimit}
	prev := cron.RunCursor{}
	for {
		runs, next, err := s.QueryRuns(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		for i := range runs {
			if !prev.IsZero() && !prev.Before(&runs[i]) {
				t.Fatalf("run %s at %v comes after %v", runs[i].ID, runs[i].ScheduledAt, prev)
			}
			prev = runs[i].Cursor()
			count[runs[i].JobID]++
		}
		if next.IsZero() {
			break
		}
		q.After = next
	}
	if count["a"] != 3000 || count["b"] != 3000 || count["c"] != 1 {
		t.Errorf("runs found per job %v, want a and b 3000 each, c 1", count)
	}
	// A job filter read through the jobs' chains, and one of more jobs
	// than that, read through the index: the same runs.
	many := []string{"b"}
	for i := range chainJobs {
		many = append(many, fmt.Sprintf("none-%d", i))
	}
	for _, jobs := range [][]string{{"b"}, many} {
		runs, next, err := s.QueryRuns(ctx, cron.RunQuery{JobIDs: jobs, Limit: 7, Since: t0.Add(8950 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range runs {
			got = append(got, r.ID)
		}
		want := []string{fmt.Sprintf("%032x", 8998), fmt.Sprintf("%032x", 8995), fmt.Sprintf("%032x", 8992), fmt.Sprintf("%032x", 8989),
			fmt.Sprintf("%032x", 8986), fmt.Sprintf("%032x", 8983), fmt.Sprintf("%032x", 8980)}
		if !slices.Equal(got, want) || next.IsZero() {
			t.Errorf("runs of %d jobs: %v, next %v; want %v and a next page", len(jobs), got, next, want)
		}
	}
}

// TestJobQueryNeedsNoIndex: after a start that compacted runs.jsonl,
// before the index of the whole file is built (here: never in the
// background), a history query of one job reads that job's chain in
// runs.jsonl and builds no index; a query of every job builds it.
func TestJobQueryNeedsNoIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := Config{FlushInterval: time.Millisecond, noPrebuild: true}
	s, err := New(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"a", "b"} {
		if err := s.Save(ctx, testJob(id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 20 {
		r := cron.Run{ID: fmt.Sprintf("%032x", i), JobID: []string{"a", "b"}[i%2], ScheduledAt: t0.Add(time.Duration(i) * time.Second),
			Status: []cron.Status{cron.StatusSuccess, cron.StatusFailed}[i%4/2]}
		if err := s.AppendRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// No runs.idx, which would restore the index, and a line to drop: the
	// start compacts runs.jsonl instead of indexing it, and the index is
	// left to build (in the background, which noPrebuild keeps from
	// starting).
	if err := os.Remove(filepath.Join(dir, RunsIndexFile)); err != nil {
		t.Fatal(err)
	}
	rf, err := os.OpenFile(filepath.Join(dir, RunsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := rf.WriteString("not a run\n"); err != nil {
		t.Fatal(err)
	}
	rf.Close()
	if s, err = New(dir, cfg); err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	runs, _, err := s.QueryRuns(ctx, cron.RunQuery{JobIDs: []string{"a"}, Statuses: []cron.Status{cron.StatusFailed}})
	if err != nil {
		t.Fatal(err)
	}
	if len(runs) != 5 || runs[0].ID != fmt.Sprintf("%032x", 18) {
		t.Errorf("failed runs of a: %d, newest %v; want 5, the 18th", len(runs), runs)
	}
	s.mu.Lock()
	built := s.refsBuilt
	s.mu.Unlock()
	if built {
		t.Errorf("a query of one job built the index of every run")
	}
	if runs, _, err = s.QueryRuns(ctx, cron.RunQuery{}); err != nil || len(runs) != 20 {
		t.Fatalf("every run: %d, %v; want 20", len(runs), err)
	}
	s.mu.Lock()
	built = s.refsBuilt
	s.mu.Unlock()
	if !built {
		t.Errorf("a query of every job built no index")
	}
}

// TestRefFields checks that the fields the index reads from a line
// without decoding it are those json.Unmarshal reads, and that a line it
// cannot read so is left to json.Unmarshal.
func TestRefFields(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 30, 0, 123456789, time.FixedZone("x", 3600))
	runs := []cron.Run{
		{ID: "0123456789abcdef0123456789abcdef", JobID: "j", ScheduledAt: at, Status: cron.StatusSuccess},
		{ID: "r2", JobID: "j", ScheduledAt: at.UTC(), Status: cron.StatusFailed, Instance: "node-1", Error: `"status":"x"`},
		{ID: "r3", JobID: "j", ScheduledAt: at, Status: cron.StatusTimeout,
			AttemptLog: []cron.Attempt{{StartedAt: at, Status: cron.StatusFailed}}},
		{ID: "r4", JobID: "j", ScheduledAt: at, Status: cron.StatusSkipped, Instance: "a",
			AttemptLog: []cron.Attempt{{StartedAt: at, Status: cron.StatusFailed, Error: `"instance":"b"`}}},
	}
	for _, r := range runs {
		line, err := appendRunLine(nil, 42, &r)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := refFields(line)
		if !ok {
			t.Fatalf("%s: not read: %s", r.ID, line)
		}
		if string(got.id) != r.ID || !got.at.Equal(r.ScheduledAt) || string(got.status) != string(r.Status) || string(got.inst) != r.Instance {
			t.Errorf("%s: read %+v from %s", r.ID, got, line)
		}
	}
	for _, line := range []string{
		`{"prev":0,"run_id":"a\"b","job_id":"j","scheduled_at":"2026-01-01T00:00:00Z","status":"success"}`,
		`{"prev":0,"run_id":"a","job_id":"j","scheduled_at":"yesterday","status":"success"}`,
		`{"prev":0,"job_id":"j","status":"success","run_id":"a","scheduled_at":"2026-01-01T00:00:00Z"}`,
		`{"prev":0,"run_id":"a","job_id":"j","scheduled_at":"2026-01-01T00:00:00Z","attempt_log":[{"status":"failed"}],"status":"success"}`,
		`{"prev":0,"run_id":"a","job_id":"j","scheduled_at":"2026-01-01T00:00:00Z","status":"success","attempt_log":[{"instance":"b"}],"instance":"c"}`,
		`{"prev":0,"run_id":"a","job_id":"j","scheduled_at":"2026-01-01T00:00:00Z","triggered_at":"0001-01-01T00:00:00Z","finished_at":"0001-01-01T00:00:00Z","status":"success","attempt_log":[{"instance":"b"}],"instance":"c"}`,
		`{"prev":0,"run_id":"a","job_id":"j\"k","scheduled_at":"2026-01-01T00:00:00Z","triggered_at":"0001-01-01T00:00:00Z","finished_at":"0001-01-01T00:00:00Z","status":"success"}`,
	} {
		if r, ok := refFields([]byte(line)); ok {
			t.Errorf("read %+v from %s", r, line)
		}
	}
}
