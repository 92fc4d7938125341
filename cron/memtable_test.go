package cron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// exactTimes compares times by ==, so that a lost location or monotonic
// reading shows.
var exactTimes = cmp.Comparer(func(a, b time.Time) bool { return a == b })

// fullJob returns a job with every field set, its times in loc (UTC: the
// form the runner stores), of the given kind.
func fullJob(id, kind string, loc *time.Location) Job {
	at := func(h int) time.Time { return time.Date(2031, 3, 4, h, 5, 6, 789, loc) }
	return Job{
		ID: id, Name: "name of " + id, Paused: true, PausedUntil: at(1), PausedAt: at(2),
		Type: "mail",
		HTTP: HTTPConfig{Method: "POST", URL: "http://callback.test/" + id, Headers: map[string]string{"X-Id": id}, Body: "{{job_id}}"},
		Args: json.RawMessage(`{"to":"` + id + `"}`),
		Schedule: ScheduleSpec{Kind: kind, RunAt: at(3), Every: Duration(time.Minute), StartAt: at(4),
			Jitter: Duration(time.Second), Cron: "*/5 * * * *", TZ: "Europe/Paris"},
		Timeout: Duration(7 * time.Second), MaxRetries: 3, RetryBackoff: Duration(2 * time.Second),
		MisfireGrace: Duration(time.Hour), Alert: &AlertConfig{URL: "http://alert.test", Secret: "s", After: 2,
			PauseAfter: 5, MissedEvery: Duration(time.Minute), Notify: "failure"},
		KeepRuns: 9, LastRunAt: at(5), NextRunAt: at(6), LastStatus: StatusFailed, LastError: "boom " + id,
		Failures: 4, LastAlert: "failing",
	}
}

// checkAllSet fails the test for each field of v (a struct, walked into
// but for times) that is zero, so that a field added to Job is added to
// the round trip too.
func checkAllSet(t *testing.T, v reflect.Value, path string) {
	t.Helper()
	if v.Type() == reflect.TypeFor[time.Time]() || v.Kind() != reflect.Struct {
		if v.IsZero() {
			t.Errorf("%s is not set", path)
		}
		return
	}
	for i := range v.NumField() {
		checkAllSet(t, v.Field(i), path+"."+v.Type().Field(i).Name)
	}
}

// TestMemStoreRoundTrip saves jobs with every field set and checks that
// Load gives them back exactly (times with their location and monotonic
// reading), and with the bookkeeping of each Record after.
func TestMemStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	zone := time.FixedZone("X", 5*3600+1800)
	checkAllSet(t, reflect.ValueOf(fullJob("a", KindOnce, time.UTC)), "Job")
	odd := fullJob("odd", KindEvery, zone)
	odd.LastStatus = "unheard-of"
	odd.NextRunAt = time.Now()                                  // a monotonic reading
	odd.LastRunAt = time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC) // past int64 nanoseconds
	odd.PausedAt = time.Unix(0, 0).UTC()                        // 0 Unix nanoseconds, which is no zero time
	want := []Job{fullJob("a", KindOnce, time.UTC), fullJob("b", KindEvery, time.UTC), odd, fullJob("c", KindCron, zone)}
	s := NewMemStore()
	for _, j := range want {
		if err := s.Save(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	load := func(what string) {
		t.Helper()
		got, err := s.Load(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got, exactTimes); diff != "" {
			t.Errorf("Load %s (-want +got):\n%s", what, diff)
		}
		for i := range min(len(got), len(want)) {
			if reflect.ValueOf(got[i].HTTP.Headers).Pointer() != reflect.ValueOf(want[i].HTTP.Headers).Pointer() {
				t.Errorf("Load %s: job %s has a copy of its header map, not the map saved", what, got[i].ID)
			}
		}
	}
	load("after Save")

	books := []Bookkeeping{
		{LastRunAt: time.Date(2032, 1, 1, 0, 0, 0, 1, time.UTC), NextRunAt: time.Date(2032, 1, 1, 0, 1, 0, 1, time.UTC),
			LastStatus: StatusSuccess, LastError: "", Failures: 0, LastAlert: ""},
		{LastRunAt: time.Date(2032, 1, 1, 0, 0, 0, 1, zone), NextRunAt: time.Now(),
			LastStatus: "other", LastError: "e", Failures: 2, LastAlert: "recovered"},
		{LastRunAt: time.Date(2033, 1, 1, 0, 0, 0, 0, time.UTC), LastStatus: StatusTimeout},
		{},
	}
	for round, b := range books {
		for i := range want {
			b := b
			b.LastError += want[i].ID // a value of each job's own
			if err := s.Record(ctx, want[i].ID, b); err != nil {
				t.Fatal(err)
			}
			b.Apply(&want[i])
		}
		load(fmt.Sprintf("after Record round %d", round))
	}

	// A job saved again keeps its place, with the values of the new save
	// only.
	want[1] = fullJob("b", KindOnce, zone)
	want[1].Paused, want[1].PausedAt, want[1].PausedUntil, want[1].LastError = false, time.Time{}, time.Time{}, ""
	want[2] = fullJob("odd", KindEvery, time.UTC)
	for _, j := range want[1:3] {
		if err := s.Save(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	load("after saving two jobs again")
	if err := s.Delete(ctx, "b"); err != nil {
		t.Fatal(err)
	}
	want = append(want[:1], want[2:]...)
	load("after Delete")
}

// TestMemStoreModel makes random changes to a MemStore, jobs made from a
// few templates (which the store shares) and odd ones, deletes most of
// them (which compacts the store) and checks Load, Runs and Record
// against a plain model after each step.
func TestMemStoreModel(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(39, 1))
	zone := time.FixedZone("Y", -3*3600)
	headers := map[string]string{"X-Token": "t"}
	t0 := time.Date(2030, 6, 1, 0, 0, 0, 0, time.UTC)
	templates := []Job{
		{Type: JobTypeHTTP, HTTP: HTTPConfig{Method: "GET", URL: "http://a.test/", Headers: headers}, Schedule: ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour)}},
		{Type: JobTypeHTTP, HTTP: HTTPConfig{Method: "POST", URL: "http://b.test/", Body: "x"}, Schedule: ScheduleSpec{Kind: KindOnce}, KeepRuns: 2},
		{Type: "fn", Args: json.RawMessage(`[1]`), Schedule: ScheduleSpec{Kind: KindCron, Cron: "@hourly", TZ: "UTC"}, Alert: &AlertConfig{After: 3}},
	}
	at := func() time.Time {
		switch rng.IntN(10) {
		case 0:
			return time.Time{}
		case 1:
			return t0.Add(time.Duration(rng.Int64N(int64(time.Hour)))).In(zone)
		}
		return t0.Add(time.Duration(rng.Int64N(int64(24 * time.Hour))))
	}
	newJob := func(id string) Job {
		if rng.IntN(20) == 0 {
			return fullJob(id, KindEvery, zone)
		}
		j := templates[rng.IntN(len(templates))]
		j.ID = id
		if j.Alert != nil {
			a := *j.Alert // an equal alert, not the same
			j.Alert = &a
		}
		if rng.IntN(4) == 0 {
			j.Name = "own name " + id
		} else {
			j.Name = "batch"
		}
		j.Schedule.StartAt, j.Schedule.RunAt, j.NextRunAt = at(), at(), at()
		if j.Schedule.Kind == KindOnce {
			j.Schedule.StartAt = time.Time{}
		} else {
			j.Schedule.RunAt = time.Time{}
		}
		if rng.IntN(10) == 0 {
			j.Paused, j.PausedAt = true, at()
		}
		return j
	}
	bookkeeping := func() Bookkeeping {
		b := Bookkeeping{LastRunAt: at(), NextRunAt: at(), LastStatus: statusNames[rng.IntN(len(statusNames))]}
		if rng.IntN(5) == 0 {
			b.LastError, b.Failures, b.LastAlert = "failed", rng.IntN(5)+1, "failing"
		}
		return b
	}

	s := &MemStore{RunLimit: 3}
	var order []string
	model := map[string]Job{}
	next := 0
	check := func(step string) {
		t.Helper()
		want := make([]Job, 0, len(order))
		for _, id := range order {
			want = append(want, model[id])
		}
		got, _ := s.Load(ctx)
		if diff := cmp.Diff(want, got, exactTimes); diff != "" {
			t.Fatalf("Load %s (-want +got):\n%s", step, diff)
		}
	}
	change := func() {
		switch op := rng.IntN(10); {
		case op < 4 || len(order) == 0:
			id := fmt.Sprintf("j%05d", next)
			next++
			j := newJob(id)
			if err := s.Save(ctx, j); err != nil {
				t.Fatal(err)
			}
			order = append(order, id)
			model[id] = j
		case op < 6:
			id := order[rng.IntN(len(order))]
			j := newJob(id)
			if err := s.Save(ctx, j); err != nil {
				t.Fatal(err)
			}
			model[id] = j
		case op < 9:
			id := order[rng.IntN(len(order))]
			b := bookkeeping()
			if err := s.Record(ctx, id, b); err != nil {
				t.Fatal(err)
			}
			j := model[id]
			b.Apply(&j)
			model[id] = j
		default:
			k := rng.IntN(len(order))
			if err := s.Delete(ctx, order[k]); err != nil {
				t.Fatal(err)
			}
			delete(model, order[k])
			order = append(order[:k], order[k+1:]...)
		}
	}
	for i := range 3000 {
		change()
		if i%100 == 0 {
			check(fmt.Sprintf("at step %d", i))
		}
	}
	check("after the changes")
	for len(order) > 200 { // deletes most: the store compacts
		k := rng.IntN(len(order))
		if err := s.Delete(ctx, order[k]); err != nil {
			t.Fatal(err)
		}
		delete(model, order[k])
		order = append(order[:k], order[k+1:]...)
	}
	check("after deleting most")
	for range 500 {
		change()
	}
	check("after more changes")
	for _, id := range order {
		for k := range 4 {
			if err := s.AppendRun(ctx, Run{ID: fmt.Sprintf("%s-%d", id, k), JobID: id}); err != nil {
				t.Fatal(err)
			}
		}
		runs, err := s.Runs(ctx, id, 0)
		want := 3
		if k := model[id].KeepRuns; k > 0 {
			want = min(k, 4)
		}
		if err != nil || len(runs) != want {
			t.Errorf("Runs(%s) = %d runs, %v; want %d", id, len(runs), err, want)
		}
	}
	for _, id := range []string{"j00000x", ""} {
		if err := s.Record(ctx, id, Bookkeeping{}); !errors.Is(err, ErrNotFound) {
			t.Errorf("Record(%q) error = %v, want ErrNotFound", id, err)
		}
	}
}

// TestMemStoreRestart runs a runner over a MemStore, with jobs of every
// kind that run, fail, alert and pause, and checks that a new runner over
// the same store (as after a restart) holds the same jobs.
func TestMemStoreRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		t0 := time.Now().UTC()
		st := NewMemStore()
		fail := HandlerFunc(func(context.Context, *Call) error { return errors.New("no luck") })
		cfg := Config{Handlers: map[string]Handler{"fail": fail}}
		a := newTestRunner(t, st, &fakeExec{}, cfg)
		every := ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute), StartAt: t0}
		headers := map[string]string{"X-Token": "t"}
		for i := range 600 { // more than one chunk of the store
			j := httpJob(fmt.Sprintf("tpl%03d", i), every)
			j.Name, j.HTTP.Headers = "batch", headers
			mustAdd(t, a, j)
		}
		full := Job{ID: "full", Name: "full", Type: "fail", Args: json.RawMessage(`{"n":1}`), Schedule: every,
			Timeout: Duration(5 * time.Second), MaxRetries: 1, RetryBackoff: Duration(time.Second),
			MisfireGrace: Duration(time.Minute), KeepRuns: 7, Alert: &AlertConfig{URL: "http://alert.test/", After: 2}}
		mustAdd(t, a, full)
		mustAdd(t, a, httpJob("once", ScheduleSpec{Kind: KindOnce, RunAt: t0.Add(90 * time.Second)}))
		mustAdd(t, a, httpJob("cron", ScheduleSpec{Kind: KindCron, Cron: "*/2 * * * *", TZ: "Europe/Paris"}))
		mustAdd(t, a, httpJob("pausedlater", every))
		stop := start(t, a)
		time.Sleep(3*time.Minute + 30*time.Second)
		if _, err := a.Pause(ctx, "pausedlater", t0.Add(time.Hour)); err != nil {
			t.Fatal(err)
		}
		if err := a.Remove(ctx, "tpl005"); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		before := mustList(t, a)
		f := mustGet(t, a, "full")
		if f.LastError == "" || f.Failures == 0 || f.LastAlert == "" || f.LastRunAt.IsZero() {
			t.Errorf("job full: last_error %q failures %d last_alert %q last_run_at %v; want all set",
				f.LastError, f.Failures, f.LastAlert, f.LastRunAt)
		}
		if p := mustGet(t, a, "pausedlater"); p.PausedAt.IsZero() || p.PausedUntil.IsZero() {
			t.Errorf("job pausedlater: paused_at %v paused_until %v; want both set", p.PausedAt, p.PausedUntil)
		}
		stored, _ := st.Load(ctx)
		if diff := cmp.Diff(before, stored, exactTimes); diff != "" {
			t.Errorf("stored jobs (-runner +store):\n%s", diff)
		}
		b := newTestRunner(t, st, &fakeExec{}, cfg)
		if err := b.Load(ctx); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(before, mustList(t, b), exactTimes); diff != "" {
			t.Errorf("jobs after a restart (-before +after):\n%s", diff)
		}
	})
}

// TestMemStoreConcurrent saves, records, deletes and loads from several
// goroutines at once (for the race detector), then checks what is left.
func TestMemStoreConcurrent(t *testing.T) {
	ctx := context.Background()
	s := NewMemStore()
	const workers, each = 4, 300
	done := make(chan error, workers+1)
	for w := range workers {
		go func() {
			for i := range each {
				id := fmt.Sprintf("w%d-%d", w, i)
				j := httpJob(id, ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)})
				if err := s.Save(ctx, j); err != nil {
					done <- err
					return
				}
				if err := s.Record(ctx, id, Bookkeeping{LastStatus: StatusSuccess, LastError: id}); err != nil {
					done <- err
					return
				}
				if err := s.AppendRun(ctx, Run{ID: id, JobID: id}); err != nil {
					done <- err
					return
				}
				if i%2 == 1 {
					if err := s.Delete(ctx, id); err != nil {
						done <- err
						return
					}
				}
			}
			done <- nil
		}()
	}
	go func() {
		for range 50 {
			if _, err := s.Load(ctx); err != nil {
				done <- err
				return
			}
			if _, err := s.Runs(ctx, "w0-0", 0); err != nil && !errors.Is(err, ErrNotFound) {
				done <- err
				return
			}
		}
		done <- nil
	}()
	for range workers + 1 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	jobs, _ := s.Load(ctx)
	if len(jobs) != workers*each/2 {
		t.Fatalf("Load: %d jobs, want %d", len(jobs), workers*each/2)
	}
	for _, j := range jobs {
		if j.LastError != j.ID || j.LastStatus != StatusSuccess {
			t.Errorf("job %s: last_error %q status %q, want its id and success", j.ID, j.LastError, j.LastStatus)
		}
	}
}
