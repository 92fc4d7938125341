package cron

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPrepare(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("X", 3600))
	base := func() Job {
		return Job{ID: "j", HTTP: HTTPConfig{URL: "http://svc.test/hook"},
			Schedule: ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)}}
	}
	tests := []struct {
		name     string
		edit     func(*Job)
		defaults Rules
		want     func(*Job) // the job after Prepare, from base with defaults filled
		field    string     // the field a *ValidationError names; "" for success
		minOnly  bool       // refused for the minimum interval, which Validate does not apply
	}{
		{name: "defaults", want: func(*Job) {}},
		{name: "defaults from Rules", defaults: Rules{Timeout: 3 * time.Second, RetryBackoff: time.Second},
			want: func(j *Job) { j.Timeout, j.RetryBackoff = Duration(3*time.Second), Duration(time.Second) }},
		{name: "method upper cased", edit: func(j *Job) { j.HTTP.Method = "post" }, want: func(j *Job) { j.HTTP.Method = "POST" }},
		{name: "start_at kept, in UTC", edit: func(j *Job) { j.Schedule.StartAt = now.Add(time.Hour) },
			want: func(j *Job) { j.Schedule.StartAt = now.Add(time.Hour).UTC() }},
		{name: "max_retries 65535", edit: func(j *Job) { j.MaxRetries = math.MaxUint16 }, want: func(j *Job) { j.MaxRetries = math.MaxUint16 }},
		{name: "type", edit: func(j *Job) { j.Type = "gr pc" }, field: "type"},
		{name: "http on another type", edit: func(j *Job) { j.Type = "grpc" }, field: "http"},
		{name: "method", edit: func(j *Job) { j.HTTP.Method = "TRACE" }, field: "http.method"},
		{name: "url missing", edit: func(j *Job) { j.HTTP.URL = "" }, field: "http.url"},
		{name: "url scheme", edit: func(j *Job) { j.HTTP.URL = "ftp://svc.test/" }, field: "http.url"},
		{name: "url host", edit: func(j *Job) { j.HTTP.URL = "http:///x" }, field: "http.url"},
		{name: "url port too high", edit: func(j *Job) { j.HTTP.URL = "http://127.0.0.1:99999/" }, field: "http.url"},
		{name: "url port 0", edit: func(j *Job) { j.HTTP.URL = "http://127.0.0.1:0/" }, field: "http.url"},
		{name: "url port 65535", edit: func(j *Job) { j.HTTP.URL = "http://127.0.0.1:65535/" }, want: func(j *Job) { j.HTTP.URL = "http://127.0.0.1:65535/" }},
		{name: "header name empty", edit: func(j *Job) { j.HTTP.Headers = map[string]string{"": "x"} }, field: "http.headers"},
		{name: "header name with space", edit: func(j *Job) { j.HTTP.Headers = map[string]string{"Bad Name": "x"} }, field: "http.headers"},
		{name: "header name with CR LF", edit: func(j *Job) { j.HTTP.Headers = map[string]string{"X-A\r\nX-B": "x"} }, field: "http.headers"},
		{name: "header value with CR LF", edit: func(j *Job) { j.HTTP.Headers = map[string]string{"X-A": "1\r\nX-B: 2"} }, field: "http.headers"},
		{name: "header value with NUL", edit: func(j *Job) { j.HTTP.Headers = map[string]string{"X-A": "a\x00"} }, field: "http.headers"},
		{name: "header Content-Length", edit: func(j *Job) { j.HTTP.Headers = map[string]string{"content-length": "5"} }, field: "http.headers"},
		{name: "header Transfer-Encoding", edit: func(j *Job) { j.HTTP.Headers = map[string]string{"Transfer-Encoding": "chunked"} }, field: "http.headers"},
		{name: "headers fine", edit: func(j *Job) {
			j.HTTP.Headers = map[string]string{"Host": "api.test", "X-T": "a\tb", "Content-Type": "text/plain"}
		},
			want: func(j *Job) {
				j.HTTP.Headers = map[string]string{"Host": "api.test", "X-T": "a\tb", "Content-Type": "text/plain"}
			}},
		{name: "unknown placeholder", edit: func(j *Job) { j.HTTP.Body = `{"a":"{{job_id}}","b":"{{unknown}}"}` }, field: "http.body"},
		{name: "placeholders and other braces", edit: func(j *Job) {
			j.HTTP.Body = `{{job_id}}{{run_id}}{{scheduled_at}}{{triggered_at}} {{ x }} {{}} {{a-b}} {{{`
		},
			want: func(j *Job) {
				j.HTTP.Body = `{{job_id}}{{run_id}}{{scheduled_at}}{{triggered_at}} {{ x }} {{}} {{a-b}} {{{`
			}},
		{name: "timeout", edit: func(j *Job) { j.Timeout = Duration(-time.Second) }, field: "timeout"},
		{name: "max_retries negative", edit: func(j *Job) { j.MaxRetries = -1 }, field: "max_retries"},
		{name: "max_retries over 65535", edit: func(j *Job) { j.MaxRetries = math.MaxUint16 + 1 }, field: "max_retries"},
		{name: "retry_backoff", edit: func(j *Job) { j.RetryBackoff = Duration(-time.Second) }, field: "retry_backoff"},
		{name: "misfire_grace", edit: func(j *Job) { j.MisfireGrace = Duration(-time.Second) }, field: "misfire_grace"},
		{name: "kind missing", edit: func(j *Job) { j.Schedule.Kind = "" }, field: "schedule.kind"},
		{name: "kind unknown", edit: func(j *Job) { j.Schedule.Kind = "hourly" }, field: "schedule.kind"},
		{name: "every", edit: func(j *Job) { j.Schedule.Every = 0 }, field: "schedule.every"},
		{name: "jitter negative", edit: func(j *Job) { j.Schedule.Jitter = -1 }, field: "schedule.jitter"},
		{name: "jitter not below every", edit: func(j *Job) { j.Schedule.Jitter = j.Schedule.Every }, field: "schedule.jitter"},
		{name: "start_at before 1679", edit: func(j *Job) { j.Schedule.StartAt = time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC) }, field: "schedule.start_at"},
		{name: "run_at missing", edit: func(j *Job) { j.Schedule = ScheduleSpec{Kind: KindOnce} }, field: "schedule.run_at"},
		{name: "run_at after 2261", edit: func(j *Job) {
			j.Schedule = ScheduleSpec{Kind: KindOnce, RunAt: time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)}
		}, field: "schedule.run_at"},
		{name: "every below the minimum", edit: func(j *Job) { j.Schedule.Every = Duration(999 * time.Millisecond) }, field: "schedule.every", minOnly: true},
		{name: "every at the minimum", edit: func(j *Job) { j.Schedule.Every = Duration(time.Second) }, want: func(j *Job) { j.Schedule.Every = Duration(time.Second) }},
		{name: "every 1ns without minimum", edit: func(j *Job) { j.Schedule.Every = 1 }, defaults: Rules{MinInterval: -1}, want: func(j *Job) { j.Schedule.Every = 1 }},
		{name: "every below a set minimum", edit: func(j *Job) { j.Schedule.Every = Duration(30 * time.Second) }, defaults: Rules{MinInterval: time.Minute}, field: "schedule.every", minOnly: true},
		{name: "@every below the minimum", edit: func(j *Job) { j.Schedule = ScheduleSpec{Kind: KindCron, Cron: "@every 500ms"} }, field: "schedule.cron", minOnly: true},
		{name: "tz on every", edit: func(j *Job) { j.Schedule.TZ = "Asia/Tokyo" }, field: "schedule.tz"},
		{name: "run_at on every", edit: func(j *Job) { j.Schedule.RunAt = now }, field: "schedule.run_at"},
		{name: "every on once", edit: func(j *Job) { j.Schedule = ScheduleSpec{Kind: KindOnce, RunAt: now, Every: Duration(time.Hour)} }, field: "schedule.every"},
		{name: "jitter on once", edit: func(j *Job) { j.Schedule = ScheduleSpec{Kind: KindOnce, RunAt: now, Jitter: 1} }, field: "schedule.jitter"},
		{name: "start_at on cron", edit: func(j *Job) { j.Schedule = ScheduleSpec{Kind: KindCron, Cron: "0 9 * * *", StartAt: now} }, field: "schedule.start_at"},
		{name: "cron on once", edit: func(j *Job) { j.Schedule = ScheduleSpec{Kind: KindOnce, RunAt: now, Cron: "0 9 * * *"} }, field: "schedule.cron"},
		{name: "cron missing", edit: func(j *Job) { j.Schedule = ScheduleSpec{Kind: KindCron} }, field: "schedule.cron"},
		{name: "cron bad", edit: func(j *Job) { j.Schedule = ScheduleSpec{Kind: KindCron, Cron: "0 25 * * *"} }, field: "schedule.cron"},
		{name: "tz unknown", edit: func(j *Job) { j.Schedule = ScheduleSpec{Kind: KindCron, Cron: "0 9 * * *", TZ: "Mars/Base"} }, field: "schedule.tz"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j := base()
			if tt.edit != nil {
				tt.edit(&j)
			}
			validateErr := j.Validate() // must agree with Prepare, and not modify j
			before := j
			_, err := j.Prepare(now, tt.defaults)
			if tt.field != "" {
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Field != tt.field {
					t.Fatalf("Prepare error = %v, want a *ValidationError on %s", err, tt.field)
				}
				if tt.minOnly {
					if validateErr != nil {
						t.Errorf("Validate error = %v, want none: the minimum interval is a runner's rule", validateErr)
					}
				} else if !errors.As(validateErr, &ve) || ve.Field != tt.field {
					t.Errorf("Validate error = %v, want a *ValidationError on %s", validateErr, tt.field)
				}
				return
			}
			if err != nil || validateErr != nil {
				t.Fatalf("Prepare error = %v, Validate error = %v; want none", err, validateErr)
			}
			if before.Timeout != 0 && before.Timeout != j.Timeout {
				t.Errorf("Validate or Prepare changed a set timeout")
			}
			want := base()
			want.Type, want.HTTP.Method = JobTypeHTTP, "GET"
			want.Timeout, want.RetryBackoff = Duration(DefaultTimeout), Duration(DefaultRetryBackoff)
			want.Schedule.StartAt = now.UTC()
			tt.want(&want)
			if diff := cmp.Diff(want, j); diff != "" {
				t.Errorf("prepared job (-want +got):\n%s", diff)
			}
		})
	}
}

// TestPrepareSchedule checks the schedule Prepare returns against the one
// the spec describes.
func TestPrepareSchedule(t *testing.T) {
	now := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		spec ScheduleSpec
		want []time.Time // the first run times after now
	}{
		{ScheduleSpec{Kind: KindOnce, RunAt: now.Add(time.Hour)}, []time.Time{now.Add(time.Hour), {}}},
		{ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)}, []time.Time{now, now.Add(time.Minute)}}, // start_at = now
		{ScheduleSpec{Kind: KindCron, Cron: "0 9 * * *", TZ: "Asia/Tokyo"}, []time.Time{time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC), time.Date(2030, 1, 2, 0, 0, 0, 0, time.UTC)}},
	}
	for _, tt := range tests {
		j := Job{ID: "j", HTTP: HTTPConfig{URL: "http://svc.test/"}, Schedule: tt.spec}
		s, err := j.Prepare(now, Rules{})
		if err != nil {
			t.Fatalf("Prepare(%s): %v", tt.spec.Kind, err)
		}
		var got []time.Time
		for t := now.Add(-time.Nanosecond); len(got) < len(tt.want); {
			t = s.Next(t)
			got = append(got, t.UTC())
			if t.IsZero() {
				break
			}
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: run times (-want +got):\n%s", tt.spec.Kind, diff)
		}
	}
}

func TestDurationJSON(t *testing.T) {
	tests := []struct {
		d    Duration
		want string
	}{
		{0, `"0s"`},
		{Duration(1500 * time.Microsecond), `"1.5ms"`},
		{Duration(1500 * time.Nanosecond), `"1.5µs"`},
		{Duration(-90 * time.Second), `"-1m30s"`},
		{Duration(26 * time.Hour), `"26h"`},
		{Duration(time.Hour), `"1h"`},
		{Duration(time.Minute), `"1m"`},
		{Duration(10 * time.Minute), `"10m"`},
		{Duration(90 * time.Minute), `"1h30m"`},
		{Duration(time.Hour + time.Second), `"1h0m1s"`},
		{Duration(-time.Hour), `"-1h"`},
		{Duration(10 * time.Second), `"10s"`},
		{Duration(100 * time.Millisecond), `"100ms"`},
		{Duration(time.Minute + 500*time.Millisecond), `"1m0.5s"`},
	}
	for _, tt := range tests {
		b, err := json.Marshal(tt.d)
		if err != nil || string(b) != tt.want {
			t.Errorf("Marshal(%d) = %s, %v; want %s", int64(tt.d), b, err, tt.want)
		}
		var back Duration
		if err := json.Unmarshal(b, &back); err != nil || back != tt.d {
			t.Errorf("Unmarshal(%s) = %d, %v; want %d", b, int64(back), err, int64(tt.d))
		}
	}
}

func TestValidID(t *testing.T) {
	tests := []struct {
		id   string
		want string // "" for valid, else the reason
	}{
		{"a", ""}, {"Job_1.a:b-c", ""}, {"..a", ""}, {strings.Repeat("x", MaxIDLen), ""},
		{"", "must be 1 to 128 characters long, got 0"},
		{strings.Repeat("x", MaxIDLen+1), "must be 1 to 128 characters long, got 129"},
		{".", `must not be "."`}, {"..", `must not be ".."`},
		{"a/b", `may hold only letters, digits, '-', '_', '.' and ':', got "/" at offset 1`},
		{"a b", `may hold only letters, digits, '-', '_', '.' and ':', got " " at offset 1`},
		{"é", `may hold only letters, digits, '-', '_', '.' and ':', got "\xc3" at offset 0`},
	}
	for _, tt := range tests {
		err := validID(tt.id)
		var got string
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Field != "id" {
				t.Fatalf("validID(%q) = %v, want a *ValidationError on id", tt.id, err)
			}
			got = ve.Reason
		}
		if got != tt.want {
			t.Errorf("validID(%q) reason = %q, want %q", tt.id, got, tt.want)
		}
	}
	r := newTestRunner(t, nil, &fakeExec{}, Config{})
	var ve *ValidationError
	if _, err := r.Add(context.Background(), httpJob("a/b", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour)})); !errors.As(err, &ve) || ve.Field != "id" {
		t.Errorf("Add(id a/b) error = %v, want a *ValidationError on id", err)
	}
}

// TestValidateTemplates checks Validate over jobs made from templates, in
// turn and from several goroutines at once: a URL or body that passed is
// not checked again, and nothing else is taken for granted, so each job
// gets the answer it gets alone.
func TestValidateTemplates(t *testing.T) {
	good := Job{Name: "t", HTTP: HTTPConfig{Method: "POST", URL: "http://example.com/hook", Body: `{"n":1}`},
		Schedule: ScheduleSpec{Kind: KindEvery, Every: Duration(time.Minute)}}
	cases := []struct {
		name   string
		change func(j *Job)
		field  string // "" for valid
	}{
		{"template", func(j *Job) {}, ""},
		{"same URL, bad timeout", func(j *Job) { j.Timeout = -1 }, "timeout"},
		{"same URL, bad method", func(j *Job) { j.HTTP.Method = "BREW" }, "http.method"},
		{"bad URL", func(j *Job) { j.HTTP.URL = "ftp://example.com/x" }, "http.url"},
		{"no host", func(j *Job) { j.HTTP.URL = "http:///x" }, "http.url"},
		{"other good URL", func(j *Job) { j.HTTP.URL = "https://example.org/" }, ""},
		{"bad body", func(j *Job) { j.HTTP.Body = "{{nope}}" }, "http.body"},
		{"typed job with the template's URL", func(j *Job) { j.Type = "report" }, "http"},
		{"same URL, bad headers", func(j *Job) { j.HTTP.Headers = map[string]string{"Bad Name": "x"} }, "http.headers"},
	}
	check := func(t *testing.T, name string, j Job, field string) {
		err := j.Validate()
		var ve *ValidationError
		switch {
		case field == "" && err != nil:
			t.Errorf("%s: %v, want valid", name, err)
		case field != "" && (!errors.As(err, &ve) || ve.Field != field):
			t.Errorf("%s: %v, want an error on %s", name, err, field)
		}
	}
	// Each case right after the template passed, and twice in a row.
	for _, c := range cases {
		check(t, "template then "+c.name, good, "")
		j := good
		c.change(&j)
		check(t, c.name, j, c.field)
		check(t, c.name+" again", j, c.field)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 200 {
				c := cases[(g+i)%len(cases)]
				j := good
				c.change(&j)
				check(t, c.name+" (concurrent)", j, c.field)
			}
		})
	}
	wg.Wait()
}
