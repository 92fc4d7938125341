package console

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// waitRun waits for one run of the fixture's runner.
func waitRun(t *testing.T, f *fixture) cron.Run {
	t.Helper()
	select {
	case r := <-f.runs:
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no run happened")
	}
	return cron.Run{}
}

func TestRunsPage(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.add(t, cron.Job{ID: "a"})
	f.add(t, cron.Job{ID: "b"})
	b := f.browser(t)
	for _, id := range []string{"a", "b", "a"} {
		b.get("/jobs/" + id)
		if code, body, _ := b.post("/jobs/"+id+"/run", url.Values{"force": {"on"}}); code != http.StatusSeeOther {
			t.Fatalf("run %s: %d\n%s", id, code, body)
		}
		waitRun(t, f)
	}
	code, body, _ := b.get("/runs")
	if code != http.StatusOK || strings.Count(body, `class="run"`) != 3 || !strings.Contains(body, `href="/jobs-ui/runs"`) {
		t.Fatalf("GET /runs: %d, want 3 runs and a nav link\n%s", code, body)
	}
	if _, body, _ := b.get("/runs?job=a"); strings.Count(body, `class="run"`) != 2 {
		t.Errorf("GET /runs?job=a: want 2 runs\n%s", body)
	}
	if _, body, _ := b.get("/runs?status=failed"); strings.Count(body, `class="run"`) != 0 {
		t.Errorf("GET /runs?status=failed: want none")
	}
	// The API's error names the bad parameter on the page.
	if code, body, _ := b.get("/runs?since=yesterday"); code != http.StatusBadRequest || !strings.Contains(body, "since: must be an RFC 3339 time") {
		t.Errorf("GET /runs?since=yesterday: %d\n%s", code, body)
	}
	if _, body, _ := b.get("/jobs/a"); !strings.Contains(body, `href="/jobs-ui/runs?job=a"`) {
		t.Error("the job page does not link to its runs on the runs page")
	}
}

func TestHistoryShowsReasonSlotsAndAlert(t *testing.T) {
	h := &historyPart{JobID: "j", Runs: rows("", []cron.Run{
		{ID: "r1", JobID: "j", Status: cron.StatusSkipped, Reason: "paused", Slots: 4, ScheduledAt: time.Now()},
		{ID: "r2", JobID: "j", Status: cron.StatusFailed, Alert: "failing_streak", ScheduledAt: time.Now()},
	}, cron.RoleAdmin)}
	c, err := newConsole(newTestRunner(t), Config{})
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if err := c.tmpl["job"].ExecuteTemplate(&sb, "history", h); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`class="small reason">paused`, `4 slots`, `class="alert">failing_streak`} {
		if !strings.Contains(sb.String(), want) {
			t.Errorf("history lacks %q\n%s", want, sb.String())
		}
	}
}

func newTestRunner(t *testing.T) *cron.Runner {
	r, err := cron.New(nil, cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result { return cron.Result{} }), cron.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestPauseUntil(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.add(t, cron.Job{ID: "j"})
	f.add(t, cron.Job{ID: "k"})
	b := f.browser(t)
	b.get("/jobs/j")
	until := time.Now().Add(2 * time.Hour).UTC().Truncate(time.Second)
	if code, body, _ := b.post("/jobs/j/pause", url.Values{"until": {until.Format(time.RFC3339)}}); code != http.StatusSeeOther {
		t.Fatalf("pause until: %d\n%s", code, body)
	}
	j, _ := f.runner.Get(context.Background(), "j")
	if !j.Paused || !j.PausedUntil.Equal(until) {
		t.Fatalf("after pause until %s: paused %v until %s", until, j.Paused, j.PausedUntil)
	}
	_, body, _ := b.get("/jobs/j")
	if !strings.Contains(body, "paused until <time datetime=\""+until.Format(time.RFC3339)) {
		t.Errorf("the job page does not say paused until %s", until)
	}
	if !strings.Contains(body, `<span class="small" id="paused-since">since <time datetime="`+j.PausedAt.Format(time.RFC3339)) || j.PausedAt.IsZero() {
		t.Errorf("the job page does not say since when the job is paused (%s)", j.PausedAt)
	}
	// Quick choice: 1d.
	if code, _, _ := b.post("/jobs/k/pause", url.Values{"for": {"1d"}}); code != http.StatusSeeOther {
		t.Fatalf("pause for 1d: %d", code)
	}
	k, _ := f.runner.Get(context.Background(), "k")
	if d := time.Until(k.PausedUntil); d < 23*time.Hour || d > 25*time.Hour {
		t.Errorf("pause for 1d ends in %s", d)
	}
	// The jobs page filters the jobs with a timed pause.
	f.add(t, cron.Job{ID: "plain"})
	if _, err := f.runner.Pause(context.Background(), "plain", time.Time{}); err != nil {
		t.Fatal(err)
	}
	_, body, _ = b.get("/jobs?paused_until=true")
	if !strings.Contains(body, `/jobs/j"`) || !strings.Contains(body, `/jobs/k"`) || strings.Contains(body, `/jobs/plain"`) {
		t.Errorf("paused_until=true lists the wrong jobs\n%s", body)
	}
	if code, _, _ := b.get("/jobs?paused_until=soon"); code != http.StatusBadRequest {
		t.Errorf("paused_until=soon: %d, want 400", code)
	}
	// A time in the past is the API's 400, shown.
	f.add(t, cron.Job{ID: "m"})
	code, body, _ := b.post("/jobs/m/pause", url.Values{"until": {"2001-01-01T00:00:00Z"}})
	if code != http.StatusBadRequest || !strings.Contains(body, "must be in the future") {
		t.Errorf("pause until the past: %d\n%s", code, body)
	}
	if code, _, _ := b.post("/jobs/m/pause", url.Values{"for": {"1y"}}); code != http.StatusBadRequest {
		t.Errorf("pause for 1y: %d, want 400", code)
	}
}

func TestRunNowWithOverrides(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.add(t, cron.Job{ID: "j"})
	b := f.browser(t)
	_, page, _ := b.get("/jobs/j")
	if !strings.Contains(page, `id="run-with-form"`) || !strings.Contains(page, `name="key"`) {
		t.Fatal("the job page has no run-now form with overrides")
	}
	vals := url.Values{"body": {`{"x":1}`}, "headers": {"X-Test: yes"}, "key": {"k1"}}
	if code, body, _ := b.post("/jobs/j/run", vals); code != http.StatusSeeOther {
		t.Fatalf("run with overrides: %d\n%s", code, body)
	}
	waitRun(t, f)
	// The same form sent again (same Idempotency-Key) queues no second run.
	if code, _, _ := b.post("/jobs/j/run", vals); code != http.StatusSeeOther {
		t.Fatalf("run again with the same key: %d", code)
	}
	select {
	case r := <-f.runs:
		t.Errorf("the repeated form ran the job again: %+v", r)
	case <-time.After(300 * time.Millisecond):
	}
	// The same key with another body is the API's 422, shown.
	code, body, _ := b.post("/jobs/j/run", url.Values{"body": {"other"}, "key": {"k1"}})
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "use a new key") {
		t.Errorf("reused key: %d\n%s", code, body)
	}
	// A bad header line is named.
	code, body, _ = b.post("/jobs/j/run", url.Values{"headers": {"no colon"}})
	if code != http.StatusBadRequest || !strings.Contains(body, "headers: line 1") {
		t.Errorf("bad header line: %d\n%s", code, body)
	}
}

func TestServicePause(t *testing.T) {
	f := newFixture(t, fixtureOpts{auth: true})
	f.add(t, cron.Job{ID: "j"})
	viewer, op, admin := f.browser(t), f.browser(t), f.browser(t)
	viewer.login(viewerToken)
	op.login(operatorToken)
	admin.login(adminToken)
	for _, b := range []*browser{viewer, op} {
		_, body, _ := b.get("/")
		if strings.Contains(body, `id="pause-all"`) {
			t.Error("a viewer or operator sees the pause-all form")
		}
		if code, _, _ := b.post("/pause-all", url.Values{"reason": {"x"}, "confirm": {"yes"}}); code != http.StatusForbidden {
			t.Errorf("pause-all by a non-admin: %d, want 403", code)
		}
	}
	_, body, _ := viewer.get("/jobs/j")
	if strings.Contains(body, `id="run-with-form"`) || strings.Contains(body, `id="pause-form"`) {
		t.Error("a viewer sees the run-now or pause form")
	}
	if f.runner.Paused().Paused {
		t.Fatal("a non-admin paused the service")
	}
	_, body, _ = admin.get("/")
	if !strings.Contains(body, `id="pause-all"`) {
		t.Fatal("the admin sees no pause-all form")
	}
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	code, body, _ := admin.post("/pause-all", url.Values{"until": {until}, "reason": {"deploy <b>"}})
	if code != http.StatusOK || !strings.Contains(body, `id="confirm-pause-all"`) || f.runner.Paused().Paused {
		t.Fatalf("pause-all without confirm: %d, want a confirmation and no pause\n%s", code, body)
	}
	if code, _, _ := admin.post("/pause-all", url.Values{"until": {until}, "reason": {"deploy <b>"}, "confirm": {"yes"}}); code != http.StatusSeeOther {
		t.Fatalf("pause-all: %d", code)
	}
	p := f.runner.Paused()
	if !p.Paused || p.Reason != "deploy <b>" || p.Until.Format(time.RFC3339) != until {
		t.Fatalf("service pause = %+v", p)
	}
	for _, path := range []string{"/", "/jobs", "/runs", "/jobs/j"} {
		_, body, _ := viewer.get(path)
		if !strings.Contains(body, `id="service-paused"`) || !strings.Contains(body, "deploy &lt;b&gt;") || !strings.Contains(body, until) {
			t.Errorf("GET %s: no service pause banner with reason and until", path)
		}
		if strings.Contains(body, `id="resume-all"`) {
			t.Errorf("GET %s: a viewer sees the resume button", path)
		}
	}
	if code, _, _ := op.post("/resume-all", nil); code != http.StatusForbidden {
		t.Errorf("resume-all by an operator: %d, want 403", code)
	}
	if code, _, _ := admin.post("/resume-all", nil); code != http.StatusSeeOther {
		t.Errorf("resume-all: %d", code)
	}
	if f.runner.Paused().Paused {
		t.Error("still paused after resume-all")
	}
	// The audit of the service pause is the API's.
	_, body, _ = admin.get("/jobs/j")
	if strings.Contains(body, `id="service-paused"`) {
		t.Error("the banner stays after resume")
	}
}

func TestFormAlertFields(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	b := f.browser(t)
	b.get("/new")
	vals := url.Values{"id": {"al"}, "schedule.kind": {"every"}, "schedule.every": {"1m"}, "http.url": {"https://example.com"},
		"alert.url": {"ftp://x"}, "alert.after": {"2"}}
	code, body, _ := b.post("/new", vals)
	if code != http.StatusBadRequest || !strings.Contains(body, `data-field="alert.url"`) {
		t.Fatalf("a bad alert url: %d, want 400 with the error beside alert.url\n%s", code, body)
	}
	vals.Set("alert.url", "https://hooks.example.com/a")
	vals.Set("alert.pause_after", "5")
	if code, body, _ := b.post("/new", vals); code != http.StatusSeeOther {
		t.Fatalf("create with alert: %d\n%s", code, body)
	}
	j, err := f.runner.Get(context.Background(), "al")
	if err != nil || j.Alert == nil || j.Alert.URL != "https://hooks.example.com/a" || j.Alert.After != 2 || j.Alert.PauseAfter != 5 {
		t.Fatalf("job alert = %+v (%v)", j.Alert, err)
	}
	_, body, _ = b.get("/jobs/al")
	if !strings.Contains(body, "https://hooks.example.com/a") || !strings.Contains(body, `id="failures">0`) {
		t.Errorf("the job page does not show the alert config and failures")
	}
	_, body, _ = b.get("/jobs/al/edit")
	if !strings.Contains(body, `value="https://hooks.example.com/a"`) {
		t.Error("the edit form does not hold the alert url")
	}
	// Emptying every alert field removes the alert.
	vals.Del("id")
	for _, k := range []string{"alert.url", "alert.after", "alert.pause_after"} {
		vals.Set(k, "")
	}
	if code, body, _ := b.post("/jobs/al/edit", vals); code != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", code, body)
	}
	if j, _ := f.runner.Get(context.Background(), "al"); j.Alert != nil {
		t.Errorf("alert after emptying the fields: %+v", j.Alert)
	}
}

func TestPausePlainIgnoresTheTime(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	f.add(t, cron.Job{ID: "j"})
	b := f.browser(t)
	b.get("/jobs/j")
	// The plain Pause button of a form whose time input holds a value.
	if code, _, _ := b.post("/jobs/j/pause", url.Values{"plain": {"1"}, "until_local": {"2099-01-01T08:00"}}); code != http.StatusSeeOther {
		t.Fatalf("pause: %d", code)
	}
	if j, _ := f.runner.Get(context.Background(), "j"); !j.Paused || !j.PausedUntil.IsZero() {
		t.Errorf("plain pause: paused %v until %s, want paused with no end", j.Paused, j.PausedUntil)
	}
	// Without the page's script the datetime-local value is read as UTC.
	f.add(t, cron.Job{ID: "k"})
	if code, _, _ := b.post("/jobs/k/pause", url.Values{"until_local": {"2099-01-01T08:00"}}); code != http.StatusSeeOther {
		t.Fatalf("pause until_local: %d", code)
	}
	if j, _ := f.runner.Get(context.Background(), "k"); !j.PausedUntil.Equal(time.Date(2099, 1, 1, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("until_local: paused until %s", j.PausedUntil)
	}
}

// TestRunNowInFlightShows409 runs a job whose run blocks: a second run
// now is the API's 409, shown with its message; force runs it anyway.
func TestRunNowInFlightShows409(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	r, err := cron.New(nil, cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, _ cron.RunInfo) cron.Result {
		started <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1}
	}), cron.Config{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() { close(release); cancel(); <-done }()
	if _, err := r.Add(ctx, cron.Job{ID: "slow", Schedule: cron.Every(time.Hour), HTTP: cron.HTTPConfig{URL: "https://example.com"}}); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(New(r, Config{}))
	defer srv.Close()
	f := &fixture{runner: r, srv: srv, base: srv.URL}
	b := f.browser(t)
	b.get("/jobs/slow")
	if code, _, _ := b.post("/jobs/slow/run", nil); code != http.StatusSeeOther {
		t.Fatalf("first run: %d", code)
	}
	<-started
	code, body, _ := b.post("/jobs/slow/run", nil)
	if code != http.StatusConflict || !strings.Contains(body, `id="error"`) || !strings.Contains(body, "has a run in flight") {
		t.Errorf("run now while a run is in flight: %d, want 409 with the API's message\n%s", code, body)
	}
	if code, body, _ := b.post("/jobs/slow/run", url.Values{"force": {"on"}}); code != http.StatusSeeOther {
		t.Errorf("forced run: %d\n%s", code, body)
	}
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Error("the forced run did not start")
	}
}

func TestRunsPagePaging(t *testing.T) {
	f := newFixture(t, fixtureOpts{})
	// Two jobs, as a store may keep a bounded history per job.
	f.add(t, cron.Job{ID: "p"})
	f.add(t, cron.Job{ID: "q"})
	const n = runsPageSize + 5
	for i := range n {
		if _, err := f.runner.RunNow(context.Background(), []string{"p", "q"}[i%2], cron.RunOptions{Force: true}); err != nil {
			t.Fatal(err)
		}
		waitRun(t, f)
	}
	b := f.browser(t)
	_, body, _ := b.get("/runs?status=success")
	if got := strings.Count(body, `class="run"`); got != runsPageSize {
		t.Fatalf("first page: %d runs, want %d", got, runsPageSize)
	}
	m := regexp.MustCompile(`href="/jobs-ui(/runs\?[^"]+)" rel="next"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("first page: no next link\n%s", body)
	}
	next := html.UnescapeString(m[1])
	if !strings.Contains(next, "status=success") {
		t.Errorf("the next link %q forgets the filter", next)
	}
	code, body, _ := b.get(next)
	if code != http.StatusOK || strings.Count(body, `class="run"`) != n-runsPageSize || strings.Contains(body, `rel="next"`) {
		t.Errorf("second page %s: %d, %d runs, want %d and no next link", next, code, strings.Count(body, `class="run"`), n-runsPageSize)
	}
	if code, body, _ := b.get("/runs?after=nonsense"); code != http.StatusBadRequest || !strings.Contains(body, "after:") {
		t.Errorf("a bad cursor: %d\n%s", code, body)
	}
}

// TestLinksKeepTheFilter: the links of the pages (next page, the
// overview's counts, a confirmation's cancel) carry their query encoded
// once, so the page they lead to reads the same filter.
func TestLinksKeepTheFilter(t *testing.T) {
	f := newFixture(t, fixtureOpts{console: Config{PageSize: 2}})
	for i := range 5 {
		f.add(t, cron.Job{ID: fmt.Sprintf("j%d", i), Name: "nightly"})
	}
	b := f.browser(t)
	_, body, _ := b.get("/jobs?q=night&kind=every")
	m := regexp.MustCompile(`href="/jobs-ui(/jobs\?[^"]+)" rel="next"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no next link\n%s", body)
	}
	next, _ := url.Parse(html.UnescapeString(m[1]))
	if q := next.Query(); q.Get("q") != "night" || q.Get("kind") != "every" || q.Get("after") != "j1" {
		t.Errorf("next link %q reads as %v", m[1], q)
	}
	_, body, _ = b.get("/")
	if !strings.Contains(body, `href="/jobs-ui/jobs?status=never"`) || !strings.Contains(body, `href="/jobs-ui/jobs?kind=every"`) {
		t.Errorf("the overview's count links are not plain queries\n%s", body)
	}
	_, body, _ = b.post("/bulk", url.Values{"action": {"pause"}, "q": {"night"}, "kind": {"every"}})
	if !strings.Contains(body, `href="/jobs-ui/jobs?kind=every&amp;q=night"`) {
		t.Errorf("the confirmation's cancel link loses the filter\n%s", body)
	}
}
