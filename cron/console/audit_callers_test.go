package console

import (
	"context"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// A caller is one way a change reaches the runner.
type caller string

const (
	viaAPI     caller = "api"          // the REST API over HTTP, with a bearer token
	viaConsole caller = "console"      // the console's forms, signed in, with the CSRF token
	viaBulk    caller = "console-bulk" // the console's bulk form (confirmed)
	viaGoActor caller = "go-actor"     // a Go call with cron.WithActor
	viaGoLocal caller = "go-local"     // a Go call whose context names no actor
	viaRunner  caller = "runner"       // the runner on its own
)

// callers are the columns of the table, each with whether it acts with a
// role that can be too low (and so whether a refused attempt is tried).
var callers = []struct {
	c     caller
	roles bool
}{
	{viaAPI, true}, {viaConsole, true}, {viaBulk, true}, {viaGoActor, true}, {viaGoLocal, false}, {viaRunner, false},
}

// A cell is one action through one caller: how to perform it, or why
// the caller cannot.
type cell struct {
	// na says why the caller cannot perform the action; the cell is then
	// skipped.
	na string
	// setup, when set, replaces the row's setup (the runner's cells set
	// up what makes the runner act by itself).
	setup func(t *testing.T, f *fixture)
	// do performs the action once as a holder of role (for a caller with
	// roles) and reports whether it was done (false: refused as
	// forbidden); any other outcome fails the test.
	do func(t *testing.T, f *fixture, c caller, role cron.Role) bool
}

// An auditRow is one action, through every caller.
type auditRow struct {
	name   string
	act    cron.Action // the Action constant the row covers
	setup  func(t *testing.T, f *fixture)
	record cron.Action // the action of its audit record
	jobID  string      // the job of its audit record
	// check, when set, checks more of the record.
	check func(t *testing.T, e cron.AuditEntry)
	cells map[caller]cell
}

// The identities of the callers with roles, by role: the fixture's
// tokens, and the actor of a Go call.
var (
	tokenOf   = map[cron.Role]string{cron.RoleViewer: viewerToken, cron.RoleOperator: operatorToken, cron.RoleAdmin: adminToken}
	tokenName = map[cron.Role]string{cron.RoleViewer: "vera", cron.RoleOperator: "otto", cron.RoleAdmin: "ada"}
)

const goActorName = "gopher"

// actorOf is who the audit record of a change by c, as role, names.
func actorOf(c caller, role cron.Role) cron.Actor {
	switch c {
	case viaAPI, viaConsole, viaBulk:
		return cron.Actor{Name: tokenName[role], Role: role}
	case viaGoActor:
		return cron.Actor{Name: goActorName, Role: role}
	case viaGoLocal:
		return cron.ActorLocal
	}
	return cron.ActorRunner
}

// below is the role just under r: one that may not do what r may.
func below(r cron.Role) cron.Role {
	if r == cron.RoleAdmin {
		return cron.RoleOperator
	}
	return cron.RoleViewer
}

// TestAuditActionsByCaller: every action, through every caller that can
// perform it (the REST API, the console's forms, a Go call with and
// without an actor, the runner on its own), leaves exactly one audit
// record naming the action, the job and that caller; an attempt with a
// role too low is refused and leaves none. The table lists every Action
// constant of package cron, and every cell a caller cannot perform says
// why.
func TestAuditActionsByCaller(t *testing.T) {
	t.Parallel()
	const (
		jobJSON  = `{"id":"new","http":{"url":"https://example.com/hook"},"schedule":{"kind":"every","every":"1h"}}`
		noRunner = "the runner makes no "
		noBulk   = "the bulk form takes pause, resume, run (without overrides) and delete, of jobs"
	)
	later := time.Now().Add(time.Hour).UTC().Truncate(time.Second).Format(time.RFC3339)
	jobForm := url.Values{"name": {"renamed"}, "type": {"http"}, "enabled": {"on"}, "schedule.kind": {"every"},
		"schedule.every": {"1h"}, "http.method": {"POST"}, "http.url": {"https://example.com/hook"}}
	newForm := url.Values{"id": {"new"}}
	for k, v := range jobForm {
		newForm[k] = v
	}
	rows := []auditRow{
		{
			name: "create", act: cron.ActionCreate, record: cron.ActionCreate, jobID: "new",
			cells: map[caller]cell{
				viaAPI:     api("POST", "/jobs", jobJSON),
				viaConsole: form("/new", newForm),
				viaBulk:    {na: noBulk},
				viaGoActor: goCall(goAdd(cron.Job{ID: "new", HTTP: cron.HTTPConfig{URL: "https://example.com/hook"}, Schedule: cron.Every(time.Hour)})),
				viaGoLocal: goCall(goAdd(cron.Job{ID: "new", HTTP: cron.HTTPConfig{URL: "https://example.com/hook"}, Schedule: cron.Every(time.Hour)})),
				viaRunner:  {na: noRunner + "create by itself"},
			},
		},
		{
			name: "update", act: cron.ActionUpdate, setup: withJob, record: cron.ActionUpdate, jobID: "j",
			cells: map[caller]cell{
				viaAPI:     api("PATCH", "/jobs/j", `{"name":"renamed"}`),
				viaConsole: form("/jobs/j/edit", jobForm),
				viaBulk:    {na: noBulk},
				viaGoActor: goCall(goRename("j", "renamed")),
				viaGoLocal: goCall(goRename("j", "renamed")),
				viaRunner:  {na: noRunner + "update by itself (the end of a timed pause is a resume)"},
			},
		},
		{
			name: "delete", act: cron.ActionDelete, setup: withJob, record: cron.ActionDelete, jobID: "j",
			cells: map[caller]cell{
				viaAPI:     api("DELETE", "/jobs/j", ""),
				viaConsole: form("/jobs/j/delete", nil),
				viaBulk:    bulk("delete"),
				viaGoActor: goCall(goRemove("j")),
				viaGoLocal: goCall(goRemove("j")),
				viaRunner:  {na: noRunner + "delete by itself (a once job that ran stays)"},
			},
		},
		{
			name: "pause", act: cron.ActionPause, setup: withJob, record: cron.ActionPause, jobID: "j",
			cells: map[caller]cell{
				viaAPI:     api("POST", "/jobs/j/pause", ""),
				viaConsole: form("/jobs/j/pause", nil),
				viaBulk:    bulk("pause"),
				viaGoActor: goCall(goPause("j")),
				viaGoLocal: goCall(goPause("j")),
				// The pause after pause_after failures in a row.
				viaRunner: {setup: withFailingJob, do: byRunner},
			},
		},
		{
			name: "pause until", act: cron.ActionPause, setup: withJob, record: cron.ActionPause, jobID: "j",
			cells: map[caller]cell{
				viaAPI:     api("POST", "/jobs/j/pause", `{"until":"`+later+`"}`),
				viaConsole: form("/jobs/j/pause", url.Values{"for": {"1h"}}),
				viaBulk:    {na: "the bulk form pauses with no end"},
				viaGoActor: goCall(goPauseUntil("j", time.Hour)),
				viaGoLocal: goCall(goPauseUntil("j", time.Hour)),
				viaRunner:  {na: "the runner's own pause (after failures) has no end: see the pause row"},
			},
		},
		{
			name: "resume", act: cron.ActionResume, setup: withPausedJob, record: cron.ActionResume, jobID: "j",
			cells: map[caller]cell{
				viaAPI:     api("POST", "/jobs/j/resume", ""),
				viaConsole: form("/jobs/j/resume", nil),
				viaBulk:    bulk("resume"),
				viaGoActor: goCall(goResume("j")),
				viaGoLocal: goCall(goResume("j")),
				// The end of a timed pause of the job.
				viaRunner: {setup: withTimedPause, do: byRunner},
			},
		},
		{
			name: "run-now", act: cron.ActionRunNow, setup: withJob, record: cron.ActionRunNow, jobID: "j",
			cells: map[caller]cell{
				viaAPI:     api("POST", "/jobs/j/run-now", ""),
				viaConsole: form("/jobs/j/run", nil),
				viaBulk:    bulk("run"),
				viaGoActor: goCall(goRunNow("j")),
				viaGoLocal: goCall(goRunNow("j")),
				viaRunner:  {na: noRunner + "run-now: its scheduled runs are no change"},
			},
		},
		{
			// Replacing a header the job sets is asked beside the
			// run-now, and recorded as the run-now (its overrides name
			// the header): one record, of action run-now.
			name: "replace-header", act: cron.ActionReplaceHeader, setup: withHeaderJob, record: cron.ActionRunNow, jobID: "j",
			check: func(t *testing.T, e cron.AuditEntry) {
				if !strings.Contains(string(e.Overrides), `"Authorization":"(hidden)"`) || strings.Contains(string(e.Overrides), "mine") {
					t.Errorf("the record's overrides %s, want the header named, its value hidden", e.Overrides)
				}
			},
			cells: map[caller]cell{
				viaAPI:     api("POST", "/jobs/j/run-now", `{"headers":{"Authorization":"Bearer mine"}}`),
				viaConsole: form("/jobs/j/run", url.Values{"headers": {"Authorization: Bearer mine"}}),
				viaBulk:    {na: noBulk},
				viaGoActor: goCall(goRunNowWith("j", cron.RunOptions{Headers: map[string]string{"Authorization": "Bearer mine"}})),
				viaGoLocal: goCall(goRunNowWith("j", cron.RunOptions{Headers: map[string]string{"Authorization": "Bearer mine"}})),
				viaRunner:  {na: noRunner + "run-now, so replaces no header"},
			},
		},
		{
			name: "pause-all", act: cron.ActionPauseAll, record: cron.ActionPauseAll, jobID: "",
			cells: map[caller]cell{
				viaAPI:     api("POST", "/pause", `{"reason":"deploy"}`),
				viaConsole: form("/pause-all", url.Values{"reason": {"deploy"}, "confirm": {"yes"}}),
				viaBulk:    {na: noBulk},
				viaGoActor: goCall(goPauseAll(0)),
				viaGoLocal: goCall(goPauseAll(0)),
				viaRunner:  {na: noRunner + "service pause by itself (it only ends a timed one)"},
			},
		},
		{
			name: "resume-all", act: cron.ActionResumeAll, setup: withServicePause, record: cron.ActionResumeAll, jobID: "",
			cells: map[caller]cell{
				viaAPI:     api("POST", "/resume", ""),
				viaConsole: form("/resume-all", nil),
				viaBulk:    {na: noBulk},
				viaGoActor: goCall(goResumeAll()),
				viaGoLocal: goCall(goResumeAll()),
				// The end of a timed service pause.
				viaRunner: {setup: withTimedServicePause, do: byRunner},
			},
		},
	}

	// The table covers every Action constant, and only those, and names
	// every caller in every row.
	consts := actionConstants(t)
	covered := map[cron.Action]bool{}
	for _, row := range rows {
		covered[row.act] = true
		if _, ok := consts[row.act]; !ok {
			t.Errorf("row %s: %q is no Action constant of package cron", row.name, row.act)
		}
		for _, c := range callers {
			ce, ok := row.cells[c.c]
			switch {
			case !ok:
				t.Errorf("row %s: no cell for caller %s: give one, or say why it does not apply", row.name, c.c)
			case (ce.na == "") == (ce.do == nil):
				t.Errorf("row %s, caller %s: give either do or na", row.name, c.c)
			}
		}
		if len(row.cells) != len(callers) {
			t.Errorf("row %s: %d cells for %d callers", row.name, len(row.cells), len(callers))
		}
	}
	for act, name := range consts {
		if !covered[act] {
			t.Errorf("cron.%s (%q) is in no row of the table: add its row", name, act)
		}
	}
	if t.Failed() {
		t.FailNow()
	}

	for _, row := range rows {
		for _, c := range callers {
			ce := row.cells[c.c]
			t.Run(row.name+"/"+string(c.c), func(t *testing.T) {
				if ce.na != "" {
					t.Skip("not applicable: " + ce.na)
				}
				t.Parallel()
				f := newAuditFixture(t)
				if setup := firstSetup(ce.setup, row.setup); setup != nil {
					setup(t, f)
				}
				need := row.act.NeedRole()
				if c.roles {
					after := lastAudit(t, f)
					if ce.do(t, f, c.c, below(need)) {
						t.Errorf("as %s: done, want refused (%s needs %s)", below(need), row.act, need)
					}
					if got := auditAfter(t, f, after); len(got) != 0 {
						t.Errorf("the refused attempt as %s left %d audit records: %s", below(need), len(got), brief(got))
					}
				}
				after := lastAudit(t, f)
				if !ce.do(t, f, c.c, need) {
					t.Fatalf("as %s: refused", need)
				}
				got := auditAfter(t, f, after)
				if c.c == viaRunner {
					got = awaitAudit(t, f, after)
				}
				want := actorOf(c.c, need)
				if len(got) != 1 {
					t.Fatalf("%d audit records, want 1: %s", len(got), brief(got))
				}
				e := got[0]
				if e.Action != row.record || e.JobID != row.jobID || e.Who != want.Name || e.Role != string(want.Role) {
					t.Errorf("audit record %s, want %s", brief(got), brief([]cron.AuditEntry{{Who: want.Name, Role: string(want.Role), Action: row.record, JobID: row.jobID}}))
				}
				if row.check != nil {
					row.check(t, e)
				}
			})
		}
	}
}

// firstSetup returns the first of fs that is not nil.
func firstSetup(fs ...func(*testing.T, *fixture)) func(*testing.T, *fixture) {
	for _, f := range fs {
		if f != nil {
			return f
		}
	}
	return nil
}

// failingName names the jobs whose runs the audit fixture's executor
// fails.
const failingName = "failing"

// newAuditFixture serves the console and the API, with a token per role,
// over a runner whose executor fails the jobs named failingName and
// whose alerts are answered at once without a network.
func newAuditFixture(t *testing.T) *fixture {
	return newFixture(t, fixtureOpts{
		auth: true,
		exec: cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
			if j.Name == failingName {
				return cron.Result{Status: cron.StatusFailed, Attempts: 1, HTTPStatus: 500, Error: "http 500"}
			}
			return cron.Result{Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200}
		}),
		runner: cron.Config{AlertClient: &http.Client{Transport: roundTripFunc(func(*http.Request) (*http.Response, error) {
			return &http.Response{StatusCode: http.StatusNoContent, Body: io.NopCloser(strings.NewReader("")), Header: http.Header{}}, nil
		})}},
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// --- the setups (as the embedding program: their records come before
// the cell's) ---

func withJob(t *testing.T, f *fixture) { f.add(t, cron.Job{ID: "j"}) }

func withHeaderJob(t *testing.T, f *fixture) {
	f.add(t, cron.Job{ID: "j", HTTP: cron.HTTPConfig{Headers: map[string]string{"Authorization": "Bearer author"}}})
}

func withPausedJob(t *testing.T, f *fixture) {
	withJob(t, f)
	if err := goPause("j")(context.Background(), f.runner); err != nil {
		t.Fatal(err)
	}
}

func withServicePause(t *testing.T, f *fixture) {
	if err := goPauseAll(0)(context.Background(), f.runner); err != nil {
		t.Fatal(err)
	}
}

// withFailingJob adds a job that fails every second and is paused by the
// runner after its first failure.
func withFailingJob(t *testing.T, f *fixture) {
	f.add(t, cron.Job{ID: "j", Name: failingName, Schedule: cron.Every(time.Second),
		Alert: &cron.AlertConfig{URL: "https://alerts.example.com/hook", PauseAfter: 1}})
}

// runnerWait is how soon the runner's own changes of the table come.
const runnerWait = 300 * time.Millisecond

// withTimedPause pauses a job until shortly: then the runner resumes it.
func withTimedPause(t *testing.T, f *fixture) {
	withJob(t, f)
	if err := goPauseUntil("j", runnerWait)(context.Background(), f.runner); err != nil {
		t.Fatal(err)
	}
}

// withTimedServicePause pauses the service until shortly: then the
// runner resumes it.
func withTimedServicePause(t *testing.T, f *fixture) {
	if err := goPauseAll(runnerWait)(context.Background(), f.runner); err != nil {
		t.Fatal(err)
	}
}

// --- the ways to perform an action ---

// api sends one request to the REST API with the token of the role.
func api(method, path, body string) cell {
	return cell{do: func(t *testing.T, f *fixture, _ caller, role cron.Role) bool {
		t.Helper()
		req, err := http.NewRequest(method, f.srv.URL+"/api"+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+tokenOf[role])
		req.Header.Set("Content-Type", "application/json")
		resp, err := f.srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		switch {
		case resp.StatusCode/100 == 2:
			return true
		case resp.StatusCode == http.StatusForbidden:
			return false
		}
		t.Fatalf("%s %s as %s: %d %s", method, path, role, resp.StatusCode, b)
		return false
	}}
}

// form posts a form of the console, signed in with the token of the
// role, with the CSRF token of its page.
func form(path string, vals url.Values) cell {
	return cell{do: func(t *testing.T, f *fixture, _ caller, role cron.Role) bool {
		t.Helper()
		b := f.browser(t)
		b.login(tokenOf[role])
		v := url.Values{}
		for k, x := range vals {
			v[k] = slices.Clone(x)
		}
		code, body, _ := b.post(path, v)
		switch code {
		case http.StatusSeeOther:
			return true
		case http.StatusForbidden:
			return false
		}
		t.Fatalf("POST %s as %s: %d\n%s", path, role, code, body)
		return false
	}}
}

// bulk applies the bulk action name, confirmed, to every job (the one of
// the row's setup), signed in with the token of the role.
func bulk(name string) cell {
	return cell{do: func(t *testing.T, f *fixture, _ caller, role cron.Role) bool {
		t.Helper()
		b := f.browser(t)
		b.login(tokenOf[role])
		code, body, resp := b.post("/bulk", url.Values{"action": {name}, "confirm": {"yes"}})
		switch code {
		case http.StatusSeeOther:
		case http.StatusForbidden:
			return false
		default:
			t.Fatalf("bulk %s as %s: %d\n%s", name, role, code, body)
		}
		// The bulk form answers 303 even when a job failed: its outcome
		// is the flash of the page it leads to.
		_, body, _ = b.get(strings.TrimPrefix(resp.Header.Get("Location"), "/jobs-ui"))
		if !strings.Contains(body, name+": 1 of 1 jobs") || strings.Contains(body, "failed, first:") {
			t.Errorf("bulk %s as %s: the outcome is not one job done:\n%s", name, role, body)
		}
		return true
	}}
}

// goCall calls the runner in process: for viaGoActor as a named actor
// of the role, for viaGoLocal with no actor.
func goCall(call func(ctx context.Context, r *cron.Runner) error) cell {
	return cell{do: func(t *testing.T, f *fixture, c caller, role cron.Role) bool {
		t.Helper()
		ctx := context.Background()
		if c == viaGoActor {
			ctx = cron.WithActor(ctx, cron.Actor{Name: goActorName, Role: role})
		}
		err := call(ctx, f.runner)
		switch {
		case err == nil:
			return true
		case errors.Is(err, cron.ErrForbidden):
			return false
		}
		t.Fatalf("Go call as %s: %v", role, err)
		return false
	}}
}

// byRunner performs nothing: the setup made the runner act by itself.
func byRunner(*testing.T, *fixture, caller, cron.Role) bool { return true }

// The Go calls of the table, one Runner method each, so that a change of
// a method's signature is made here alone.

func goAdd(j cron.Job) func(context.Context, *cron.Runner) error {
	return func(ctx context.Context, r *cron.Runner) error { _, err := r.Add(ctx, j); return err }
}

func goRename(id, name string) func(context.Context, *cron.Runner) error {
	return func(ctx context.Context, r *cron.Runner) error {
		_, err := r.Update(ctx, id, func(j *cron.Job) error { j.Name = name; return nil })
		return err
	}
}

func goRemove(id string) func(context.Context, *cron.Runner) error {
	return func(ctx context.Context, r *cron.Runner) error { return r.Remove(ctx, id) }
}

func goPause(id string) func(context.Context, *cron.Runner) error {
	return func(ctx context.Context, r *cron.Runner) error { _, err := r.Pause(ctx, id, time.Time{}); return err }
}

func goPauseUntil(id string, d time.Duration) func(context.Context, *cron.Runner) error {
	return func(ctx context.Context, r *cron.Runner) error {
		_, err := r.Pause(ctx, id, time.Now().Add(d))
		return err
	}
}

func goResume(id string) func(context.Context, *cron.Runner) error {
	return func(ctx context.Context, r *cron.Runner) error { _, err := r.Resume(ctx, id); return err }
}

func goRunNow(id string) func(context.Context, *cron.Runner) error {
	return func(ctx context.Context, r *cron.Runner) error {
		_, err := r.RunNow(ctx, id, cron.RunOptions{Force: true})
		return err
	}
}

func goRunNowWith(id string, o cron.RunOptions) func(context.Context, *cron.Runner) error {
	return func(ctx context.Context, r *cron.Runner) error { _, err := r.RunNow(ctx, id, o); return err }
}

// goPauseAll pauses the service for d, or with no end for 0.
func goPauseAll(d time.Duration) func(context.Context, *cron.Runner) error {
	return func(ctx context.Context, r *cron.Runner) error {
		var until time.Time
		if d > 0 {
			until = time.Now().Add(d)
		}
		_, err := r.PauseAll(ctx, until, "deploy")
		return err
	}
}

func goResumeAll() func(context.Context, *cron.Runner) error {
	return func(ctx context.Context, r *cron.Runner) error { _, err := r.ResumeAll(ctx); return err }
}

// --- reading the audit log ---

// auditAfter returns the fixture's audit records after id after.
func auditAfter(t *testing.T, f *fixture, after int64) []cron.AuditEntry {
	t.Helper()
	es, _, err := f.runner.Audit(context.Background(), cron.AuditQuery{After: after, Limit: 1000})
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	return es
}

// lastAudit returns the id of the last audit record not of the runner's
// own: a record of the runner that comes before a cell reads it (the end
// of a short timed pause) still counts as the cell's.
func lastAudit(t *testing.T, f *fixture) int64 {
	t.Helper()
	var last int64
	for _, e := range auditAfter(t, f, 0) {
		if e.Who != cron.ActorRunner.Name {
			last = e.ID
		}
	}
	return last
}

// awaitAudit waits for the first audit record after id after (a change
// the runner makes by itself), then a moment more for any other, and
// returns them.
func awaitAudit(t *testing.T, f *fixture, after int64) []cron.AuditEntry {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(auditAfter(t, f, after)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no audit record within 10s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(runnerWait)
	return auditAfter(t, f, after)
}

// brief is records as "who role action job", for messages.
func brief(es []cron.AuditEntry) string {
	var out []string
	for _, e := range es {
		out = append(out, strconv.Quote(e.Who+" "+e.Role+" "+string(e.Action)+" "+e.JobID))
	}
	return "[" + strings.Join(out, ", ") + "]"
}

// actionConstants reads the Action constants of package cron from its
// source: their values, and their names.
func actionConstants(t *testing.T) map[cron.Action]string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("..", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the sources of package cron: %v %v", files, err)
	}
	out := map[cron.Action]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		if file.Name.Name != "cron" {
			continue
		}
		for _, d := range file.Decls {
			gd, ok := d.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, s := range gd.Specs {
				vs := s.(*ast.ValueSpec)
				for i, id := range vs.Names {
					var lit ast.Expr
					if i < len(vs.Values) {
						lit = vs.Values[i]
					}
					if ty, ok := vs.Type.(*ast.Ident); !ok || ty.Name != "Action" {
						// Action("x") without a declared type.
						call, ok := lit.(*ast.CallExpr)
						if fn, isIdent := callFun(call); !ok || !isIdent || fn != "Action" || len(call.Args) != 1 {
							continue
						}
						lit = call.Args[0]
					}
					bl, ok := lit.(*ast.BasicLit)
					if !ok || bl.Kind != token.STRING {
						t.Fatalf("%s: the Action constant %s has no string literal value: read it here", fset.Position(id.Pos()), id.Name)
					}
					v, err := strconv.Unquote(bl.Value)
					if err != nil {
						t.Fatal(err)
					}
					out[cron.Action(v)] = id.Name
				}
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no Action constant found in package cron")
	}
	return out
}

func callFun(c *ast.CallExpr) (string, bool) {
	if c == nil {
		return "", false
	}
	id, ok := c.Fun.(*ast.Ident)
	if !ok {
		return "", false
	}
	return id.Name, true
}
