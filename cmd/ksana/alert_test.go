package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// alertSink is a webhook that verifies and keeps the alerts it gets.
type alertSink struct {
	*httptest.Server
	mu  sync.Mutex
	got []cron.Alert
}

func newAlertSink(t *testing.T, secret string) *alertSink {
	s := &alertSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := cron.VerifyAlert(secret, r.Header, body, time.Now(), time.Minute); err != nil {
			t.Errorf("alert: %v", err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var a cron.Alert
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("alert body %s: %v", body, err)
		}
		s.mu.Lock()
		s.got = append(s.got, a)
		s.mu.Unlock()
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *alertSink) transitions() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, a := range s.got {
		out = append(out, a.Transition+"@"+strconv.Itoa(a.ConsecutiveFailures))
	}
	return out
}

// TestClusterAlertOnce: two ksana processes on one PostgreSQL database,
// with the service's alert webhook (KSANA_ALERT_URL, KSANA_ALERT_SECRET):
// a job whose callback fails raises failing, failing_streak and paused
// once each, signed, and is paused on both instances.
func TestClusterAlertOnce(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("processes on PostgreSQL")
	}
	dbURL := postgresSchemaURL(t, "ksana_alert_test")
	bin := buildKsana(t)
	sink := newAlertSink(t, "k3y")
	cb := newCallback(t, http.StatusInternalServerError, 0)
	env := []string{"DATABASE_URL=" + dbURL, "KSANA_LEASE_TTL=2s", "KSANA_ALERT_URL=" + sink.URL, "KSANA_ALERT_SECRET=k3y"}
	ms := []*member{startMember(t, bin, "a", env...), startMember(t, bin, "b", env...)}
	body := fmt.Sprintf(`{"id":"f","schedule":{"kind":"every","every":"500ms"},"http":{"url":%q},"timeout":"2s","max_retries":0,
		"alert":{"after":2,"pause_after":4}}`, cb.URL)
	if code := call(t, "POST", ms[1].url+"/jobs", body, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	for _, m := range ms {
		waitFor(t, "the job paused on "+m.name, func() bool {
			var j cron.Job
			return call(t, "GET", m.url+"/jobs/f", "", &j) == 200 && j.Paused && j.LastAlert == cron.AlertPaused
		})
	}
	time.Sleep(time.Second) // an alert sent twice would come now
	want := []string{"failing@1", "failing_streak@2", "paused@4"}
	if diff := cmp.Diff(want, sink.transitions()); diff != "" {
		t.Errorf("alerts (-want +got):\n%s", diff)
	}
	var runs []cron.Run
	call(t, "GET", ms[0].url+"/jobs/f/runs", "", &runs)
	var marked []string
	for i := len(runs) - 1; i >= 0; i-- {
		if runs[i].Alert != "" {
			marked = append(marked, runs[i].Alert)
		}
	}
	if diff := cmp.Diff([]string{"failing", "failing_streak", "paused"}, marked); diff != "" {
		t.Errorf("runs marked with their alert (-want +got):\n%s", diff)
	}
}
