package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
)

// ReservationHarness is a [scheduler.ReservationStore] under test.
type ReservationHarness struct {
	Store scheduler.ReservationStore
	// Synctest says that the store reads its time from package time in this
	// process (an in-memory store): the expiry case then runs in a
	// testing/synctest bubble, where its wait takes no real time. A store
	// on a server (whose clock runs) leaves it false, and the case waits.
	Synctest bool
}

// TestReservationStore runs the conformance suite of
// [scheduler.ReservationStore]. newHarness returns an empty store; each call
// must give a store that shares no node ids with the others.
func TestReservationStore(t *testing.T, newHarness func(t *testing.T) ReservationHarness) {
	t.Run("CapacityReleaseCount", func(t *testing.T) { testReserveBasics(t, newHarness(t).Store) })
	t.Run("Expiry", func(t *testing.T) {
		h := newHarness(t)
		if h.Synctest {
			synctest.Test(t, func(t *testing.T) { testReserveExpiry(t, h.Store) })
			return
		}
		testReserveExpiry(t, h.Store)
	})
	t.Run("Concurrent", func(t *testing.T) { testReserveConcurrent(t, newHarness(t).Store) })
	t.Run("BadInput", func(t *testing.T) { testReserveBadInput(t, newHarness(t).Store) })
}

func reservedCount(t *testing.T, s scheduler.ReservationStore, node string) int {
	t.Helper()
	n, err := s.Count(context.Background(), node)
	if err != nil {
		t.Fatalf("Count(%s): %v", node, err)
	}
	return n
}

func testReserveBasics(t *testing.T, s scheduler.ReservationStore) {
	ctx := context.Background()
	const ttl = time.Minute
	for i := range 3 {
		if err := s.Reserve(ctx, "n", fmt.Sprintf("j%d", i), 3, ttl); err != nil {
			t.Fatalf("Reserve j%d: %v", i, err)
		}
	}
	if err := s.Reserve(ctx, "n", "j3", 3, ttl); !errors.Is(err, scheduler.ErrNodeFull) {
		t.Errorf("Reserve on a full node: error = %v, want ErrNodeFull", err)
	}
	if err := s.Reserve(ctx, "n", "j1", 3, ttl); err != nil {
		t.Errorf("Reserve again by a holder of a full node: %v, want nil (idempotent)", err)
	}
	if got := reservedCount(t, s, "n"); got != 3 {
		t.Errorf("Count = %d, want 3", got)
	}
	if err := s.Reserve(ctx, "other", "j3", 1, ttl); err != nil {
		t.Errorf("Reserve on another node: %v", err)
	}
	held, err := s.Release(ctx, "n", "j1")
	if err != nil || !held {
		t.Errorf("Release(j1) = %v, %v; want true, nil", held, err)
	}
	held, err = s.Release(ctx, "n", "j1")
	if err != nil || held {
		t.Errorf("second Release(j1) = %v, %v; want false, nil", held, err)
	}
	if got := reservedCount(t, s, "n"); got != 2 {
		t.Errorf("Count after release = %d, want 2", got)
	}
	if err := s.Reserve(ctx, "n", "j3", 3, ttl); err != nil {
		t.Errorf("Reserve after a release: %v", err)
	}
	// Many slots, of several nodes, in one call; a slot not held is no error.
	for _, n := range []string{"m1", "m2"} {
		for _, j := range []string{"a", "b"} {
			if err := s.Reserve(ctx, n, j, 4, ttl); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := s.ReleaseSlots(ctx, []scheduler.Slot{{NodeID: "m1", JobID: "a"}, {NodeID: "m2", JobID: "a"}, {NodeID: "m2", JobID: "b"}, {NodeID: "m3", JobID: "x"}}); err != nil {
		t.Fatal(err)
	}
	if a, b := reservedCount(t, s, "m1"), reservedCount(t, s, "m2"); a != 1 || b != 0 {
		t.Errorf("after ReleaseSlots: m1 holds %d, m2 %d; want 1 and 0", a, b)
	}
	if err := s.ReleaseSlots(ctx, []scheduler.Slot{{NodeID: "m1", JobID: ""}}); err == nil {
		t.Error("ReleaseSlots with an empty job id: no error")
	}
	if got := reservedCount(t, s, "empty"); got != 0 {
		t.Errorf("Count of an unknown node = %d, want 0", got)
	}
	// A lower capacity than held refuses newcomers but keeps holders.
	if err := s.Reserve(ctx, "n", "j9", 1, ttl); !errors.Is(err, scheduler.ErrNodeFull) {
		t.Errorf("Reserve with capacity 1 on a node holding 3: %v, want ErrNodeFull", err)
	}
	if got := reservedCount(t, s, "n"); got != 3 {
		t.Errorf("Count = %d, want 3", got)
	}
}

func testReserveExpiry(t *testing.T, s scheduler.ReservationStore) {
	ctx := context.Background()
	const short = 500 * time.Millisecond
	if err := s.Reserve(ctx, "n", "long", 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve(ctx, "n", "short", 2, short); err != nil {
		t.Fatal(err)
	}
	if err := s.Reserve(ctx, "n", "third", 2, time.Minute); !errors.Is(err, scheduler.ErrNodeFull) {
		t.Fatalf("Reserve on a full node: %v, want ErrNodeFull", err)
	}
	// Renewing keeps a reservation alive past its first expiry.
	if err := s.Reserve(ctx, "n", "long", 2, time.Minute); err != nil {
		t.Fatal(err)
	}
	time.Sleep(short + 200*time.Millisecond)
	if got := reservedCount(t, s, "n"); got != 1 {
		t.Errorf("Count after the short reservation expired = %d, want 1", got)
	}
	if err := s.Reserve(ctx, "n", "third", 2, time.Minute); err != nil {
		t.Errorf("Reserve after an expiry freed a slot: %v", err)
	}
	if got := reservedCount(t, s, "n"); got != 2 {
		t.Errorf("Count = %d, want 2", got)
	}
	if held, err := s.Release(ctx, "n", "short"); err != nil || held {
		t.Errorf("Release of the reclaimed reservation = %v, %v; want false", held, err)
	}
}

// testReserveConcurrent: 1,000 concurrent Reserve calls for distinct jobs on
// a node of capacity 8 grant exactly 8, and the node never holds more.
func testReserveConcurrent(t *testing.T, s scheduler.ReservationStore) {
	ctx := context.Background()
	const calls, capacity = 1000, 8
	var granted, full atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	var maxSeen atomic.Int64
	var watcher sync.WaitGroup
	watcher.Add(1)
	go func() { // watch the count while the calls run
		defer watcher.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			n, err := s.Count(ctx, "busy")
			if err != nil {
				t.Errorf("Count: %v", err)
				return
			}
			if int64(n) > maxSeen.Load() {
				maxSeen.Store(int64(n))
			}
		}
	}()
	for i := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.Reserve(ctx, "busy", fmt.Sprintf("job-%d", i), capacity, time.Minute)
			switch {
			case err == nil:
				granted.Add(1)
			case errors.Is(err, scheduler.ErrNodeFull):
				full.Add(1)
			default:
				t.Errorf("Reserve: %v", err)
			}
		}()
	}
	wg.Wait()
	close(stop)
	watcher.Wait()
	if granted.Load() != capacity || full.Load() != calls-capacity {
		t.Errorf("%d concurrent Reserve on capacity %d: %d granted, %d full; want %d and %d",
			calls, capacity, granted.Load(), full.Load(), capacity, calls-capacity)
	}
	if got := reservedCount(t, s, "busy"); got != capacity {
		t.Errorf("Count = %d, want %d", got, capacity)
	}
	if maxSeen.Load() > capacity {
		t.Errorf("Count reached %d during the calls, capacity is %d", maxSeen.Load(), capacity)
	}
}

func testReserveBadInput(t *testing.T, s scheduler.ReservationStore) {
	ctx := context.Background()
	if err := s.Reserve(ctx, "n", "j", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, arg string
		call      func() error
	}{
		{"empty node", "node_id", func() error { return s.Reserve(ctx, "", "j2", 1, time.Minute) }},
		{"empty job", "job_id", func() error { return s.Reserve(ctx, "n", "", 1, time.Minute) }},
		{"capacity 0", "capacity", func() error { return s.Reserve(ctx, "n", "j2", 0, time.Minute) }},
		{"capacity -1", "capacity", func() error { return s.Reserve(ctx, "n", "j2", -1, time.Minute) }},
		{"ttl 0", "ttl", func() error { return s.Reserve(ctx, "n", "j2", 1, 0) }},
		{"release empty node", "node_id", func() error { _, err := s.Release(ctx, "", "j"); return err }},
		{"release empty job", "job_id", func() error { _, err := s.Release(ctx, "n", ""); return err }},
		{"count empty node", "node_id", func() error { _, err := s.Count(ctx, ""); return err }},
	}
	for _, tt := range tests {
		err := tt.call()
		var ae *scheduler.ArgumentError
		if !errors.As(err, &ae) || ae.Name != tt.arg {
			t.Errorf("%s: error = %v, want an ArgumentError naming %s", tt.name, err, tt.arg)
		}
	}
	if got := reservedCount(t, s, "n"); got != 1 {
		t.Errorf("Count after bad input = %d, want 1", got)
	}
}
