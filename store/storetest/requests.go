package storetest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
)

// TestRequestStore runs the conformance suite of [scheduler.RequestStore].
// newStore returns an empty store whose wait timeout is at least 10s; each
// call must give a store that shares no request ids with the others.
func TestRequestStore(t *testing.T, newStore func(t *testing.T) scheduler.RequestStore) {
	t.Run("BindOnce", func(t *testing.T) { testBindOnce(t, newStore(t)) })
	t.Run("Concurrent", func(t *testing.T) { testBindConcurrent(t, newStore(t)) })
	t.Run("CreateFails", func(t *testing.T) { testBindCreateFails(t, newStore(t)) })
	t.Run("WaitEndsWithContext", func(t *testing.T) { testBindWaitContext(t, newStore(t)) })
	t.Run("BadInput", func(t *testing.T) { testBindBadInput(t, newStore(t)) })
}

func bindingFunc(b scheduler.RequestBinding, calls *atomic.Int64) func(context.Context) (scheduler.RequestBinding, error) {
	return func(context.Context) (scheduler.RequestBinding, error) {
		calls.Add(1)
		return b, nil
	}
}

func testBindOnce(t *testing.T, s scheduler.RequestStore) {
	ctx := context.Background()
	var calls atomic.Int64
	want := scheduler.RequestBinding{JobID: "job-1", NodeID: "node-a", Data: json.RawMessage(`{"lang":"zh"}`)}
	got, created, err := s.Bind(ctx, "req-1", bindingFunc(want, &calls))
	if err != nil || !created {
		t.Fatalf("first Bind = %v, %v; want created", created, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("first Bind binding (-want +got):\n%s", diff)
	}
	other := scheduler.RequestBinding{JobID: "job-2"}
	got, created, err = s.Bind(ctx, "req-1", bindingFunc(other, &calls))
	if err != nil || created {
		t.Fatalf("duplicate Bind = %v, %v; want not created", created, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("duplicate Bind binding (-original +got):\n%s", diff)
	}
	if calls.Load() != 1 {
		t.Errorf("create called %d times, want 1", calls.Load())
	}
	got, created, err = s.Bind(ctx, "req-2", bindingFunc(other, &calls))
	if err != nil || !created || got.JobID != "job-2" {
		t.Errorf("Bind(req-2) = %+v, %v, %v; want job-2 created", got, created, err)
	}
}

// testBindConcurrent: 1,000 concurrent Bind calls with one request id call
// create once, and all return the same binding.
func testBindConcurrent(t *testing.T, s scheduler.RequestStore) {
	ctx := context.Background()
	const n = 1000
	var calls atomic.Int64
	release := make(chan struct{})
	create := func(context.Context) (scheduler.RequestBinding, error) {
		k := calls.Add(1)
		<-release // hold the lock until every caller is in
		return scheduler.RequestBinding{JobID: fmt.Sprintf("job-%d", k)}, nil
	}
	var wg, started sync.WaitGroup
	results := make([]scheduler.RequestBinding, n)
	createdBy := make([]bool, n)
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		started.Add(1)
		go func() {
			defer wg.Done()
			started.Done()
			results[i], createdBy[i], errs[i] = s.Bind(ctx, "req-hot", create)
		}()
	}
	started.Wait()
	close(release)
	wg.Wait()
	creators := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("Bind %d: %v", i, errs[i])
		}
		if createdBy[i] {
			creators++
		}
		if diff := cmp.Diff(results[0], results[i]); diff != "" {
			t.Fatalf("Bind %d returned another binding (-first +got):\n%s", i, diff)
		}
	}
	if calls.Load() != 1 || creators != 1 {
		t.Errorf("create called %d times, %d callers report created; want 1 and 1", calls.Load(), creators)
	}
	if results[0].JobID != "job-1" {
		t.Errorf("binding = %+v, want job-1", results[0])
	}
}

func testBindCreateFails(t *testing.T, s scheduler.RequestStore) {
	ctx := context.Background()
	boom := errors.New("boom")
	_, _, err := s.Bind(ctx, "req-f", func(context.Context) (scheduler.RequestBinding, error) {
		return scheduler.RequestBinding{}, boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Bind with a failing create: error = %v, want boom", err)
	}
	_, _, err = s.Bind(ctx, "req-f", func(context.Context) (scheduler.RequestBinding, error) {
		return scheduler.RequestBinding{NodeID: "n"}, nil // no job id
	})
	if !errors.Is(err, scheduler.ErrInvalidArgument) {
		t.Fatalf("Bind with a binding without job id: error = %v, want ErrInvalidArgument", err)
	}
	var calls atomic.Int64
	got, created, err := s.Bind(ctx, "req-f", bindingFunc(scheduler.RequestBinding{JobID: "job-ok"}, &calls))
	if err != nil || !created || got.JobID != "job-ok" {
		t.Errorf("Bind after failures = %+v, %v, %v; want job-ok created at once", got, created, err)
	}
}

// testBindWaitContext: a duplicate waiting for a slow create gives up when
// its context ends, with ErrBindWait, and does not call create.
func testBindWaitContext(t *testing.T, s scheduler.RequestStore) {
	ctx := context.Background()
	release := make(chan struct{})
	entered := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, _, err := s.Bind(ctx, "req-slow", func(context.Context) (scheduler.RequestBinding, error) {
			close(entered)
			<-release
			return scheduler.RequestBinding{JobID: "job-slow"}, nil
		})
		done <- err
	}()
	<-entered
	wctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	var calls atomic.Int64
	_, _, err := s.Bind(wctx, "req-slow", bindingFunc(scheduler.RequestBinding{JobID: "job-dup"}, &calls))
	if !errors.Is(err, scheduler.ErrBindWait) || calls.Load() != 0 {
		t.Errorf("duplicate with an ended context: error = %v, create calls %d; want ErrBindWait and 0", err, calls.Load())
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got, created, err := s.Bind(ctx, "req-slow", bindingFunc(scheduler.RequestBinding{JobID: "job-dup"}, &calls))
	if err != nil || created || got.JobID != "job-slow" {
		t.Errorf("Bind after the slow create = %+v, %v, %v; want job-slow", got, created, err)
	}
}

func testBindBadInput(t *testing.T, s scheduler.RequestStore) {
	ctx := context.Background()
	var calls atomic.Int64
	ok := bindingFunc(scheduler.RequestBinding{JobID: "j"}, &calls)
	var ae *scheduler.ArgumentError
	if _, _, err := s.Bind(ctx, "", ok); !errors.As(err, &ae) || ae.Name != "request_id" {
		t.Errorf("Bind with an empty request id: error = %v, want an ArgumentError naming request_id", err)
	}
	if _, _, err := s.Bind(ctx, "r", nil); !errors.As(err, &ae) || ae.Name != "create" {
		t.Errorf("Bind with a nil create: error = %v, want an ArgumentError naming create", err)
	}
	if calls.Load() != 0 {
		t.Errorf("create called %d times on bad input", calls.Load())
	}
	bad := scheduler.RequestBinding{JobID: "j", Data: json.RawMessage(`{not json`)}
	if _, _, err := s.Bind(ctx, "r", bindingFunc(bad, &calls)); err == nil {
		t.Errorf("Bind of a binding with invalid data: no error")
	}
	got, created, err := s.Bind(ctx, "r", ok)
	if err != nil || !created || got.JobID != "j" {
		t.Errorf("Bind after bad input = %+v, %v, %v; want j created", got, created, err)
	}
}
