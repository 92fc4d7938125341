package jsonstore

import (
	"context"
	"reflect"
	"testing"

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
