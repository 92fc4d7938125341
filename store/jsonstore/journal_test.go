package jsonstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestJournalConformance(t *testing.T) {
	storetest.TestCronStore(t, func(t *testing.T) cron.Store {
		return open(t, t.TempDir(), Config{Journal: true, FlushInterval: 5 * time.Millisecond})
	})
}

// TestJournalDurableWithoutRewrite: in journal mode a Save returns without
// waiting for a rewrite, and a store opened after a crash (the first one
// never rewrote) has every acknowledged change.
func TestJournalDurableWithoutRewrite(t *testing.T) {
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
	// The replay was written into jobs.json and the journal emptied.
	if diff := cmp.Diff(want, readFileJobs(t, dir)); diff != "" {
		t.Errorf("jobs.json after replay (-want +got):\n%s", diff)
	}
	if st, err := os.Stat(filepath.Join(dir, JournalFile)); err != nil {
		t.Errorf("journal after replay: %v", err)
	} else if st.Size() != 0 {
		t.Errorf("journal after replay has %d bytes, want none", st.Size())
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
	s3.Close()
}

// TestJournalCompaction: a rewrite empties the journal of what it holds.
func TestJournalCompaction(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		dir := t.TempDir()
		s, err := New(dir, Config{Journal: true, FlushInterval: time.Second})
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
