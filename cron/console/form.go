package console

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

// formField is one input of the job form. Its name is the field's dotted
// JSON name ("schedule.every"), the one the API names in its errors, so
// that an error shows beside its input.
type formField struct {
	Name    string
	Label   string
	Kind    string // text, select, textarea, checkbox
	Help    string
	Options []string
	Sched   string // the schedule kind it belongs to, "" for every kind
	HTTP    bool   // an input of HTTP jobs only
	Value   string
	Error   string
}

// formPage is the page of the job form, to create or to edit.
type formPage struct {
	Edit   bool
	ID     string
	Fields []formField
	Error  string // an error no input is named by
}

// newFields are the inputs of the form, empty but for the defaults
// shown.
func (c *Console) newFields(edit bool) []formField {
	fs := []formField{
		{Name: "id", Label: "Id", Kind: "text", Help: "letters, digits, - _ . : (empty: a random id)"},
		{Name: "name", Label: "Name", Kind: "text"},
		{Name: "type", Label: "Type", Kind: "select", Options: c.types(), Value: cron.JobTypeHTTP, Help: "http: a callback; other types: a Go function of the service"},
		{Name: "enabled", Label: "Enabled", Kind: "checkbox", Value: "on"},
		{Name: "schedule.kind", Label: "Schedule", Kind: "select", Options: []string{cron.KindCron, cron.KindEvery, cron.KindOnce}, Value: cron.KindCron},
		{Name: "schedule.cron", Label: "Cron expression", Kind: "text", Sched: cron.KindCron, Help: "e.g. 0 */5 * * * or @daily; 6 fields: seconds first"},
		{Name: "schedule.tz", Label: "Time zone", Kind: "text", Sched: cron.KindCron, Help: "IANA name, e.g. Europe/Paris (empty: UTC)"},
		{Name: "schedule.every", Label: "Every", Kind: "text", Sched: cron.KindEvery, Help: "a duration: 30s, 5m, 1h30m"},
		{Name: "schedule.start_at", Label: "Start at", Kind: "text", Sched: cron.KindEvery, Help: "RFC 3339, e.g. 2030-01-02T15:04:05Z (empty: now)"},
		{Name: "schedule.jitter", Label: "Jitter", Kind: "text", Sched: cron.KindEvery, Help: "a duration below every (empty: none)"},
		{Name: "schedule.run_at", Label: "Run at", Kind: "text", Sched: cron.KindOnce, Help: "RFC 3339, e.g. 2030-01-02T15:04:05Z"},
		{Name: "http.method", Label: "Method", Kind: "select", HTTP: true, Options: []string{"POST", "GET", "PUT", "PATCH", "DELETE"}, Value: "POST"},
		{Name: "http.url", Label: "URL", Kind: "text", HTTP: true, Help: "http:// or https://"},
		{Name: "http.headers", Label: "Headers", Kind: "textarea", HTTP: true, Help: "one per line: Name: value"},
		{Name: "http.body", Label: "Body", Kind: "textarea", HTTP: true},
		{Name: "args", Label: "Args", Kind: "textarea", Help: "JSON, for a Go function job"},
		{Name: "timeout", Label: "Timeout", Kind: "text", Help: "a duration (empty: the service's default)"},
		{Name: "max_retries", Label: "Max retries", Kind: "text", Help: "an integer (empty: the service's default)"},
		{Name: "retry_backoff", Label: "Retry backoff", Kind: "text", Help: "a duration (empty: the service's default)"},
		{Name: "misfire_grace", Label: "Misfire grace", Kind: "text", Help: "a duration: how late a missed slot may still run (empty: none)"},
		{Name: "keep_runs", Label: "Runs kept", Kind: "text", Help: "how many of the job's runs its history keeps, the newest, up to 100000 (empty: the service's number)"},
		{Name: "alert.url", Label: "Alert webhook", Kind: "text", Help: "http:// or https:// URL told when the job starts failing, keeps failing, recovers or is paused (empty: the service's, if any)"},
		{Name: "alert.secret", Label: "Alert secret", Kind: "text", Help: "signs each alert with HMAC-SHA256 (empty: unsigned)"},
		{Name: "alert.after", Label: "Alert after", Kind: "text", Help: "failures in a row that send failing_streak (empty: the default)"},
		{Name: "alert.pause_after", Label: "Pause after", Kind: "text", Help: "failures in a row that pause the job (empty: never)"},
		{Name: "alert.missed_every", Label: "Missed alerts every", Kind: "text", Help: "the least time between two alerts of missed slots (empty: 5m; negative: none)"},
		{Name: "alert.notify", Label: "Notify each run", Kind: "text", Help: "failure: an alert of each failed run; always: of each run (empty: the transitions only)"},
	}
	if edit {
		fs = fs[1:]
	}
	return fs
}

// jobValues are the form's values of job j.
func jobValues(j cron.Job) map[string]string {
	v := map[string]string{
		"id": j.ID, "name": j.Name, "type": j.Type, "schedule.kind": j.Schedule.Kind,
		"schedule.cron": j.Schedule.Cron, "schedule.tz": j.Schedule.TZ, "schedule.every": durString(j.Schedule.Every),
		"schedule.start_at": rfc(j.Schedule.StartAt), "schedule.jitter": durString(j.Schedule.Jitter),
		"schedule.run_at": rfc(j.Schedule.RunAt), "http.method": j.HTTP.Method, "http.url": j.HTTP.URL,
		"http.body": j.HTTP.Body, "args": string(j.Args), "timeout": durString(j.Timeout),
		"max_retries": strconv.Itoa(j.MaxRetries), "retry_backoff": durString(j.RetryBackoff),
		"misfire_grace": durString(j.MisfireGrace),
	}
	if j.KeepRuns != 0 {
		v["keep_runs"] = strconv.Itoa(j.KeepRuns)
	}
	if j.IsHTTP() {
		v["type"] = cron.JobTypeHTTP
	}
	if a := j.Alert; a != nil {
		v["alert.url"], v["alert.secret"] = a.URL, a.Secret
		if a.After != 0 {
			v["alert.after"] = strconv.Itoa(a.After)
		}
		if a.PauseAfter != 0 {
			v["alert.pause_after"] = strconv.Itoa(a.PauseAfter)
		}
		v["alert.missed_every"], v["alert.notify"] = durString(a.MissedEvery), a.Notify
	}
	if !j.Paused {
		v["enabled"] = "on"
	}
	var hs []string
	for _, k := range slices.Sorted(maps.Keys(j.HTTP.Headers)) {
		hs = append(hs, k+": "+j.HTTP.Headers[k])
	}
	v["http.headers"] = strings.Join(hs, "\n")
	return v
}

// fill sets the values of fs from vals (a missing checkbox is off).
func fill(fs []formField, vals func(string) string) {
	for i := range fs {
		fs[i].Value = vals(fs[i].Name)
	}
}

// setError puts msg beside the input named field, or beside the nearest
// enclosing one ("http.headers.X" goes to "http.headers"); it reports
// false when no input holds the field.
func setError(fs []formField, field, msg string) bool {
	for f := field; f != ""; {
		for i := range fs {
			if fs[i].Name == f {
				fs[i].Error = msg
				return true
			}
		}
		i := strings.LastIndexByte(f, '.')
		if i < 0 {
			break
		}
		f = f[:i]
	}
	return false
}

func (c *Console) newForm(w http.ResponseWriter, req *http.Request) {
	u, ok := c.reader(w, req)
	if !ok {
		return
	}
	if !c.can(u, httpapi.RoleAdmin) {
		c.fail(w, req, http.StatusForbidden, "creating a job needs the admin role")
		return
	}
	c.render(w, req, http.StatusOK, "form", &formPage{Fields: c.newFields(false)})
}

func (c *Console) editForm(w http.ResponseWriter, req *http.Request) {
	u, ok := c.reader(w, req)
	if !ok {
		return
	}
	id := req.PathValue("id")
	if !c.can(u, httpapi.RoleAdmin) {
		c.fail(w, req, http.StatusForbidden, "editing a job needs the admin role")
		return
	}
	j, err := c.r.Get(req.Context(), id)
	if err != nil {
		c.readFailed(w, req, err, id)
		return
	}
	fs := c.newFields(true)
	vals := jobValues(j)
	fill(fs, func(k string) string { return vals[k] })
	c.render(w, req, http.StatusOK, "form", &formPage{Edit: true, ID: id, Fields: fs})
}

func (c *Console) create(w http.ResponseWriter, req *http.Request, u user) {
	p := &formPage{Fields: c.newFields(false)}
	fill(p.Fields, req.PostFormValue)
	body, field, err := jobBody(req.PostFormValue, nil)
	if err != nil {
		c.refuse(w, req, p, http.StatusBadRequest, field, err.Error())
		return
	}
	j, err := c.api.CreateJob(u.ctx(req), body)
	if err != nil {
		pr := httpapi.Problem(err, "")
		c.refuse(w, req, p, pr.Status, pr.Field, pr.Msg)
		return
	}
	setFlash(w, req, "job "+j.ID+" created")
	http.Redirect(w, req, mount(req)+"/jobs/"+url.PathEscape(j.ID), http.StatusSeeOther)
}

func (c *Console) edit(w http.ResponseWriter, req *http.Request, u user) {
	id := req.PathValue("id")
	p := &formPage{Edit: true, ID: id, Fields: c.newFields(true)}
	fill(p.Fields, req.PostFormValue)
	old, err := c.r.Get(req.Context(), id)
	if err != nil {
		c.readFailed(w, req, err, id)
		return
	}
	body, field, err := jobBody(req.PostFormValue, &old)
	if err != nil {
		c.refuse(w, req, p, http.StatusBadRequest, field, err.Error())
		return
	}
	if _, err := c.api.PatchJob(u.ctx(req), id, body); err != nil {
		pr := httpapi.Problem(err, id)
		c.refuse(w, req, p, pr.Status, pr.Field, pr.Msg)
		return
	}
	setFlash(w, req, "job "+id+" saved")
	http.Redirect(w, req, mount(req)+"/jobs/"+url.PathEscape(id), http.StatusSeeOther)
}

// refuse shows the form again with the error beside its input.
func (c *Console) refuse(w http.ResponseWriter, req *http.Request, p *formPage, status int, field, msg string) {
	if field == "" || !setError(p.Fields, field, msg) {
		p.Error = msg
		if field != "" {
			p.Error = field + ": " + msg
		}
	}
	c.render(w, req, status, "form", p)
}

var integer = regexp.MustCompile(`^-?[0-9]+$`)

// jobBody turns the form's values into the API's JSON body: a job to
// create (old nil: empty inputs are left out, so they take their
// defaults) or a merge patch of job old (empty inputs are null, so they
// return to their defaults). It checks only what the form itself shapes
// (header lines, JSON args); every rule of a job is the API's.
func jobBody(val func(string) string, old *cron.Job) (body []byte, field string, err error) {
	edit := old != nil
	doc := map[string]any{}
	set := func(m map[string]any, k, v string) {
		switch {
		case v != "":
			m[k] = v
		case edit:
			m[k] = nil
		}
	}
	if !edit {
		set(doc, "id", strings.TrimSpace(val("id")))
	}
	set(doc, "name", val("name"))
	typ := strings.TrimSpace(val("type"))
	set(doc, "type", typ)
	doc["enabled"] = val("enabled") != ""
	kind := val("schedule.kind")
	sched := map[string]any{"kind": kind}
	for _, f := range []struct{ name, kind string }{
		{"cron", cron.KindCron}, {"tz", cron.KindCron}, {"every", cron.KindEvery}, {"start_at", cron.KindEvery},
		{"jitter", cron.KindEvery}, {"run_at", cron.KindOnce},
	} {
		v := strings.TrimSpace(val("schedule." + f.name))
		if f.kind != kind {
			v = ""
		}
		set(sched, f.name, v)
	}
	doc["schedule"] = sched
	if typ == "" || typ == cron.JobTypeHTTP {
		h := map[string]any{}
		set(h, "method", val("http.method"))
		set(h, "url", strings.TrimSpace(val("http.url")))
		set(h, "body", val("http.body"))
		headers, err := parseHeaders(val("http.headers"))
		if err != nil {
			return nil, "http.headers", err
		}
		if edit {
			for k := range old.HTTP.Headers {
				if _, ok := headers[k]; !ok {
					headers[k] = nil
				}
			}
		}
		if len(headers) > 0 {
			h["headers"] = headers
		}
		doc["http"] = h
		if edit {
			doc["args"] = nil
		}
	} else {
		if edit {
			doc["http"] = nil
		}
		if a := strings.TrimSpace(val("args")); a != "" {
			if !json.Valid([]byte(a)) {
				return nil, "args", fmt.Errorf("is not valid JSON")
			}
			doc["args"] = json.RawMessage(a)
		} else if edit {
			doc["args"] = nil
		}
	}
	for _, k := range []string{"timeout", "retry_backoff", "misfire_grace"} {
		set(doc, k, strings.TrimSpace(val(k)))
	}
	// A count goes as a number when it reads as one, else as the text
	// given, for the API to name what is wrong with it.
	number := func(m map[string]any, k, v string) {
		if v = strings.TrimSpace(v); integer.MatchString(v) && len(v) < 12 {
			m[k] = json.Number(v)
		} else {
			set(m, k, v)
		}
	}
	number(doc, "max_retries", val("max_retries"))
	number(doc, "keep_runs", val("keep_runs"))
	alert, given := map[string]any{}, false
	for _, k := range []string{"url", "secret", "after", "pause_after", "missed_every", "notify"} {
		v := val("alert." + k)
		if k == "url" || k == "missed_every" || k == "notify" {
			v = strings.TrimSpace(v)
		}
		given = given || v != ""
		if k == "after" || k == "pause_after" {
			number(alert, k, v)
		} else {
			set(alert, k, v)
		}
	}
	switch {
	case given:
		doc["alert"] = alert
	case edit:
		doc["alert"] = nil
	}
	b, err := json.Marshal(doc)
	return b, "", err
}

// parseHeaders reads "Name: value" lines.
func parseHeaders(s string) (map[string]any, error) {
	out := map[string]any{}
	for i, line := range strings.Split(s, "\n") {
		line = strings.TrimSpace(line)
		if line == "" {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, fmt.Errorf("line %d: want Name: value, got %q", i+1, short(line, 60))
		}
		out[strings.TrimSpace(k)] = strings.TrimSpace(v)
	}
	return out, nil
}
