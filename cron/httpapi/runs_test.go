package httpapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// loadedFixture serves the API over a runner of st that has loaded its
// jobs and does not run: nothing fires.
func loadedFixture(t *testing.T, st cron.Store, exec cron.Executor) *fixture {
	t.Helper()
	r, err := cron.New(st, exec, cron.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Load(context.Background()); err != nil {
		t.Fatal(err)
	}
	api, err := New(r, Config{})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{runner: r, api: api, srv: httptest.NewServer(api)}
	t.Cleanup(f.srv.Close)
	return f
}

// TestHistory: GET /runs pages the runs of every job newest first
// through its Link header, applies the filters, and names the bad
// parameter of a bad query.
func TestHistory(t *testing.T) {
	ctx := context.Background()
	st := cron.NewMemStore()
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	var all []cron.Run
	for _, id := range []string{"a", "b", "c"} {
		j := cron.Job{ID: id, HTTP: cron.HTTPConfig{Method: "POST", URL: "http://callback.test/"},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour), StartAt: t0.Add(1000 * time.Hour)}}
		if err := st.Save(ctx, j); err != nil {
			t.Fatal(err)
		}
		for i := range 30 {
			r := cron.Run{ID: fmt.Sprintf("%s-%02d", id, i), JobID: id, ScheduledAt: t0.Add(time.Duration(i) * time.Minute), Status: cron.StatusSuccess}
			switch i % 5 {
			case 1:
				r.Status = cron.StatusFailed
			case 2:
				r.Status, r.Reason, r.Slots = cron.StatusMissed, cron.ReasonDowntime, 3
			}
			all = append(all, r)
			if err := st.AppendRun(ctx, r); err != nil {
				t.Fatal(err)
			}
		}
	}
	srv := loadedFixture(t, st, cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result { return cron.Result{} })).srv
	get := func(path string) (int, http.Header, []byte) {
		t.Helper()
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var raw json.RawMessage
		_ = json.NewDecoder(resp.Body).Decode(&raw)
		return resp.StatusCode, resp.Header, raw
	}
	link := regexp.MustCompile(`^<\?([^>]*)>; rel="next"$`)
	for _, c := range []struct {
		query string
		q     cron.RunQuery
	}{
		{"limit=7", cron.RunQuery{}},
		{"limit=4&job=a&job=c", cron.RunQuery{JobIDs: []string{"a", "c"}}},
		{"status=failed,missed&limit=9", cron.RunQuery{Statuses: []cron.Status{cron.StatusFailed, cron.StatusMissed}}},
		{"since=2026-03-01T00:10:00Z&until=2026-03-01T00:20:00Z&job=b&limit=3", cron.RunQuery{JobIDs: []string{"b"},
			Since: t0.Add(10 * time.Minute), Until: t0.Add(20 * time.Minute)}},
	} {
		c.q.Limit = cron.MaxRunQueryLimit
		want, _ := c.q.Page(all)
		var got []cron.Run
		query := c.query
		for page := 0; page < 100; page++ {
			status, h, body := get("/runs?" + query)
			if status != 200 {
				t.Fatalf("GET /runs?%s: %d %s", query, status, body)
			}
			var runs []cron.Run
			if err := json.Unmarshal(body, &runs); err != nil {
				t.Fatal(err)
			}
			got = append(got, runs...)
			m := link.FindStringSubmatch(h.Get("Link"))
			if m == nil {
				break
			}
			query = m[1]
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("GET /runs?%s, every page (-want +got):\n%s", c.query, diff)
		}
	}
	// The burst fields reach the client.
	_, _, body := get("/runs?job=a&status=missed&limit=1")
	if !strings.Contains(string(body), `"reason":"downtime","slots":3`) {
		t.Errorf("GET /runs of a missed burst: %s, want reason and slots", body)
	}
	for _, c := range []struct{ query, field string }{
		{"limit=0", "limit"}, {"limit=1001", "limit"}, {"limit=x", "limit"}, {"status=paused", "status"},
		{"since=yesterday", "since"}, {"until=2026-13-01T00:00:00Z", "until"}, {"job=", "job"}, {"instance=", "instance"},
		{"after=zzz", "after"}, {"color=red", "color"}, {"limit=1&limit=2", "limit"},
		{"since=2026-03-02T00:00:00Z&until=2026-03-01T00:00:00Z", "since"},
	} {
		status, _, body := get("/runs?" + c.query)
		var e errorBody
		_ = json.Unmarshal(body, &e)
		if status != 400 || e.Field != c.field || e.Error == "" {
			t.Errorf("GET /runs?%s: %d %s, want 400 naming %q", c.query, status, body, c.field)
		}
	}
}
