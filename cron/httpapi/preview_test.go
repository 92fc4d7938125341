package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

type errAnswer struct {
	Error string `json:"error"`
	Field string `json:"field"`
}

// TestPreviewSameErrorsAsCreate: each schedule a create refuses, the
// preview refuses with the same status and field; each it takes, the
// preview lists.
func TestPreviewSameErrorsAsCreate(t *testing.T) {
	f := newFixture(t, Config{})
	past := time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)
	future := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	tests := []struct {
		name     string
		schedule string
		field    string // "" when valid
	}{
		{"every", `{"kind":"every","every":"1h"}`, ""},
		{"cron in a zone", `{"kind":"cron","cron":"0 9 * * *","tz":"Europe/Paris"}`, ""},
		{"once ahead", `{"kind":"once","run_at":"` + future + `"}`, ""},
		{"no kind", `{}`, "schedule.kind"},
		{"bad kind", `{"kind":"weekly"}`, "schedule.kind"},
		{"every below the minimum", `{"kind":"every","every":"100ms"}`, "schedule.every"},
		{"every not a duration", `{"kind":"every","every":"soon"}`, "schedule.every"},
		{"jitter too big", `{"kind":"every","every":"1m","jitter":"2m"}`, "schedule.jitter"},
		{"tz on every", `{"kind":"every","every":"1m","tz":"UTC"}`, "schedule.tz"},
		{"bad cron", `{"kind":"cron","cron":"0 25 * * *"}`, "schedule.cron"},
		{"bad tz", `{"kind":"cron","cron":"0 9 * * *","tz":"Mars/Olympus"}`, "schedule.tz"},
		{"unknown field", `{"kind":"cron","cron":"0 9 * * *","zone":"UTC"}`, "schedule.zone"},
		{"wrong type", `{"kind":"cron","cron":9}`, "schedule.cron"},
		{"once passed", `{"kind":"once","run_at":"` + past + `"}`, "schedule.run_at"},
		{"once bad time", `{"kind":"once","run_at":"tomorrow"}`, "schedule.run_at"},
		{"not an object", `[]`, "schedule"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			create := f.do(t, "POST", "/jobs", `{"id":"p`+string(rune('a'+i))+`","http":{"url":"http://callback.test/"},"schedule":`+tt.schedule+`}`, nil)
			prev := f.do(t, "POST", "/schedules/preview", `{"schedule":`+tt.schedule+`,"n":3}`, nil)
			if tt.field == "" {
				if create.status != 201 || prev.status != 200 {
					t.Fatalf("create %d %s, preview %d %s; want 201 and 200", create.status, create.body, prev.status, prev.body)
				}
				var got PreviewAnswer
				if err := json.Unmarshal([]byte(prev.body), &got); err != nil {
					t.Fatal(err)
				}
				if len(got.Next) == 0 || len(got.Next) > 3 {
					t.Errorf("preview lists %d times, want 1 to 3: %s", len(got.Next), prev.body)
				}
				return
			}
			var ce, pe errAnswer
			_ = json.Unmarshal([]byte(create.body), &ce)
			_ = json.Unmarshal([]byte(prev.body), &pe)
			if create.status != 400 || ce.Field != tt.field {
				t.Fatalf("create: %d %s, want 400 on %s", create.status, create.body, tt.field)
			}
			// The message of a past run_at tells how far in the past it
			// lies and the time of the request: both move between the two
			// requests, so only the text around them is compared.
			ce.Error, pe.Error = withoutTimes(ce.Error), withoutTimes(pe.Error)
			if diff := cmp.Diff(ce, pe); prev.status != 400 || diff != "" {
				t.Errorf("preview: %d, error (-create +preview):\n%s", prev.status, diff)
			}
		})
	}
}

// withoutTimes replaces the durations and times a past run_at's message
// carries by a placeholder: "is 1h0m1s in the past (now is …)" becomes
// "is <d> in the past".
func withoutTimes(msg string) string {
	msg, _, _ = strings.Cut(msg, " (now is")
	if before, after, ok := strings.Cut(msg, "is "); ok {
		if _, rest, ok := strings.Cut(after, " in the past"); ok {
			return before + "is <d> in the past" + rest
		}
	}
	return msg
}

func TestPreviewBody(t *testing.T) {
	f := newFixture(t, Config{})
	tests := []struct {
		name   string
		body   string
		status int
		field  string
		want   []string // the times, when 200
	}{
		{"start_at grid", `{"schedule":{"kind":"every","every":"1h","start_at":"2100-01-01T00:30:00Z"},"n":2}`, 200, "",
			[]string{"2100-01-01T00:30:00Z", "2100-01-01T01:30:00Z"}},
		{"default n", `{"schedule":{"kind":"every","every":"1h","start_at":"2100-01-01T00:00:00Z"}}`, 200, "", nil},
		{"n max", `{"schedule":{"kind":"every","every":"1s"},"n":1000}`, 200, "", nil},
		{"n too big", `{"schedule":{"kind":"every","every":"1h"},"n":1001}`, 400, "n", nil},
		{"n zero", `{"schedule":{"kind":"every","every":"1h"},"n":0}`, 400, "n", nil},
		{"n string", `{"schedule":{"kind":"every","every":"1h"},"n":"3"}`, 400, "n", nil},
		{"bad id", `{"schedule":{"kind":"every","every":"1h"},"id":"a/b"}`, 400, "id", nil},
		{"no schedule", `{"n":3}`, 400, "schedule", nil},
		{"unknown field", `{"schedule":{"kind":"every","every":"1h"},"count":3}`, 400, "count", nil},
		{"empty", ``, 400, "", nil},
		{"array", `[1]`, 400, "", nil},
		{"trailing", `{"schedule":{"kind":"every","every":"1h"}} {}`, 400, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, "POST", "/schedules/preview", tt.body, nil)
			if r.status != tt.status {
				t.Fatalf("status %d (%s), want %d", r.status, r.body, tt.status)
			}
			if tt.status != 200 {
				var e errAnswer
				if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Field != tt.field || e.Error == "" {
					t.Errorf("error %s, want one on field %q", r.body, tt.field)
				}
				return
			}
			var got struct {
				Next []string `json:"next"`
			}
			if err := json.Unmarshal([]byte(r.body), &got); err != nil {
				t.Fatal(err)
			}
			n := DefaultPreview
			if strings.Contains(tt.body, `"n":1000`) {
				n = 1000
			} else if tt.want != nil {
				n = len(tt.want)
			}
			if len(got.Next) != n {
				t.Errorf("%d times, want %d", len(got.Next), n)
			}
			if tt.want != nil {
				if diff := cmp.Diff(tt.want, got.Next); diff != "" {
					t.Errorf("times (-want +got):\n%s", diff)
				}
			}
		})
	}
	if r := f.do(t, "GET", "/schedules/preview", "", nil); r.status != 405 || r.header.Get("Allow") != "POST" {
		t.Errorf("GET /schedules/preview: %d Allow %q, want 405 Allow POST", r.status, r.header.Get("Allow"))
	}
}

func TestJobNext(t *testing.T) {
	f := newFixture(t, Config{Token: "tok-secret-000001"})
	auth := map[string]string{"Authorization": "Bearer tok-secret-000001"}
	if r := f.do(t, "POST", "/jobs", `{"id":"paris","http":{"url":"http://callback.test/"},"schedule":{"kind":"cron","cron":"0 9 * * *","tz":"Europe/Paris"}}`, auth); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := f.do(t, "POST", "/jobs/paris/pause", "", auth); r.status != 200 {
		t.Fatalf("pause: %d %s", r.status, r.body)
	}
	tests := []struct {
		name   string
		path   string
		status int
		field  string
		n      int
	}{
		{"default", "/jobs/paris/next", 200, "", DefaultPreview},
		{"n", "/jobs/paris/next?n=3", 200, "", 3},
		{"n max", "/jobs/paris/next?n=1000", 200, "", 1000},
		{"n too big", "/jobs/paris/next?n=1001", 400, "n", 0},
		{"n zero", "/jobs/paris/next?n=0", 400, "n", 0},
		{"n twice", "/jobs/paris/next?n=1&n=2", 400, "n", 0},
		{"unknown parameter", "/jobs/paris/next?limit=2", 400, "limit", 0},
		{"unknown job", "/jobs/nope/next", 404, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.do(t, "GET", tt.path, "", auth)
			if r.status != tt.status {
				t.Fatalf("status %d (%s), want %d", r.status, r.body, tt.status)
			}
			if tt.status != 200 {
				var e errAnswer
				if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Field != tt.field {
					t.Errorf("error %s, want one on field %q", r.body, tt.field)
				}
				return
			}
			var got NextAnswer
			if err := json.Unmarshal([]byte(r.body), &got); err != nil {
				t.Fatal(err)
			}
			if got.JobID != "paris" || !got.Paused || got.Kind != cron.KindCron || got.TZ != "Europe/Paris" || len(got.Next) != tt.n {
				t.Fatalf("got %+v (%d times), want job paris, paused, cron in Europe/Paris, %d times", got, len(got.Next), tt.n)
			}
			paris, _ := time.LoadLocation("Europe/Paris")
			for i, ts := range got.Next {
				if ts.Location() != time.UTC {
					t.Errorf("time %d %v: not UTC", i, ts)
				}
				if l := ts.In(paris); l.Hour() != 9 || l.Minute() != 0 {
					t.Errorf("time %d %v is %v in Paris, want 09:00", i, ts, l)
				}
				if i > 0 && !ts.After(got.Next[i-1]) {
					t.Errorf("time %d %v not after the one before", i, ts)
				}
			}
		})
	}
	if r := f.do(t, "GET", "/jobs/paris/next", "", nil); r.status != 401 {
		t.Errorf("without the token: %d, want 401", r.status)
	}
}

// FuzzDecodePreview: any body is either refused with 400 or decodes to a
// schedule and an n in range.
func FuzzDecodePreview(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"schedule":{"kind":"every","every":"1h"},"n":3}`, `{"schedule":null}`, `{"n":1e3,"schedule":{}}`,
		`{"schedule":{"kind":"cron","cron":"* * * * *","tz":"UTC"},"id":"x"}`, `{"n":-1}`, `[]`, `null`, `{"schedule":{"run_at":"x"}}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, rerr := decodePreview([]byte(s))
		if rerr != nil {
			if rerr.Status != 400 || rerr.Msg == "" {
				t.Fatalf("decodePreview(%q): error %+v, want a 400 with a message", s, rerr)
			}
			return
		}
		if !p.has || p.n < 1 || p.n > cron.MaxPreview {
			t.Fatalf("decodePreview(%q) = %+v: no schedule or n out of range", s, p)
		}
	})
}
