package cron

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// fakeExec records the runs it is given and answers with fn (default:
// success at once).
type fakeExec struct {
	mu    sync.Mutex
	calls []RunInfo
	fn    func(ctx context.Context, j *Job, info RunInfo) Result
}

func (f *fakeExec) Execute(ctx context.Context, j *Job, info RunInfo) Result {
	f.mu.Lock()
	f.calls = append(f.calls, info)
	fn := f.fn
	f.mu.Unlock()
	if fn != nil {
		return fn(ctx, j, info)
	}
	return Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}
}

func (f *fakeExec) runs() []RunInfo {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.calls)
}

// scheduledOf returns the ScheduledAt of each run of job id.
func (f *fakeExec) scheduledOf(id string) []time.Time {
	var out []time.Time
	for _, c := range f.runs() {
		if c.JobID == id {
			out = append(out, c.ScheduledAt)
		}
	}
	return out
}

// recObserver records what the observer hook sees.
type recObserver struct {
	mu   sync.Mutex
	runs []Run
}

func (o *recObserver) RunFinished(r Run) {
	o.mu.Lock()
	o.runs = append(o.runs, r)
	o.mu.Unlock()
}

func (o *recObserver) statuses(id string) []Status {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []Status
	for _, r := range o.runs {
		if r.JobID == id {
			out = append(out, r.Status)
		}
	}
	return out
}

// countingStore wraps MemStore and counts Flush calls, checking that they
// come after the last Record.
type countingStore struct {
	*MemStore
	mu              sync.Mutex
	records, flushs int
	recordAfterLast bool
}

func (s *countingStore) Record(ctx context.Context, id string, b Bookkeeping) error {
	s.mu.Lock()
	s.records++
	if s.flushs > 0 {
		s.recordAfterLast = true
	}
	s.mu.Unlock()
	return s.MemStore.Record(ctx, id, b)
}

func (s *countingStore) Flush(ctx context.Context) error {
	s.mu.Lock()
	s.flushs++
	s.mu.Unlock()
	return s.MemStore.Flush(ctx)
}

func httpJob(id string, s ScheduleSpec) Job {
	return Job{ID: id, Name: "job " + id, HTTP: HTTPConfig{URL: "http://callback.test/hook"}, Schedule: s}
}

func newTestRunner(t *testing.T, st Store, ex Executor, cfg Config) *Runner {
	t.Helper()
	r, err := New(st, ex, cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return r
}

// start runs r until the returned stop is called; stop returns Run's error.
func start(t *testing.T, r *Runner) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-errc
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func mustAdd(t *testing.T, r *Runner, j Job) Job {
	t.Helper()
	got, err := r.Add(context.Background(), j)
	if err != nil {
		t.Fatalf("Add(%q): %v", j.ID, err)
	}
	return got
}

func mustGet(t *testing.T, r *Runner, id string) Job {
	t.Helper()
	j, err := r.Get(context.Background(), id)
	if err != nil {
		t.Fatalf("Get(%q): %v", id, err)
	}
	return j
}

// mustList returns every job r lists.
func mustList(t *testing.T, r *Runner) []Job {
	t.Helper()
	jobs, _, err := r.List(context.Background(), JobQuery{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	return jobs
}

// replaceJob replaces the configuration of job j.ID with j's through
// Update.
func replaceJob(ctx context.Context, r *Runner, j Job) (Job, error) {
	return r.Update(ctx, j.ID, func(cur *Job) error {
		*cur = j
		return nil
	})
}

func TestUpdateChange(t *testing.T) {
	ctx := context.Background()
	errNo := errors.New("no, thanks")
	tests := []struct {
		name    string
		change  func(*Job) error
		wantErr string // "" for success
		want    func(j *Job)
	}{
		{name: "renames", change: func(j *Job) error { j.Name = "new"; return nil }, want: func(j *Job) { j.Name = "new" }},
		{name: "defaults filled", change: func(j *Job) error { j.Timeout, j.HTTP.Method = 0, "post"; return nil },
			want: func(j *Job) { j.Timeout, j.HTTP.Method = Duration(DefaultTimeout), "POST" }},
		{name: "system fields ignored", change: func(j *Job) error { j.LastStatus, j.LastError = StatusFailed, "x"; return nil }, want: func(*Job) {}},
		{name: "error from change", change: func(j *Job) error { j.Name = "lost"; return errNo }, wantErr: "no, thanks"},
		{name: "invalid", change: func(j *Job) error { j.HTTP.URL = "ftp://x"; return nil }, wantErr: "cron: invalid job: http.url: scheme must be http or https, got \"ftp\""},
		{name: "id changed", change: func(j *Job) error { j.ID = "other"; return nil }, wantErr: "cron: invalid job: id: cannot be changed (the job is \"a\", got \"other\")"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := NewMemStore()
			r := newTestRunner(t, st, &fakeExec{}, Config{})
			before := mustAdd(t, r, httpJob("a", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour), StartAt: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}))
			got, err := r.Update(ctx, "a", tt.change)
			want := before
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("Update error = %v, want %q", err, tt.wantErr)
				}
			} else {
				if err != nil {
					t.Fatalf("Update: %v", err)
				}
				tt.want(&want)
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("Update returned (-want +got):\n%s", diff)
				}
			}
			// The runner and the store hold the same job: the change, or
			// nothing at all after an error.
			if diff := cmp.Diff(want, mustGet(t, r, "a")); diff != "" {
				t.Errorf("runner holds (-want +got):\n%s", diff)
			}
			stored, _ := st.Load(ctx)
			if diff := cmp.Diff([]Job{want}, stored); diff != "" {
				t.Errorf("store holds (-want +got):\n%s", diff)
			}
		})
	}
	r := newTestRunner(t, NewMemStore(), &fakeExec{}, Config{})
	if _, err := r.Update(ctx, "nope", func(*Job) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("Update(unknown) error = %v, want ErrNotFound", err)
	}
}

// TestUpdateReadModifyWrite runs concurrent read-modify-write changes of
// one job through Update: none may be lost.
func TestUpdateReadModifyWrite(t *testing.T) {
	ctx := context.Background()
	st := NewMemStore()
	r := newTestRunner(t, st, &fakeExec{}, Config{})
	mustAdd(t, r, httpJob("a", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour)}))
	const n = 40
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			if _, err := r.Update(ctx, "a", func(j *Job) error { j.MaxRetries++; return nil }); err != nil {
				t.Errorf("Update: %v", err)
			}
		})
	}
	wg.Wait()
	stored, _ := st.Load(ctx)
	if got, want := [2]int{mustGet(t, r, "a").MaxRetries, stored[0].MaxRetries}, [2]int{n, n}; got != want {
		t.Errorf("max_retries (runner, store) = %v, want %v", got, want)
	}
}

func TestOnceFiresOnTime(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ex := &fakeExec{}
		obs := &recObserver{}
		st := NewMemStore()
		r := newTestRunner(t, st, ex, Config{Observer: obs})
		at := time.Now().Add(10 * time.Second)
		mustAdd(t, r, httpJob("a", ScheduleSpec{Kind: KindOnce, RunAt: at}))
		stop := start(t, r)

		time.Sleep(10*time.Second - time.Millisecond)
		synctest.Wait()
		if got := ex.runs(); len(got) != 0 {
			t.Fatalf("runs before run_at: got %d, want 0", len(got))
		}
		time.Sleep(time.Second)
		synctest.Wait()
		runs := ex.runs()
		if len(runs) != 1 {
			t.Fatalf("runs after run_at: got %d, want 1", len(runs))
		}
		if !runs[0].ScheduledAt.Equal(at) || !runs[0].TriggeredAt.Equal(at) {
			t.Errorf("run scheduled %v triggered %v, want both %v", runs[0].ScheduledAt, runs[0].TriggeredAt, at)
		}
		if len(runs[0].RunID) != 32 {
			t.Errorf("run id %q: want 32 hex characters", runs[0].RunID)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		want := Bookkeeping{LastRunAt: at, LastStatus: StatusSuccess}
		if diff := cmp.Diff(want, ptr(mustGet(t, r, "a")).Bookkeeping()); diff != "" {
			t.Errorf("runner bookkeeping (-want +got):\n%s", diff)
		}
		stored, _ := st.Load(context.Background())
		if diff := cmp.Diff(want, stored[0].Bookkeeping()); diff != "" {
			t.Errorf("stored bookkeeping (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]Status{StatusSuccess}, obs.statuses("a")); diff != "" {
			t.Errorf("observed (-want +got):\n%s", diff)
		}
		hist, err := r.Runs(context.Background(), "a", 10)
		if err != nil || len(hist) != 1 || hist[0].ID != runs[0].RunID || hist[0].Lag() != 0 {
			t.Errorf("Runs = %+v, %v; want the one run %s with lag 0", hist, err, runs[0].RunID)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestLoadMisfire(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		now := time.Now()
		hour := time.Hour
		st := NewMemStore()
		ctx := context.Background()
		start0 := now.Add(-10*hour - 30*time.Minute) // grid: start0 + k*1h
		jobs := []Job{
			// A once job past due, never run: missed.
			withNext(httpJob("once-late", ScheduleSpec{Kind: KindOnce, RunAt: now.Add(-hour)}), time.Time{}),
			// A once job that already ran: left alone.
			withBk(httpJob("once-done", ScheduleSpec{Kind: KindOnce, RunAt: now.Add(-hour)}), Bookkeeping{LastRunAt: now.Add(-hour), LastStatus: StatusSuccess}),
			// A once job in the future: scheduled.
			httpJob("once-future", ScheduleSpec{Kind: KindOnce, RunAt: now.Add(hour)}),
			// An every job whose next_run_at is 5 slots back: rolls on.
			withNext(httpJob("every-late", ScheduleSpec{Kind: KindEvery, Every: Duration(hour), StartAt: start0}), start0.Add(5*hour)),
			// The same within its misfire grace: runs once at once, then rolls.
			withGrace(withNext(httpJob("every-grace", ScheduleSpec{Kind: KindEvery, Every: Duration(hour), StartAt: start0}), now.Add(-20*time.Minute)), 30*time.Minute),
			// A once job within its grace: runs once.
			withGrace(withNext(httpJob("once-grace", ScheduleSpec{Kind: KindOnce, RunAt: now.Add(-time.Minute)}), now.Add(-time.Minute)), time.Hour),
			// Invalid: skipped, left in the store.
			{ID: "bad", HTTP: HTTPConfig{URL: "ftp://x"}, Schedule: ScheduleSpec{Kind: KindOnce, RunAt: now}},
			// Disabled: not scheduled.
			func() Job {
				j := httpJob("off", ScheduleSpec{Kind: KindEvery, Every: Duration(hour), StartAt: start0})
				j.Paused = true
				return j
			}(),
		}
		for _, j := range jobs {
			if err := st.Save(ctx, j); err != nil {
				t.Fatal(err)
			}
		}
		ex := &fakeExec{}
		obs := &recObserver{}
		r := newTestRunner(t, st, ex, Config{Observer: obs})
		if err := r.Load(ctx); err != nil {
			t.Fatalf("Load: %v", err)
		}
		if err := r.Load(ctx); err == nil {
			t.Errorf("second Load: got nil error, want one")
		}
		nextSlot := start0.Add(11 * hour) // the first grid slot after now
		tests := []struct {
			id   string
			want Bookkeeping
		}{
			{"once-late", Bookkeeping{LastStatus: StatusMissed}},
			{"once-done", Bookkeeping{LastRunAt: now.Add(-hour), LastStatus: StatusSuccess}},
			{"once-future", Bookkeeping{NextRunAt: now.Add(hour)}},
			{"every-late", Bookkeeping{NextRunAt: nextSlot}},
			{"every-grace", Bookkeeping{NextRunAt: nextSlot}},
			{"once-grace", Bookkeeping{}},
			{"off", Bookkeeping{}},
		}
		for _, tt := range tests {
			if diff := cmp.Diff(tt.want, ptr(mustGet(t, r, tt.id)).Bookkeeping()); diff != "" {
				t.Errorf("job %s after Load (-want +got):\n%s", tt.id, diff)
			}
		}
		if _, err := r.Get(ctx, "bad"); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(bad) error = %v, want ErrNotFound (skipped)", err)
		}
		stored, _ := st.Load(ctx)
		if len(stored) != len(jobs) {
			t.Errorf("store has %d jobs after Load, want %d (invalid ones kept)", len(stored), len(jobs))
		}

		stop := start(t, r)
		time.Sleep(29 * time.Minute) // before the next slot
		synctest.Wait()
		// The recorder has written what Load changed.
		stored, _ = st.Load(ctx)
		for _, s := range stored {
			if s.ID == "once-late" && s.LastStatus != StatusMissed {
				t.Errorf("stored once-late status %q, want missed", s.LastStatus)
			}
		}
		got := map[string][]time.Time{}
		for _, c := range ex.runs() {
			got[c.JobID] = append(got[c.JobID], c.ScheduledAt)
		}
		want := map[string][]time.Time{
			"every-grace": {now.Add(-20 * time.Minute)},
			"once-grace":  {now.Add(-time.Minute)},
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("runs in the first 29m (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]Status{StatusMissed}, obs.statuses("once-late")); diff != "" {
			t.Errorf("observed once-late (-want +got):\n%s", diff)
		}
		_ = stop()
	})
}

func withNext(j Job, next time.Time) Job { j.NextRunAt = next; return j }
func withBk(j Job, b Bookkeeping) Job    { b.Apply(&j); return j }
func withGrace(j Job, g time.Duration) Job {
	j.MisfireGrace = Duration(g)
	return j
}

func TestEveryNoDrift(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			time.Sleep(7 * time.Second) // a slow run must not shift later slots
			return Result{Status: StatusSuccess, Attempts: 1}
		}}
		r := newTestRunner(t, NewMemStore(), ex, Config{})
		start0 := t0.Add(3 * time.Second)
		mustAdd(t, r, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(10 * time.Second), StartAt: start0}))
		stop := start(t, r)
		time.Sleep(60 * time.Second)
		synctest.Wait()
		var want []time.Time
		for k := range 6 {
			want = append(want, start0.Add(time.Duration(k)*10*time.Second))
		}
		runs := ex.runs()
		var sched, trig []time.Time
		for _, c := range runs {
			sched, trig = append(sched, c.ScheduledAt), append(trig, c.TriggeredAt)
		}
		if diff := cmp.Diff(want, sched); diff != "" {
			t.Errorf("scheduled times (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, trig); diff != "" {
			t.Errorf("triggered times (-want +got):\n%s", diff)
		}
		if got, want := mustGet(t, r, "e").NextRunAt, start0.Add(60*time.Second); !got.Equal(want) {
			t.Errorf("next_run_at = %v, want %v", got, want)
		}
		_ = stop()
	})
}

func TestEveryJitter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ex := &fakeExec{}
		r := newTestRunner(t, NewMemStore(), ex, Config{})
		interval, jitter := 10*time.Second, 4*time.Second
		mustAdd(t, r, httpJob("j", ScheduleSpec{Kind: KindEvery, Every: Duration(interval), StartAt: t0, Jitter: Duration(jitter)}))
		stop := start(t, r)
		time.Sleep(100 * time.Second)
		synctest.Wait()
		_ = stop()
		ev := everySchedule{Interval: interval, Start: t0, Jitter: jitter, Seed: seedFor("j")}
		var want []time.Time
		for at := ev.Next(t0); at.Before(t0.Add(100 * time.Second)); at = ev.Next(at) {
			want = append(want, at)
		}
		got := ex.scheduledOf("j")
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("scheduled times (-want +got):\n%s", diff)
		}
		offsets := map[time.Duration]bool{}
		for k, at := range got {
			slot := t0.Add(time.Duration(k) * interval)
			off := at.Sub(slot)
			if off < 0 || off >= jitter {
				t.Errorf("run %d at %v: offset %v from its slot, want in [0, %v)", k, at, off, jitter)
			}
			offsets[off] = true
		}
		if len(offsets) < 2 {
			t.Errorf("all %d runs have the same offset: jitter not applied", len(got))
		}
		for _, c := range ex.runs() {
			if !c.TriggeredAt.Equal(c.ScheduledAt) {
				t.Errorf("run %s triggered %v, scheduled %v", c.RunID, c.TriggeredAt, c.ScheduledAt)
			}
		}
	})
}

// TestLateWake moves the wall clock forward under a running runner, as a
// suspend does: every jobs roll on with no catch-up, a grace lets the slot
// run once, a once job is missed.
func TestLateWake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		var jump atomic.Int64
		ex := &fakeExec{}
		obs := &recObserver{}
		r := newTestRunner(t, NewMemStore(), ex, Config{Observer: obs})
		r.now = func() time.Time { return time.Now().Add(time.Duration(jump.Load())) }
		every := ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0}
		mustAdd(t, r, httpJob("roll", every))
		mustAdd(t, r, withGrace(httpJob("grace", every), 2*time.Hour))
		mustAdd(t, r, httpJob("once", ScheduleSpec{Kind: KindOnce, RunAt: t0.Add(90 * time.Second)}))
		stop := start(t, r)
		time.Sleep(30 * time.Second)
		synctest.Wait()
		jump.Store(int64(time.Hour)) // the machine slept for an hour
		time.Sleep(2 * time.Second)  // the loop ticks at least once a second
		synctest.Wait()
		if got := ex.scheduledOf("roll"); len(got) != 0 {
			t.Errorf("roll ran %v, want no catch-up run", got)
		}
		if diff := cmp.Diff([]time.Time{t0.Add(time.Minute)}, ex.scheduledOf("grace")); diff != "" {
			t.Errorf("grace runs (-want +got):\n%s", diff)
		}
		if got := ex.scheduledOf("once"); len(got) != 0 {
			t.Errorf("once ran %v, want none (missed)", got)
		}
		if diff := cmp.Diff([]Status{StatusMissed}, obs.statuses("once")); diff != "" {
			t.Errorf("observed once (-want +got):\n%s", diff)
		}
		// Both every jobs now sit on the first grid slot after the jump.
		now := r.now()
		wantNext := t0.Add(now.Sub(t0).Truncate(time.Minute) + time.Minute)
		for _, id := range []string{"roll", "grace"} {
			if got := mustGet(t, r, id).NextRunAt; !got.Equal(wantNext) {
				t.Errorf("%s next_run_at = %v, want %v", id, got, wantNext)
			}
		}
		_ = stop()
	})
}

func TestRunNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ex := &fakeExec{}
		r := newTestRunner(t, NewMemStore(), ex, Config{})
		mustAdd(t, r, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour), StartAt: t0}))
		before := mustGet(t, r, "e").NextRunAt
		stop := start(t, r)
		time.Sleep(time.Minute)
		tk, err := r.RunNow(context.Background(), "e", RunOptions{Force: true})
		if err != nil {
			t.Fatalf("RunNow: %v", err)
		}
		id := tk.RunID
		synctest.Wait()
		runs := ex.runs()
		if len(runs) != 1 || runs[0].RunID != id || !runs[0].ScheduledAt.Equal(t0.Add(time.Minute)) {
			t.Fatalf("runs = %+v, want one run %s scheduled at %v", runs, id, t0.Add(time.Minute))
		}
		j := mustGet(t, r, "e")
		if !j.NextRunAt.Equal(before) || j.LastStatus != StatusSuccess {
			t.Errorf("after run-now: next_run_at %v status %q, want %v success", j.NextRunAt, j.LastStatus, before)
		}
		if _, err := r.RunNow(context.Background(), "nope", RunOptions{Force: true}); !errors.Is(err, ErrNotFound) {
			t.Errorf("RunNow(unknown) error = %v, want ErrNotFound", err)
		}
		_ = stop()
		if _, err := r.RunNow(context.Background(), "e", RunOptions{Force: true}); !errors.Is(err, ErrClosed) {
			t.Errorf("RunNow after Run returned: error = %v, want ErrClosed", err)
		}
	})
}

func TestPauseResume(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ex := &fakeExec{}
		st := NewMemStore()
		r := newTestRunner(t, st, ex, Config{})
		ctx := context.Background()
		mustAdd(t, r, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(10 * time.Second), StartAt: t0}))
		stop := start(t, r)
		time.Sleep(15 * time.Second) // one run, at t0+10s
		p, err := r.Pause(ctx, "e", time.Time{})
		if err != nil {
			t.Fatalf("Pause: %v", err)
		}
		if !p.Paused || p.LastStatus != StatusPaused || !p.NextRunAt.IsZero() {
			t.Errorf("paused job: enabled %v status %q next %v; want false paused zero", !p.Paused, p.LastStatus, p.NextRunAt)
		}
		time.Sleep(40 * time.Second) // nothing runs
		synctest.Wait()
		if diff := cmp.Diff([]time.Time{t0.Add(10 * time.Second)}, ex.scheduledOf("e")); diff != "" {
			t.Errorf("runs while paused (-want +got):\n%s", diff)
		}
		stored, _ := st.Load(ctx)
		if !stored[0].Paused || stored[0].LastStatus != StatusPaused {
			t.Errorf("stored: enabled %v status %q, want false paused", !stored[0].Paused, stored[0].LastStatus)
		}
		res, err := r.Resume(ctx, "e") // at t0+55s
		if err != nil {
			t.Fatalf("Resume: %v", err)
		}
		if res.Paused || !res.NextRunAt.Equal(t0.Add(60*time.Second)) {
			t.Errorf("resumed: enabled %v next %v, want true %v", !res.Paused, res.NextRunAt, t0.Add(60*time.Second))
		}
		time.Sleep(10 * time.Second)
		synctest.Wait()
		want := []time.Time{t0.Add(10 * time.Second), t0.Add(60 * time.Second)}
		if diff := cmp.Diff(want, ex.scheduledOf("e")); diff != "" {
			t.Errorf("runs after resume (-want +got):\n%s", diff)
		}
		pause := func(ctx context.Context, id string) (Job, error) { return r.Pause(ctx, id, time.Time{}) }
		for _, f := range []func(context.Context, string) (Job, error){pause, r.Resume} {
			if _, err := f(ctx, "nope"); !errors.Is(err, ErrNotFound) {
				t.Errorf("unknown id: error %v, want ErrNotFound", err)
			}
		}
		_ = stop()
	})
}

func TestOverlapSkipped(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			if info.ScheduledAt.Equal(t0.Add(10 * time.Second)) {
				time.Sleep(25 * time.Second) // spans the slots at 20s and 30s
			}
			return Result{Status: StatusSuccess, Attempts: 1}
		}}
		obs := &recObserver{}
		st := NewMemStore()
		r := newTestRunner(t, st, ex, Config{Observer: obs})
		mustAdd(t, r, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(10 * time.Second), StartAt: t0}))
		stop := start(t, r)
		time.Sleep(25 * time.Second)
		synctest.Wait()
		if j := mustGet(t, r, "e"); j.LastStatus != StatusSkipped || !j.NextRunAt.Equal(t0.Add(30*time.Second)) {
			t.Errorf("during overlap: status %q next %v, want skipped %v", j.LastStatus, j.NextRunAt, t0.Add(30*time.Second))
		}
		time.Sleep(20 * time.Second) // to t0+45s
		synctest.Wait()
		_ = stop()
		want := []time.Time{t0.Add(10 * time.Second), t0.Add(40 * time.Second)}
		if diff := cmp.Diff(want, ex.scheduledOf("e")); diff != "" {
			t.Errorf("executed slots (-want +got):\n%s", diff)
		}
		wantObs := []Status{StatusSkipped, StatusSuccess, StatusSuccess}
		if diff := cmp.Diff(wantObs, obs.statuses("e")); diff != "" {
			t.Errorf("observed (-want +got):\n%s", diff)
		}
		hist, _ := st.Runs(context.Background(), "e", 0)
		var got []Status
		for _, h := range hist {
			got = append(got, h.Status)
		}
		if diff := cmp.Diff([]Status{StatusSuccess, StatusSuccess, StatusSkipped}, got); diff != "" {
			t.Errorf("history newest first (-want +got):\n%s", diff)
		}
		// The slots of 20s and 30s, skipped during one overlap: one record.
		if skip := hist[len(hist)-1]; skip.Reason != ReasonOverlap || skip.Slots != 2 || !skip.ScheduledAt.Equal(t0.Add(20*time.Second)) {
			t.Errorf("skipped record: reason %q slots %d scheduled_at %v, want overlap, 2, %v", skip.Reason, skip.Slots, skip.ScheduledAt, t0.Add(20*time.Second))
		}
	})
}

func TestUpdateResetsTimer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ex := &fakeExec{}
		r := newTestRunner(t, NewMemStore(), ex, Config{})
		ctx := context.Background()
		j := mustAdd(t, r, httpJob("a", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour), StartAt: t0}))
		stop := start(t, r)
		time.Sleep(time.Second)
		synctest.Wait() // the timer goroutine now sleeps toward t0+1h
		at := t0.Add(5500 * time.Millisecond)
		j.Schedule = ScheduleSpec{Kind: KindOnce, RunAt: at}
		j.Name = "renamed"
		u, err := replaceJob(ctx, r, j)
		if err != nil {
			t.Fatalf("Update: %v", err)
		}
		if u.Name != "renamed" || !u.NextRunAt.Equal(at) {
			t.Errorf("updated: name %q next %v, want renamed %v", u.Name, u.NextRunAt, at)
		}
		time.Sleep(5 * time.Second)
		synctest.Wait()
		runs := ex.runs()
		if len(runs) != 1 || !runs[0].TriggeredAt.Equal(at) {
			t.Fatalf("runs = %+v, want one triggered at %v", runs, at)
		}
		// Adding an earlier job resets the timer too.
		at2 := time.Now().Add(300 * time.Millisecond)
		mustAdd(t, r, httpJob("b", ScheduleSpec{Kind: KindOnce, RunAt: at2}))
		time.Sleep(time.Second)
		synctest.Wait()
		if got := ex.runs(); len(got) != 2 || !got[1].TriggeredAt.Equal(at2) {
			t.Errorf("runs = %+v, want the second triggered at %v", got, at2)
		}
		// An Update that keeps the schedule keeps next_run_at.
		e, _ := r.Add(ctx, httpJob("c", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0}))
		e.Timeout = Duration(time.Second)
		e.NextRunAt = time.Time{} // system fields are ignored
		u2, err := replaceJob(ctx, r, e)
		if err != nil || !u2.NextRunAt.Equal(mustGet(t, r, "c").NextRunAt) || u2.NextRunAt.IsZero() || u2.Timeout != Duration(time.Second) {
			t.Errorf("Update keeping the schedule = %+v, %v", u2, err)
		}
		if _, err := replaceJob(ctx, r, httpJob("nope", e.Schedule)); !errors.Is(err, ErrNotFound) {
			t.Errorf("Update(unknown) error = %v, want ErrNotFound", err)
		}
		bad := e
		bad.HTTP.Method = "TRACE"
		var ve *ValidationError
		if _, err := replaceJob(ctx, r, bad); !errors.As(err, &ve) || ve.Field != "http.method" {
			t.Errorf("Update(bad method) error = %v, want a ValidationError on http.method", err)
		}
		_ = stop()
	})
}

func TestRemove(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		release := make(chan struct{})
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			if j.ID == "blocker" {
				<-release
			}
			return Result{Status: StatusSuccess, Attempts: 1}
		}}
		st := NewMemStore()
		r := newTestRunner(t, st, ex, Config{Workers: 1})
		ctx := context.Background()
		mustAdd(t, r, httpJob("heap", ScheduleSpec{Kind: KindOnce, RunAt: t0.Add(time.Hour)}))
		mustAdd(t, r, httpJob("blocker", ScheduleSpec{Kind: KindOnce, RunAt: t0.Add(time.Hour)}))
		mustAdd(t, r, httpJob("queued", ScheduleSpec{Kind: KindOnce, RunAt: t0.Add(time.Hour)}))
		stop := start(t, r)
		if _, err := r.RunNow(ctx, "blocker", RunOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the only worker is busy
		if _, err := r.RunNow(ctx, "queued", RunOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"heap", "queued"} {
			if err := r.Remove(ctx, id); err != nil {
				t.Fatalf("Remove(%s): %v", id, err)
			}
		}
		if err := r.Remove(ctx, "heap"); !errors.Is(err, ErrNotFound) {
			t.Errorf("second Remove: error %v, want ErrNotFound", err)
		}
		close(release)
		time.Sleep(2 * time.Hour)
		synctest.Wait()
		var ids []string
		for _, c := range ex.runs() {
			ids = append(ids, c.JobID)
		}
		if diff := cmp.Diff([]string{"blocker", "blocker"}, ids); diff != "" {
			t.Errorf("executed (-want +got):\n%s", diff)
		}
		var names []string
		for _, j := range mustList(t, r) {
			names = append(names, j.ID)
		}
		stored, _ := st.Load(ctx)
		var storedIDs []string
		for _, j := range stored {
			storedIDs = append(storedIDs, j.ID)
		}
		if diff := cmp.Diff([]string{"blocker"}, names); diff != "" {
			t.Errorf("List (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff([]string{"blocker"}, storedIDs); diff != "" {
			t.Errorf("store (-want +got):\n%s", diff)
		}
		_ = stop()
	})
}

func TestShutdownDrains(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			select {
			case <-time.After(5 * time.Second):
				return Result{Status: StatusSuccess, Attempts: 1}
			case <-ctx.Done():
				return Result{Status: StatusFailed, Attempts: 1, Error: "cancelled"}
			}
		}}
		st := &countingStore{MemStore: NewMemStore()}
		r := newTestRunner(t, st, ex, Config{DrainTimeout: time.Minute})
		mustAdd(t, r, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(2 * time.Second), StartAt: t0}))
		mustAdd(t, r, httpJob("o", ScheduleSpec{Kind: KindOnce, RunAt: t0.Add(3 * time.Second)}))
		stop := start(t, r)
		time.Sleep(2500 * time.Millisecond) // e's run at 2s is in flight
		synctest.Wait()
		began := time.Now()
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if took := time.Since(began); took != 4500*time.Millisecond {
			t.Errorf("Run returned %v after cancel, want 4.5s (the run in flight finishing)", took)
		}
		if diff := cmp.Diff([]time.Time{t0.Add(2 * time.Second)}, ex.scheduledOf("e")); diff != "" {
			t.Errorf("e runs (-want +got):\n%s", diff)
		}
		if got := ex.scheduledOf("o"); len(got) != 0 {
			t.Errorf("o ran at %v after shutdown began, want no run", got)
		}
		if j := mustGet(t, r, "e"); j.LastStatus != StatusSuccess {
			t.Errorf("e status %q, want success (drained)", j.LastStatus)
		}
		stored, _ := st.Load(context.Background())
		if stored[0].LastStatus != StatusSuccess || !stored[0].LastRunAt.Equal(t0.Add(2*time.Second)) {
			t.Errorf("stored e: %q at %v, want success at %v", stored[0].LastStatus, stored[0].LastRunAt, t0.Add(2*time.Second))
		}
		st.mu.Lock()
		if st.flushs != 1 || st.recordAfterLast {
			t.Errorf("Flush calls %d (records after it: %v), want 1 after the last record", st.flushs, st.recordAfterLast)
		}
		st.mu.Unlock()
	})
}

func TestShutdownCancelsAfterDrainTimeout(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			<-ctx.Done()
			return Result{Status: StatusFailed, Attempts: 1, Error: ctx.Err().Error()}
		}}
		obs := &recObserver{}
		r := newTestRunner(t, NewMemStore(), ex, Config{DrainTimeout: 3 * time.Second, Observer: obs})
		mustAdd(t, r, httpJob("o", ScheduleSpec{Kind: KindOnce, RunAt: time.Now().Add(time.Second)}))
		stop := start(t, r)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		began := time.Now()
		_ = stop()
		if took := time.Since(began); took != 3*time.Second {
			t.Errorf("Run returned %v after cancel, want the drain timeout, 3s", took)
		}
		if diff := cmp.Diff([]Status{StatusFailed}, obs.statuses("o")); diff != "" {
			t.Errorf("observed (-want +got):\n%s", diff)
		}
	})
}

func TestAddValidation(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := NewMemStore()
		r := newTestRunner(t, st, &fakeExec{}, Config{DefaultTimeout: 7 * time.Second, DefaultRetryBackoff: 2 * time.Second})
		ctx := context.Background()
		now := time.Now().UTC()
		good := httpJob("", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)})
		j, err := r.Add(ctx, good)
		if err != nil {
			t.Fatalf("Add: %v", err)
		}
		if len(j.ID) != 32 || !isHex(j.ID) {
			t.Errorf("generated id %q, want 32 hex characters", j.ID)
		}
		want := good
		want.ID, want.Type, want.HTTP.Method = j.ID, JobTypeHTTP, "GET"
		want.Timeout, want.RetryBackoff = Duration(7*time.Second), Duration(2*time.Second)
		want.Schedule.StartAt = now
		want.NextRunAt = now.Add(time.Minute)
		if diff := cmp.Diff(want, j); diff != "" {
			t.Errorf("added job (-want +got):\n%s", diff)
		}
		stored, _ := st.Load(ctx)
		if diff := cmp.Diff([]Job{want}, stored); diff != "" {
			t.Errorf("stored (-want +got):\n%s", diff)
		}
		if _, err := r.Add(ctx, j); !errors.Is(err, ErrExists) {
			t.Errorf("Add(same id) error = %v, want ErrExists", err)
		}
		tests := []struct {
			name  string
			edit  func(*Job)
			field string
		}{
			{"bad url", func(j *Job) { j.HTTP.URL = "ftp://x/y" }, "http.url"},
			{"no host", func(j *Job) { j.HTTP.URL = "http:///y" }, "http.url"},
			{"method", func(j *Job) { j.HTTP.Method = "TRACE" }, "http.method"},
			{"interval", func(j *Job) { j.Schedule.Every = 0 }, "schedule.every"},
			{"jitter", func(j *Job) { j.Schedule.Jitter = Duration(time.Minute) }, "schedule.jitter"},
			{"kind", func(j *Job) { j.Schedule.Kind = "sometimes" }, "schedule.kind"},
			{"once without run_at", func(j *Job) { j.Schedule = ScheduleSpec{Kind: KindOnce} }, "schedule.run_at"},
			{"run_at out of range", func(j *Job) {
				j.Schedule = ScheduleSpec{Kind: KindOnce, RunAt: time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC)}
			}, "schedule.run_at"},
			{"retries", func(j *Job) { j.MaxRetries = -1 }, "max_retries"},
			{"timeout", func(j *Job) { j.Timeout = Duration(-time.Second) }, "timeout"},
		}
		for _, tt := range tests {
			j := httpJob("x", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)})
			tt.edit(&j)
			_, err := r.Add(ctx, j)
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != tt.field {
				t.Errorf("%s: error %v, want a ValidationError on %s", tt.name, err, tt.field)
			}
		}
		if got := r.Len(); got != 1 {
			t.Errorf("Len after rejected adds = %d, want 1", got)
		}
		// A once job past due at Add is missed.
		late, err := r.Add(ctx, httpJob("late", ScheduleSpec{Kind: KindOnce, RunAt: now.Add(-time.Hour)}))
		if err != nil || late.LastStatus != StatusMissed || !late.NextRunAt.IsZero() {
			t.Errorf("Add(past once) = status %q next %v, %v; want missed, zero", late.LastStatus, late.NextRunAt, err)
		}
	})
}

func isHex(s string) bool {
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// noHistory is a Store without RunStore.
type noHistory struct{ m *MemStore }

func (s noHistory) Load(ctx context.Context) ([]Job, error)     { return s.m.Load(ctx) }
func (s noHistory) Save(ctx context.Context, j Job) error       { return s.m.Save(ctx, j) }
func (s noHistory) Delete(ctx context.Context, id string) error { return s.m.Delete(ctx, id) }
func (s noHistory) Record(ctx context.Context, id string, b Bookkeeping) error {
	return s.m.Record(ctx, id, b)
}
func (s noHistory) Flush(ctx context.Context) error { return s.m.Flush(ctx) }

func TestRunsErrors(t *testing.T) {
	ctx := context.Background()
	r := newTestRunner(t, noHistory{NewMemStore()}, &fakeExec{}, Config{})
	mustAdd(t, r, httpJob("a", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)}))
	if _, err := r.Runs(ctx, "a", 10); !errors.Is(err, ErrUnsupported) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("Runs without history: error %v, want ErrUnsupported", err)
	}
	if _, err := r.Runs(ctx, "b", 10); !errors.Is(err, ErrNotFound) {
		t.Errorf("Runs(unknown): error %v, want ErrNotFound", err)
	}
}

func TestNewConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		ok   bool
	}{
		{"zero", Config{}, true},
		{"workers", Config{Workers: -1}, false},
		{"drain", Config{DrainTimeout: -1}, false},
		{"timeout", Config{DefaultTimeout: -1}, false},
		{"backoff", Config{DefaultRetryBackoff: -1}, false},
		{"tolerance", Config{MisfireTolerance: -1}, false},
	}
	for _, tt := range tests {
		_, err := New(NewMemStore(), &fakeExec{}, tt.cfg)
		if (err == nil) != tt.ok {
			t.Errorf("%s: New error = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	if _, err := New(nil, &fakeExec{}, Config{RunLimit: -1}); err == nil || err.Error() != "cron: New: Config.RunLimit must not be negative, got -1" {
		t.Errorf("New(RunLimit -1) error = %v, want one naming Config.RunLimit", err)
	}
	if r, err := New(NewMemStore(), nil, Config{}); err != nil {
		t.Errorf("New(nil executor): %v, want the default HTTP executor", err)
	} else if _, ok := r.exec.(*HTTPExecutor); !ok {
		t.Errorf("New(nil executor) runs HTTP jobs with %T, want *HTTPExecutor", r.exec)
	}
	r, _ := New(NewMemStore(), &fakeExec{}, Config{})
	want := Config{Workers: 4, DrainTimeout: 30 * time.Second, DefaultTimeout: 10 * time.Second, DefaultRetryBackoff: 5 * time.Second, MisfireTolerance: time.Second, RunLimit: DefaultRunLimit, ClaimAhead: DefaultClaimAhead,
		AlertBackoff: DefaultAlertBackoff, AlertHorizon: DefaultAlertHorizon, PauseRefresh: DefaultPauseRefresh}
	if diff := cmp.Diff(want, r.cfg, cmp.Comparer(func(a, b Observer) bool { return a == b })); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

// TestConcurrentAPI hammers the API from many goroutines while the runner
// fires (run it with -race); the runner and the store must agree at the end.
func TestConcurrentAPI(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := NewMemStore()
		ex := &fakeExec{}
		r := newTestRunner(t, st, ex, Config{Workers: 3})
		stop := start(t, r)
		ctx := context.Background()
		var wg sync.WaitGroup
		for g := range 8 {
			wg.Go(func() {
				for i := range 30 {
					id := fmt.Sprintf("g%d-%d", g, i)
					j, err := r.Add(ctx, httpJob(id, ScheduleSpec{Kind: KindEvery, Every: Duration(time.Duration(1+i%3) * time.Second)}))
					if err != nil {
						t.Errorf("Add: %v", err)
						return
					}
					switch i % 5 {
					case 0:
						_, _ = r.Pause(ctx, id, time.Time{})
					case 1:
						_, _ = r.Pause(ctx, id, time.Time{})
						_, _ = r.Resume(ctx, id)
					case 2:
						_, _ = r.RunNow(ctx, id, RunOptions{Force: true})
					case 3:
						j.Schedule.Every = Duration(1500 * time.Millisecond)
						_, _ = replaceJob(ctx, r, j)
					case 4:
						_ = r.Remove(ctx, id)
					}
					_, _ = r.Get(ctx, id)
					_, _, _ = r.List(ctx, JobQuery{})
					time.Sleep(100 * time.Millisecond)
				}
			})
		}
		wg.Wait()
		time.Sleep(5 * time.Second)
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if len(ex.runs()) == 0 {
			t.Errorf("no runs while the API was busy")
		}
		stored, _ := st.Load(ctx)
		listed := mustList(t, r)
		// Each goroutine created its jobs one after the other: both lists
		// keep that order. Jobs of different goroutines were created
		// concurrently and may come in either order.
		for name, jobs := range map[string][]Job{"runner": listed, "store": stored} {
			last := map[string]int{}
			for _, j := range jobs {
				var g, i int
				if _, err := fmt.Sscanf(j.ID, "g%d-%d", &g, &i); err != nil {
					t.Fatalf("unexpected id %q", j.ID)
				}
				if prev, ok := last[fmt.Sprint(g)]; ok && prev >= i {
					t.Errorf("%s lists g%d-%d after g%d-%d", name, g, i, g, prev)
				}
				last[fmt.Sprint(g)] = i
			}
		}
		byID := func(a, b Job) int { return strings.Compare(a.ID, b.ID) }
		slices.SortFunc(listed, byID)
		slices.SortFunc(stored, byID)
		if diff := cmp.Diff(listed, stored); diff != "" {
			t.Errorf("runner and store disagree (-runner +store):\n%s", diff)
		}
		if got, want := len(stored), 8*30*4/5; got != want {
			t.Errorf("jobs left = %d, want %d", got, want)
		}
	})
}

// TestConcurrentAddSameID adds one id from many goroutines at once: one Add
// wins, every other gets ErrExists, and the store holds the winner's job.
func TestConcurrentAddSameID(t *testing.T) {
	st := NewMemStore()
	r := newTestRunner(t, st, &fakeExec{}, Config{})
	ctx := context.Background()
	var wg sync.WaitGroup
	var won atomic.Int32
	winner := make(chan string, 16)
	for g := range 16 {
		wg.Go(func() {
			j := httpJob("same", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)})
			j.Name = fmt.Sprintf("from %d", g)
			_, err := r.Add(ctx, j)
			switch {
			case err == nil:
				won.Add(1)
				winner <- j.Name
			case !errors.Is(err, ErrExists):
				t.Errorf("Add: %v, want nil or ErrExists", err)
			}
		})
	}
	wg.Wait()
	if won.Load() != 1 {
		t.Fatalf("%d Adds of one id succeeded, want 1", won.Load())
	}
	name := <-winner
	stored, _ := st.Load(ctx)
	if len(stored) != 1 || stored[0].Name != name || mustGet(t, r, "same").Name != name {
		t.Errorf("store holds %+v; want the one job named %q, as the runner has it", stored, name)
	}
}

// slowSaves delays each Save by up to half a millisecond, at random, so
// that concurrent writes overlap in the store.
type slowSaves struct{ *MemStore }

func (s slowSaves) Save(ctx context.Context, j Job) error {
	time.Sleep(time.Duration(rand.Int64N(int64(500 * time.Microsecond))))
	return s.MemStore.Save(ctx, j)
}

// TestConcurrentWritesOneJob updates, pauses and resumes one job from many
// goroutines at once: whatever order they take, the store must end with the
// runner's state, because writes to one job reach the store in the order
// they are applied.
func TestConcurrentWritesOneJob(t *testing.T) {
	st := NewMemStore()
	r := newTestRunner(t, slowSaves{st}, &fakeExec{}, Config{})
	ctx := context.Background()
	mustAdd(t, r, httpJob("one", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)}))
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				switch (g + i) % 3 {
				case 0:
					j := mustGet(t, r, "one")
					j.Name = fmt.Sprintf("g%d-%d", g, i)
					j.Schedule.Every = Duration(time.Duration(1+i%5) * time.Minute)
					if _, err := replaceJob(ctx, r, j); err != nil {
						t.Errorf("Update: %v", err)
					}
				case 1:
					if _, err := r.Pause(ctx, "one", time.Time{}); err != nil {
						t.Errorf("Pause: %v", err)
					}
				case 2:
					if _, err := r.Resume(ctx, "one"); err != nil {
						t.Errorf("Resume: %v", err)
					}
				}
			}
		})
	}
	wg.Wait()
	stored, _ := st.Load(ctx)
	if diff := cmp.Diff(mustList(t, r), stored); diff != "" {
		t.Errorf("runner and store disagree (-runner +store):\n%s", diff)
	}
}

func TestLoadFixesStartAndUpdateEnabled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		now := time.Now().UTC()
		st := NewMemStore()
		if err := st.Save(ctx, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)})); err != nil {
			t.Fatal(err)
		}
		r := newTestRunner(t, st, &fakeExec{}, Config{})
		if err := r.Load(ctx); err != nil {
			t.Fatalf("Load: %v", err)
		}
		stored, _ := st.Load(ctx)
		if got := stored[0].Schedule.StartAt; !got.Equal(now) {
			t.Errorf("stored start_at after Load = %v, want %v (the load time, saved)", got, now)
		}
		j := mustGet(t, r, "e")
		if !j.NextRunAt.Equal(now.Add(time.Minute)) {
			t.Errorf("next_run_at = %v, want %v", j.NextRunAt, now.Add(time.Minute))
		}
		// Disabling through Update pauses; enabling reschedules.
		j.Paused = true
		u, err := replaceJob(ctx, r, j)
		if err != nil || u.LastStatus != StatusPaused || !u.NextRunAt.IsZero() {
			t.Errorf("Update(enabled=false) = status %q next %v, %v; want paused, zero", u.LastStatus, u.NextRunAt, err)
		}
		time.Sleep(90 * time.Second)
		j.Paused = false
		u, err = replaceJob(ctx, r, j)
		if err != nil || !u.NextRunAt.Equal(now.Add(2*time.Minute)) {
			t.Errorf("Update(enabled=true) = next %v, %v; want %v", u.NextRunAt, err, now.Add(2*time.Minute))
		}
	})
}

func TestExecutorPanic(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result { panic("boom") }}
		obs := &recObserver{}
		r := newTestRunner(t, NewMemStore(), ex, Config{Observer: obs})
		mustAdd(t, r, httpJob("p", ScheduleSpec{Kind: KindOnce, RunAt: time.Now().Add(time.Second)}))
		stop := start(t, r)
		time.Sleep(2 * time.Second)
		synctest.Wait()
		_ = stop()
		j := mustGet(t, r, "p")
		if j.LastStatus != StatusFailed || j.LastError != "executor panicked: boom" {
			t.Errorf("after a panicking executor: status %q error %q, want failed, executor panicked: boom", j.LastStatus, j.LastError)
		}
		if diff := cmp.Diff([]Status{StatusFailed}, obs.statuses("p")); diff != "" {
			t.Errorf("observed (-want +got):\n%s", diff)
		}
	})
}

// TestNoStore runs a runner without a store: its jobs fire, and it keeps
// the newest RunLimit runs of each job itself, through updates, and drops
// them with the job.
func TestNoStore(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		t0 := time.Now().UTC()
		r := newTestRunner(t, nil, &fakeExec{}, Config{RunLimit: 3})
		mustAdd(t, r, httpJob("a", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0}))
		mustAdd(t, r, httpJob("late", ScheduleSpec{Kind: KindOnce, RunAt: t0.Add(-time.Hour)}))
		stop := start(t, r)
		time.Sleep(5*time.Minute + time.Second)
		synctest.Wait()
		if _, err := replaceJob(ctx, r, httpJob("a", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0})); err != nil {
			t.Fatal(err)
		}
		runs, err := r.Runs(ctx, "a", 0)
		if err != nil {
			t.Fatalf("Runs: %v", err)
		}
		var got []time.Time
		for _, run := range runs {
			got = append(got, run.ScheduledAt)
		}
		want := []time.Time{t0.Add(5 * time.Minute), t0.Add(4 * time.Minute), t0.Add(3 * time.Minute)} // newest 3, newest first
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Runs(a) scheduled_at (-want +got):\n%s", diff)
		}
		if runs, _ := r.Runs(ctx, "a", 1); len(runs) != 1 || !runs[0].ScheduledAt.Equal(want[0]) {
			t.Errorf("Runs(a, 1) = %+v, want the newest", runs)
		}
		late, _ := r.Runs(ctx, "late", 0)
		if len(late) != 1 || late[0].Status != StatusMissed {
			t.Errorf("Runs(late) = %+v, want one missed", late)
		}
		if err := r.Remove(ctx, "a"); err != nil {
			t.Fatal(err)
		}
		mustAdd(t, r, httpJob("a", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour), StartAt: time.Now()}))
		if runs, _ := r.Runs(ctx, "a", 0); len(runs) != 0 {
			t.Errorf("Runs of a job added again after Remove = %+v, want none", runs)
		}
		if err := stop(); err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// TestObserverSeesStoredRuns checks that the observer sees a run once it is
// in the history: the recorder appends it first.
func TestObserverSeesStoredRuns(t *testing.T) {
	for _, tc := range []struct {
		name  string
		store Store
	}{{"memstore", NewMemStore()}, {"no store", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				var r *Runner
				var missing atomic.Int64
				var seen atomic.Int64
				obs := ObserverFunc(func(run Run) {
					seen.Add(1)
					runs, err := r.Runs(ctx, run.JobID, 0)
					if err != nil || !slices.ContainsFunc(runs, func(x Run) bool { return x.ID == run.ID }) {
						missing.Add(1)
					}
				})
				r = newTestRunner(t, tc.store, &fakeExec{}, Config{Observer: obs})
				mustAdd(t, r, httpJob("a", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: time.Now()}))
				start(t, r)
				time.Sleep(10*time.Second + time.Millisecond)
				synctest.Wait()
				if got := [2]int64{seen.Load(), missing.Load()}; got != [2]int64{10, 0} {
					t.Errorf("observer calls, of which the run was not in Runs = %v, want [10 0]", got)
				}
			})
		})
	}
}

// TestLoadClearsUnusedScheduleFields: a job stored with a schedule field
// its kind does not use (accepted, and ignored, before the rule) loads and
// runs as before, the field cleared.
func TestLoadClearsUnusedScheduleFields(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := NewMemStore()
		t0 := time.Now().UTC()
		j := httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0, TZ: "Mars/Olympus", Cron: "x"})
		if err := st.Save(ctx, j); err != nil {
			t.Fatal(err)
		}
		r := newTestRunner(t, st, &fakeExec{}, Config{})
		if err := r.Load(ctx); err != nil {
			t.Fatalf("Load: %v", err)
		}
		got := mustGet(t, r, "e")
		want := ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0}
		if diff := cmp.Diff(want, got.Schedule); diff != "" {
			t.Errorf("loaded schedule (-want +got):\n%s", diff)
		}
		if !got.NextRunAt.Equal(t0.Add(time.Minute)) {
			t.Errorf("next_run_at = %v, want %v", got.NextRunAt, t0.Add(time.Minute))
		}
	})
}

// TestOverlapOneRecord: a job whose run outlasts many slots has the
// slots skipped meanwhile recorded as one run (reason overlap, slots the
// count, scheduled_at the first), seen once by the observer and warned
// about once.
func TestOverlapOneRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now()
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			time.Sleep(150*time.Second + 500*time.Millisecond)
			return Result{Status: StatusSuccess, Attempts: 1}
		}}
		obs := &recObserver{}
		var logs syncBuf
		log := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
		r := newTestRunner(t, nil, ex, Config{Observer: obs, Logger: log})
		mustAdd(t, r, httpJob("e", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Second), StartAt: t0.Add(time.Second)}))
		stop := start(t, r)
		time.Sleep(160 * time.Second)
		synctest.Wait()
		runs, _, err := r.QueryRuns(context.Background(), RunQuery{Statuses: []Status{StatusSkipped}})
		_ = stop()
		if err != nil {
			t.Fatalf("QueryRuns: %v", err)
		}
		// The run of 1s ends at 151.5s: the slots of 2s to 151s were skipped.
		want := []Run{{JobID: "e", ScheduledAt: t0.Add(2 * time.Second), Status: StatusSkipped, Reason: ReasonOverlap, Slots: 150,
			Error: "previous run still in flight"}}
		if diff := cmp.Diff(want, runs, cmpopts.IgnoreFields(Run{}, "ID", "TriggeredAt", "FinishedAt")); diff != "" {
			t.Errorf("skipped runs (-want +got):\n%s", diff)
		}
		// Then the run of 152s, cut by the stop, and the slots skipped
		// during it: one more record.
		if diff := cmp.Diff([]Status{StatusSkipped, StatusSuccess, StatusSkipped, StatusSuccess}, obs.statuses("e")); diff != "" {
			t.Errorf("observed (-want +got):\n%s", diff)
		}
		if n := strings.Count(logs.String(), `"msg":"cron: slot skipped"`); n != 1 { // at most one a minute
			t.Errorf("%d skip warnings, want 1", n)
		}
	})
}

// syncBuf is a bytes.Buffer safe for concurrent writes.
type syncBuf struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMinInterval: Add and Update refuse an every job below MinInterval;
// a stored one still loads (with a warning) and runs.
func TestMinInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := NewMemStore()
		t0 := time.Now().UTC()
		if err := st.Save(ctx, httpJob("fast", ScheduleSpec{Kind: KindEvery, Every: Duration(100 * time.Millisecond), StartAt: t0})); err != nil {
			t.Fatal(err)
		}
		var logs syncBuf
		ex := &fakeExec{}
		r := newTestRunner(t, st, ex, Config{MinInterval: time.Minute, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
		if err := r.Load(ctx); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(logs.String(), "runs more often than MinInterval") {
			t.Errorf("no warning about the stored job below MinInterval; logs:\n%s", logs.String())
		}
		var ve *ValidationError
		if _, err := r.Add(ctx, httpJob("new", ScheduleSpec{Kind: KindEvery, Every: Duration(30 * time.Second)})); !errors.As(err, &ve) || ve.Field != "schedule.every" {
			t.Errorf("Add(every 30s, MinInterval 1m) error = %v, want a *ValidationError on schedule.every", err)
		}
		if _, err := r.Update(ctx, "fast", func(j *Job) error { j.Name = "renamed"; return nil }); !errors.As(err, &ve) || ve.Field != "schedule.every" {
			t.Errorf("Update of the stored fast job error = %v, want a *ValidationError on schedule.every", err)
		}
		start(t, r)
		time.Sleep(time.Second)
		synctest.Wait()
		if n := len(ex.scheduledOf("fast")); n < 9 {
			t.Errorf("the stored fast job ran %d times in 1s, want about 10", n)
		}
	})
}

// brokenHistory is a MemStore whose history cannot be read.
type brokenHistory struct{ *MemStore }

var errDiskGone = errors.New("disk gone")

func (brokenHistory) Runs(context.Context, string, int) ([]Run, error) { return nil, errDiskGone }
func (brokenHistory) QueryRuns(context.Context, RunQuery) ([]Run, RunCursor, error) {
	return nil, RunCursor{}, errDiskGone
}
func (brokenHistory) RunByID(context.Context, string) (Run, error) { return Run{}, errDiskGone }

// TestOneStoreContract checks that a store that is not shared answers
// through the contract of a shared one: a failed read of its history
// wraps ErrUnavailable (the API's 503) and the store's error, as over a
// shared store; and the reads of every job (Count, List with Text, a
// removal of an unknown id) answer from the runner, which holds them all.
func TestOneStoreContract(t *testing.T) {
	ctx := context.Background()
	r := newTestRunner(t, brokenHistory{NewMemStore()}, &fakeExec{}, Config{})
	mustAdd(t, r, httpJob("alpha", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)}))
	mustAdd(t, r, httpJob("beta", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)}))
	for name, err := range map[string]error{
		"Runs":      func() error { _, err := r.Runs(ctx, "alpha", 1); return err }(),
		"QueryRuns": func() error { _, _, err := r.QueryRuns(ctx, RunQuery{}); return err }(),
		"RunByID":   func() error { _, err := r.RunByID(ctx, "x"); return err }(),
	} {
		if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errDiskGone) {
			t.Errorf("%s: error %v, want ErrUnavailable wrapping the store's", name, err)
		}
	}
	if _, err := r.Pause(ctx, "beta", time.Time{}); err != nil {
		t.Fatal(err)
	}
	if on, off, err := r.Count(ctx); on != 1 || off != 1 || err != nil {
		t.Errorf("Count = %d, %d, %v; want 1 enabled, 1 paused", on, off, err)
	}
	jobs, more, err := r.List(ctx, JobQuery{Text: "ALP"})
	if err != nil || more || len(jobs) != 1 || jobs[0].ID != "alpha" {
		t.Errorf("List(Text ALP) = %d jobs, more %v, %v; want alpha", len(jobs), more, err)
	}
	if err := r.Remove(ctx, "gamma"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Remove(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := r.Update(ctx, "gamma", func(*Job) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Errorf("Update(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := r.RunNow(ctx, "gamma", RunOptions{}); !errors.Is(err, ErrNotFound) {
		t.Errorf("RunNow(unknown) = %v, want ErrNotFound", err)
	}
}
