package cron

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// TestHeapOrder adds, reschedules, pauses and removes many once jobs at
// random, then fires everything and checks that the runs come out in time
// order, each surviving job exactly once and no other. It covers stale
// items, compaction and slot reuse.
func TestHeapOrder(t *testing.T) {
	for _, seed := range []uint64{1, 2, 3} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			r := newTestRunner(t, nullStore{}, &fakeExec{}, Config{})
			ctx := context.Background()
			base := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
			want := map[string]time.Time{}
			var ids []string
			for i := range 3000 {
				id := fmt.Sprintf("j%04d", i)
				at := base.Add(time.Duration(rng.IntN(100_000)) * time.Millisecond)
				j := mustAdd(t, r, httpJob(id, ScheduleSpec{Kind: KindOnce, RunAt: at}))
				want[id] = at
				ids = append(ids, id)
				if i%3 != 0 || len(ids) < 10 {
					continue
				}
				victim := ids[rng.IntN(len(ids))]
				if _, ok := want[victim]; !ok {
					continue
				}
				switch rng.IntN(3) {
				case 0:
					if err := r.Remove(ctx, victim); err != nil {
						t.Fatal(err)
					}
					delete(want, victim)
				case 1:
					j, _ = r.Get(victim)
					at := base.Add(time.Duration(rng.IntN(100_000)) * time.Millisecond)
					j.Schedule.RunAt = at
					if _, err := r.Update(ctx, j); err != nil {
						t.Fatal(err)
					}
					want[victim] = at
				case 2:
					if _, err := r.Pause(ctx, victim); err != nil {
						t.Fatal(err)
					}
					delete(want, victim)
				}
			}
			var events []Run
			var got []string
			var last time.Time
			r.mu.Lock()
			for now := base; now.Before(base.Add(101 * time.Second)); now = now.Add(250 * time.Millisecond) {
				for {
					_, more := r.fireDue(toNano(now), &events)
					if !more {
						break
					}
				}
				for {
					tk, ok := r.dequeue()
					if !ok {
						break
					}
					at := fromNano(tk.scheduled)
					if at.Before(last) {
						t.Errorf("run of %s at %v came after one at %v", tk.e.id, at, last)
					}
					last = at
					if !at.Equal(want[tk.e.id]) {
						t.Errorf("run of %s at %v, want %v", tk.e.id, at, want[tk.e.id])
					}
					got = append(got, tk.e.id)
					tk.e.inflight--
				}
			}
			r.mu.Unlock()
			wantIDs := make([]string, 0, len(want))
			for id := range want {
				wantIDs = append(wantIDs, id)
			}
			slices.Sort(wantIDs)
			slices.Sort(got)
			if diff := cmp.Diff(wantIDs, got); diff != "" {
				t.Errorf("jobs fired (-want +got):\n%s", diff)
			}
			if len(events) != 0 {
				t.Errorf("events: %+v, want none (no misfires)", events)
			}
		})
	}
}

// TestRemovedSlotReused removes a job while its run is in flight and adds
// another that takes its slot: the old run's end must not touch the new job.
func TestRemovedSlotReused(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
		if j.ID == "old" {
			started <- struct{}{}
			<-release
		}
		return Result{Status: StatusFailed, Attempts: 1, Error: "old run"}
	}}
	r := newTestRunner(t, NewMemStore(), ex, Config{})
	ctx := context.Background()
	mustAdd(t, r, httpJob("old", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour)}))
	stop := start(t, r)
	if _, err := r.RunNow(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	<-started
	if err := r.Remove(ctx, "old"); err != nil {
		t.Fatal(err)
	}
	mustAdd(t, r, httpJob("new", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour)}))
	close(release)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	j := mustGet(t, r, "new")
	if j.LastStatus != "" || j.LastError != "" || !j.LastRunAt.IsZero() {
		t.Errorf("new job got the old run's bookkeeping: %+v", BookkeepingOf(&j))
	}
	r.mu.Lock()
	_, e, _ := r.lookup("new")
	inflight := e.inflight
	r.mu.Unlock()
	if inflight != 0 {
		t.Errorf("new job inflight = %d, want 0", inflight)
	}
}

// TestEntrySize guards the runner's memory per job: entries live by value in
// slabs, so each byte here is a byte per job.
func TestEntrySize(t *testing.T) {
	if got := unsafe.Sizeof(entry{}); got > 160 {
		t.Errorf("entry is %d bytes, want at most 160", got)
	}
	if got := unsafe.Sizeof(item{}); got != 16 {
		t.Errorf("heap item is %d bytes, want 16", got)
	}
}
