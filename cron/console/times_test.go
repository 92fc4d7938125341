package console

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// The forms of a time on the pages.
var (
	absTimeRE = regexp.MustCompile(`^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC$`)
	relTimeRE = regexp.MustCompile(`^(now|\d+ (s|min|h|d) ago|in \d+ (s|min|h|d))$`)
)

func TestRelative(t *testing.T) {
	now := time.Date(2026, 11, 27, 22, 57, 25, 0, time.UTC)
	for _, tc := range []struct {
		d    time.Duration
		want string
	}{
		{0, "now"},
		{-300 * time.Millisecond, "now"},
		{-5 * time.Minute, "5 min ago"},
		{3 * time.Second, "in 3 s"},
		{-59 * time.Second, "59 s ago"},
		{2*time.Hour + 5*time.Minute, "in 2 h"},
		{-47 * time.Hour, "47 h ago"},
		{-72 * time.Hour, "3 d ago"},
	} {
		if got := relative(now.Add(tc.d), now); got != tc.want {
			t.Errorf("relative(%v) = %q, want %q", tc.d, got, tc.want)
		}
	}
	if got := abs(now.In(time.FixedZone("X", 3600))); got != "2026-11-27 22:57:25 UTC" || !absTimeRE.MatchString(got) {
		t.Errorf("abs = %q", got)
	}
	if abs(time.Time{}) != "" {
		t.Error("abs of the zero time is not empty")
	}
}

func TestDurText(t *testing.T) {
	for _, tc := range []struct {
		d    any
		want string
	}{
		{cron.Duration(14 * time.Hour), "14h"},
		{cron.Duration(5 * time.Minute), "5m"},
		{cron.Duration(90 * time.Minute), "1h30m"},
		{cron.Duration(30 * time.Second), "30s"},
		{1234567 * time.Microsecond, "1.235s"},
		{-2 * time.Second, "-2s"},
		{1500 * time.Nanosecond, "2µs"},
		{time.Duration(0), "0s"},
	} {
		if got := durText(tc.d); got != tc.want {
			t.Errorf("durText(%v) = %q, want %q", tc.d, got, tc.want)
		}
		// The command line's rule: cron.Duration's String.
		if cd, ok := tc.d.(cron.Duration); ok && durText(cd) != cd.String() {
			t.Errorf("durText(%v) differs from the CLI's %q", cd, cd.String())
		}
	}
}

func TestThousands(t *testing.T) {
	for n, want := range map[int]string{0: "0", 999: "999", 1000: "1,000", 1234567: "1,234,567", -1234: "-1,234"} {
		if got := thousands(n); got != want {
			t.Errorf("thousands(%d) = %q, want %q", n, got, want)
		}
	}
}

var timeElemRE = regexp.MustCompile(`<time datetime="[^"]+"(?: title="([^"]*)")?( data-rel)?>([^<]*)</time>`)

// TestOneTimeForm checks every time of the pages: its text relative
// (its title the absolute form) or the absolute form itself.
func TestOneTimeForm(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.add(t, cron.Job{ID: "c", Schedule: cron.ScheduleSpec{Kind: cron.KindCron, Cron: "0 9 * * *", TZ: "Asia/Tokyo"}})
	f.add(t, cron.Job{ID: "e", Schedule: cron.Every(14 * time.Hour)})
	if _, err := f.runner.Pause(context.Background(), "e", time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := f.runner.RunNow(context.Background(), "c", cron.RunOptions{}); err != nil {
		t.Fatal(err)
	}
	run := waitRun(t, f)
	b := f.browser(t)
	for _, page := range []string{"/", "/jobs", "/jobs/c", "/jobs/e", "/runs", "/runs/" + run.ID} {
		code, body, _ := b.get(page)
		if code != 200 {
			t.Fatalf("GET %s: %d", page, code)
		}
		n := 0
		for _, m := range timeElemRE.FindAllStringSubmatch(body, -1) {
			n++
			title, rel, text := m[1], m[2] != "", m[3]
			switch {
			case rel && (!absTimeRE.MatchString(title) || !relTimeRE.MatchString(text)):
				t.Errorf("%s: relative time %q titled %q", page, text, title)
			case !rel && !absTimeRE.MatchString(text):
				t.Errorf("%s: absolute time %q", page, text)
			}
		}
		if n == 0 {
			t.Errorf("%s shows no time", page)
		}
		if strings.Contains(body, "0m0s") || strings.Contains(body, "h0m") {
			t.Errorf("%s writes a duration in Go's form", page)
		}
	}
	if _, body, _ := b.get("/jobs"); !strings.Contains(body, "every 14h") || !strings.Contains(body, "(Asia/Tokyo)") {
		t.Errorf("the jobs list lacks the CLI's duration or the cron job's zone\n%s", body)
	}
	_, body, _ := b.get("/jobs/c")
	for _, want := range []string{"<th>In Asia/Tokyo</th><th>UTC</th><th>In</th>", " JST</td>", `id="zone">Asia/Tokyo<`} {
		if !strings.Contains(body, want) {
			t.Errorf("the cron job's page lacks %q", want)
		}
	}
	if _, body, _ := b.get("/jobs/e"); !strings.Contains(body, "<th>Time (UTC)</th><th>In</th>") || strings.Contains(body, "<th>UTC</th>") {
		t.Error("a UTC job's next runs show UTC twice")
	}
}
