package cron

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestRunNowWith: a run-now's body and headers reach the callback of that
// run only; a run-now while a run is in flight is ErrInFlight unless
// forced; overrides that do not fit the job name their field.
func TestRunNowWith(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var mu sync.Mutex
		var seen []HTTPConfig
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			mu.Lock()
			seen = append(seen, j.HTTP)
			mu.Unlock()
			<-release
			return Result{Status: StatusSuccess, Attempts: 1}
		}}
		r := newTestRunner(t, NewMemStore(), ex, Config{})
		j := httpJob("h", Every(time.Hour))
		j.HTTP.Body = "stored"
		j.HTTP.Headers = map[string]string{"X-A": "1", "X-B": "2"}
		mustAdd(t, r, j)
		stop := start(t, r)
		defer stop()
		ctx := context.Background()
		body := "over {{job_id}}"
		if _, err := r.RunNow(ctx, "h", RunOptions{Body: &body, Headers: map[string]string{"x-b": "3"}}); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := r.RunNow(ctx, "h", RunOptions{}); !errors.Is(err, ErrInFlight) {
			t.Errorf("run-now during a run: %v, want ErrInFlight", err)
		}
		if _, err := r.RunNow(ctx, "h", RunOptions{Force: true}); err != nil {
			t.Errorf("forced run-now during a run: %v", err)
		}
		close(release)
		synctest.Wait()
		want := []HTTPConfig{
			{Method: "GET", URL: j.HTTP.URL, Headers: map[string]string{"X-A": "1", "x-b": "3"}, Body: "over {{job_id}}"},
			{Method: "GET", URL: j.HTTP.URL, Headers: map[string]string{"X-A": "1", "X-B": "2"}, Body: "stored"},
		}
		mu.Lock()
		got := seen
		mu.Unlock()
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("callbacks (-want +got):\n%s", diff)
		}
		if got := mustGet(t, r, "h"); got.HTTP.Body != "stored" {
			t.Errorf("stored body after an override = %q, want stored", got.HTTP.Body)
		}
		for _, tt := range []struct {
			opts  RunOptions
			field string
		}{
			{RunOptions{Args: []byte(`{}`)}, "args"},
			{RunOptions{Headers: map[string]string{"Bad Name": "x"}}, "headers"},
			{RunOptions{Body: ptr("{{nope}}")}, "body"},
		} {
			var ve *ValidationError
			if _, err := r.RunNow(ctx, "h", tt.opts); !errors.As(err, &ve) || ve.Field != tt.field {
				t.Errorf("RunNow(%+v) = %v, want an error on %s", tt.opts, err, tt.field)
			}
		}
	})
}
