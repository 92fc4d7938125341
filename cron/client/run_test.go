package client_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
)

func ptr[T any](v T) *T { return &v }

// TestClientRunAndWait: Wait returns the record of a run-now once it
// ends, with its trigger; Run of an unknown id matches ErrNotFound; Wait
// of an id that never ends returns when ctx does. A Body of bytes reaches
// the callback, an empty one as an empty body.
func TestClientRunAndWait(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var bodies []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(b))
		mu.Unlock()
		if r.URL.Path == "/fail" {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	t.Cleanup(hook.Close)
	s := newService(t, "")
	c := s.client(t, "")
	for _, id := range []string{"ok", "fail"} {
		j := cron.Job{ID: id, HTTP: cron.HTTPConfig{Method: "POST", URL: hook.URL + "/" + id, Body: "stored"}, Schedule: cron.Every(time.Hour)}
		if _, err := c.Create(ctx, j); err != nil {
			t.Fatal(err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	id, err := c.RunNowWith(ctx, "ok", client.RunNowOptions{Body: []byte(`{"x":1}`)})
	if err != nil {
		t.Fatal(err)
	}
	run, err := c.Wait(wctx, id)
	if err != nil || run.ID != id || run.JobID != "ok" || run.Status != cron.StatusSuccess || run.Trigger != cron.TriggerRunNow || run.TriggeredBy == "" {
		t.Errorf("Wait(%s) = %+v, %v; want the success of job ok, triggered by a run-now, who asked named", id, run, err)
	}
	if got, err := c.Run(ctx, id); err != nil || got.ID != id || got.Status != cron.StatusSuccess {
		t.Errorf("Run(%s) = %+v, %v; want the same record", id, got, err)
	}
	id, err = c.RunNowWith(ctx, "fail", client.RunNowOptions{Body: []byte{}, Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if run, err := c.Wait(wctx, id); err != nil || run.Status != cron.StatusFailed {
		t.Errorf("Wait of a failing run = %+v, %v; want failed", run, err)
	}
	mu.Lock()
	if len(bodies) < 2 || bodies[0] != `{"x":1}` || bodies[len(bodies)-1] != "" {
		t.Errorf("bodies sent %q; want the override, then an empty one", bodies)
	}
	mu.Unlock()

	_, err = c.Run(ctx, "no-such-run")
	wantAPIError(t, "Run of an unknown id", err, 404, "", cron.ErrNotFound)
	short, cancel2 := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel2()
	if _, err := c.Wait(short, "no-such-run"); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait of an unknown id = %v, want the end of ctx", err)
	}
}

// TestClientTypedPatch: a JobPatch changes the fields it sets and no
// other: a pointer to 0 sets 0, enabled false pauses, the http fields
// set are merged into the callback.
func TestClientTypedPatch(t *testing.T) {
	ctx := context.Background()
	s := newService(t, "")
	c := s.client(t, "")
	j := s.job("p", cron.Every(time.Hour))
	j.MaxRetries = 3
	j.HTTP.Headers = map[string]string{"X-Keep": "1"}
	if _, err := c.Create(ctx, j); err != nil {
		t.Fatal(err)
	}
	got, err := c.Patch(ctx, "p", client.JobPatch{MaxRetries: ptr(0), Enabled: ptr(false),
		HTTP: &client.HTTPPatch{Body: ptr("new body"), Headers: map[string]string{"X-New": "2"}}})
	if err != nil {
		t.Fatalf("Patch: %v", err)
	}
	if got.MaxRetries != 0 || !got.Paused || got.HTTP.Body != "new body" || got.HTTP.Headers["X-Keep"] != "1" || got.HTTP.Headers["X-New"] != "2" ||
		got.Name != j.Name || got.HTTP.URL != j.HTTP.URL {
		t.Errorf("patched job %+v; want max_retries 0, paused, the new body, both headers, the rest kept", got)
	}
	_, err = c.Patch(ctx, "p", client.JobPatch{Timeout: ptr(cron.Duration(-time.Second))})
	wantAPIError(t, "Patch to a bad timeout", err, 400, "timeout", cron.ErrInvalidJob)
}
