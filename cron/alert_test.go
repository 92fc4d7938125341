package cron

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// webhook is an alert receiver: it verifies each alert's signature and
// keeps the alerts it accepted; fail500 answers 500 to the first
// deliveries.
type webhook struct {
	t       *testing.T
	secret  string
	mu      sync.Mutex
	got     []Alert
	tries   int
	fail500 int
}

func (h *webhook) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if h.secret == "" {
		if sig := req.Header.Get(AlertSignatureHeader); sig != "" {
			h.t.Errorf("unsigned alert has %s %q", AlertSignatureHeader, sig)
		}
	} else if err := VerifyAlert(h.secret, req.Header, body, time.Now(), time.Minute); err != nil {
		h.t.Errorf("alert signature: %v", err)
		http.Error(w, "bad signature", http.StatusUnauthorized)
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tries++
	if h.fail500 > 0 {
		h.fail500--
		http.Error(w, "down", http.StatusInternalServerError)
		return
	}
	var a Alert
	if err := json.Unmarshal(body, &a); err != nil {
		h.t.Errorf("alert body %s: %v", body, err)
	}
	h.got = append(h.got, a)
}

func (h *webhook) transitions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, a := range h.got {
		out = append(out, a.Transition)
	}
	return out
}

// outcomes is a handler whose runs fail or succeed in the order given
// (true: success), then succeed.
type outcomes struct {
	mu   sync.Mutex
	plan []bool
}

func (o *outcomes) Run(ctx context.Context, c *Call) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	ok := true
	if len(o.plan) > 0 {
		ok, o.plan = o.plan[0], o.plan[1:]
	}
	if !ok {
		return errors.New("boom")
	}
	return nil
}

// TestAlerts: a job's runs raise failing on the first failure,
// failing_streak at after failures in a row, recovered on the success
// that follows, and paused (the job is then paused, durably) at
// pause_after; each alert is signed, a 500 is retried, and the run that
// caused each carries its transition.
func TestAlerts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := &webhook{t: t, secret: "s3cret", fail500: 1}
		pn := newPipeNet(t, hook)
		st := NewMemStore()
		plan := &outcomes{plan: []bool{false, false, false, true, false, false, false, false, false, true}}
		r := newTestRunner(t, st, nil, Config{
			Handlers: map[string]Handler{"flaky": plan}, AlertClient: pn.Client, AlertBackoff: time.Second,
		})
		j := goJob("f", "flaky", Every(time.Minute))
		j.Alert = &AlertConfig{URL: "http://hooks.example/alert", Secret: "s3cret", After: 3, PauseAfter: 5}
		mustAdd(t, r, j)
		stop := start(t, r)
		time.Sleep(12*time.Minute + time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := []string{AlertFailing, AlertFailingStreak, AlertRecovered, AlertFailing, AlertFailingStreak, AlertPaused}
		if diff := cmp.Diff(want, hook.transitions()); diff != "" {
			t.Errorf("alerts received (-want +got):\n%s", diff)
		}
		if hook.tries != len(want)+1 {
			t.Errorf("webhook got %d requests, want %d (one 500, retried)", hook.tries, len(want)+1)
		}
		got := mustGet(t, r, "f")
		if !got.Paused || got.Failures != 5 || got.LastAlert != AlertPaused {
			t.Errorf("job after pause_after: paused %v failures %d last_alert %q; want true, 5, paused", got.Paused, got.Failures, got.LastAlert)
		}
		stored, _ := st.Load(context.Background())
		if len(stored) != 1 || !stored[0].Paused || stored[0].Failures != 5 || stored[0].LastAlert != AlertPaused {
			t.Errorf("stored job: %+v; want paused with failures 5 and last_alert paused", stored)
		}
		if j, err := r.Resume(context.Background(), "f"); err != nil || j.Failures != 0 || j.LastAlert != "" {
			t.Errorf("Resume = failures %d, last_alert %q, %v; want a new episode (0, \"\")", j.Failures, j.LastAlert, err)
		}
		stored, _ = st.Load(context.Background())
		if stored[0].Paused || stored[0].Failures != 0 || stored[0].LastAlert != "" {
			t.Errorf("stored job after Resume: %+v; want enabled, its health cleared", stored[0])
		}
		runs, err := r.Runs(context.Background(), "f", 0)
		if err != nil {
			t.Fatal(err)
		}
		var marked []string
		for i := len(runs) - 1; i >= 0; i-- {
			if runs[i].Alert != "" {
				marked = append(marked, runs[i].Alert)
			}
		}
		if diff := cmp.Diff(want, marked); diff != "" {
			t.Errorf("runs marked with their alert (-want +got):\n%s", diff)
		}
		hook.mu.Lock()
		a := hook.got[1]
		hook.mu.Unlock()
		if a.Job.ID != "f" || a.Job.Type != "flaky" || a.Job.Name != "fn f" || a.ConsecutiveFailures != 3 || a.Error != "boom" ||
			a.Run.JobID != "f" || a.Run.Status != StatusFailed || a.Run.ID == "" || a.Time.IsZero() {
			t.Errorf("failing_streak alert = %+v; want job f/flaky, 3 failures, error boom, its run", a)
		}
	})
}

// TestAlertNotify: with alert.notify, each run that is no transition is
// alerted too (transition run), every failed one under "failure" and
// every one under "always"; the transitions and the job's health are as
// without it.
func TestAlertNotify(t *testing.T) {
	for _, tt := range []struct {
		notify string
		want   []string
	}{
		{"", []string{AlertFailing, AlertFailingStreak, AlertRecovered}},
		{"failure", []string{AlertFailing, AlertRun, AlertFailingStreak, AlertRun, AlertRecovered}},
		{"always", []string{AlertFailing, AlertRun, AlertFailingStreak, AlertRun, AlertRecovered, AlertRun}},
	} {
		t.Run("notify="+tt.notify, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				hook := &webhook{t: t}
				pn := newPipeNet(t, hook)
				plan := &outcomes{plan: []bool{false, false, false, false, true, true}}
				r := newTestRunner(t, NewMemStore(), nil, Config{Handlers: map[string]Handler{"flaky": plan}, AlertClient: pn.Client})
				j := goJob("n", "flaky", Every(time.Minute))
				j.Alert = &AlertConfig{URL: "http://hooks.example/alert", After: 3, Notify: tt.notify}
				mustAdd(t, r, j)
				stop := start(t, r)
				time.Sleep(6*time.Minute + time.Second)
				synctest.Wait()
				if err := stop(); err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, hook.transitions()); diff != "" {
					t.Errorf("alerts received (-want +got):\n%s", diff)
				}
				if got := mustGet(t, r, "n"); got.Failures != 0 || got.LastAlert != AlertRecovered {
					t.Errorf("job's health: failures %d, last_alert %q; want 0, recovered (a run alert leaves it)", got.Failures, got.LastAlert)
				}
			})
		})
	}
}

// TestAlertsOnceAcrossRestart: the failures in a row and the last alert
// are kept with the job's bookkeeping, so that a runner started again on
// the same store sends no second failing alert for the same streak, and
// the service default serves a job without an alert of its own.
func TestAlertsOnceAcrossRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := &webhook{t: t}
		pn := newPipeNet(t, hook)
		st := NewMemStore()
		plan := &outcomes{plan: []bool{false, false, false, false, true}}
		cfg := Config{Handlers: map[string]Handler{"flaky": plan}, AlertClient: pn.Client,
			Alert: AlertConfig{URL: "http://hooks.example/alert", After: 4}}
		r := newTestRunner(t, st, nil, cfg)
		mustAdd(t, r, goJob("f", "flaky", Every(time.Minute)))
		stop := start(t, r)
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		r2 := newTestRunner(t, st, nil, cfg)
		stop = start(t, r2)
		time.Sleep(4 * time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		want := []string{AlertFailing, AlertFailingStreak, AlertRecovered}
		if diff := cmp.Diff(want, hook.transitions()); diff != "" {
			t.Errorf("alerts across a restart (-want +got):\n%s", diff)
		}
	})
}

func TestNextHealth(t *testing.T) {
	cfg := &AlertConfig{URL: "http://x", After: 2, PauseAfter: 3}
	tests := []struct {
		name   string
		h      health
		status Status
		cfg    *AlertConfig
		want   health
		tr     string
		pause  bool
	}{
		{"first failure", health{}, StatusFailed, cfg, health{1, AlertFailing}, AlertFailing, false},
		{"streak", health{1, AlertFailing}, StatusTimeout, cfg, health{2, AlertFailingStreak}, AlertFailingStreak, false},
		{"pause", health{2, AlertFailingStreak}, StatusFailed, cfg, health{3, AlertPaused}, AlertPaused, true},
		{"past pause", health{3, AlertPaused}, StatusFailed, cfg, health{4, AlertPaused}, "", false},
		{"recovered", health{4, AlertPaused}, StatusSuccess, cfg, health{0, AlertRecovered}, AlertRecovered, false},
		{"success again", health{0, AlertRecovered}, StatusSuccess, cfg, health{0, AlertRecovered}, "", false},
		{"skip keeps", health{1, AlertFailing}, StatusSkipped, cfg, health{1, AlertFailing}, "", false},
		{"no alert counts", health{}, StatusFailed, nil, health{1, ""}, "", false},
		{"never alerted: no recovery", health{2, ""}, StatusSuccess, cfg, health{0, ""}, "", false},
		{"after 1", health{}, StatusFailed, &AlertConfig{URL: "http://x", After: 1}, health{1, AlertFailing}, AlertFailing, false},
	}
	for _, tt := range tests {
		h, tr, pause := nextHealth(tt.h, tt.status, tt.cfg)
		if h != tt.want || tr != tt.tr || pause != tt.pause {
			t.Errorf("%s: nextHealth = %+v %q %v; want %+v %q %v", tt.name, h, tr, pause, tt.want, tt.tr, tt.pause)
		}
	}
}

func TestAlertValidation(t *testing.T) {
	tests := []struct {
		alert AlertConfig
		field string
	}{
		{AlertConfig{URL: "ftp://x"}, "alert.url"},
		{AlertConfig{URL: "/relative"}, "alert.url"},
		{AlertConfig{URL: "http://x", After: -1}, "alert.after"},
		{AlertConfig{URL: "http://x", PauseAfter: -2}, "alert.pause_after"},
		{AlertConfig{URL: "http://x", Secret: string(make([]byte, MaxAlertSecretLen+1))}, "alert.secret"},
		{AlertConfig{URL: "http://x", Notify: "sometimes"}, "alert.notify"},
		{AlertConfig{URL: "http://x", Notify: "failure"}, ""},
		{AlertConfig{URL: "http://x", Notify: "always"}, ""},
		{AlertConfig{After: 2}, ""}, // the runner's URL
	}
	for _, tt := range tests {
		j := goJob("v", "flaky", Every(time.Minute))
		j.Alert = &tt.alert
		err := j.Validate()
		var ve *ValidationError
		switch {
		case tt.field == "" && err != nil:
			t.Errorf("alert %+v: %v, want valid", tt.alert, err)
		case tt.field != "" && (!errors.As(err, &ve) || ve.Field != tt.field):
			t.Errorf("alert %+v: %v, want an error on %s", tt.alert, err, tt.field)
		}
	}
	if _, err := New(nil, nil, Config{Alert: AlertConfig{URL: "nope"}}); err == nil {
		t.Error("New with Config.Alert.URL nope: nil error")
	}
}

// TestAlertAllowHosts: with AlertAllowHosts set, an alert to a host
// outside it is never requested, and one to a host inside it is sent.
func TestAlertAllowHosts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := &webhook{t: t}
		pn := newPipeNet(t, hook)
		plan := &outcomes{plan: []bool{false, false}}
		r := newTestRunner(t, NewMemStore(), nil, Config{
			Handlers: map[string]Handler{"flaky": plan}, AlertClient: pn.Client, AlertRetries: -1,
			AlertAllowHosts: HostAllowList{"*.internal"},
		})
		out := goJob("out", "flaky", Every(time.Minute))
		out.Alert = &AlertConfig{URL: "http://metadata.example/alert"}
		in := goJob("in", "flaky", Every(time.Minute))
		in.Alert = &AlertConfig{URL: "http://hooks.internal/alert"}
		mustAdd(t, r, out)
		mustAdd(t, r, in)
		stop := start(t, r)
		time.Sleep(time.Minute + time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		hook.mu.Lock()
		defer hook.mu.Unlock()
		if hook.tries != 1 || len(hook.got) != 1 || hook.got[0].Job.ID != "in" {
			t.Errorf("webhook got %d requests (%+v); want one, the alert of job in", hook.tries, hook.got)
		}
	})
}
