package jsonstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// refView is a ref as a query sees it: its job by id, its run id and
// instance by value.
type refView struct {
	At       int64
	Off      int64
	Job      string
	ID, Inst string
	Seq      uint32
	Status   cron.Status
}

// refViews returns the history index, refs of deleted jobs left out.
func refViews(s *Store) (bool, []refView) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var v []refView
	for i := range s.refs {
		r := &s.refs[i]
		if r.e.deleted {
			continue
		}
		inst := ""
		if r.inst > 0 {
			inst = s.instances[r.inst-1]
		}
		v = append(v, refView{At: r.at, Off: r.off, Job: r.e.id, ID: s.runID(r), Inst: inst, Seq: r.seq, Status: refStatuses[r.status]})
	}
	return s.refsBuilt, v
}

// TestRunsIndexKeepsHistoryIndex: Close writes the history index into
// runs.idx and the next start restores it, the same as a build reads it
// from runs.jsonl, so that the first history query waits for nothing. A
// runs.idx cut short anywhere, or a runs.jsonl grown since, is not used:
// the start reads runs.jsonl and the background build gives the same
// index and the same answers.
func TestRunsIndexKeepsHistoryIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := Config{FlushInterval: time.Millisecond, RunHistory: 5}
	s := open(t, dir, cfg)
	for _, id := range []string{"a", "b", "c", "gone"} {
		if err := s.Save(ctx, testJob(id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 60 {
		r := cron.Run{ID: fmt.Sprintf("%032x", i), JobID: []string{"a", "b", "c", "gone"}[i%4],
			ScheduledAt: t0.Add(time.Duration(i*7%60) * time.Second), Status: refStatuses[1+i%5]}
		if i%3 == 0 {
			r.Instance = fmt.Sprintf("inst-%d", i%2)
		}
		if i%11 == 0 {
			r.ID = fmt.Sprintf("run-%d", i) // not 32 hex digits
		}
		if err := s.AppendRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, "gone"); err != nil {
		t.Fatal(err)
	}
	query := func(s *Store) []cron.Run {
		t.Helper()
		runs, _, err := s.QueryRuns(ctx, cron.RunQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	wantRuns := query(s)
	_, want := refViews(s)
	if len(want) == 0 || len(wantRuns) != 15 {
		t.Fatalf("before Close: %d refs, %d runs in the history; want some, and 15", len(want), len(wantRuns))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, RunsIndexFile)); err != nil {
		t.Fatalf("after Close: %v", err)
	}

	noBuild := cfg
	noBuild.noPrebuild = true
	s = open(t, dir, noBuild)
	built, got := refViews(s)
	if !built {
		t.Fatalf("after a clean stop the history index is not restored")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("restored history index (-built +restored):\n%s", diff)
	}
	if diff := cmp.Diff(wantRuns, query(s)); diff != "" {
		t.Errorf("history after a restart (-before +after):\n%s", diff)
	}
	// It goes on: a new run is indexed and the next Close writes it.
	extra := cron.Run{ID: fmt.Sprintf("%032x", 999), JobID: "a", ScheduledAt: t0.Add(time.Hour), Status: cron.StatusSuccess, Instance: "inst-new"}
	if err := s.AppendRun(ctx, extra); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	wantRuns = query(s)
	if len(wantRuns) == 0 || wantRuns[0].ID != extra.ID || wantRuns[0].Instance != "inst-new" {
		t.Fatalf("newest run after an append: %+v, want %s", wantRuns[:1], extra.ID)
	}
	_, want = refViews(s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, noBuild)
	if built, got := refViews(s); !built || !cmp.Equal(want, got) {
		t.Errorf("after a second restart: built %v, index differs: %s", built, cmp.Diff(want, got))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	idx, err := os.ReadFile(filepath.Join(dir, RunsIndexFile))
	if err != nil {
		t.Fatal(err)
	}

	// Cut short at every length, or with a byte changed: the start reads
	// runs.jsonl, and the build gives the same answers.
	check := func(name string, data []byte) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, RunsIndexFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
		s := open(t, dir, cfg)
		defer s.Close()
		if diff := cmp.Diff(wantRuns, query(s)); diff != "" {
			t.Fatalf("%s: history (-want +got):\n%s", name, diff)
		}
		// A full read may compact runs.jsonl (the lines of the deleted
		// job go), which moves the lines: the index is built anew, and
		// the answers above are what counts.
		if built, _ := refViews(s); !built {
			t.Fatalf("%s: no history index after a query of every job", name)
		}
	}
	for n := 0; n < len(idx); n += max(1, len(idx)/40) {
		check(fmt.Sprintf("runs.idx cut to %d of %d bytes", n, len(idx)), idx[:n])
	}
	for i := len(idx) - 1; i > 0; i -= max(1, len(idx)/40) {
		bad := append([]byte(nil), idx...)
		bad[i] ^= 0xff
		check(fmt.Sprintf("byte %d of runs.idx changed", i), bad)
	}

	// runs.jsonl grown since (here by an empty line, which a start
	// compacts away): the index is built anew.
	if err := os.WriteFile(filepath.Join(dir, RunsIndexFile), idx, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(filepath.Join(dir, RunsFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("\n"))
	f.Close()
	s = open(t, dir, cfg)
	defer s.Close()
	if diff := cmp.Diff(wantRuns, query(s)); diff != "" {
		t.Fatalf("runs.jsonl grown: history (-want +got):\n%s", diff)
	}
	// The compaction kept the lines of the history only.
	if built, got := refViews(s); !built || len(got) != len(wantRuns) {
		t.Fatalf("runs.jsonl grown: built %v, %d refs, want %d", built, len(got), len(wantRuns))
	}
}

// copyWithoutIndex copies dir's files but runs.idx (and the lock) into a
// new directory: a store opened there builds the history index from
// runs.jsonl alone.
func copyWithoutIndex(t *testing.T, dir string) string {
	t.Helper()
	out := t.TempDir()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() || e.Name() == RunsIndexFile || e.Name() == "jobs.lock" {
			continue
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(out, e.Name()), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestRunsIndexAfterCrash: runs.idx stays after a start, so that a start
// after a crash restores the history index for the part of runs.jsonl it
// covers and indexes only the lines appended since: the index and the
// answers are those of a build from runs.jsonl alone. A deletion of a job
// with runs removes runs.idx first, so that a job made again with the id
// after a crash does not get the old job's runs.
func TestRunsIndexAfterCrash(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := Config{FlushInterval: time.Millisecond, Journal: true}
	noBuild := cfg
	noBuild.noPrebuild = true
	s := open(t, dir, cfg)
	n := 0
	appendRuns := func(s *Store, jobs ...string) {
		t.Helper()
		for _, id := range jobs {
			r := cron.Run{ID: fmt.Sprintf("%032x", n), JobID: id, ScheduledAt: t0.Add(time.Duration(n) * time.Second),
				Status: refStatuses[1+n%5], Instance: fmt.Sprintf("i%d", n%3)}
			n++
			if err := s.AppendRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range []string{"n1", "a", "n2", "b", "c"} { // n1, n2: never any run
		if err := s.Save(ctx, testJob(id)); err != nil {
			t.Fatal(err)
		}
	}
	query := func(s *Store, q cron.RunQuery) []cron.Run {
		t.Helper()
		runs, _, err := s.QueryRuns(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		return runs
	}
	appendRuns(s, "a", "b", "c", "a", "b", "c")
	query(s, cron.RunQuery{}) // the index is built: Close writes it
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	// Runs appended after a start, then a crash.
	s = open(t, dir, cfg)
	appendRuns(s, "a", "a", "c")
	crash(t, s)
	same := func(name string) {
		t.Helper()
		ref := open(t, copyWithoutIndex(t, dir), cfg)
		defer ref.Close()
		wantRuns := query(ref, cron.RunQuery{Limit: 1000})
		_, want := refViews(ref)
		s := open(t, dir, noBuild)
		defer crash(t, s)
		built, got := refViews(s)
		if !built {
			t.Fatalf("%s: the history index is not restored", name)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s: history index (-built from runs.jsonl +restored):\n%s", name, diff)
		}
		if diff := cmp.Diff(wantRuns, query(s, cron.RunQuery{Limit: 1000})); diff != "" {
			t.Errorf("%s: history (-built +restored):\n%s", name, diff)
		}
	}
	same("after a crash")

	// A job with runs deleted and made again, then a crash.
	s = open(t, dir, cfg)
	if err := s.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, RunsIndexFile)); !os.IsNotExist(err) {
		t.Fatalf("runs.idx after the deletion of a job with runs: %v, want it gone", err)
	}
	if err := s.Save(ctx, testJob("b")); err != nil {
		t.Fatal(err)
	}
	appendRuns(s, "b")
	crash(t, s)
	s = open(t, dir, cfg)
	if runs := query(s, cron.RunQuery{JobIDs: []string{"b"}}); len(runs) != 1 || runs[0].ID != fmt.Sprintf("%032x", n-1) {
		t.Errorf("runs of b made again: %d, want its one new run", len(runs))
	}
	// That start read runs.jsonl whole; its Close writes runs.idx anew.
	appendRuns(s, "c")
	query(s, cron.RunQuery{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, cfg)
	appendRuns(s, "b", "a")
	crash(t, s)
	same("after a second crash")

	// Jobs without runs deleted and made after runs.idx was written: its
	// table's places are off by them.
	s = open(t, dir, cfg)
	query(s, cron.RunQuery{})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, cfg)
	for _, id := range []string{"n1", "n2"} {
		if err := s.Delete(ctx, id); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Save(ctx, testJob("n3")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, RunsIndexFile)); err != nil {
		t.Fatalf("runs.idx after deletions of jobs without runs: %v, want it kept", err)
	}
	appendRuns(s, "c", "n3")
	crash(t, s)
	same("after jobs without runs deleted")
}

// TestOrderWalk: runs.idx lists the jobs with runs in the order of
// jobs.json, each with the number of jobs before it that have none; the
// walk finds each at that place in the jobs loaded, or a little off it
// when jobs were deleted since, and else reports nil (the start then looks
// the job up) without losing its place for the next ones.
func TestOrderWalk(t *testing.T) {
	order := make([]*entry, 300)
	for i := range order {
		order[i] = &entry{id: fmt.Sprintf("j%03d", i)}
	}
	// Written when every job was there: runs for every third job.
	type rec struct {
		gap int
		id  string
	}
	var table []rec
	gap := 0
	for i := range order {
		if i%3 != 0 {
			gap++
			continue
		}
		table = append(table, rec{gap, order[i].id})
		gap = 0
	}
	// Since then: two jobs without runs deleted early on, a hundred in a
	// row (more than the walk looks past) later, and one job with runs
	// gone altogether.
	order[1].deleted, order[4].deleted = true, true
	for i := 151; i < 300 && i < 151+150; i++ {
		if i%3 != 0 {
			order[i].deleted = true
		}
	}
	order = slices.Delete(order, 99, 100) // j099, which had runs
	w := newOrderWalk(order)
	found := 0
	for _, r := range table {
		e := w.find(r.gap, []byte(r.id))
		if e != nil {
			found++
			if e.id != r.id || e.deleted {
				t.Fatalf("find(%d, %s) = %s (deleted %v)", r.gap, r.id, e.id, e.deleted)
			}
		} else if r.id != "j099" {
			t.Errorf("find(%d, %s): not found in order", r.gap, r.id)
		}
	}
	if found != len(table)-1 {
		t.Errorf("found %d of %d jobs in order, want all but the one gone", found, len(table))
	}
	// A table in another order: nothing found out of place, nothing wrong.
	w = newOrderWalk(order)
	if e := w.find(0, []byte("j297")); e != nil {
		t.Errorf("find(0, j297) at the start = %s, want nil", e.id)
	}
	if e := w.find(0, []byte("j000")); e == nil || e.id != "j000" {
		t.Errorf("find(0, j000) after a miss = %v, want j000", e)
	}
	// A table that skips far more jobs than there are: the walk gives up
	// (the start looks the jobs up) once it has read the jobs twice over.
	w = newOrderWalk(order)
	for range 10 * len(order) {
		w.find(len(order), []byte("none"))
	}
	if w.budget > 0 {
		t.Errorf("the walk read %d jobs for a table of misses and goes on", 2*len(order)+1024-w.budget)
	}
	if e := w.find(0, []byte("j000")); e != nil {
		t.Errorf("find after the budget = %s, want nil (a lookup)", e.id)
	}
}

// TestStartBuildsHistoryIndex: a start without runs.idx reads runs.jsonl
// and builds the history index in the same read, the same index a build
// of the file gives (lines of every form: run ids of hex digits and not,
// instances, escapes), so that the first query waits for nothing.
func TestStartBuildsHistoryIndex(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	cfg := Config{FlushInterval: time.Millisecond, noPrebuild: true}
	s := open(t, dir, cfg)
	for _, id := range []string{"a", "b", `c"q`} {
		if err := s.Save(ctx, testJob(id)); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 40 {
		r := cron.Run{ID: fmt.Sprintf("%032x", i), JobID: []string{"a", "b", `c"q`}[i%3], ScheduledAt: t0.Add(time.Duration(i*7%40) * time.Second),
			Status: refStatuses[1+i%5], Instance: []string{"", "n1", "n2"}[i%3]}
		if i%4 == 1 {
			r.ID = fmt.Sprintf("run-%d", i)
		}
		if i%5 == 2 {
			r.Error = `"instance":"x"`
			r.AttemptLog = []cron.Attempt{{StartedAt: t0, Status: cron.StatusFailed, Error: `"instance":"y"`}}
		}
		if err := s.AppendRun(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	crash(t, s) // no runs.idx: a crash before the first Close

	s = open(t, dir, cfg)
	built, got := refViews(s)
	if !built || len(got) != 40 {
		t.Fatalf("after the start: built %v, %d refs; want the index of 40 runs", built, len(got))
	}
	s.mu.Lock()
	s.refsBuilt, s.refs, s.refMax, s.longIDs = false, nil, nil, nil
	s.mu.Unlock()
	s.rmu.RLock()
	err := s.buildRefs(false)
	s.rmu.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	_, want := refViews(s)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("history index (-built from runs.jsonl +built by the start):\n%s", diff)
	}
}
