package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestAlertsEndpoint: GET /alerts shows an alert its webhook refuses as
// pending, with its delivery id, attempts and last error, and never the
// webhook's secret nor its URL's token; a bad parameter is a 400.
func TestAlertsEndpoint(t *testing.T) {
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "down", http.StatusServiceUnavailable)
	}))
	defer hook.Close()
	f := newFixtureWith(t, Config{}, cron.Config{
		Handlers:     map[string]cron.Handler{"bad": cron.Func(func(context.Context) error { return errors.New("boom") })},
		AlertBackoff: time.Hour,
	})
	ctx := context.Background()
	if _, err := f.runner.Add(ctx, cron.Job{ID: "b", Name: "b", Type: "bad", Schedule: cron.Every(time.Hour),
		Alert: &cron.AlertConfig{URL: hook.URL + "/a?token=tok-123", Secret: "hook-secret-9"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := f.runner.RunNow(ctx, "b", cron.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	var ans AlertsAnswer
	var body string
	for deadline := time.Now().Add(10 * time.Second); ; {
		r := f.do(t, "GET", "/alerts", "", nil)
		if r.status != 200 {
			t.Fatalf("GET /alerts: %d %s", r.status, r.body)
		}
		body = r.body
		ans = AlertsAnswer{}
		if err := json.Unmarshal([]byte(body), &ans); err != nil {
			t.Fatal(err)
		}
		if ans.Pending == 1 && len(ans.Alerts) == 1 && ans.Alerts[0].Attempts > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET /alerts = %s; want one pending alert, tried", body)
		}
		time.Sleep(10 * time.Millisecond)
	}
	d := ans.Alerts[0]
	if d.ID == "" || d.Alert.Transition != cron.AlertFailing || d.Alert.Job.ID != "b" || !strings.Contains(d.LastError, "503") ||
		ans.OldestPending == nil || ans.Dead != 0 {
		t.Errorf("GET /alerts = %s; want the failing alert of b, its delivery id, its 503", body)
	}
	if strings.Contains(body, "hook-secret-9") || strings.Contains(body, "tok-123") {
		t.Errorf("GET /alerts shows a secret: %s", body)
	}
	if r := f.do(t, "GET", "/alerts?state=dead", "", nil); r.status != 200 || !strings.Contains(r.body, `"alerts":[]`) {
		t.Errorf("GET /alerts?state=dead = %d %s; want none", r.status, r.body)
	}
	for _, q := range []string{"state=gone", "limit=0", "x=1"} {
		if r := f.do(t, "GET", "/alerts?"+q, "", nil); r.status != 400 {
			t.Errorf("GET /alerts?%s = %d, want 400", q, r.status)
		}
	}
}
