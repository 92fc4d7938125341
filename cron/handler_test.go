package cron

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// calls records the calls a handler gets.
type calls struct {
	mu  sync.Mutex
	got []Call
}

func (c *calls) add(call *Call) {
	c.mu.Lock()
	c.got = append(c.got, *call)
	c.mu.Unlock()
}

func (c *calls) all() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.got...)
}

func goJob(id, typ string, s ScheduleSpec) Job {
	return Job{ID: id, Name: "fn " + id, Type: typ, Schedule: s}
}

// TestHandlerRuns: a job of a registered type is run by its handler on
// schedule, with its args and the run's info; its runs are recorded as an
// HTTP job's are, and the executor is never called.
func TestHandlerRuns(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Now().UTC()
		type reportArgs struct {
			Team string `json:"team"`
		}
		var seen calls
		var teams []string
		var mu sync.Mutex
		st := NewMemStore()
		ex := &fakeExec{}
		obs := &recObserver{}
		r := newTestRunner(t, st, ex, Config{Observer: obs, Handlers: map[string]Handler{
			"report": Typed(func(ctx context.Context, a reportArgs, c *Call) error {
				seen.add(c)
				mu.Lock()
				teams = append(teams, a.Team)
				mu.Unlock()
				return nil
			}),
		}})
		j := goJob("rep", "report", Every(time.Minute))
		j.Args = json.RawMessage(`{ "team" : "core" }`)
		added := mustAdd(t, r, j)
		if string(added.Args) != `{"team":"core"}` || added.Type != "report" || added.WritesHTTP() {
			t.Fatalf("added: type %q args %s http %+v; want report, compact args, no http", added.Type, added.Args, added.HTTP)
		}
		stop := start(t, r)
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		_ = stop()
		got := seen.all()
		if len(got) != 2 {
			t.Fatalf("handler called %d times, want 2 (at 1m and 2m)", len(got))
		}
		for i, c := range got {
			if want := t0.Add(time.Duration(i+1) * time.Minute); !c.ScheduledAt.Equal(want) || c.Attempt != 1 || c.JobID != "rep" ||
				len(c.RunID) != 32 || c.Job.Name != "fn rep" {
				t.Errorf("call %d: scheduled %v attempt %d job %q run %q name %q; want %v, 1, rep, a run id, fn rep",
					i, c.ScheduledAt, c.Attempt, c.JobID, c.RunID, c.Job.Name, want)
			}
		}
		if diff := cmp.Diff([]string{"core", "core"}, teams); diff != "" {
			t.Errorf("args (-want +got):\n%s", diff)
		}
		if n := len(ex.runs()); n != 0 {
			t.Errorf("executor called %d times for a Go function job, want 0", n)
		}
		if diff := cmp.Diff([]Status{StatusSuccess, StatusSuccess}, obs.statuses("rep")); diff != "" {
			t.Errorf("observed (-want +got):\n%s", diff)
		}
		runs, _ := st.Runs(context.Background(), "rep", 0)
		if len(runs) != 2 || runs[0].Status != StatusSuccess || runs[0].Attempts != 1 {
			t.Errorf("stored runs %+v, want 2 successes of one attempt", runs)
		}
		stored, _ := st.Load(context.Background())
		if len(stored) != 1 || stored[0].Type != "report" || string(stored[0].Args) != `{"team":"core"}` || stored[0].LastStatus != StatusSuccess {
			t.Errorf("stored job %+v, want type report, its args, last_status success", stored)
		}
	})
}

// TestHandlerOutcomes: retries, timeouts, permanent errors, panics and
// args that do not fit, each as the job's settings say.
func TestHandlerOutcomes(t *testing.T) {
	tests := []struct {
		name    string
		retries int
		h       func(ctx context.Context, c *Call) error
		args    string
		want    Status
		tries   int
		errHas  string
		elapsed time.Duration // from the run's start to its end
	}{
		{"success", 3, func(context.Context, *Call) error { return nil }, "", StatusSuccess, 1, "", 0},
		{"retried then success", 3, func(_ context.Context, c *Call) error {
			if c.Attempt < 3 {
				return errors.New("flaky")
			}
			return nil
		}, "", StatusSuccess, 3, "", 2 * time.Second},
		{"retries exhausted", 2, func(context.Context, *Call) error { return errors.New("down") }, "", StatusFailed, 3, "down", 2 * time.Second},
		{"permanent", 3, func(context.Context, *Call) error { return Permanent(errors.New("bad input")) }, "", StatusFailed, 1, "bad input", 0},
		{"timeout each attempt", 1, func(ctx context.Context, _ *Call) error {
			<-ctx.Done()
			return ctx.Err()
		}, "", StatusTimeout, 2, "timeout after 3s", 7 * time.Second},
		{"panic", 1, func(context.Context, *Call) error { panic("boom") }, "", StatusFailed, 2, "handler panicked: boom", time.Second},
		{"args do not fit", 3, nil, `{"nope":1}`, StatusFailed, 1, "unknown field", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				h := Handler(HandlerFunc(tt.h))
				if tt.h == nil {
					h = Typed(func(context.Context, struct{ A int }, *Call) error { return nil })
				}
				obs := &recObserver{}
				r := newTestRunner(t, nil, nil, Config{Observer: obs, Handlers: map[string]Handler{"t": h}})
				j := goJob("j", "t", At(time.Now().Add(time.Second)))
				j.MaxRetries, j.Timeout, j.RetryBackoff, j.Args = tt.retries, Duration(3*time.Second), Duration(time.Second), json.RawMessage(tt.args)
				mustAdd(t, r, j)
				stop := start(t, r)
				time.Sleep(time.Minute)
				synctest.Wait()
				_ = stop()
				runs, err := r.Runs(context.Background(), "j", 0)
				if err != nil || len(runs) != 1 {
					t.Fatalf("Runs = %+v, %v; want one run", runs, err)
				}
				run := runs[0]
				if run.Status != tt.want || run.Attempts != tt.tries || !strings.Contains(run.Error, tt.errHas) || run.Latency.D() != tt.elapsed {
					t.Errorf("run: %s after %d attempts in %s, error %q; want %s after %d in %s, error containing %q",
						run.Status, run.Attempts, run.Latency, run.Error, tt.want, tt.tries, tt.elapsed, tt.errHas)
				}
				if n := len(run.AttemptLog); (run.Attempts > 1 && n != run.Attempts) || (run.Attempts == 1 && n != 0) {
					t.Errorf("%d attempts, attempt log %+v", run.Attempts, run.AttemptLog)
				}
				for i, a := range run.AttemptLog {
					if i < len(run.AttemptLog)-1 && (a.Status == StatusSuccess || a.Error == "") {
						t.Errorf("attempt %d of %+v: retried, so failed with an error", i+1, run.AttemptLog)
					}
					if i > 0 && !a.StartedAt.After(run.AttemptLog[i-1].StartedAt) {
						t.Errorf("attempts not in order: %+v", run.AttemptLog)
					}
				}
				if got := mustGet(t, r, "j"); got.LastStatus != tt.want || got.LastError != run.Error {
					t.Errorf("job: last_status %q last_error %q; want %q %q", got.LastStatus, got.LastError, tt.want, run.Error)
				}
			})
		})
	}
}

// TestHandlerCancelledAtStop: a run in flight when the runner stops gets
// DrainTimeout, then its context is cancelled and it is recorded as a
// cancelled failure, without retry.
func TestHandlerCancelledAtStop(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var seen calls
		st := NewMemStore()
		r := newTestRunner(t, st, nil, Config{DrainTimeout: 2 * time.Second})
		r.Handle("block", HandlerFunc(func(ctx context.Context, c *Call) error {
			seen.add(c)
			<-ctx.Done()
			return ctx.Err()
		}))
		j := goJob("b", "block", At(time.Now().Add(time.Second)))
		j.MaxRetries, j.Timeout = 5, Duration(time.Hour)
		mustAdd(t, r, j)
		stop := start(t, r)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		began := time.Now()
		_ = stop()
		if took := time.Since(began); took != 2*time.Second {
			t.Errorf("Run returned %v after cancel, want the drain timeout, 2s", took)
		}
		runs, _ := st.Runs(context.Background(), "b", 0)
		if len(runs) != 1 || runs[0].Status != StatusFailed || runs[0].Error != "run cancelled" || runs[0].Attempts != 1 || len(seen.all()) != 1 {
			t.Errorf("runs %+v after %d calls; want one failed run, \"run cancelled\", 1 attempt", runs, len(seen.all()))
		}
	})
}

// TestUnhandledType: a stored job whose type has no handler is kept and
// reported; its runs fail with the reason until a handler is registered.
// A new job of such a type is refused, naming the field.
func TestUnhandledType(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		st := NewMemStore()
		stored := goJob("orphan", "gone", Every(time.Hour))
		stored.Args = json.RawMessage(`[1,2]`)
		stored.Schedule.StartAt = time.Now().UTC()
		if err := st.Save(ctx, stored); err != nil {
			t.Fatal(err)
		}
		r := newTestRunner(t, st, nil, Config{})
		stop := start(t, r)
		synctest.Wait()
		if diff := cmp.Diff(map[string]int{"gone": 1}, r.Unhandled()); diff != "" {
			t.Errorf("Unhandled (-want +got):\n%s", diff)
		}
		if _, err := r.RunNow(ctx, "orphan", RunOptions{Force: true}); err != nil {
			t.Fatalf("RunNow: %v", err)
		}
		synctest.Wait()
		runs, _ := st.Runs(ctx, "orphan", 0)
		if len(runs) != 1 || runs[0].Status != StatusFailed || !strings.Contains(runs[0].Error, `no handler for type "gone"`) {
			t.Errorf("runs %+v, want one failed run naming the missing handler", runs)
		}
		_, err := r.Add(ctx, goJob("new", "gone", Every(time.Hour)))
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "type" || !strings.Contains(ve.Reason, `no handler is registered for type "gone"`) {
			t.Errorf("Add of an unhandled type: %v, want a ValidationError on type", err)
		}
		r.Handle("gone", Func(func(context.Context) error { return nil }))
		if got := r.Unhandled(); got != nil {
			t.Errorf("Unhandled after Handle = %v, want nil", got)
		}
		if _, err := r.RunNow(ctx, "orphan", RunOptions{Force: true}); err != nil {
			t.Fatalf("RunNow: %v", err)
		}
		synctest.Wait()
		_ = stop()
		if runs, _ := st.Runs(ctx, "orphan", 0); len(runs) != 2 || runs[0].Status != StatusSuccess {
			t.Errorf("runs %+v, want the newest a success", runs)
		}
		all, _ := st.Load(ctx)
		if len(all) != 1 || all[0].ID != "orphan" || string(all[0].Args) != `[1,2]` {
			t.Errorf("store holds %+v, want the job kept as it was", all)
		}
	})
}

// TestTypedValidation: the fields of an HTTP job are refused on a Go
// function job and the other way round, and type names and args are
// checked.
func TestTypedValidation(t *testing.T) {
	base := goJob("j", "report", Every(time.Minute))
	tests := []struct {
		name  string
		edit  func(j *Job)
		field string
	}{
		{"http on a function job", func(j *Job) { j.HTTP.URL = "http://x.test/" }, "http"},
		{"method on a function job", func(j *Job) { j.HTTP.Method = "GET" }, "http"},
		{"args on an http job", func(j *Job) { j.Type, j.HTTP.URL, j.Args = "", "http://x.test/", json.RawMessage(`{}`) }, "args"},
		{"args not JSON", func(j *Job) { j.Args = json.RawMessage(`{"a":`) }, "args"},
		{"type with a space", func(j *Job) { j.Type = "my report" }, "type"},
		{"type too long", func(j *Job) { j.Type = strings.Repeat("t", MaxTypeLen+1) }, "type"},
	}
	for _, tt := range tests {
		j := base
		tt.edit(&j)
		err := j.Validate()
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != tt.field {
			t.Errorf("%s: Validate = %v, want a ValidationError on %q", tt.name, err, tt.field)
		}
	}
	j := base
	j.Args = json.RawMessage(" null ")
	if _, err := j.Prepare(time.Now(), Rules{}); err != nil || j.Args != nil || j.Type != "report" || j.HTTP.Method != "" {
		t.Errorf("Prepare: %v, args %q type %q method %q; want no error, null args dropped, no method", err, j.Args, j.Type, j.HTTP.Method)
	}
}

func TestHandleRefuses(t *testing.T) {
	r := newTestRunner(t, nil, nil, Config{})
	r.Handle("ok", Func(func(context.Context) error { return nil }))
	for _, tt := range []struct {
		typ string
		h   Handler
	}{
		{"http", Func(func(context.Context) error { return nil })},
		{"", Func(func(context.Context) error { return nil })},
		{"a b", Func(func(context.Context) error { return nil })},
		{"nil", nil},
		{"ok", Func(func(context.Context) error { return nil })},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Handle(%q) did not panic", tt.typ)
				}
			}()
			r.Handle(tt.typ, tt.h)
		}()
	}
	if _, err := New(nil, nil, Config{Handlers: map[string]Handler{"http": Func(nil)}}); err == nil || !strings.Contains(err.Error(), "Config.Handlers") {
		t.Errorf("New with a handler for http: %v, want an error naming Config.Handlers", err)
	}
	if diff := cmp.Diff([]string{"http", "ok"}, r.Types()); diff != "" {
		t.Errorf("Types (-want +got):\n%s", diff)
	}
}

// TestJobJSONTyped: a Go function job's JSON has type and args and no http
// object; an HTTP job's has http and no args.
func TestJobJSONTyped(t *testing.T) {
	j := goJob("j", "report", Every(time.Minute))
	j.Args = json.RawMessage(`{"team":"core"}`)
	b, _ := json.Marshal(j)
	if s := string(b); strings.Contains(s, `"http"`) || !strings.Contains(s, `"type":"report","args":{"team":"core"}`) {
		t.Errorf("typed job JSON %s: want type and args, no http", s)
	}
	var back Job
	if err := json.Unmarshal(b, &back); err != nil || back.Type != "report" || string(back.Args) != `{"team":"core"}` {
		t.Errorf("round trip: %+v, %v", back, err)
	}
	h := httpJob("h", Every(time.Minute))
	b, _ = json.Marshal(h)
	if s := string(b); !strings.Contains(s, `"http":{`) || strings.Contains(s, `"args"`) {
		t.Errorf("http job JSON %s: want http, no args", s)
	}
}
