package cron

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestSharedConfig checks that jobs made from one template share what
// they call, and that a change of one of them, or a job that differs in one
// field, gets its own: no job ever shows another's values.
func TestSharedConfig(t *testing.T) {
	r := newTestRunner(t, nil, &fakeExec{}, Config{})
	ctx := context.Background()
	every := ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)}
	tmpl := Job{Name: "t", Schedule: every,
		HTTP: HTTPConfig{Method: "POST", URL: "http://a.test/x", Body: "{{job_id}}", Headers: map[string]string{"X-A": "1"}}}
	a := mustAdd(t, r, tmpl)
	b := mustAdd(t, r, tmpl)
	other := tmpl
	other.HTTP.Headers = map[string]string{"X-A": "1"} // equal, not the same map
	c := mustAdd(t, r, other)
	other.MaxRetries = 2
	d := mustAdd(t, r, other)
	empty := tmpl
	empty.HTTP.Headers = map[string]string{}
	e := mustAdd(t, r, empty)

	cfgOf := func(id string) *jobConfig {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, en, ok := r.lookup(id)
		if !ok {
			t.Fatalf("job %q not held", id)
		}
		return en.cfg
	}
	if cfgOf(a.ID) != cfgOf(b.ID) || cfgOf(a.ID) != cfgOf(c.ID) {
		t.Errorf("jobs of one template (and of an equal header map) do not share their configuration")
	}
	if cfgOf(d.ID) == cfgOf(a.ID) {
		t.Errorf("a job with other max_retries shares the template's configuration")
	}
	if cfgOf(e.ID) == cfgOf(a.ID) {
		t.Errorf("a job with other headers shares the template's configuration")
	}
	if got := mustGet(t, r, e.ID).HTTP.Headers; got == nil || len(got) != 0 {
		t.Errorf("headers of a job added with an empty map = %v, want an empty map", got)
	}

	// Update one: the others keep their values.
	if _, err := r.Update(ctx, b.ID, func(j *Job) error {
		j.HTTP.URL = "http://b.test/y"
		j.HTTP.Headers = map[string]string{"X-B": "2"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := a
	if diff := cmp.Diff(want, mustGet(t, r, a.ID)); diff != "" {
		t.Errorf("job a after an update of b (-want +got):\n%s", diff)
	}
	gotB := mustGet(t, r, b.ID)
	if gotB.HTTP.URL != "http://b.test/y" || gotB.HTTP.Headers["X-B"] != "2" || gotB.HTTP.Headers["X-A"] != "" {
		t.Errorf("job b after its update = %+v", gotB.HTTP)
	}
	if got := mustGet(t, r, d.ID).MaxRetries; got != 2 {
		t.Errorf("max_retries of d = %d, want 2", got)
	}
}

// TestKnownConfigStillValidates checks that a job following one that
// passed is still checked in each field where it differs: the last
// configuration spares only the checks of equal values.
func TestKnownConfigStillValidates(t *testing.T) {
	r := newTestRunner(t, nil, &fakeExec{}, Config{})
	ctx := context.Background()
	good := Job{Schedule: ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)},
		HTTP: HTTPConfig{URL: "http://a.test/x", Headers: map[string]string{"X-A": "1"}, Body: "{{run_id}}"}}
	tests := []struct {
		name  string
		edit  func(*Job)
		field string
	}{
		{"url", func(j *Job) { j.HTTP.URL = "ftp://a.test/x" }, "http.url"},
		{"header", func(j *Job) { j.HTTP.Headers = map[string]string{"X-A": "1\n"} }, "http.headers"},
		{"header added", func(j *Job) { j.HTTP.Headers = map[string]string{"X-A": "1", "Content-Length": "3"} }, "http.headers"},
		{"body", func(j *Job) { j.HTTP.Body = "{{nope}}" }, "http.body"},
	}
	for _, tt := range tests {
		mustAdd(t, r, good) // the last configuration is the good one
		j := good
		j.HTTP.Headers = map[string]string{"X-A": "1"}
		tt.edit(&j)
		_, err := r.Add(ctx, j)
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tt.field {
			t.Errorf("%s: error %v, want a ValidationError on %s", tt.name, err, tt.field)
		}
	}
}

// TestCronShared checks that jobs with one expression and zone share its
// parse, that another zone or expression gets its own, and that an update
// of one job's expression leaves the others alone.
func TestCronShared(t *testing.T) {
	r := newTestRunner(t, nil, &fakeExec{}, Config{})
	ctx := context.Background()
	job := func(spec, tz string) Job {
		return Job{HTTP: HTTPConfig{URL: "http://a.test/x"}, Schedule: ScheduleSpec{Kind: KindCron, Cron: spec, TZ: tz}}
	}
	a := mustAdd(t, r, job("0 * * * *", ""))
	b := mustAdd(t, r, job("0 * * * *", ""))
	c := mustAdd(t, r, job("0 * * * *", "Asia/Tokyo"))
	d := mustAdd(t, r, job("30 * * * *", ""))
	cronOf := func(id string) *cadence {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, en, _ := r.lookup(id)
		return en.cad
	}
	if cronOf(a.ID) != cronOf(b.ID) {
		t.Errorf("two jobs of one expression do not share its parse")
	}
	if cronOf(c.ID) == cronOf(a.ID) || cronOf(d.ID) == cronOf(a.ID) {
		t.Errorf("jobs of another zone or expression share the parse of \"0 * * * *\" in UTC")
	}
	if _, err := r.Update(ctx, b.ID, func(j *Job) error { j.Schedule.Cron = "15 * * * *"; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, r, a.ID).Schedule.Cron; got != "0 * * * *" {
		t.Errorf("a's expression after an update of b = %q", got)
	}
	if got := mustGet(t, r, b.ID); got.Schedule.Cron != "15 * * * *" || got.NextRunAt.Minute() != 15 {
		t.Errorf("b after its update: cron %q next %v, want minute 15", got.Schedule.Cron, got.NextRunAt)
	}
	if got := mustGet(t, r, c.ID); got.Schedule.TZ != "Asia/Tokyo" {
		t.Errorf("c's zone = %q", got.Schedule.TZ)
	}
	// A bad expression is refused however many good ones were cached.
	if _, err := r.Add(ctx, job("61 * * * *", "")); !errors.Is(err, ErrInvalidJob) {
		t.Errorf("Add(bad cron) error = %v, want ErrInvalidJob", err)
	}
}

// TestCronNextMemo checks the memo of a shared expression against the
// parse itself, at random times asked in a random order from several
// goroutines, on expressions with gaps of every size and a zone with
// daylight saving.
func TestCronNextMemo(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Skip("no zone data:", err)
	}
	for _, spec := range []string{"*/7 * * * * *", "0 30 2 * * *", "0 0 0 29 2 *", "@every 90s", "0 0 9 * * MON-FRI"} {
		s, err := parseCronIn(spec, ny)
		if err != nil {
			t.Fatal(err)
		}
		cs := &cronExpr{spec: spec, s: s}
		t0 := time.Date(2027, 3, 1, 0, 0, 0, 0, time.UTC).UnixNano()
		var wg sync.WaitGroup
		for g := range 4 {
			wg.Go(func() {
				rng := rand.New(rand.NewPCG(uint64(g), 7))
				at, last := t0, t0
				for range 2000 {
					// Mostly small steps (the memo's case) or the last
					// answer (as a fire asks), sometimes a jump back or
					// ahead.
					switch rng.IntN(10) {
					case 0:
						at = t0 + rng.Int64N(int64(400*24*time.Hour))
					case 1, 2, 3:
						at = last
					default:
						at += rng.Int64N(int64(3 * time.Minute))
					}
					want := toNano(s.Next(time.Unix(0, at)))
					last = want
					if got := cs.next(at); got != want {
						t.Errorf("%s: next(%v) = %v, want %v", spec, fromNano(at), fromNano(got), fromNano(want))
						return
					}
				}
			})
		}
		wg.Wait()
	}
}

// TestNewIDUnique checks that ids drawn from many goroutines at once are
// 32 hex characters and never repeat.
func TestNewIDUnique(t *testing.T) {
	const perG, gs = 5000, 8
	var mu sync.Mutex
	seen := make(map[string]bool, perG*gs)
	var wg sync.WaitGroup
	for range gs {
		wg.Go(func() {
			ids := make([]string, perG)
			for i := range ids {
				ids[i] = newID()
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if len(id) != 32 || !isHex(id) {
					t.Errorf("id %q, want 32 hex characters", id)
				}
				if seen[id] {
					t.Errorf("id %q drawn twice", id)
				}
				seen[id] = true
			}
		})
	}
	wg.Wait()
}

// TestEveryShared checks that every jobs of one jitter share it, and that
// an update of one job's interval or jitter leaves the others alone.
func TestEveryShared(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestRunner(t, nil, &fakeExec{}, Config{})
		ctx := context.Background()
		job := func(every, jitter time.Duration) Job {
			return Job{HTTP: HTTPConfig{URL: "http://a.test/x"},
				Schedule: ScheduleSpec{Kind: KindEvery, Every: Duration(every), Jitter: Duration(jitter)}}
		}
		a := mustAdd(t, r, job(time.Minute, time.Second))
		b := mustAdd(t, r, job(time.Minute, time.Second))
		c := mustAdd(t, r, job(time.Hour, time.Second))
		d := mustAdd(t, r, job(time.Minute, 0))
		cadOf := func(id string) *cadence {
			r.mu.Lock()
			defer r.mu.Unlock()
			_, en, _ := r.lookup(id)
			return en.cad
		}
		if cadOf(a.ID) == nil || cadOf(a.ID) != cadOf(b.ID) || cadOf(a.ID) != cadOf(c.ID) {
			t.Errorf("jobs of one jitter do not share it")
		}
		if cadOf(d.ID) != nil {
			t.Errorf("a job without jitter has a cadence")
		}
		if _, err := r.Update(ctx, b.ID, func(j *Job) error {
			j.Schedule.Every, j.Schedule.Jitter = Duration(time.Hour), Duration(2*time.Second)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if got := mustGet(t, r, a.ID); got.Schedule.Every != Duration(time.Minute) || got.Schedule.Jitter != Duration(time.Second) || !got.NextRunAt.Equal(a.NextRunAt) {
			t.Errorf("a after an update of b: every %v jitter %v next %v, want 1m, 1s, %v", got.Schedule.Every, got.Schedule.Jitter, got.NextRunAt, a.NextRunAt)
		}
		got := mustGet(t, r, b.ID)
		if got.Schedule.Every != Duration(time.Hour) || got.Schedule.Jitter != Duration(2*time.Second) {
			t.Errorf("b after its update: every %v jitter %v, want 1h, 2s", got.Schedule.Every, got.Schedule.Jitter)
		}
		// start_at is now: slot 0 is now, and its jitter puts the run
		// after it, within the new 2s.
		if off := time.Until(got.NextRunAt); off <= 0 || off >= 2*time.Second {
			t.Errorf("b's next run is %v from now, want within (0, 2s)", off)
		}
		if got := mustGet(t, r, c.ID); got.Schedule.Every != Duration(time.Hour) || got.Schedule.Jitter != Duration(time.Second) {
			t.Errorf("c: every %v jitter %v, want 1h, 1s", got.Schedule.Every, got.Schedule.Jitter)
		}
	})
}
