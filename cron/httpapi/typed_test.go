package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/internal/jobfuzz"
)

// TestGoFunctionJobs: through the API, a job of a registered type is
// created with its args, listed, read, run now, and its run recorded; a
// job of an unregistered type is refused naming the field, and the fields
// of the other kind of job are refused too.
func TestGoFunctionJobs(t *testing.T) {
	var got atomic.Value
	r, err := cron.New(cron.NewMemStore(), nil, cron.Config{Handlers: map[string]cron.Handler{
		"report": cron.HandlerFunc(func(ctx context.Context, c *cron.Call) error {
			got.Store(string(c.Job.Args))
			return errors.New("printer on fire")
		}),
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	api, err := New(r, Config{DefaultMaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{runner: r, api: api, srv: httptest.NewServer(api)}
	t.Cleanup(f.srv.Close)

	res := f.do(t, "POST", "/jobs", `{"id":"rep","type":"report","args":{"team": "core"},"schedule":{"kind":"every","every":"1h"},"timeout":"2s"}`, nil)
	if res.status != 201 {
		t.Fatalf("create: %d %s", res.status, res.body)
	}
	if strings.Contains(res.body, `"http"`) || !strings.Contains(res.body, `"type":"report","args":{"team":"core"}`) {
		t.Errorf("created job %s: want type and compact args, no http", res.body)
	}
	if res := f.do(t, "POST", "/jobs", `{"id":"web","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"}}`, nil); res.status != 201 {
		t.Fatalf("create http job: %d %s", res.status, res.body)
	}
	res = f.do(t, "GET", "/jobs?type=report", "", nil)
	var listed []cron.Job
	if err := json.Unmarshal([]byte(res.body), &listed); err != nil || res.status != 200 || len(listed) != 1 || listed[0].ID != "rep" {
		t.Errorf("GET /jobs?type=report: %d %s, want the one report job", res.status, res.body)
	}
	if j := decodeJob(t, f.do(t, "GET", "/jobs/rep", "", nil).body); j.Type != "report" || string(j.Args) != `{"team":"core"}` {
		t.Errorf("GET /jobs/rep: type %q args %s", j.Type, j.Args)
	}
	if res := f.do(t, "POST", "/jobs/rep/run-now", "", nil); res.status != 202 {
		t.Fatalf("run-now: %d %s", res.status, res.body)
	}
	var runs []cron.Run
	deadline := time.Now().Add(10 * time.Second)
	for len(runs) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // polls the API for the run's record
		_ = json.Unmarshal([]byte(f.do(t, "GET", "/jobs/rep/runs", "", nil).body), &runs)
	}
	if len(runs) != 1 || runs[0].Status != cron.StatusFailed || runs[0].Error != "printer on fire" || runs[0].Attempts != 1 {
		t.Errorf("runs %+v, want one failed run with the handler's error, 1 attempt (max_retries defaulted to 0)", runs)
	}
	if a, _ := got.Load().(string); a != `{"team":"core"}` {
		t.Errorf("handler got args %q", a)
	}
	// PATCH its args.
	if res := f.do(t, "PATCH", "/jobs/rep", `{"args":{"team":"ops"}}`, nil); res.status != 200 || decodeJob(t, res.body).Args == nil ||
		!jobfuzz.SameJSON(decodeJob(t, res.body).Args, json.RawMessage(`{"team":"ops"}`)) {
		t.Errorf("PATCH args: %d %s", res.status, res.body)
	}

	for _, tt := range []struct{ name, body, wantBody string }{
		{"unregistered type", `{"type":"nope","schedule":{"kind":"every","every":"1h"}}`,
			errBody(`no handler is registered for type "nope"; the runner runs http, report`, "type")},
		{"bad type name", `{"type":"a b","schedule":{"kind":"every","every":"1h"}}`,
			errBody(`may hold only letters, digits, '-', '_', '.' and ':', got " " at offset 1`, "type")},
		{"http on a function job", `{"type":"report","http":{"url":"http://h/"},"schedule":{"kind":"every","every":"1h"}}`,
			errBody(`is for jobs of type http; a job of type "report" takes args`, "http")},
		{"args on an http job", `{"args":[1],"http":{"url":"http://h/"},"schedule":{"kind":"every","every":"1h"}}`,
			errBody(`is for jobs that run a Go function; an HTTP job sends http.body`, "args")},
	} {
		before := listJobs(t, r)
		if res := f.do(t, "POST", "/jobs", tt.body, nil); res.status != 400 || res.body != tt.wantBody {
			t.Errorf("%s: %d %s, want 400 %s", tt.name, res.status, res.body, tt.wantBody)
		}
		if diff := cmp.Diff(before, listJobs(t, r)); diff != "" {
			t.Errorf("%s: a refused create changed the jobs:\n%s", tt.name, diff)
		}
	}
}

// FuzzDecodeMatchesJob holds the API's decoding of a job body to cron.Job's
// own JSON form: a job with every field set (by reflection: a field added
// to cron.Job is set too), written by MarshalJSON without its system
// fields, reads back through decodeJobBody as cron.Job reads it. A field
// the API does not know fails here.
func FuzzDecodeMatchesJob(f *testing.F) {
	f.Add([]byte("seed"))
	f.Add(make([]byte, 300))
	all := make([]byte, 600)
	for i := range all {
		all[i] = byte(i*7 + 3)
	}
	f.Add(all)
	f.Fuzz(func(t *testing.T, data []byte) {
		j := jobfuzz.Fill(data)
		j.LastRunAt, j.NextRunAt, j.LastStatus, j.LastError, j.PausedUntil, j.PausedAt = time.Time{}, time.Time{}, "", "", time.Time{}, time.Time{}
		j.Failures, j.LastAlert = 0, ""
		want, err := jobfuzz.Reference(j)
		if err != nil {
			t.Skip(err)
		}
		b, _ := json.Marshal(j)
		var doc map[string]json.RawMessage
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatal(err)
		}
		for f := range systemFields {
			delete(doc, f)
		}
		b, _ = json.Marshal(doc)
		p, rerr := decodeJobBody(b)
		if rerr != nil {
			t.Fatalf("decodeJobBody: %v\n%s", rerr, b)
		}
		got := cron.Job{ID: p.id}
		p.apply(&got)
		if diff := cmp.Diff(want, got, cmp.Comparer(jobfuzz.SameJSON)); diff != "" {
			t.Errorf("decoded (-cron.Job's JSON +API):\n%s\n%s", diff, b)
		}
	})
}
