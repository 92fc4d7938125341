package cron

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"sync"
	"testing"
	"testing/synctest"
	"time"
)

// outageHook is an alert receiver that answers 503 while down, and
// otherwise keeps each alert it accepts by its delivery id, checking that
// every attempt was signed a moment ago and names its delivery.
type outageHook struct {
	t      *testing.T
	secret string
	mu     sync.Mutex
	down   bool
	tries  int
	got    map[string][]Alert // delivery id -> the alerts accepted with it
	refuse int                // 503s answered
}

func (h *outageHook) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	if h.secret == "" {
		if _, err := fmt.Sscan(req.Header.Get(AlertTimestampHeader), new(int64)); err != nil {
			h.t.Errorf("alert without %s", AlertTimestampHeader)
		}
	} else if err := VerifyAlert(h.secret, req.Header, body, time.Now(), time.Minute); err != nil {
		h.t.Errorf("alert signature: %v", err)
	}
	id := req.Header.Get(AlertDeliveryHeader)
	if id == "" {
		h.t.Errorf("alert without %s", AlertDeliveryHeader)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.tries++
	if h.down {
		h.refuse++
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	var a Alert
	if err := json.Unmarshal(body, &a); err != nil {
		h.t.Errorf("alert body %s: %v", body, err)
	}
	if h.got == nil {
		h.got = make(map[string][]Alert)
	}
	h.got[id] = append(h.got[id], a)
}

func (h *outageHook) setDown(down bool) {
	h.mu.Lock()
	h.down = down
	h.mu.Unlock()
}

// alerts returns the alerts accepted, and fails t when one delivery id
// came more than once.
func (h *outageHook) alerts(t *testing.T) []Alert {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []Alert
	for id, as := range h.got {
		if len(as) != 1 {
			t.Errorf("delivery %s accepted %d times, want once", id, len(as))
		}
		out = append(out, as...)
	}
	return out
}

// TestAlertOutlivesOutage: a webhook down for half an hour (far beyond a
// few quick retries) gets the alert once it is up again, once per
// delivery id, signed anew at the attempt that got through; in between
// it waits in the store's outbox, pending, and is listed.
func TestAlertOutlivesOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := &outageHook{t: t, secret: "s3cret", down: true}
		pn := newPipeNet(t, hook)
		st := NewMemStore()
		plan := &outcomes{plan: []bool{false}}
		r := newTestRunner(t, st, nil, Config{
			Handlers: map[string]Handler{"flaky": plan}, AlertClient: pn.Client,
			Alert: AlertConfig{URL: "http://hooks.example/alert?token=abc", Secret: "s3cret"},
		})
		mustAdd(t, r, goJob("f", "flaky", Every(time.Hour)))
		stop := start(t, r)
		defer stop()
		time.Sleep(time.Hour + 30*time.Minute)
		synctest.Wait()
		pending, n, err := r.Alerts(context.Background(), false, 10)
		if err != nil || n != 1 || len(pending) != 1 {
			t.Fatalf("Alerts(pending) = %d of %d, %v; want the one alert waiting", len(pending), n, err)
		}
		if d := pending[0]; d.Alert.Transition != AlertFailing || d.Attempts < 8 || d.LastError == "" || d.Secret != "" ||
			d.URL != RedactURL("http://hooks.example/alert?token=abc") {
			t.Errorf("pending alert = %+v; want failing, tried again and again, its secret and token hidden", d)
		}
		if got := hook.alerts(t); len(got) != 0 {
			t.Fatalf("webhook down accepted %d alerts", len(got))
		}
		hook.setDown(false)
		time.Sleep(MaxAlertBackoff + time.Second)
		synctest.Wait()
		got := hook.alerts(t)
		if len(got) != 1 || got[0].Transition != AlertFailing || got[0].Job.ID != "f" {
			t.Fatalf("alerts after the outage = %+v; want the failing alert of f, once", got)
		}
		if _, n, _ := r.Alerts(context.Background(), false, 10); n != 0 {
			t.Errorf("%d alerts still pending after delivery", n)
		}
	})
}

// TestAlertSurvivesRestart: an alert raised while the webhook is down
// waits in the store; a runner started again on the same store, the
// webhook up, delivers it.
func TestAlertSurvivesRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := &outageHook{t: t, down: true}
		pn := newPipeNet(t, hook)
		st := NewMemStore()
		plan := &outcomes{plan: []bool{false}}
		cfg := Config{Handlers: map[string]Handler{"flaky": plan}, AlertClient: pn.Client,
			Alert: AlertConfig{URL: "http://hooks.example/alert"}}
		r := newTestRunner(t, st, nil, cfg)
		mustAdd(t, r, goJob("f", "flaky", Every(time.Hour)))
		stop := start(t, r)
		time.Sleep(time.Hour + time.Minute)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got := hook.alerts(t); len(got) != 0 || hook.refuse == 0 {
			t.Fatalf("before the restart: %d alerts accepted, %d refused; want none, some", len(got), hook.refuse)
		}
		hook.setDown(false)
		r2 := newTestRunner(t, st, nil, cfg)
		stop = start(t, r2)
		time.Sleep(MaxAlertBackoff + time.Second) // its next attempt is due by then
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if got := hook.alerts(t); len(got) != 1 || got[0].Transition != AlertFailing {
			t.Fatalf("after the restart: alerts %+v; want the failing alert, once", got)
		}
	})
}

// TestAlertStorm: 300 jobs fail at once while the webhook is down for
// a minute; every alert arrives, once, when it is up.
func TestAlertStorm(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := &outageHook{t: t, down: true}
		pn := newPipeNet(t, hook)
		r := newTestRunner(t, NewMemStore(), nil, Config{
			Handlers:    map[string]Handler{"bad": Func(func(context.Context) error { return fmt.Errorf("boom") })},
			AlertClient: pn.Client, Workers: 64,
			Alert: AlertConfig{URL: "http://hooks.example/alert"},
		})
		for i := range 300 {
			mustAdd(t, r, goJob(fmt.Sprintf("j%03d", i), "bad", Every(time.Hour)))
		}
		stop := start(t, r)
		defer stop()
		time.Sleep(time.Hour + time.Minute)
		synctest.Wait()
		hook.setDown(false)
		time.Sleep(MaxAlertBackoff + time.Minute)
		synctest.Wait()
		seen := map[string]bool{}
		for _, a := range hook.alerts(t) {
			if a.Transition == AlertFailing {
				seen[a.Job.ID] = true
			}
		}
		if len(seen) != 300 {
			t.Errorf("failing alerts of %d jobs arrived, want 300", len(seen))
		}
	})
}

// TestAlertDead: past its horizon an alert is dead, listed as such, and
// no longer tried.
func TestAlertDead(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := &outageHook{t: t, down: true}
		pn := newPipeNet(t, hook)
		plan := &outcomes{plan: []bool{false}}
		r := newTestRunner(t, NewMemStore(), nil, Config{
			Handlers: map[string]Handler{"flaky": plan}, AlertClient: pn.Client, AlertHorizon: time.Hour,
			Alert: AlertConfig{URL: "http://hooks.example/alert"},
		})
		mustAdd(t, r, goJob("f", "flaky", Every(24*time.Hour)))
		stop := start(t, r)
		defer stop()
		time.Sleep(24*time.Hour + 2*time.Hour)
		synctest.Wait()
		dead, n, err := r.Alerts(context.Background(), true, 10)
		if err != nil || n != 1 || !dead[0].Dead || dead[0].LastError == "" {
			t.Fatalf("Alerts(dead) = %+v (%d), %v; want the one alert, dead", dead, n, err)
		}
		hook.mu.Lock()
		tries := hook.tries
		hook.mu.Unlock()
		time.Sleep(time.Hour)
		synctest.Wait()
		if hook.tries != tries {
			t.Errorf("a dead alert was tried again")
		}
	})
}

// TestMissedAlert: the slots passed while the runner was down raise one
// missed alert with their count and reason; the next missed slots within
// MissedEvery raise none.
func TestMissedAlert(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hook := &outageHook{t: t}
		pn := newPipeNet(t, hook)
		st := NewMemStore()
		cfg := Config{Handlers: map[string]Handler{"ok": Func(func(context.Context) error { return nil })},
			AlertClient: pn.Client, Alert: AlertConfig{URL: "http://hooks.example/alert"}}
		r := newTestRunner(t, st, nil, cfg)
		mustAdd(t, r, goJob("m", "ok", Every(time.Minute)))
		stop := start(t, r)
		time.Sleep(2*time.Minute + time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Minute) // down
		r2 := newTestRunner(t, st, nil, cfg)
		stop = start(t, r2)
		time.Sleep(5 * time.Second)
		synctest.Wait()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		got := hook.alerts(t)
		if len(got) != 1 {
			t.Fatalf("alerts after a downtime = %+v; want one missed alert", got)
		}
		a := got[0]
		if a.Transition != AlertMissed || a.Job.ID != "m" || a.Run.Status != StatusMissed || a.Run.Reason != ReasonDowntime || a.Run.Slots < 9 {
			t.Errorf("missed alert = %+v; want missed, job m, reason downtime, about 10 slots", a)
		}
	})
}
