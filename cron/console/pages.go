package console

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

// view is what every page template gets: the layout's data and the
// page's own (Page).
type view struct {
	Title      string
	App        string
	Base       string // the mount point, "" or "/ui"
	Here       string // the page's path and query below Base, for "back"
	CSRF       string
	User       user
	CanOperate bool // run, pause, resume
	CanAdmin   bool // create, edit, delete
	// CanPauseAll: the service-wide pause and resume.
	CanPauseAll bool
	// Pause is the service-wide pause, shown on every page while set.
	Pause    cron.PauseState
	ReadOnly bool
	Flash    string
	Status   int
	Page     any
}

// render writes page name with data p and status.
func (c *Console) render(w http.ResponseWriter, req *http.Request, status int, name string, p any) {
	t, tname := c.tmpl[name], "layout"
	if name == "history" {
		// The history part of a job's page, alone.
		t, tname = c.tmpl["job"], "history"
	}
	u := c.who(req)
	v := view{
		Title:       pageTitle(name, p),
		App:         c.cfg.Title,
		Base:        mount(req),
		Here:        req.URL.RequestURI(),
		CSRF:        c.csrfToken(w, req),
		User:        u,
		CanOperate:  c.can(u, httpapi.RoleOperator),
		CanAdmin:    c.can(u, httpapi.RoleAdmin),
		CanPauseAll: c.can(u, pauseAllNeeds),
		Pause:       c.r.Paused(),
		ReadOnly:    c.cfg.ReadOnly,
		Status:      status,
		Page:        p,
	}
	if req.Method == http.MethodGet {
		v.Flash = takeFlash(w, req)
	}
	var buf bytes.Buffer
	var data any = v
	if tname != "layout" {
		data = p
	}
	if err := t.ExecuteTemplate(&buf, tname, data); err != nil {
		c.log.Error("console: render", "page", name, "error", err)
		http.Error(w, "rendering the page failed", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/html; charset=utf-8")
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Length", strconv.Itoa(buf.Len()))
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// pageTitle is the title of page name.
func pageTitle(name string, p any) string {
	switch pg := p.(type) {
	case *jobPage:
		return "Job " + pg.Job.Name
	case *runPage:
		return "Run " + pg.Run.ID
	case *formPage:
		if pg.Edit {
			return "Edit job " + pg.ID
		}
		return "New job"
	}
	switch name {
	case "overview":
		return "Overview"
	case "jobs":
		return "Jobs"
	case "login":
		return "Sign in"
	case "confirm", "pauseall":
		return "Confirm"
	case "runs":
		return "Runs"
	}
	return "Error"
}

// errorPage is the page of a refused or failed request.
type errorPage struct {
	Message string
}

// fail answers with an error page; a user who is not signed in is sent
// to the sign-in form instead when the page is read.
func (c *Console) fail(w http.ResponseWriter, req *http.Request, status int, msg string) {
	c.render(w, req, status, "error", &errorPage{Message: msg})
}

// reader checks that req may read: a visitor not signed in (with
// authentication on) is sent to the sign-in form.
func (c *Console) reader(w http.ResponseWriter, req *http.Request) (user, bool) {
	u := c.who(req)
	if !u.SignedIn {
		http.Redirect(w, req, mount(req)+"/login", http.StatusSeeOther)
		return u, false
	}
	return u, true
}

// --- overview ---

// overviewStats are the counts of the overview, computed by reading every
// job and kept for Config.OverviewMaxAge.
type overviewStats struct {
	At       time.Time
	Enabled  int
	Paused   int
	ByStatus []count
	ByKind   []count
	Failing  []cron.Job
	Next     []cron.Job
	Partial  string // why the counts stop short, "" when complete
}

type count struct {
	Name  string
	Query template.URL // the jobs-page query that lists them
	N     int
}

// Most jobs listed in the overview's lists.
const (
	overviewFailing = 20
	overviewNext    = 15
	scanPage        = 1000
)

type overviewPage struct {
	Stats  *overviewStats
	Charts []*runsChart
	Notes  []note
	Error  string
}

type note struct{ Name, Value string }

func (c *Console) overview(w http.ResponseWriter, req *http.Request) {
	u, ok := c.reader(w, req)
	if !ok {
		return
	}
	// The counts are shared by every user; the jobs they name are shown
	// as this user's role may read them.
	st := *c.stats()
	st.Failing, st.Next = shownJobs(st.Failing, u.ID.Role), shownJobs(st.Next, u.ID.Role)
	p := &overviewPage{Stats: &st, Charts: c.overviewCharts(req.Context())}
	if c.cfg.Notes != nil {
		for k, v := range c.cfg.Notes() {
			p.Notes = append(p.Notes, note{k, fmt.Sprint(v)})
		}
		slices.SortFunc(p.Notes, func(a, b note) int { return strings.Compare(a.Name, b.Name) })
	}
	c.render(w, req, http.StatusOK, "overview", p)
}

// stats returns the overview's counts, computed again in the background
// once older than Config.OverviewMaxAge (see cached). The jobs are read
// a page at a time, so the runner is never held for long.
func (c *Console) stats() *overviewStats {
	return c.ov.get(c.cfg.OverviewMaxAge, c.overviewCounts)
}

// overviewCounts computes the overview's counts from a scan of every job.
func (c *Console) overviewCounts() *overviewStats {
	st := &overviewStats{At: time.Now().UTC()}
	byStatus := map[string]int{}
	byKind := map[string]int{}
	err := scan(context.Background(), c.r, filter{}, func(j *cron.Job) {
		if j.Paused {
			st.Paused++
		} else {
			st.Enabled++
		}
		byStatus[string(j.LastStatus)]++
		byKind[j.Schedule.Kind]++
		if (j.LastStatus == cron.StatusFailed || j.LastStatus == cron.StatusTimeout) && len(st.Failing) < overviewFailing {
			st.Failing = append(st.Failing, *j)
		}
		if !j.Paused && !j.NextRunAt.IsZero() {
			st.Next = keepSoonest(st.Next, *j, overviewNext)
		}
	})
	if err != nil {
		st.Partial = err.Error()
	}
	for _, s := range []string{"success", "failed", "timeout", "skipped", "missed", "paused", ""} {
		if n := byStatus[s]; n > 0 {
			name, q := s, s
			if s == "" {
				name, q = "never run", "never"
			}
			st.ByStatus = append(st.ByStatus, count{name, template.URL("status=" + url.QueryEscape(q)), n})
		}
	}
	for _, k := range []string{cron.KindOnce, cron.KindEvery, cron.KindCron} {
		if n := byKind[k]; n > 0 {
			st.ByKind = append(st.ByKind, count{k, template.URL("kind=" + url.QueryEscape(k)), n})
		}
	}
	return st
}

// keepSoonest inserts j into next (sorted by NextRunAt) keeping n jobs.
func keepSoonest(next []cron.Job, j cron.Job, n int) []cron.Job {
	if len(next) == n && !j.NextRunAt.Before(next[n-1].NextRunAt) {
		return next
	}
	i, _ := slices.BinarySearchFunc(next, j.NextRunAt, func(a cron.Job, t time.Time) int { return a.NextRunAt.Compare(t) })
	next = slices.Insert(next, i, j)
	if len(next) > n {
		next = next[:n]
	}
	return next
}

// scan calls visit with every job f selects, a page at a time, reading
// them with ctx.
func scan(ctx context.Context, r *cron.Runner, f filter, visit func(*cron.Job)) error {
	after, keep := "", f.keep()
	for {
		jobs, more, err := r.List(ctx, cron.JobQuery{After: after, Limit: scanPage, Text: f.Q, Keep: keep})
		if err != nil {
			return fmt.Errorf("reading the jobs after %q: %w", after, err)
		}
		for i := range jobs {
			visit(&jobs[i])
		}
		if !more || len(jobs) == 0 {
			return nil
		}
		after = jobs[len(jobs)-1].ID
	}
}

// --- jobs ---

// filter selects jobs on the jobs page and for bulk actions.
type filter struct {
	Q       string // part of the id or the name, any case
	Status  string // last status; "never": never run
	Kind    string
	Type    string
	Enabled string // "", "true" or "false"
	// PausedUntil "true" keeps the jobs paused until a time (a timed
	// pause, that ends by itself); "" any job.
	PausedUntil string
}

// statuses are the values of the status filter.
var statuses = []string{"success", "failed", "timeout", "skipped", "paused", "missed", "never"}

// parseFilter reads a filter from form or query values; a bad value is
// an error naming the parameter.
func parseFilter(q url.Values) (filter, error) {
	f := filter{
		Q: strings.TrimSpace(q.Get("q")), Status: q.Get("status"), Kind: q.Get("kind"),
		Type: strings.TrimSpace(q.Get("type")), Enabled: q.Get("enabled"), PausedUntil: q.Get("paused_until"),
	}
	if f.PausedUntil != "" && f.PausedUntil != "true" {
		return f, fmt.Errorf("paused_until must be true (jobs with a timed pause) or empty, got %q", f.PausedUntil)
	}
	if f.Status != "" && !slices.Contains(statuses, f.Status) {
		return f, fmt.Errorf("status must be one of %s, got %q", strings.Join(statuses, ", "), f.Status)
	}
	if f.Kind != "" && f.Kind != cron.KindOnce && f.Kind != cron.KindEvery && f.Kind != cron.KindCron {
		return f, fmt.Errorf("kind must be once, every or cron, got %q", f.Kind)
	}
	if f.Enabled != "" && f.Enabled != "true" && f.Enabled != "false" {
		return f, fmt.Errorf("enabled must be true or false, got %q", f.Enabled)
	}
	if len(f.Q) > 200 {
		return f, errors.New("q must be at most 200 characters long")
	}
	if len(f.Type) > cron.MaxTypeLen {
		return f, fmt.Errorf("type must be at most %d characters long", cron.MaxTypeLen)
	}
	return f, nil
}

// empty reports whether f selects every job.
func (f filter) empty() bool { return f == filter{} }

// values is f as query parameters.
func (f filter) values() url.Values {
	v := url.Values{}
	for k, s := range map[string]string{"q": f.Q, "status": f.Status, "kind": f.Kind, "type": f.Type, "enabled": f.Enabled, "paused_until": f.PausedUntil} {
		if s != "" {
			v.Set(k, s)
		}
	}
	return v
}

// Query is f as a query string.
func (f filter) Query() string { return f.values().Encode() }

// Link is f as the query of a link in a page: encoded once, its = and &
// kept as they are.
func (f filter) Link() template.URL { return template.URL(f.Query()) }

// String describes f for a confirmation.
func (f filter) String() string {
	if f.empty() {
		return "every job"
	}
	var parts []string
	if f.Q != "" {
		parts = append(parts, fmt.Sprintf("id or name containing %q", f.Q))
	}
	if f.Status != "" {
		parts = append(parts, "last status "+f.Status)
	}
	if f.Kind != "" {
		parts = append(parts, "kind "+f.Kind)
	}
	if f.Type != "" {
		parts = append(parts, "type "+f.Type)
	}
	switch f.Enabled {
	case "true":
		parts = append(parts, "enabled")
	case "false":
		parts = append(parts, "paused")
	}
	if f.PausedUntil == "true" {
		parts = append(parts, "paused until a time")
	}
	return "jobs with " + strings.Join(parts, ", ")
}

// keep is f but its text (Q, which the runner tests itself: see
// [cron.JobQuery.Text]) as a test of a job; nil when it selects
// every job. It allocates nothing: the runner calls it with its lock
// held.
func (f filter) keep() func(*cron.Job) bool {
	rest := f
	rest.Q = ""
	if rest.empty() {
		return nil
	}
	status := cron.Status(f.Status)
	if f.Status == "never" {
		status = ""
	}
	typ := f.Type
	if typ == cron.JobTypeHTTP {
		typ = ""
	}
	return func(j *cron.Job) bool {
		if f.Status != "" && j.LastStatus != status {
			return false
		}
		if f.Kind != "" && j.Schedule.Kind != f.Kind {
			return false
		}
		if f.Type != "" {
			jt := j.Type
			if jt == cron.JobTypeHTTP {
				jt = ""
			}
			if jt != typ {
				return false
			}
		}
		if f.Enabled != "" && j.Paused != (f.Enabled == "false") {
			return false
		}
		if f.PausedUntil == "true" && (!j.Paused || j.PausedUntil.IsZero()) {
			return false
		}
		return true
	}
}

type jobsPage struct {
	F      filter
	Sort   string // the sort parameter, "" for the creation order
	Jobs   []cron.Job
	After  string // the cursor of this page, "" for the first
	Next   string // the cursor of the next page, "" when none
	Types  []string
	Kinds  []string
	States []string
	Error  string
	Note   string // why the list is not as asked, when it is not

	Total    string     // "1,234 jobs, 12 paused"; "" when not counted
	Number   int        // the page's number from 1; 0 when unknown
	Pages    int        // the number of pages of a sorted list; 0 when unknown
	First    string     // the path of the first page, below the mount point
	Back     string     // the path of the previous page; "" on the first
	Forward  string     // the path of the next page; "" on the last
	Numbers  []pageLink // links to nearby pages of a sorted list
	Headers  map[string]sortHeader
	Filtered bool
}

// pageLink is a link to a page of a sorted list by its number.
type pageLink struct {
	N    int
	Href string // the path of the page, below the mount point
	On   bool   // the page shown
}

// countMax is the most jobs a service may hold for the jobs list to
// count the jobs a filter keeps (with a scan) on every load.
const countMax = 100_000

// sortMax is the most jobs a sorted list reads and sorts; a sort over
// more is refused with a note, and the list stays in creation order.
const sortMax = 100_000

func (c *Console) jobs(w http.ResponseWriter, req *http.Request) {
	u, ok := c.reader(w, req)
	if !ok {
		return
	}
	q := req.URL.Query()
	p := &jobsPage{Types: c.types(), Kinds: []string{cron.KindOnce, cron.KindEvery, cron.KindCron}, States: statuses}
	f, err := parseFilter(q)
	p.F, p.Filtered = f, !f.empty()
	p.Sort = q.Get("sort")
	if err == nil {
		err = parseSort(p.Sort)
	}
	if err != nil {
		p.Sort = ""
	}
	p.Headers = map[string]sortHeader{}
	for col, label := range map[string]string{"id": "id", "name": "Job", "next": "Next run", "last": "time", "status": "Last run"} {
		p.Headers[col] = header(f, p.Sort, col, label)
	}
	first := f.values()
	if p.Sort != "" {
		first.Set("sort", p.Sort)
	}
	p.First = pathQuery("/jobs", first)
	if err != nil {
		p.Error = err.Error()
		c.render(w, req, http.StatusBadRequest, "jobs", p)
		return
	}
	if p.Sort != "" {
		if c.sortedJobs(w, req, u, p, q) {
			return
		}
		// Too many jobs to sort: the first page in creation order.
		q = f.values()
	}
	if q.Get("page") != "" {
		p.Error = "page is only given with sort (a sorted list has page numbers; the creation order pages with after and prev)"
		c.render(w, req, http.StatusBadRequest, "jobs", p)
		return
	}
	pg, err := parsePager(q)
	if err != nil {
		p.Error = err.Error()
		c.render(w, req, http.StatusBadRequest, "jobs", p)
		return
	}
	p.After = pg.After
	jobs, more, err := c.r.List(req.Context(), cron.JobQuery{After: p.After, Limit: c.cfg.PageSize, Text: f.Q, Keep: f.keep()})
	status := http.StatusOK
	switch {
	case errors.Is(err, cron.ErrNotFound):
		p.Error = "the job that ended the previous page was removed, or after names no job: start again from the first page"
		status = http.StatusBadRequest
	case err != nil:
		p.Error = err.Error()
		status = http.StatusServiceUnavailable
	}
	p.Jobs = shownJobs(jobs, u.ID.Role)
	if more && len(jobs) > 0 {
		p.Next = jobs[len(jobs)-1].ID
	}
	pg.Next = p.Next
	p.Number = pg.Number()
	if v := f.values(); pg.backValues(v) {
		p.Back = pathQuery("/jobs", v)
	}
	if v := f.values(); pg.nextValues(v) {
		p.Forward = pathQuery("/jobs", v)
	}
	p.Total = c.countJobs(req, f)
	c.render(w, req, status, "jobs", p)
}

// sortedJobs answers a jobs list sorted by p.Sort: it reads every job
// the filter keeps (at most sortMax), sorts them and shows page ?page=.
// It returns false, with a note in p, when more jobs match than it
// sorts: the caller lists them in creation order.
func (c *Console) sortedJobs(w http.ResponseWriter, req *http.Request, u user, p *jobsPage, q url.Values) bool {
	n, err := pageNumber(q.Get("page"))
	if err == nil && (q.Get("after") != "" || len(q["prev"]) > 0) {
		err = errors.New("after and prev page the creation order; a sorted list pages with page")
	}
	if err != nil {
		p.Error = err.Error()
		c.render(w, req, http.StatusBadRequest, "jobs", p)
		return true
	}
	if enabled, paused, err := c.count(req.Context()); err == nil && p.F.empty() && enabled+paused > sortMax {
		p.Note = fmt.Sprintf("not sorted: a sort reads at most %s jobs, and the service holds %s; filter the list to sort it", thousands(sortMax), thousands(enabled+paused))
		return false
	}
	var all []cron.Job
	paused, over := 0, false
	err = scan(req.Context(), c.r, p.F, func(j *cron.Job) {
		if len(all) == sortMax {
			over = true
			return
		}
		all = append(all, *j)
		if j.Paused {
			paused++
		}
	})
	if err != nil {
		p.Error = err.Error()
		c.render(w, req, http.StatusServiceUnavailable, "jobs", p)
		return true
	}
	if over {
		p.Note = fmt.Sprintf("not sorted: a sort reads at most %s jobs, and more match; narrow the filter to sort them", thousands(sortMax))
		return false
	}
	size := c.cfg.PageSize
	p.Pages = max(1, (len(all)+size-1)/size)
	if n > p.Pages {
		p.Error = fmt.Sprintf("page %d is past the last page, %d", n, p.Pages)
		c.render(w, req, http.StatusBadRequest, "jobs", p)
		return true
	}
	sortJobs(all, p.Sort)
	from := (n - 1) * size
	p.Jobs = shownJobs(all[from:min(from+size, len(all))], u.ID.Role)
	p.Number = n
	p.Total = totalText(len(all), paused, p.Filtered)
	link := func(k int) string {
		v := p.F.values()
		v.Set("sort", p.Sort)
		if k > 1 {
			v.Set("page", strconv.Itoa(k))
		}
		return pathQuery("/jobs", v)
	}
	if n > 1 {
		p.Back = link(n - 1)
	}
	if n < p.Pages {
		p.Forward = link(n + 1)
	}
	if p.Pages > 1 {
		for k := max(1, n-3); k <= min(p.Pages, n+3); k++ {
			p.Numbers = append(p.Numbers, pageLink{k, link(k), k == n})
		}
	}
	c.render(w, req, http.StatusOK, "jobs", p)
	return true
}

// countJobs is the total line of a jobs list in creation order: the
// runner's count ([cron.Runner.Count]) for every job, a scan for a
// filter while the service holds at most countMax jobs, else the number
// of every job.
func (c *Console) countJobs(req *http.Request, f filter) string {
	enabled, paused, err := c.count(req.Context())
	if err != nil {
		return ""
	}
	all := enabled + paused
	if f.empty() {
		return totalText(all, paused, false)
	}
	if all > countMax {
		return fmt.Sprintf("%s jobs in all; the matching ones are counted only while the service holds at most %s", thousands(all), thousands(countMax))
	}
	n, paused := 0, 0
	if err := scan(req.Context(), c.r, f, func(j *cron.Job) {
		n++
		if j.Paused {
			paused++
		}
	}); err != nil {
		return ""
	}
	return totalText(n, paused, true)
}

// count returns the runner's count of its jobs ([cron.Runner.Count]),
// read again in the background once older than Config.OverviewMaxAge
// (see cached): over a million jobs it costs a scan.
func (c *Console) count(ctx context.Context) (enabled, paused int, err error) {
	ctx = context.WithoutCancel(ctx)
	n := c.cnt.get(c.cfg.OverviewMaxAge, func() jobCount {
		var n jobCount
		n.enabled, n.paused, n.err = c.r.Count(ctx)
		return n
	})
	return n.enabled, n.paused, n.err
}

// jobCount is a count of the runner's jobs, or why it failed.
type jobCount struct {
	enabled, paused int
	err             error
}

// totalText writes a count of jobs: "1,234 jobs, 12 paused".
func totalText(n, paused int, filtered bool) string {
	s := thousands(n) + " jobs"
	if n == 1 {
		s = "1 job"
	}
	if filtered {
		s += " match"
		if n == 1 {
			s += "es"
		}
	}
	return s + ", " + thousands(paused) + " paused"
}

// types are the job types a job may have: http and the runner's.
func (c *Console) types() []string {
	return append([]string{cron.JobTypeHTTP}, c.r.Types()...)
}

// --- one job ---

type jobPage struct {
	Job       cron.Job
	Words     string
	Written   []note
	Zone      string
	Next      []time.Time
	NextError string
	History   *historyPart
	Chart     *jobChart
	Audit     []httpapi.AuditEntry
	AuditNote string
	RunKey    string // the Idempotency-Key of the run-now form
}

// historyPart is the run history of a job, a part of its page that
// reloads by itself.
type historyPart struct {
	Base    string // the mount point, for links
	JobID   string
	Runs    []runRow
	Note    string
	Refresh int // milliseconds, 0: never
}

type runRow struct {
	cron.Run
	Lag  time.Duration
	Base string // the mount point, for the link to the run's page
}

// historyRuns is how many runs the job page shows.
const historyRuns = 50

func (c *Console) job(w http.ResponseWriter, req *http.Request) {
	u, ok := c.reader(w, req)
	if !ok {
		return
	}
	id := req.PathValue("id")
	j, err := c.r.Get(req.Context(), id)
	if err != nil {
		c.readFailed(w, req, err, id)
		return
	}
	// As the API shows it to this role (the secrets rule).
	j = j.RedactedFor(u.ID.Role)
	p := &jobPage{Job: j, Words: describe(j.Schedule), Written: written(j.Schedule), Zone: zoneName(j.Schedule), RunKey: newKey()}
	next, _, err := c.r.Next(req.Context(), id, 10)
	if err != nil {
		p.NextError = err.Error()
	}
	p.Next = next
	p.History = c.historyOf(req, u, id)
	p.Chart = c.jobChartOf(req.Context(), mount(req), id, u.ID.Role)
	if audit, _, err := c.r.Audit(req.Context(), cron.AuditQuery{JobID: id, Limit: 50}); err == nil {
		p.Audit = audit
		slices.Reverse(p.Audit)
	} else {
		p.AuditNote = "reading the audit log: " + err.Error()
	}
	c.render(w, req, http.StatusOK, "job", p)
}

// history answers the history part of a job's page alone.
func (c *Console) history(w http.ResponseWriter, req *http.Request) {
	u, ok := c.reader(w, req)
	if !ok {
		return
	}
	id := req.PathValue("id")
	if _, err := c.r.Get(req.Context(), id); err != nil {
		c.readFailed(w, req, err, id)
		return
	}
	c.render(w, req, http.StatusOK, "history", c.historyOf(req, u, id))
}

func (c *Console) historyOf(req *http.Request, u user, id string) *historyPart {
	h := &historyPart{Base: mount(req), JobID: id}
	if c.cfg.RefreshInterval > 0 {
		h.Refresh = int(c.cfg.RefreshInterval / time.Millisecond)
	}
	runs, err := c.r.Runs(req.Context(), id, historyRuns)
	switch {
	case errors.Is(err, cron.ErrUnsupported):
		h.Note = "the store keeps no run history"
	case err != nil:
		h.Note = err.Error()
	}
	h.Runs = rows(h.Base, runs, u.ID.Role)
	return h
}

// readFailed answers a failed read of job id.
func (c *Console) readFailed(w http.ResponseWriter, req *http.Request, err error, id string) {
	switch {
	case errors.Is(err, cron.ErrNotFound):
		c.fail(w, req, http.StatusNotFound, fmt.Sprintf("job %q not found", id))
	case errors.Is(err, cron.ErrUnavailable):
		c.fail(w, req, http.StatusServiceUnavailable, err.Error())
	default:
		c.fail(w, req, http.StatusInternalServerError, err.Error())
	}
}

// --- actions ---

// actions are the one-job writes of POST /jobs/{id}/{action}: the
// runner's action, and what the flash says once done.
var actions = map[string]struct {
	act  cron.Action
	done string
}{
	"run":    {cron.ActionRunNow, "run queued"},
	"pause":  {cron.ActionPause, "paused"},
	"resume": {cron.ActionResume, "resumed"},
	"delete": {cron.ActionDelete, "deleted"},
}

// do makes the one-job write name (run, pause, resume, delete) of job id,
// with no argument, as the actor of ctx.
func (c *Console) do(ctx context.Context, name, id string) error {
	var err error
	switch name {
	case "run":
		_, err = c.r.RunNow(ctx, id, cron.RunOptions{})
	case "pause":
		_, err = c.r.Pause(ctx, id, time.Time{})
	case "resume":
		_, err = c.r.Resume(ctx, id)
	case "delete":
		err = c.r.Remove(ctx, id)
	}
	return err
}

func (c *Console) action(w http.ResponseWriter, req *http.Request, u user) {
	id, name := req.PathValue("id"), req.PathValue("action")
	act, ok := actions[name]
	if !ok {
		c.fail(w, req, http.StatusNotFound, "no such action: "+name)
		return
	}
	done := act.done
	ctx := u.ctx(req)
	var err error
	switch name {
	case "pause":
		until, perr := pauseUntil(req, time.Now())
		if perr != nil {
			c.fail(w, req, http.StatusBadRequest, perr.Error())
			return
		}
		var t time.Time
		if until != "" {
			t, _ = time.Parse(time.RFC3339, until)
			done = "paused until " + until
		}
		_, err = c.r.Pause(ctx, id, t)
	case "run":
		b, field, berr := runNowBody(req.PostFormValue)
		if berr != nil {
			c.fail(w, req, http.StatusBadRequest, field+": "+berr.Error())
			return
		}
		_, err = c.api.RunNow(ctx, id, b, req.PostFormValue("key"))
	default:
		err = c.do(ctx, name, id)
	}
	if err != nil {
		pr := httpapi.Problem(err, id)
		msg := pr.Msg
		if pr.Field != "" && !strings.Contains(msg, pr.Field) {
			msg = pr.Field + ": " + msg
		}
		c.fail(w, req, pr.Status, msg)
		return
	}
	setFlash(w, req, fmt.Sprintf("job %s %s", id, done))
	back := c.back(req, "/jobs/"+url.PathEscape(id))
	if name == "delete" {
		back = "/jobs"
	}
	http.Redirect(w, req, mount(req)+back, http.StatusSeeOther)
}

// back is the page to return to after a write: the form's "back" field
// when it is a path of the console (no scheme, no host, no control
// character that a browser would drop to make "//host"), else def.
func (c *Console) back(req *http.Request, def string) string {
	b := req.PostFormValue("back")
	if !strings.HasPrefix(b, "/") || strings.HasPrefix(b, "//") || strings.HasPrefix(b, "/\\") {
		return def
	}
	for i := 0; i < len(b); i++ {
		if b[i] < 0x20 || b[i] == 0x7f || b[i] == '\\' {
			return def
		}
	}
	if u, err := url.Parse(b); err != nil || u.Scheme != "" || u.Host != "" {
		return def
	}
	return b
}

// --- bulk ---

type confirmPage struct {
	Action string
	F      filter
	Count  int // the jobs that match; -1: not counted (see bulk)
	All    int // every job, when the matching ones are not counted
}

// bulkActions are the actions a bulk write may take, and the role each
// needs.
var bulkActions = map[string]httpapi.Role{
	"pause":  cron.ActionPause.NeedRole(),
	"resume": cron.ActionResume.NeedRole(),
	"run":    cron.ActionRunNow.NeedRole(),
	"delete": cron.ActionDelete.NeedRole(),
}

// bulk applies one action to every job matching a filter: a first POST
// shows how many jobs match and asks for a confirmation; the POST with
// confirm=yes applies it, through the API, job by job.
func (c *Console) bulk(w http.ResponseWriter, req *http.Request, u user) {
	name := req.PostFormValue("action")
	if _, ok := bulkActions[name]; !ok {
		c.fail(w, req, http.StatusBadRequest, fmt.Sprintf("action must be pause, resume, run or delete, got %q", name))
		return
	}
	if err := c.r.Authorize(u.ctx(req), actions[name].act, ""); err != nil {
		c.fail(w, req, http.StatusForbidden, httpapi.Problem(err, "").Msg)
		return
	}
	f, err := parseFilter(req.PostForm)
	if err != nil {
		c.fail(w, req, http.StatusBadRequest, err.Error())
		return
	}
	if req.PostFormValue("confirm") != "yes" {
		// The runner's count of every job, without a scan; the jobs a
		// filter keeps are counted with a scan while the service holds at
		// most countMax jobs (as the jobs list counts them), and as they
		// are acted on beyond.
		enabled, paused, err := c.r.Count(req.Context())
		p := &confirmPage{Action: name, F: f, Count: enabled + paused}
		if err == nil && !f.empty() {
			if p.Count > countMax {
				p.All, p.Count = p.Count, -1
			} else {
				p.Count = 0
				err = scan(req.Context(), c.r, f, func(*cron.Job) { p.Count++ })
			}
		}
		if err != nil {
			c.fail(w, req, http.StatusServiceUnavailable, err.Error())
			return
		}
		c.render(w, req, http.StatusOK, "confirm", p)
		return
	}
	var ids []string
	if err := scan(req.Context(), c.r, f, func(j *cron.Job) { ids = append(ids, j.ID) }); err != nil {
		c.fail(w, req, http.StatusServiceUnavailable, err.Error())
		return
	}
	act := actions[name]
	done, failed := 0, 0
	var firstErr string
	ctx := u.ctx(req)
	for _, id := range ids {
		err := c.do(ctx, name, id)
		if err == nil {
			done++
			continue
		}
		if errors.Is(err, cron.ErrNotFound) && name == "delete" {
			continue // removed meanwhile
		}
		failed++
		if firstErr == "" {
			firstErr = fmt.Sprintf("job %s: %s", id, httpapi.Problem(err, id).Msg)
		}
		if req.Context().Err() != nil {
			break
		}
	}
	msg := fmt.Sprintf("%s: %d of %d jobs (%s) %s", name, done, len(ids), f, act.done)
	if failed > 0 {
		msg += fmt.Sprintf("; %d failed, first: %s", failed, firstErr)
	}
	setFlash(w, req, msg)
	http.Redirect(w, req, mount(req)+"/jobs?"+f.Query(), http.StatusSeeOther)
}

// shownJobs returns copies of jobs as a holder of role may read them (the
// secrets rule of [cron.Job.RedactedFor]).
func shownJobs(jobs []cron.Job, role cron.Role) []cron.Job {
	out := make([]cron.Job, len(jobs))
	for i := range jobs {
		out[i] = jobs[i].RedactedFor(role)
	}
	return out
}
