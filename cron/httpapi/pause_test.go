package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// POST /jobs/{id}/pause?until= stores paused_until, a past until is 400
// naming until, a plain pause clears it; POST /pause shows in /health,
// makes run-now 409 and is audited with the pause before and after;
// POST /resume ends it.
func TestPauseEndpoints(t *testing.T) {
	f := newFixture(t, Config{})
	if r := f.do(t, "POST", "/jobs", `{"id":"j","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"}}`, nil); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	for _, req := range []struct{ path, body string }{
		{"/jobs/j/pause?until=" + until.Format(time.RFC3339), ""},
		{"/jobs/j/pause", `{"until":"` + until.Format(time.RFC3339) + `"}`},
	} {
		r := f.do(t, "POST", req.path, req.body, nil)
		var j cron.Job
		if err := json.Unmarshal([]byte(r.body), &j); r.status != 200 || err != nil || !j.Paused || !j.PausedUntil.Equal(until) {
			t.Errorf("POST %s %s: %d %s; want paused until %v", req.path, req.body, r.status, r.body, until)
		}
	}
	// paused_at is when the job was paused, shown by GET, kept by a pause
	// again and by a PATCH while the job stays paused.
	var pausedAt time.Time
	if r := f.do(t, "GET", "/jobs/j", "", nil); r.status == 200 {
		var j cron.Job
		if err := json.Unmarshal([]byte(r.body), &j); err != nil || j.PausedAt.IsZero() || time.Since(j.PausedAt) > time.Minute || !strings.Contains(r.body, `"paused_at":"`) {
			t.Errorf("GET of a paused job: %s; want its paused_at", r.body)
		}
		pausedAt = j.PausedAt
	}
	// A PATCH keeps paused_until while the job stays paused.
	if r := f.do(t, "PATCH", "/jobs/j", `{"name":"renamed"}`, nil); r.status != 200 || !strings.Contains(r.body, `"paused_until":"`+until.Format(time.RFC3339)+`"`) ||
		!strings.Contains(r.body, `"paused_at":"`+pausedAt.Format(time.RFC3339Nano)+`"`) {
		t.Errorf("PATCH of a job paused until: %d %s; want paused_until and paused_at (%v) kept", r.status, r.body, pausedAt)
	}
	r := f.do(t, "POST", "/jobs/j/pause?until=2000-01-01T00:00:00Z", "", nil)
	if e := decodeErr(t, r.body); r.status != 400 || e.Field != "until" || !strings.Contains(e.Error, "must be in the future") {
		t.Errorf("past until: %d %s; want 400 naming until", r.status, r.body)
	}
	if r := f.do(t, "POST", "/jobs/j/pause", "", nil); r.status != 200 || strings.Contains(r.body, "paused_until") {
		t.Errorf("plain pause: %d %s; want no paused_until", r.status, r.body)
	}
	if r := f.do(t, "POST", "/jobs/j/resume", "", nil); r.status != 200 || strings.Contains(r.body, "paused_until") || strings.Contains(r.body, "paused_at") || !strings.Contains(r.body, `"enabled":true`) {
		t.Errorf("resume: %d %s; want no paused_until nor paused_at", r.status, r.body)
	}
	if r := f.do(t, "GET", "/jobs/j", "", nil); r.status != 200 || strings.Contains(r.body, "paused_at") {
		t.Errorf("GET of a resumed job: %d %s; want no paused_at", r.status, r.body)
	}

	// The service pause.
	r = f.do(t, "POST", "/pause", `{"until":"`+until.Format(time.RFC3339)+`","reason":"db upgrade"}`, nil)
	if r.status != 200 || !strings.Contains(r.body, `"paused":true`) || !strings.Contains(r.body, `"pause_reason":"db upgrade"`) {
		t.Errorf("POST /pause: %d %s", r.status, r.body)
	}
	var health map[string]any
	r = f.do(t, "GET", "/health", "", nil)
	if err := json.Unmarshal([]byte(r.body), &health); err != nil || health["paused"] != true || health["paused_until"] != until.Format(time.RFC3339) || health["pause_reason"] != "db upgrade" || health["paused_at"] == nil {
		t.Errorf("GET /health while paused: %s", r.body)
	}
	if r := f.do(t, "POST", "/jobs/j/run-now", "", nil); r.status != 409 {
		t.Errorf("run-now while paused: %d %s, want 409", r.status, r.body)
	}
	if r := f.do(t, "GET", "/jobs/j", "", nil); !strings.Contains(r.body, `"enabled":true`) {
		t.Errorf("the service pause changed the job: %s", r.body)
	}
	for _, tt := range []struct{ path, body, field string }{
		{"/pause?until=2000-01-01T00:00:00Z", "", "until"},
		{"/pause", `{"reason":"` + strings.Repeat("x", cron.MaxPauseReason+1) + `"}`, "reason"},
		{"/pause?color=red", "", "color"},
		{"/pause", `{"reason":5}`, "reason"},
	} {
		r := f.do(t, "POST", tt.path, tt.body, nil)
		if e := decodeErr(t, r.body); r.status != 400 || e.Field != tt.field {
			t.Errorf("POST %s %.40s: %d %s; want 400 naming %s", tt.path, tt.body, r.status, r.body, tt.field)
		}
	}
	if r := f.do(t, "POST", "/resume", "", nil); r.status != 200 || r.body != `{"paused":false}`+"\n" {
		t.Errorf("POST /resume: %d %s", r.status, r.body)
	}
	r = f.do(t, "GET", "/health", "", nil)
	if r.body != `{"status":"ok"}`+"\n" {
		t.Errorf("GET /health after resume: %s", r.body)
	}
	if r := f.do(t, "POST", "/jobs/j/run-now", "", nil); r.status != 202 {
		t.Errorf("run-now after resume: %d %s, want 202", r.status, r.body)
	}

	// The audit log has the service pause with its state before and after.
	r = f.do(t, "GET", "/audit?job_id=", "", nil)
	var entries []AuditEntry
	if err := json.Unmarshal([]byte(r.body), &entries); err != nil {
		t.Fatal(err)
	}
	var found bool
	for _, e := range entries {
		if e.Action == cron.ActionPauseAll {
			found = true
			if !strings.Contains(string(e.Before), `"paused":false`) || !strings.Contains(string(e.After), `"paused":true`) {
				t.Errorf("audit of POST /pause: before %s after %s", e.Before, e.After)
			}
		}
	}
	if !found {
		t.Errorf("no audit entry of POST /pause in %s", r.body)
	}
}

// With the runner's Config.AuditLog the entries go to that log, which GET
// /audit reads (filtered by who and since); a second server over a runner
// on the same log (another instance on a shared database) reads the
// first one's entries.
func TestAuditLogConfig(t *testing.T) {
	log := &cron.AuditBuffer{}
	ts, err := NewTokenSet([]Token{{Secret: "tok-ann-1234567890", Name: "ann", Role: RoleAdmin}, {Secret: "tok-bob-1234567890", Name: "bob", Role: RoleAdmin}})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixtureWith(t, Config{Authenticator: ts}, cron.Config{AuditLog: log})
	ann := map[string]string{"Authorization": "Bearer tok-ann-1234567890"}
	bob := map[string]string{"Authorization": "Bearer tok-bob-1234567890"}
	if r := f.do(t, "POST", "/jobs", `{"id":"a","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"}}`, ann); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	mid := time.Now()
	if r := f.do(t, "POST", "/jobs/a/pause", "", bob); r.status != 200 {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	if log.Len() != 2 {
		t.Fatalf("the log has %d entries, want 2", log.Len())
	}
	f2 := newFixtureWith(t, Config{Authenticator: ts}, cron.Config{AuditLog: log})
	for _, tt := range []struct {
		query string
		want  []string
	}{
		{"", []string{"ann create", "bob pause"}},
		{"?who=bob", []string{"bob pause"}},
		{"?since=" + mid.UTC().Format(time.RFC3339Nano), []string{"bob pause"}},
	} {
		r := f2.do(t, "GET", "/audit"+tt.query, "", ann)
		var entries []AuditEntry
		if err := json.Unmarshal([]byte(r.body), &entries); err != nil {
			t.Fatalf("GET /audit%s: %s", tt.query, r.body)
		}
		var got []string
		for _, e := range entries {
			got = append(got, e.Who+" "+string(e.Action))
		}
		if strings.Join(got, ",") != strings.Join(tt.want, ",") {
			t.Errorf("GET /audit%s on the second server: %v, want %v", tt.query, got, tt.want)
		}
	}
	if r := f2.do(t, "GET", "/audit?since=yesterday", "", ann); r.status != 400 || decodeErr(t, r.body).Field != "since" {
		t.Errorf("bad since: %d %s", r.status, r.body)
	}
}

func decodeErr(t *testing.T, body string) errorBody {
	t.Helper()
	var e errorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e
}
