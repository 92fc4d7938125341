package console

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

// --- runs across jobs ---

// runsFilter is the filter of the runs page: the query parameters of the
// API's GET /runs, as given.
type runsFilter struct {
	Job, Status, Since, Until, Instance string
}

// runsPageSize is the number of runs on a page of the runs page.
const runsPageSize = 50

type runsPage struct {
	F      runsFilter
	Runs   []runRow
	After  string // the cursor of this page, "" for the first
	Next   string // the cursor of the next page, "" when none
	States []string
	Error  string

	Number  int    // the page's number from 1; 0 when unknown
	Back    string // the path of the previous page, below the mount point; "" on the first
	Forward string // the path of the next page, below the mount point; "" on the last
}

// Query is the filter as a query string, with the cursor after when set.
func (f runsFilter) Query(after string) string {
	v := url.Values{}
	for k, s := range map[string]string{"job": f.Job, "status": f.Status, "since": f.Since, "until": f.Until, "instance": f.Instance, "after": after} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v.Encode()
}

// Link is Query(after) as the query of a link in a page: encoded once,
// its = and & kept as they are.
func (f runsFilter) Link(after string) template.URL { return template.URL(f.Query(after)) }

// runs answers the runs page: the history across jobs, read through the
// API's GET /runs with the same filters and its keyset paging.
func (c *Console) runs(w http.ResponseWriter, req *http.Request) {
	u, ok := c.reader(w, req)
	if !ok {
		return
	}
	q := req.URL.Query()
	p := &runsPage{States: []string{"success", "failed", "timeout", "skipped", "missed"}}
	p.F = runsFilter{Job: strings.TrimSpace(q.Get("job")), Status: q.Get("status"), Since: strings.TrimSpace(q.Get("since")),
		Until: strings.TrimSpace(q.Get("until")), Instance: strings.TrimSpace(q.Get("instance"))}
	fail := func(err error) {
		pr := httpapi.Problem(err, "")
		p.Error = pr.Msg
		if pr.Field != "" {
			p.Error = pr.Field + ": " + pr.Msg
		}
		c.render(w, req, pr.Status, "runs", p)
	}
	pg, err := parsePager(q)
	p.After = pg.After
	if err != nil {
		p.After = ""
		p.Error = err.Error()
		c.render(w, req, http.StatusBadRequest, "runs", p)
		return
	}
	vals, _ := url.ParseQuery(p.F.Query(p.After))
	rq, err := httpapi.ParseRunQuery(vals)
	if err != nil {
		fail(err)
		return
	}
	rq.Limit = runsPageSize
	runs, next, err := c.r.QueryRuns(req.Context(), rq)
	if err != nil {
		fail(err)
		return
	}
	p.Runs = rows(mount(req), runs, u.ID.Role)
	if !next.IsZero() {
		p.Next = next.String()
	}
	pg.Next = p.Next
	p.Number = pg.Number()
	base, _ := url.ParseQuery(p.F.Query(""))
	if v := clone(base); pg.backValues(v) {
		p.Back = pathQuery("/runs", v)
	}
	if v := clone(base); pg.nextValues(v) {
		p.Forward = pathQuery("/runs", v)
	}
	c.render(w, req, http.StatusOK, "runs", p)
}

// clone copies v.
func clone(v url.Values) url.Values {
	out := url.Values{}
	for k, vs := range v {
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// rows are the table rows of runs, with their lag, as a holder of role
// may read them, linked under the mount point base.
func rows(base string, runs []cron.Run, role cron.Role) []runRow {
	out := make([]runRow, 0, len(runs))
	for _, r := range runs {
		row := runRow{Run: r.RedactedFor(role), Base: base}
		if !r.TriggeredAt.IsZero() && !r.ScheduledAt.IsZero() {
			row.Lag = r.TriggeredAt.Sub(r.ScheduledAt)
		}
		out = append(out, row)
	}
	return out
}

// --- one run ---

// runPage is the page of one run record.
type runPage struct {
	Run     runRow
	JobName string // the job's name, "" when it has none or is gone
	JobGone bool   // the job no longer exists
}

// run answers the page of one run: GET /runs/{id}, read with
// [cron.Runner.RunByID] and shown as the user's role may read it.
func (c *Console) run(w http.ResponseWriter, req *http.Request) {
	u, ok := c.reader(w, req)
	if !ok {
		return
	}
	id := req.PathValue("id")
	r, err := c.r.RunByID(req.Context(), id)
	switch {
	case errors.Is(err, cron.ErrNotFound):
		c.fail(w, req, http.StatusNotFound, fmt.Sprintf("run %q not found: unknown, no longer kept, or still queued or in flight (its record is written when it ends)", short(id, 200)))
		return
	case errors.Is(err, cron.ErrUnsupported):
		c.fail(w, req, http.StatusNotImplemented, "the store keeps no run history")
		return
	case errors.Is(err, cron.ErrUnavailable):
		c.fail(w, req, http.StatusServiceUnavailable, err.Error())
		return
	case err != nil:
		c.fail(w, req, http.StatusInternalServerError, err.Error())
		return
	}
	p := &runPage{Run: rows(mount(req), []cron.Run{r}, u.ID.Role)[0]}
	if j, err := c.r.Get(req.Context(), r.JobID); err == nil {
		p.JobName = j.Name
	} else if errors.Is(err, cron.ErrNotFound) {
		p.JobGone = true
	}
	c.render(w, req, http.StatusOK, "run", p)
}

// --- one job's writes with arguments ---

// quickPauses are the durations a pause may be given by one button.
var quickPauses = map[string]time.Duration{"1h": time.Hour, "1d": 24 * time.Hour}

// pauseUntil reads the end of a pause from a form: none when the plain
// pause button sent it (plain), else for (a quick choice: 1h or 1d),
// else until (RFC 3339, set by the page's script from the datetime-local
// input in the browser's zone), else until_local read as UTC (a browser
// without scripts). It returns "" for a pause with no end.
func pauseUntil(req *http.Request, now time.Time) (string, error) {
	if req.PostFormValue("plain") != "" {
		return "", nil
	}
	if s := req.PostFormValue("for"); s != "" {
		d, ok := quickPauses[s]
		if !ok {
			return "", fmt.Errorf("for must be 1h or 1d, got %q", short(s, 20))
		}
		return now.Add(d).UTC().Format(time.RFC3339), nil
	}
	if s := strings.TrimSpace(req.PostFormValue("until")); s != "" {
		if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
			return "", fmt.Errorf("until must be an RFC 3339 time such as 2026-12-01T00:00:00Z, got %q", short(s, 60))
		}
		return s, nil
	}
	if s := strings.TrimSpace(req.PostFormValue("until_local")); s != "" {
		for _, layout := range []string{"2006-01-02T15:04", "2006-01-02T15:04:05"} {
			if t, err := time.Parse(layout, s); err == nil {
				return t.UTC().Format(time.RFC3339), nil
			}
		}
		return "", fmt.Errorf("until must be a date and time such as 2026-12-01T08:00, got %q", short(s, 60))
	}
	return "", nil
}

// runNowBody is the API's body of a run-now from the form's overrides
// (body, headers as "Name: value" lines, args as JSON, force), nil when
// none is given; a bad input is an error naming its field.
func runNowBody(val func(string) string) (body []byte, field string, err error) {
	doc := map[string]any{}
	if b := val("body"); b != "" {
		doc["body"] = b
	}
	if h := val("headers"); strings.TrimSpace(h) != "" {
		hs, err := parseHeaders(h)
		if err != nil {
			return nil, "headers", err
		}
		doc["headers"] = hs
	}
	if a := strings.TrimSpace(val("args")); a != "" {
		if !json.Valid([]byte(a)) {
			return nil, "args", fmt.Errorf("is not valid JSON")
		}
		doc["args"] = json.RawMessage(a)
	}
	if val("force") != "" {
		doc["force"] = true
	}
	if len(doc) == 0 {
		return nil, "", nil
	}
	b, err := json.Marshal(doc)
	return b, "", err
}

// newKey is a random Idempotency-Key for a form: sending the form twice
// (a double click, a reload that posts again) queues one run.
func newKey() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// --- the service-wide pause ---

// pauseAllNeeds is the role of the service-wide pause and resume.
var pauseAllNeeds = cron.ActionPauseAll.NeedRole()

type pauseConfirmPage struct {
	Until  string // RFC 3339, "" for no end
	Reason string
}

// UntilTime is Until as a time; zero for no end.
func (p *pauseConfirmPage) UntilTime() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, p.Until)
	return t
}

// pauseAll pauses the whole service through the API's POST /pause: a
// first POST asks for a confirmation; the POST with confirm=yes pauses.
func (c *Console) pauseAll(w http.ResponseWriter, req *http.Request, u user) {
	if !u.ID.Role.Includes(pauseAllNeeds) {
		c.fail(w, req, http.StatusForbidden, fmt.Sprintf("pausing the service needs the %s role; you have %s", pauseAllNeeds, u.ID.Role))
		return
	}
	until, err := pauseUntil(req, time.Now())
	if err != nil {
		c.fail(w, req, http.StatusBadRequest, err.Error())
		return
	}
	reason := strings.TrimSpace(req.PostFormValue("reason"))
	if req.PostFormValue("confirm") != "yes" {
		c.render(w, req, http.StatusOK, "pauseall", &pauseConfirmPage{Until: until, Reason: reason})
		return
	}
	var t time.Time
	if until != "" {
		t, _ = time.Parse(time.RFC3339, until)
	}
	if _, err := c.r.PauseAll(u.ctx(req), t, reason); err != nil {
		pr := httpapi.Problem(err, "")
		c.fail(w, req, pr.Status, pr.Msg)
		return
	}
	setFlash(w, req, "the service is paused: no job runs until it is resumed")
	http.Redirect(w, req, mount(req)+"/", http.StatusSeeOther)
}

// resumeAll ends the service-wide pause through the API's POST /resume.
func (c *Console) resumeAll(w http.ResponseWriter, req *http.Request, u user) {
	if !u.ID.Role.Includes(pauseAllNeeds) {
		c.fail(w, req, http.StatusForbidden, fmt.Sprintf("resuming the service needs the %s role; you have %s", pauseAllNeeds, u.ID.Role))
		return
	}
	if _, err := c.r.ResumeAll(u.ctx(req)); err != nil {
		pr := httpapi.Problem(err, "")
		c.fail(w, req, pr.Status, pr.Msg)
		return
	}
	setFlash(w, req, "the service is resumed")
	http.Redirect(w, req, mount(req)+c.back(req, "/"), http.StatusSeeOther)
}
