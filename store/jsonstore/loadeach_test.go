package jsonstore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestLoadEachMatchesLoad checks that LoadEach hands out the jobs Load
// returns, in the same order, without the deleted ones, and copies of
// their maps (a change by the caller does not reach the store).
func TestLoadEachMatchesLoad(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Config{Journal: true})
	ctx := context.Background()
	for i := range 5 {
		if err := s.Save(ctx, testJob(jobID(i))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Delete(ctx, jobID(2)); err != nil {
		t.Fatal(err)
	}
	var got []cron.Job
	if err := s.LoadEach(ctx, func(j *cron.Job) {
		c := *j
		c.HTTP.Headers = map[string]string{}
		for k, v := range j.HTTP.Headers {
			c.HTTP.Headers[k] = v
		}
		got = append(got, c)
		j.HTTP.Headers["X-Token"] = "changed"
	}); err != nil {
		t.Fatal(err)
	}
	want := load(t, s)
	if len(got) != 4 || !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadEach gave %d jobs %v,\nLoad %d jobs %v", len(got), got, len(want), want)
	}
	if j, _ := s.Get(jobID(0)); j.HTTP.Headers["X-Token"] != "abc" {
		t.Fatalf("a change to a job LoadEach gave reached the store: %v", j.HTTP.Headers)
	}
	// A runner over the store loads every job through it.
	r, err := cron.New(s, cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result {
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1}
	}), cron.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Len() != 4 {
		t.Fatalf("the runner loaded %d jobs, want 4", r.Len())
	}
	s.Close()
	if err := s.LoadEach(ctx, func(*cron.Job) {}); err != ErrClosed {
		t.Fatalf("LoadEach after Close: %v, want ErrClosed", err)
	}
}

// TestLoadEachLetsWritesIn: LoadEach lets the lock go between chunks of
// jobs, so that writes go through while it runs. Here, as it passes the
// first job, two goroutines delete the sixth job and the last (each chunk
// ends with a pause, so that writers waiting for the lock get it at the
// next release): LoadEach must pass the sixth (its turn came first) and
// not the last. Without the journal each Delete starts a rewrite of
// jobs.json, which drops deleted jobs from memory but must not while
// LoadEach runs, or the jobs still to pass would shift: every other job
// comes once, in creation order.
func TestLoadEachLetsWritesIn(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	const n = 8 * loadChunk
	s := open(t, seedDir(t, n), Config{FlushInterval: time.Millisecond})
	early, gone := jobID(5), jobID(n-1)
	deleted := make(chan error, 2)
	var got []string
	if err := s.LoadEach(ctx, func(j *cron.Job) {
		switch i := len(got); {
		case i == 0:
			go func() { deleted <- s.Delete(ctx, early) }()
			go func() { deleted <- s.Delete(ctx, gone) }()
		case i%loadChunk == loadChunk-10:
			time.Sleep(2 * time.Millisecond)
		}
		got = append(got, j.ID)
	}); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-deleted; err != nil {
			t.Fatal(err)
		}
	}
	var want []string
	for i := range n - 1 {
		want = append(want, jobID(i))
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("LoadEach passed %d jobs, want %d (every job once, in order, the last deleted while it ran); first difference at %d",
			len(got), len(want), firstDiff(got, want))
	}
	// Once LoadEach is done, a rewrite drops them.
	if err := s.Save(ctx, testJob(jobID(0))); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	left, tombs := len(s.order), s.tombs
	s.mu.Unlock()
	if left != n-2 || tombs != 0 {
		t.Errorf("after LoadEach and a rewrite: %d entries, %d deleted; want %d, 0", left, tombs, n-2)
	}
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
