package jsonstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// TestBookkeepingBelowThresholdNoRewrite: 10,000 bookkeeping updates go to
// the journal and cause no rewrite of jobs.json while the journal stays
// below the threshold; a crash then loses none that a flush made durable,
// and a clean stop writes them into jobs.json.
func TestBookkeepingBelowThresholdNoRewrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Config{Journal: true, FlushInterval: time.Millisecond})
	const jobs, updates = 100, 10_000
	for i := range jobs {
		if err := s.Save(ctx, testJob(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	before := s.Rewrites()
	fileBefore, err := os.ReadFile(filepath.Join(dir, JobsFile))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Time{}
	for i := range updates {
		id := fmt.Sprint(i % jobs)
		at := t0.Add(time.Duration(i) * time.Second)
		if err := s.Record(ctx, id, cron.Bookkeeping{LastRunAt: at, NextRunAt: at.Add(time.Minute), LastStatus: cron.StatusSuccess}); err != nil {
			t.Fatal(err)
		}
		want[id] = at
		if i%1000 == 0 {
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Rewrites() - before; got != 0 {
		t.Errorf("%d bookkeeping updates made %d rewrites of jobs.json below the threshold, want 0", updates, got)
	}
	fileAfter, err := os.ReadFile(filepath.Join(dir, JobsFile))
	if err != nil {
		t.Fatal(err)
	}
	if string(fileAfter) != string(fileBefore) {
		t.Errorf("jobs.json changed below the threshold")
	}
	if got := journalRecords(t, dir); got < updates {
		t.Errorf("journal holds %d records, want at least the %d updates", got, updates)
	}
	crash(t, s)

	check := func(what string, got []cron.Job) {
		t.Helper()
		if len(got) != jobs {
			t.Fatalf("%s: %d jobs, want %d", what, len(got), jobs)
		}
		for _, j := range got {
			if !j.LastRunAt.Equal(want[j.ID]) || j.LastStatus != cron.StatusSuccess {
				t.Errorf("%s: job %s last_run_at %v status %q, want %v success", what, j.ID, j.LastRunAt, j.LastStatus, want[j.ID])
			}
		}
	}
	s2 := open(t, dir, Config{Journal: true})
	check("after a crash", load(t, s2))
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	check("jobs.json after a clean stop", readFileJobs(t, dir))
	if got := journalRecords(t, dir); got != 0 {
		t.Errorf("journal after a clean stop holds %d records, want 0", got)
	}
}

// TestJournalPastThresholdRewrites: once the journal passes the threshold
// jobs.json is rewritten in the background and the journal emptied.
func TestJournalPastThresholdRewrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Config{Journal: true, FlushInterval: time.Millisecond, CompactMin: 64 << 10})
	if err := s.Save(ctx, testJob("a")); err != nil {
		t.Fatal(err)
	}
	before := s.Rewrites()
	for i := range 2000 { // about 200 KB of records
		if err := s.Record(ctx, "a", cron.Bookkeeping{LastRunAt: t0.Add(time.Duration(i) * time.Second)}); err != nil {
			t.Fatal(err)
		}
		if i%100 == 0 {
			if err := s.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Rewrites() - before; got < 1 || got > 4 {
		t.Errorf("rewrites past the threshold = %d, want 1..4", got)
	}
	if got := readFileJobs(t, dir); len(got) != 1 || got[0].LastRunAt.Before(t0.Add(1000*time.Second)) {
		t.Errorf("jobs.json after the rewrites = %+v, want job a with a recent last_run_at", got)
	}
}

// TestTornJournalTailDropped: a record cut short at the end of the journal
// (a crash in the middle of a write) is dropped at start, the records
// before it are replayed, and new records appended after it replay too.
func TestTornJournalTailDropped(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
	a, b := testJob("a"), testJob("b")
	for _, j := range []cron.Job{a, b} {
		if err := s.Save(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	crash(t, s)
	c := testJob("c")
	torn := appendJournalSave(nil, 3, &c)
	f, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(torn[:len(torn)-40])
	f.Close()

	s2 := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
	if diff := cmp.Diff([]cron.Job{a, b}, load(t, s2)); diff != "" {
		t.Errorf("jobs after a torn tail (-want +got):\n%s", diff)
	}
	d := testJob("d")
	if err := s2.Save(ctx, d); err != nil {
		t.Fatal(err)
	}
	crash(t, s2)
	s3 := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
	if diff := cmp.Diff([]cron.Job{a, b, d}, load(t, s3)); diff != "" {
		t.Errorf("jobs after a save past the torn tail (-want +got):\n%s", diff)
	}
}

// TestCrashDuringRewrite: a crash at each step of a rewrite (journal
// rotated; jobs.json renamed in but the rotated journal not yet removed)
// leaves a store that opens with every acknowledged change.
func TestCrashDuringRewrite(t *testing.T) {
	t.Parallel()
	for _, step := range []string{"rotated", "written"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			ctx := context.Background()
			s := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
			var want []cron.Job
			for i := range 5 {
				j := testJob(fmt.Sprint(i))
				if err := s.Save(ctx, j); err != nil {
					t.Fatal(err)
				}
				want = append(want, j)
			}
			if err := s.Delete(ctx, "1"); err != nil {
				t.Fatal(err)
			}
			want = append(want[:1], want[2:]...)
			if _, _, err := s.rotateJournal(); err != nil {
				t.Fatal(err)
			}
			// Changes made during the rewrite go to the new journal.
			want[0].Name = "renamed"
			if err := s.Save(ctx, want[0]); err != nil {
				t.Fatal(err)
			}
			if step == "written" {
				if _, _, err := s.writeJobsFile(time.Now()); err != nil {
					t.Fatal(err)
				}
			}
			files, _ := journalFiles(dir)
			if len(files) != 2 {
				t.Errorf("journal files during the rewrite = %v, want a rotated one and the current one", files)
			}
			crash(t, s)
			s2 := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
			if diff := cmp.Diff(want, load(t, s2)); diff != "" {
				t.Errorf("jobs after a crash (-want +got):\n%s", diff)
			}
			if err := s2.Close(); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(want, readFileJobs(t, dir)); diff != "" {
				t.Errorf("jobs.json after a clean stop (-want +got):\n%s", diff)
			}
			if files, _ := journalFiles(dir); len(files) != 1 {
				t.Errorf("journal files after a clean stop = %v, want only %s", files, JournalFile)
			}
		})
	}
}

// TestRunsOnDisk: the history is read from runs.jsonl, survives restarts
// (with runs.idx after a clean stop, without it after a crash), and a
// compaction keeps the newest RunHistory runs of each job.
func TestRunsOnDisk(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	const hist = 5
	cfg := Config{Journal: true, RunHistory: hist, FlushInterval: time.Millisecond}
	s := open(t, dir, cfg)
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		if err := s.Save(ctx, testJob(id)); err != nil {
			t.Fatal(err)
		}
	}
	n := 0
	appendRuns := func(s *Store, count int) {
		t.Helper()
		for range count {
			for _, id := range ids {
				n++
				if err := s.AppendRun(ctx, cron.Run{ID: fmt.Sprint("r", n), JobID: id, Status: cron.StatusSuccess, ScheduledAt: t0.Add(time.Duration(n))}); err != nil {
					t.Fatal(err)
				}
			}
			if n%300 == 0 {
				if err := s.Flush(ctx); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	check := func(what string, s *Store) {
		t.Helper()
		for k, id := range ids {
			got, err := s.Runs(ctx, id, 0)
			if err != nil {
				t.Fatalf("%s: Runs(%s): %v", what, id, err)
			}
			var gotIDs, want []string
			for _, r := range got {
				gotIDs = append(gotIDs, r.ID)
			}
			for i := range hist {
				want = append(want, fmt.Sprint("r", n-len(ids)+1+k-i*len(ids)))
			}
			if diff := cmp.Diff(want, gotIDs); diff != "" {
				t.Errorf("%s: runs of %s (-want +got):\n%s", what, id, diff)
			}
		}
	}
	appendRuns(s, 10)
	check("before any compaction", s)
	appendRuns(s, 2000) // 6000 lines: past 2*15+4096, a compaction
	check("after a compaction", s)
	s.mu.Lock()
	lines := s.runLines
	s.mu.Unlock()
	if lines >= 6000 {
		t.Errorf("runs.jsonl has %d lines after 6030 runs, want it compacted", lines)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, RunsIndexFile)); err != nil {
		t.Errorf("runs.idx after a clean stop: %v", err)
	}
	s2 := open(t, dir, cfg)
	check("after a clean restart", s2)
	if err := s2.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s2.Save(ctx, testJob("b")); err != nil {
		t.Fatal(err)
	}
	if got, _ := s2.Runs(ctx, "b", 0); len(got) != 0 {
		t.Errorf("a job deleted and created again has %d runs, want 0", len(got))
	}
	ids = []string{"a", "c"}
	appendRuns(s2, 7)
	check("after more runs", s2)
	crash(t, s2)
	s3 := open(t, dir, cfg)
	check("after a crash", s3)
	// (After a crash, before a compaction of runs.jsonl, the job created
	// again under the id of a deleted one shows the old job's runs: lines
	// know their job by id only.)
}

// TestFastDecodeHalves: a jobs.json large enough to be read on two
// goroutines decodes as the general decoder decodes it, in the form this
// package writes and pretty-printed (elements over several lines).
func TestFastDecodeHalves(t *testing.T) {
	t.Parallel()
	var refs [][]byte
	for i := range 20_000 {
		j := testJob(fmt.Sprintf("job-%05d", i))
		j.Name = fmt.Sprintf("name, {with} \"quotes\"\n%d", i)
		refs = append(refs, appendJob(nil, &j))
	}
	plain := appendDocument(nil, t0, refs)
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, plain, "", "  "); err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"plain": plain, "pretty": pretty.Bytes()} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if len(data) < 4<<20 {
				t.Fatalf("file of %d bytes: too small to be split", len(data))
			}
			_, fast, ok := fastDecode(data)
			if !ok {
				t.Fatal("fastDecode refused the file")
			}
			_, raws, err := splitFile(data)
			if err != nil {
				t.Fatal(err)
			}
			if len(fast) != len(raws) {
				t.Fatalf("fastDecode read %d jobs, the general decoder %d", len(fast), len(raws))
			}
			for i := range raws {
				var want fileJob
				if err := json.Unmarshal(raws[i], &want); err != nil {
					t.Fatal(err)
				}
				if reflect.DeepEqual(want, fast[i]) {
					continue // equal to the bit: cmp.Diff, much slower, would find nothing
				}
				if diff := cmp.Diff(want, fast[i]); diff != "" {
					t.Fatalf("job %d (-general +fast):\n%s", i, diff)
				}
			}
		})
	}
}

// TestCompactRewrites: Compact rewrites jobs.json at once in journal mode
// and empties the journal.
func TestCompactRewrites(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
	if err := s.Save(ctx, testJob("a")); err != nil {
		t.Fatal(err)
	}
	before := s.Rewrites()
	if err := s.Compact(ctx); err != nil {
		t.Fatal(err)
	}
	if got := s.Rewrites() - before; got != 1 {
		t.Errorf("rewrites after Compact = %d, want 1", got)
	}
	if got := len(readFileJobs(t, dir)); got != 1 {
		t.Errorf("jobs.json after Compact holds %d jobs, want 1", got)
	}
	if got := journalRecords(t, dir); got != 0 {
		t.Errorf("journal after Compact holds %d records, want 0", got)
	}
}
