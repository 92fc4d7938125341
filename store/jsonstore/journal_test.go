package jsonstore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestJournalConformance(t *testing.T) {
	t.Parallel()
	storetest.TestCronStore(t, func(t *testing.T) cron.Store {
		return open(t, t.TempDir(), Config{Journal: true, FlushInterval: 5 * time.Millisecond})
	})
}

// TestJournalDurableWithoutRewrite: in journal mode a Save returns without
// waiting for a rewrite, and a store opened after a crash (the first one
// never rewrote) has every acknowledged change.
func TestJournalDurableWithoutRewrite(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	// An hour between rewrites: nothing reaches jobs.json but the journal.
	crashed := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
	synctestSave := func() {
		// Three saves right after the initial rewrite would wait an hour
		// each without the journal.
		for _, id := range []string{"a", "b", "c"} {
			if err := crashed.Save(ctx, testJob(id)); err != nil {
				t.Fatal(err)
			}
		}
	}
	done := make(chan struct{})
	go func() { synctestSave(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("journal saves waited for a rewrite")
	}
	renamed := testJob("b")
	renamed.Name = "renamed"
	if err := crashed.Save(ctx, renamed); err != nil {
		t.Fatal(err)
	}
	if err := crashed.Delete(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if got := readFileJobs(t, dir); len(got) != 0 {
		t.Fatalf("jobs.json has %d jobs before any rewrite, want 0", len(got))
	}
	// A record cut short by the crash.
	f, err := os.OpenFile(filepath.Join(dir, JournalFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"seq":99,"op":"save","job":{"id":"torn","na`)
	f.Close()
	crash(t, crashed)

	// "Restart": a second store over the same directory (which, like the
	// first, does not rewrite on its own while the test looks).
	s2, err := New(dir, Config{Journal: true, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	want := []cron.Job{renamed, testJob("c")}
	if diff := cmp.Diff(want, load(t, s2)); diff != "" {
		t.Errorf("jobs after replay (-want +got):\n%s", diff)
	}
	// The replay is not written into jobs.json at start: the journal
	// goes on.
	if got := s2.Rewrites(); got != 0 {
		t.Errorf("rewrites of jobs.json at start after a replay = %d, want 0", got)
	}
	// New records after the replay continue the sequence and replay too.
	if err := s2.Save(ctx, testJob("d")); err != nil {
		t.Fatal(err)
	}
	crash(t, s2)
	s3, err := New(dir, Config{Journal: true, FlushInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(load(t, s3)); got != 3 {
		t.Errorf("after a second crash: %d jobs, want 3", got)
	}
	// A clean stop writes jobs.json whole and empties the journal.
	if err := s3.Close(); err != nil {
		t.Fatal(err)
	}
	if got := len(readFileJobs(t, dir)); got != 3 {
		t.Errorf("jobs.json after a clean stop holds %d jobs, want 3", got)
	}
	if got := journalRecords(t, dir); got != 0 {
		t.Errorf("journal after a clean stop holds %d records, want none", got)
	}
}

// journalRecords counts the records in the journal files of dir.
func journalRecords(t *testing.T, dir string) int {
	t.Helper()
	files, err := journalFiles(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, p := range files {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		n += strings.Count(string(data), "{\"seq\":")
	}
	return n
}

// TestJournalCompaction: past the threshold, a rewrite empties the
// journal of what it holds.
func TestJournalCompaction(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s, err := New(dir, Config{Journal: true, FlushInterval: time.Second, CompactMin: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		size := func() int64 {
			st, err := os.Stat(filepath.Join(dir, JournalFile))
			if err != nil {
				t.Fatal(err)
			}
			return st.Size()
		}
		for i := range 10 {
			if err := s.Save(ctx, testJob(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		if size() == 0 {
			t.Fatal("journal empty after saves")
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if got := size(); got != 0 {
			t.Errorf("journal size after the rewrite = %d, want 0", got)
		}
		if got := len(readFileJobs(t, dir)); got != 10 {
			t.Errorf("jobs.json holds %d jobs, want 10", got)
		}
	})
}

// TestJournalLeftWithoutJournalMode: a store opened without Journal still
// replays a journal it finds, then removes it.
func TestJournalLeftWithoutJournalMode(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
	if err := s.Save(ctx, testJob("a")); err != nil {
		t.Fatal(err)
	}
	crash(t, s)
	s2 := open(t, dir, Config{})
	if got := len(load(t, s2)); got != 1 {
		t.Errorf("jobs = %d, want 1", got)
	}
	if _, err := os.Stat(filepath.Join(dir, JournalFile)); !os.IsNotExist(err) {
		t.Errorf("journal still there after a rewrite without Journal: %v", err)
	}
}

// TestJournalGroupCommit saves from many goroutines at once with the
// journal on and no rewrite for an hour, then crashes: every acknowledged
// save must replay, with each job's last value. That the saves share
// syncs is TestJournalSavesShareASync.
func TestJournalGroupCommit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
	const writers, each = 16, 40
	var wg sync.WaitGroup
	for g := range writers {
		wg.Go(func() {
			for i := range each {
				j := testJob(fmt.Sprintf("w%02d-%d", g, i%10))
				j.Name = fmt.Sprintf("g%d i%d", g, i)
				if err := s.Save(ctx, j); err != nil {
					t.Errorf("Save: %v", err)
				}
			}
		})
	}
	wg.Wait()
	s.jmu.Lock()
	syncs := s.jsyncs
	s.jmu.Unlock()
	if records := journalRecords(t, dir); records != writers*each {
		t.Errorf("journal holds %d records, want %d", records, writers*each)
	}
	t.Logf("%d saves, %d journal syncs", writers*each, syncs)
	crash(t, s)

	s2 := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
	got := map[string]string{}
	for _, j := range load(t, s2) {
		got[j.ID] = j.Name
	}
	want := map[string]string{}
	for g := range writers {
		for i := range 10 {
			want[fmt.Sprintf("w%02d-%d", g, i)] = fmt.Sprintf("g%d i%d", g, 30+i)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs after replay (-want +got):\n%s", diff)
	}
}

// TestJournalSavesShareASync: saves that arrive while a journal write is
// under way gather in one batch, and one write and one sync make them all
// durable. The write under way is held by the test, and synctest.Wait
// says when every save is waiting for it, so the outcome does not depend
// on how the goroutines are scheduled.
func TestJournalSavesShareASync(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s, err := New(dir, Config{Journal: true, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		s.jmu.Lock()
		s.jbusy = true // a write under way
		s.jmu.Unlock()
		const writers = 16
		var wg sync.WaitGroup
		for g := range writers {
			wg.Go(func() {
				if err := s.Save(ctx, testJob(fmt.Sprintf("w%02d", g))); err != nil {
					t.Errorf("Save: %v", err)
				}
			})
		}
		synctest.Wait() // every save waits for the write under way
		s.jmu.Lock()
		before := s.jsyncs
		s.mu.Lock()
		queued := strings.Count(string(s.jpend), "{\"seq\":")
		s.mu.Unlock()
		s.jbusy = false
		s.jcond.Broadcast()
		s.jmu.Unlock()
		if queued != writers {
			t.Errorf("records waiting for the write under way = %d, want %d", queued, writers)
		}
		wg.Wait()
		s.jmu.Lock()
		syncs := s.jsyncs - before
		s.jmu.Unlock()
		records := journalRecords(t, dir)
		if records != writers || syncs != 1 {
			t.Errorf("%d saves waiting together: %d records journaled with %d syncs, want %d with 1", writers, records, syncs, writers)
		}
		crash(t, s)
		s2, err := New(dir, Config{Journal: true, FlushInterval: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		defer s2.Close()
		if got := len(load(t, s2)); got != writers {
			t.Errorf("jobs after replay = %d, want %d", got, writers)
		}
	})
}

// TestJournalCloseDuringSaves closes the store while eight goroutines save
// with the journal on: every Save returns nil or ErrClosed, Close returns,
// and every save that returned nil is there after reopening.
func TestJournalCloseDuringSaves(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s, err := New(dir, Config{Journal: true, FlushInterval: 20 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	acked := map[string]string{}
	// Close comes once every goroutine has had a save acknowledged, while
	// they all go on saving.
	var started sync.WaitGroup
	started.Add(8)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			first := true
			defer func() {
				if first { // ended before its first acknowledged save
					started.Done()
				}
			}()
			for i := 0; ; i++ {
				j := testJob(fmt.Sprintf("c%d-%d", g, i%20))
				j.Name = fmt.Sprint(i)
				err := s.Save(ctx, j)
				if errors.Is(err, ErrClosed) {
					return
				}
				if err != nil {
					t.Errorf("Save: %v", err)
					return
				}
				mu.Lock()
				acked[j.ID] = j.Name
				mu.Unlock()
				if first {
					first = false
					started.Done()
				}
			}
		})
	}
	started.Wait()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	wg.Wait()
	s2 := open(t, dir, Config{Journal: true})
	got := map[string]string{}
	for _, j := range load(t, s2) {
		got[j.ID] = j.Name
	}
	for id, name := range acked {
		// A later save of the same id may have reached the store and
		// failed only at its journal write (ErrClosed): the stored name is
		// then that later one, never an earlier one.
		if g, ok := got[id]; !ok || atoi(t, g) < atoi(t, name) {
			t.Errorf("job %s: acknowledged name %s, after reopening %q (present %v)", id, name, g, ok)
		}
	}
	if len(acked) < 8 {
		t.Errorf("%d jobs acknowledged before Close, want at least 8", len(acked))
	}
}

func atoi(t *testing.T, s string) int {
	t.Helper()
	var n int
	if _, err := fmt.Sscan(s, &n); err != nil {
		t.Fatalf("name %q: %v", s, err)
	}
	return n
}

// TestCloseEmptiesJournalAfterRewrites saves from four goroutines while
// jobs.json is rewritten over and over (every flush passes the threshold),
// so that saves land between a rewrite's journal rotation and its snapshot
// of the jobs; then it stops saving and closes. Close must leave every
// change in jobs.json and the journal empty: a change counted durable by a
// rewrite that started after it went to the new journal would otherwise
// stay there, unmerged.
func TestCloseEmptiesJournalAfterRewrites(t *testing.T) {
	t.Parallel()
	for round := range 20 {
		dir := t.TempDir()
		ctx := context.Background()
		s, err := New(dir, Config{Journal: true, FlushInterval: time.Millisecond, CompactMin: 1})
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]string{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				for i := range 40 {
					j := testJob(fmt.Sprintf("r%d-%d", g, i%7))
					j.Name = fmt.Sprint(i)
					if err := s.Save(ctx, j); err != nil {
						t.Errorf("Save: %v", err)
						return
					}
					mu.Lock()
					want[j.ID] = j.Name
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(filepath.Join(dir, JournalFile)); err != nil {
			t.Fatal(err)
		} else if st.Size() != 0 {
			t.Fatalf("round %d: %s holds %d bytes after a clean stop, want none", round, JournalFile, st.Size())
		}
		got := map[string]string{}
		for _, j := range readFileJobs(t, dir) {
			got[j.ID] = j.Name
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("round %d: jobs.json after a clean stop (-want +got):\n%s", round, diff)
		}
	}
}
