package cron

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"testing/synctest"
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
					j, _ = r.Get(ctx, victim)
					at := base.Add(time.Duration(rng.IntN(100_000)) * time.Millisecond)
					j.Schedule.RunAt = at
					if _, err := replaceJob(ctx, r, j); err != nil {
						t.Fatal(err)
					}
					want[victim] = at
				case 2:
					if _, err := r.Pause(ctx, victim, time.Time{}); err != nil {
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
	if _, err := r.RunNow(ctx, "old", RunOptions{Force: true}); err != nil {
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
		t.Errorf("new job got the old run's bookkeeping: %+v", j.Bookkeeping())
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
	if got := unsafe.Sizeof(entry{}); got > 112 {
		t.Errorf("entry is %d bytes, want at most 112", got)
	}
	if got := unsafe.Sizeof(item{}); got != 16 {
		t.Errorf("heap item is %d bytes, want 16", got)
	}
}

// TestTimeQueueModel drives the time queue (heap and timing wheel) with
// random pushes, reschedules, removals and fires over times that span
// milliseconds to years (so items land in the heap, both wheel levels and
// far), with a clock that mostly moves forward, sometimes jumps ahead by
// months and sometimes goes back. After every step, peek must agree with a
// plain map of the live items: the earliest live item when it is due, and
// otherwise either that item or a wake-up time after now and no later than
// it.
func TestTimeQueueModel(t *testing.T) {
	spans := []time.Duration{
		time.Millisecond, time.Second, 20 * time.Second, 10 * time.Minute, 2 * time.Hour,
		30 * time.Hour, 90 * 24 * time.Hour, 400 * 24 * time.Hour, 5 * 365 * 24 * time.Hour,
	}
	for _, seed := range []uint64{1, 2, 3, 4} {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			var tab table
			h := &timeHeap{tab: &tab}
			live := map[int32]int64{} // slot -> at of its live item
			now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano()
			if seed == 4 {
				now = time.Date(1950, 6, 1, 0, 0, 0, 0, time.UTC).UnixNano() // before 1970: negative ticks
			}
			h.cur = now >> tickShift
			if seed == 3 {
				h.cur = 0 // a queue that starts far behind the clock
			}
			schedule := func(idx int32, at int64) {
				e := tab.at(idx)
				if e.queuedAt != 0 {
					e.queuedAt = 0
					h.markStale()
				}
				e.queuedAt = at
				h.push(item{at: at, idx: idx, gen: e.gen})
				live[idx] = at
			}
			randAt := func() int64 {
				d := spans[rng.IntN(len(spans))]
				at := now + rng.Int64N(int64(d)) - int64(d)/20 // a few are already due
				if at == 0 {
					at = 1
				}
				return at
			}
			earliest := func() (int64, bool) {
				m, ok := int64(math.MaxInt64), false
				for _, at := range live {
					if at < m {
						m, ok = at, true
					}
				}
				return m, ok
			}
			for step := range 20000 {
				if step%25 == 0 {
					if err := checkQueue(h); err != nil {
						t.Fatalf("before step %d: %v", step, err)
					}
				}
				switch op := rng.IntN(100); {
				case op < 35 || len(live) < 20: // a new job
					idx, _ := tab.alloc()
					schedule(idx, randAt())
				case op < 50: // reschedule a job
					for idx := range live {
						schedule(idx, randAt())
						break
					}
				case op < 60: // remove a job
					for idx := range live {
						e := tab.at(idx)
						e.queuedAt = 0
						h.markStale()
						tab.release(idx)
						delete(live, idx)
						break
					}
				case op < 62: // the clock jumps ahead
					now += rng.Int64N(int64(200 * 24 * time.Hour))
				case op < 64: // the clock goes back
					now -= rng.Int64N(int64(10 * time.Minute))
				default: // time passes, and everything due fires
					now += rng.Int64N(int64(3 * time.Second))
					for {
						it, ok := h.peek(now)
						want, any := earliest()
						if ok != any {
							t.Fatalf("step %d: peek ok = %v with %d live items", step, ok, len(live))
						}
						if !ok {
							break
						}
						if it.idx < 0 {
							if it.at <= now || it.at > want {
								t.Fatalf("step %d: wake-up at %d, want after now %d and no later than the earliest item %d", step, it.at, now, want)
							}
							break
						}
						if it.at != want {
							t.Fatalf("step %d: peek = %d, want the earliest live item %d", step, it.at, want)
						}
						if it.at > now {
							break
						}
						// Fire it as fireDue does: hold the root, maybe
						// schedule the next run, release.
						e := tab.at(it.idx)
						e.queuedAt = 0
						delete(live, it.idx)
						h.hold()
						if rng.IntN(2) == 0 {
							schedule(it.idx, randAt())
						}
						h.release()
					}
				}
			}
			// Count what the queue holds against the model: every live
			// item exactly once.
			n := 0
			count := func(its []item) {
				for _, it := range its {
					if h.live(it) {
						n++
					}
				}
			}
			count(h.items[heapBase:])
			for _, w := range []*wheel{h.w0, h.w1} {
				if w != nil {
					for _, its := range w.slots {
						count(its)
					}
				}
			}
			count(h.far)
			if n != len(live) {
				t.Errorf("queue holds %d live items, the model %d", n, len(live))
			}
			if h.total() < n || h.n0 < 0 || h.n1 < 0 {
				t.Errorf("counts: total %d, n0 %d, n1 %d, live %d", h.total(), h.n0, h.n1, n)
			}
		})
	}
}

// checkQueue verifies the time queue's invariants: counts and bitmaps match
// the slots, and every item is where its tick says.
func checkQueue(h *timeHeap) error {
	p := h.cur >> wheelBits
	for i, it := range h.items[min(heapBase, len(h.items)):] {
		if it.at>>tickShift >= h.cur && !h.holdTop {
			return fmt.Errorf("heap item %d at tick %d, not before cur %d", i, it.at>>tickShift, h.cur)
		}
	}
	levels := []struct {
		w    *wheel
		n    int
		ok   func(t int64, s int) bool
		name string
	}{
		{h.w0, h.n0, func(t int64, s int) bool { return t >= h.cur && t>>wheelBits < p+2 && int(t&h.w0.mask) == s }, "level 0"},
		{h.w1, h.n1, func(t int64, s int) bool {
			q := t >> wheelBits
			return q >= p+2 && q < p+2+wheelSize && int(q&h.w1.mask) == s
		}, "level 1"},
	}
	for _, l := range levels {
		n := 0
		if l.w != nil {
			for s, its := range l.w.slots {
				if (len(its) > 0) != l.w.isUsed(s) {
					return fmt.Errorf("%s slot %d: %d items, used bit %v", l.name, s, len(its), l.w.isUsed(s))
				}
				for _, it := range its {
					if !l.ok(it.at>>tickShift, s) {
						return fmt.Errorf("%s slot %d holds tick %d (cur %d)", l.name, s, it.at>>tickShift, h.cur)
					}
				}
				n += len(its)
			}
		}
		if n != l.n {
			return fmt.Errorf("%s holds %d items, counted %d", l.name, n, l.n)
		}
	}
	for _, it := range h.far {
		if q := it.at >> tickShift >> wheelBits; q < h.farMin || q < p+2 {
			return fmt.Errorf("far item of period %d, farMin %d, period %d", q, h.farMin, p)
		}
	}
	return nil
}

// TestWheelSpansFireOnTime runs the real timer loop under a fake clock over
// two days, with jobs whose next runs lie in the heap, in both levels of
// the timing wheel and in far: every run must start exactly at its slot,
// and a job rescheduled or removed while parked must follow the change.
func TestWheelSpansFireOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ex := &fakeExec{}
		r := newTestRunner(t, NewMemStore(), ex, Config{})
		ctx := context.Background()
		t0 := time.Now()
		mustAdd(t, r, httpJob("m7", ScheduleSpec{Kind: KindEvery, Every: Duration(7 * time.Minute), StartAt: t0.Add(time.Second)}))
		mustAdd(t, r, httpJob("p90", ScheduleSpec{Kind: KindEvery, Every: Duration(90 * time.Minute), StartAt: t0.Add(5 * time.Minute)}))
		mustAdd(t, r, httpJob("h26", ScheduleSpec{Kind: KindEvery, Every: Duration(26 * time.Hour), StartAt: t0.Add(3 * time.Hour)}))
		mustAdd(t, r, httpJob("once", ScheduleSpec{Kind: KindOnce, RunAt: t0.Add(40*time.Hour + 123*time.Millisecond)}))
		mustAdd(t, r, httpJob("far", ScheduleSpec{Kind: KindOnce, RunAt: t0.Add(300 * 24 * time.Hour)}))
		mustAdd(t, r, httpJob("cron", ScheduleSpec{Kind: KindCron, Cron: "15 30 3 * * *", TZ: "UTC"}))
		stop := start(t, r)

		time.Sleep(30 * time.Hour)
		synctest.Wait()
		j := mustGet(t, r, "once")
		moved := t0.Add(45*time.Hour + 7*time.Millisecond)
		j.Schedule.RunAt = moved
		if _, err := replaceJob(ctx, r, j); err != nil {
			t.Fatal(err)
		}
		time.Sleep(19 * time.Hour)
		synctest.Wait()
		if err := r.Remove(ctx, "p90"); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Hour)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		end := t0.Add(50 * time.Hour)

		grid := func(start time.Time, every time.Duration, until time.Time) []time.Time {
			var out []time.Time
			for at := start; !at.After(until); at = at.Add(every) {
				out = append(out, at)
			}
			return out
		}
		var cronWant []time.Time
		for d := t0.Truncate(24 * time.Hour); d.Before(end); d = d.Add(24 * time.Hour) {
			if at := d.Add(3*time.Hour + 30*time.Minute + 15*time.Second); at.After(t0) && !at.After(end) {
				cronWant = append(cronWant, at)
			}
		}
		want := map[string][]time.Time{
			"m7":   grid(t0.Add(time.Second), 7*time.Minute, end),
			"p90":  grid(t0.Add(5*time.Minute), 90*time.Minute, t0.Add(49*time.Hour)),
			"h26":  grid(t0.Add(3*time.Hour), 26*time.Hour, end),
			"once": {moved},
			"cron": cronWant,
		}
		got := map[string][]time.Time{}
		for _, run := range ex.runs() {
			if !run.TriggeredAt.Equal(run.ScheduledAt) {
				t.Errorf("%s: run scheduled at %v started at %v", run.JobID, run.ScheduledAt, run.TriggeredAt)
			}
			got[run.JobID] = append(got[run.JobID], run.ScheduledAt)
		}
		if diff := cmp.Diff(want, got, cmp.Comparer(func(a, b time.Time) bool { return a.Equal(b) })); diff != "" {
			t.Errorf("runs (-want +got):\n%s", diff)
		}
		if far := mustGet(t, r, "far"); !far.NextRunAt.Equal(t0.Add(300 * 24 * time.Hour)) {
			t.Errorf("far: next_run_at %v, want %v", far.NextRunAt, t0.Add(300*24*time.Hour))
		}
	})
}
