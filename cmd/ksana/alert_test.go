package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// alertSink is a webhook that verifies and keeps the alerts it gets,
// with the delivery id of each; while down it answers 503 instead and
// counts the attempts refused, by delivery id.
type alertSink struct {
	*httptest.Server
	mu      sync.Mutex
	got     []cron.Alert
	ids     map[string]cron.Alert // delivery id -> the alert taken
	repeats []string              // delivery ids taken more than once
	down    bool
	tried   map[string]int // delivery id -> attempts refused while down
}

func newAlertSink(t *testing.T, secret string) *alertSink {
	s := &alertSink{ids: map[string]cron.Alert{}, tried: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		id := r.Header.Get(cron.AlertDeliveryHeader)
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down {
			s.tried[id]++
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		if err := cron.VerifyAlert(secret, r.Header, body, time.Now(), time.Minute); err != nil {
			t.Errorf("alert %s: %v", id, err)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var a cron.Alert
		if err := json.Unmarshal(body, &a); err != nil {
			t.Errorf("alert body %s: %v", body, err)
		}
		if _, ok := s.ids[id]; ok {
			s.repeats = append(s.repeats, id)
		}
		s.ids[id] = a
		s.got = append(s.got, a)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *alertSink) setDown(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
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

// startFailingJob starts two ksana processes, a and b, on a PostgreSQL
// schema of their own with sink as the service's alert webhook (secret
// k3y), and creates job f through a: a callback that fails every 500ms,
// alerting failing_streak after 2 failures and paused after 4. restart
// starts a process of the name again, as the first ones were.
func startFailingJob(t *testing.T, schema string, sink *alertSink) (ms []*member, restart func(name string) *member) {
	t.Helper()
	dbURL := postgresSchemaURL(t, schema)
	bin := buildKsana(t)
	cb := newCallback(t, http.StatusInternalServerError, 0)
	env := []string{"DATABASE_URL=" + dbURL, "KSANA_LEASE_TTL=2s", "KSANA_ALERT_URL=" + sink.URL, "KSANA_ALERT_SECRET=k3y"}
	restart = func(name string) *member { return startMember(t, bin, name, env...) }
	ms = []*member{restart("a"), restart("b")}
	body := fmt.Sprintf(`{"id":"f","schedule":{"kind":"every","every":"500ms"},"http":{"url":%q},"timeout":"2s","max_retries":0,
		"alert":{"after":2,"pause_after":4}}`, cb.URL)
	if code := call(t, "POST", ms[0].url+"/jobs", body, nil); code != 201 {
		t.Fatalf("create: %d", code)
	}
	return ms, restart
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
	sink := newAlertSink(t, "k3y")
	ms, _ := startFailingJob(t, "ksana_alert_test", sink)
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

// TestClusterAlertOutage: two ksana processes on one PostgreSQL database,
// whose alert webhook is down while a job fails and is paused. The
// instance that holds the job is killed (kill -9) during the outage and
// started again. Once the webhook is back, each alert raised (failing,
// failing_streak, paused) arrives once, under the delivery id its
// refused attempts carried; /health shows the three pending during the
// outage, and none once delivered.
func TestClusterAlertOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("processes on PostgreSQL")
	}
	sink := newAlertSink(t, "k3y")
	sink.setDown(true)
	ms, restart := startFailingJob(t, "ksana_alert_outage_test", sink)
	// refusedEach reports whether each of three alerts was refused n
	// times at least.
	refusedEach := func(n int) bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		for _, k := range sink.tried {
			if k < n {
				return false
			}
		}
		return len(sink.tried) == 3
	}
	waitFor(t, "three alerts refused twice by the webhook", func() bool { return refusedEach(2) })
	// Kill the holder of the job, and start it again, during the outage.
	holder := 0
	if ms[1].health(t)["jobs"] == float64(1) {
		holder = 1
	}
	m := ms[holder]
	if err := m.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	m.cmd.Wait()
	m.dead = true
	ms[holder] = restart(m.name)
	// The retries go on after the restart (their times are stored), then
	// the webhook is back: the next retries, some seconds later, arrive.
	// A delivery the killed instance held in an attempt waits for its
	// lease (a minute) first.
	waitWithin(t, 90*time.Second, "three alerts refused four times", func() bool { return refusedEach(4) })
	for _, m := range ms {
		if h := m.health(t); h["alerts_pending"] != float64(3) || h["alerts_oldest_pending"] == nil {
			t.Errorf("/health of %s during the outage: alerts_pending %v, alerts_oldest_pending %v; want 3 and a time",
				m.name, h["alerts_pending"], h["alerts_oldest_pending"])
		}
	}
	sink.mu.Lock()
	refused := maps.Clone(sink.tried)
	sink.down = false
	sink.mu.Unlock()
	waitWithin(t, 40*time.Second, "the three alerts delivered", func() bool {
		sink.mu.Lock()
		defer sink.mu.Unlock()
		return len(sink.ids) == 3
	})
	time.Sleep(2 * time.Second) // a delivery sent twice would come now
	sink.mu.Lock()
	defer sink.mu.Unlock()
	if len(sink.repeats) > 0 {
		t.Errorf("deliveries taken more than once: %v", sink.repeats)
	}
	var got []string
	for id, a := range sink.ids {
		if refused[id] == 0 {
			t.Errorf("delivery %s (%s) taken under an id no refused attempt carried; refused: %v", id, a.Transition, refused)
		}
		got = append(got, a.Transition+"@"+strconv.Itoa(a.ConsecutiveFailures))
	}
	slices.Sort(got)
	if diff := cmp.Diff([]string{"failing@1", "failing_streak@2", "paused@4"}, got); diff != "" {
		t.Errorf("alerts delivered (-want +got):\n%s", diff)
	}
	for _, m := range ms {
		if h := m.health(t); h["alerts_pending"] != nil || h["alerts_dead"] != nil {
			t.Errorf("/health of %s once delivered: alerts_pending %v, alerts_dead %v; want none", m.name, h["alerts_pending"], h["alerts_dead"])
		}
	}
}
