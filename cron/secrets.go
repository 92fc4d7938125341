package cron

import (
	"encoding/base64"
	"encoding/json"
	"net/url"
	"strings"
)

// replyMark starts the excerpt of a callback's reply in the error of a
// failed run ("http 500; reply: ..."): what follows it may echo the
// request, so the secrets rule hides it from viewers.
const replyMark = "; reply: "

// Redacted returns a copy of j with every secret hidden, as a viewer sees
// it: [Job.RedactedFor] with [RoleViewer].
func (j Job) Redacted() Job { return j.RedactedFor(RoleViewer) }

// RedactedFor returns j as a holder of role may read it. It is the one
// secrets rule of ksana: the REST API, the console, the CLI (through the
// API), the audit log, the log records and the alert payloads all show a
// job through it.
//
//   - [RoleAdmin] sees the job as it is stored (an admin writes the
//     secrets).
//   - Every other role, and the audit log, the logs and the alerts, see
//     each callback header's value, the user name and password of the
//     callback and alert URLs, the value of each query parameter of those
//     URLs, the callback's body, a Go function job's args and the alert's
//     signing secret as [Hidden]; names (of headers, query parameters),
//     hosts and paths stay.
//   - A viewer (and an unknown role) also sees no excerpt of a callback's
//     reply in last_error: a target that echoes the request would show the
//     hidden headers. An operator sees the excerpt, which the runner
//     stores with the job's secrets already taken out (see
//     [Job.ScrubText]), to find out why a run failed.
func (j Job) RedactedFor(role Role) Job {
	if role == RoleAdmin {
		return j
	}
	if len(j.HTTP.Headers) > 0 {
		h := make(map[string]string, len(j.HTTP.Headers))
		for k := range j.HTTP.Headers {
			h[k] = Hidden
		}
		j.HTTP.Headers = h
	}
	j.HTTP.URL = RedactURL(j.HTTP.URL)
	if j.HTTP.Body != "" {
		j.HTTP.Body = Hidden
	}
	if len(j.Args) > 0 {
		j.Args = []byte(`"` + Hidden + `"`)
	}
	if j.Alert != nil {
		a := *j.Alert
		a.URL = RedactURL(a.URL)
		if a.Secret != "" {
			a.Secret = Hidden
		}
		j.Alert = &a
	}
	j.LastError = redactError(j.LastError, role)
	return j
}

// RedactURL returns raw with its user name, password and query values
// replaced by [Hidden]: "https://user:pw@h/p?key=v" becomes
// "https://(hidden):(hidden)@h/p?key=(hidden)". A value that does not
// parse as a URL is hidden whole when it holds "@" or "?", and kept
// otherwise. Log records name URLs through it.
func RedactURL(raw string) string {
	if raw == "" {
		return raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		if strings.ContainsAny(raw, "@?") {
			return Hidden
		}
		return raw
	}
	if u.User == nil && u.RawQuery == "" && u.Fragment == "" {
		return raw
	}
	var b strings.Builder
	if u.Scheme != "" {
		b.WriteString(u.Scheme)
		b.WriteString(":")
	}
	if u.Opaque != "" {
		b.WriteString(Hidden)
		return b.String()
	}
	if u.Host != "" || u.User != nil {
		b.WriteString("//")
	}
	if u.User != nil {
		b.WriteString(Hidden)
		if _, ok := u.User.Password(); ok {
			b.WriteString(":" + Hidden)
		}
		b.WriteString("@")
	}
	b.WriteString(u.Host)
	b.WriteString(u.EscapedPath())
	if u.RawQuery != "" || u.ForceQuery {
		b.WriteString("?")
		for i, kv := range strings.Split(u.RawQuery, "&") {
			if i > 0 {
				b.WriteString("&")
			}
			k, _, hasV := strings.Cut(kv, "=")
			b.WriteString(k)
			if hasV {
				b.WriteString("=" + Hidden)
			}
		}
	}
	if u.Fragment != "" {
		b.WriteString("#" + Hidden)
	}
	return b.String()
}

// redactError returns the error of a run (a job's last_error, a
// [Run.Error]) as a holder of role may read it: whole for an admin and an
// operator, without the excerpt of the callback's reply for any other
// role (see [Job.RedactedFor]).
func redactError(msg string, role Role) string {
	if role == RoleAdmin || role == RoleOperator {
		return msg
	}
	if i := strings.Index(msg, replyMark); i >= 0 {
		return msg[:i] + replyMark + Hidden
	}
	return msg
}

// RedactedFor returns r as a holder of role may read it: its error, and
// each attempt's, through redactError.
func (r Run) RedactedFor(role Role) Run {
	r.Error = redactError(r.Error, role)
	if len(r.AttemptLog) > 0 {
		log := make([]Attempt, len(r.AttemptLog))
		for i, a := range r.AttemptLog {
			a.Error = redactError(a.Error, role)
			log[i] = a
		}
		r.AttemptLog = log
	}
	return r
}

// ScrubText returns s with every secret of j that it holds (each header
// value, the URL's user name, password and query values, the value of
// the Authorization header a URL's user info makes, the body and the
// alert's secret) replaced by [Hidden]. The runner stores the errors of
// j's runs through it, so that a reply that echoes the request does not
// keep the job's credentials in the history, the logs or the alerts.
func (j *Job) ScrubText(s string) string {
	if s == "" {
		return s
	}
	var secrets []string
	add := func(v string) {
		if len(v) >= 4 && strings.Contains(s, v) {
			secrets = append(secrets, v)
		}
	}
	for _, v := range j.HTTP.Headers {
		add(v)
		// "Bearer abc": the token alone may be echoed.
		if _, tok, ok := strings.Cut(v, " "); ok {
			add(tok)
		}
	}
	for _, raw := range []string{j.HTTP.URL, alertURL(j)} {
		u, err := url.Parse(raw)
		if err != nil {
			continue
		}
		if u.User != nil {
			add(u.User.Username())
			pw, _ := u.User.Password()
			add(pw)
			add(base64.StdEncoding.EncodeToString([]byte(u.User.Username() + ":" + pw)))
		}
		for _, vs := range u.Query() {
			for _, v := range vs {
				add(v)
			}
		}
	}
	add(j.HTTP.Body)
	bodyValues(j.HTTP.Body, add)
	if j.Alert != nil {
		add(j.Alert.Secret)
	}
	for _, v := range secrets {
		s = strings.ReplaceAll(s, v, Hidden)
	}
	return s
}

// bodyValues calls add with each string value of a JSON body, or each
// value of a form-encoded one: a reply may echo one of them alone.
func bodyValues(body string, add func(string)) {
	var v any
	if json.Unmarshal([]byte(body), &v) == nil {
		var walk func(any)
		walk = func(v any) {
			switch x := v.(type) {
			case string:
				add(x)
			case []any:
				for _, e := range x {
					walk(e)
				}
			case map[string]any:
				for _, e := range x {
					walk(e)
				}
			}
		}
		walk(v)
		return
	}
	if q, err := url.ParseQuery(body); err == nil {
		for _, vs := range q {
			for _, s := range vs {
				add(s)
			}
		}
	}
}

func alertURL(j *Job) string {
	if j.Alert == nil {
		return ""
	}
	return j.Alert.URL
}
