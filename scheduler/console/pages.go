package console

import (
	"encoding/base64"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
)

var funcs = template.FuncMap{
	"rfc": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"utc": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"ago": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return time.Since(t).Round(time.Second).String() + " ago"
	},
	"ms": func(ms int64) time.Time {
		if ms == 0 {
			return time.Time{}
		}
		return time.UnixMilli(ms)
	},
	"dur":   func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"join":  func(s []string) string { return strings.Join(s, ", ") },
	"query": url.QueryEscape,
	"pct": func(used, capacity int) int {
		if capacity <= 0 {
			return 0
		}
		return min(100, used*100/capacity)
	},
	"fieldValue": fieldValue,
}

// fieldValue shows a dead letter's field: a payload is shown by its size
// only (it may hold anything a session sent), other values cut at 200
// bytes.
func fieldValue(f scheduler.Field) string {
	if f.Name == "payload" || strings.Contains(strings.ToLower(f.Name), "token") || strings.Contains(strings.ToLower(f.Name), "secret") {
		return fmt.Sprintf("(%d bytes, hidden)", len(f.Value))
	}
	if len(f.Value) > 200 {
		return f.Value[:200] + "…"
	}
	return f.Value
}

func encodeFlash(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }

func decodeFlash(s string) string {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return ""
	}
	return string(b)
}

// --- overview ---

type overviewPage struct {
	scheduler.PlaneView
	Online int
	Jobs   int // jobs followed on the nodes attached here
}

func (c *Console) overview(w http.ResponseWriter, req *http.Request) {
	v, err := c.d.Overview(req.Context())
	if err != nil {
		c.fail(w, req, http.StatusServiceUnavailable, "reading the plane: "+err.Error())
		return
	}
	p := &overviewPage{PlaneView: v}
	for _, n := range v.Fleet {
		if n.Online {
			p.Online++
		}
	}
	for _, n := range v.Nodes {
		p.Jobs += len(n.Jobs)
	}
	c.render(w, req, http.StatusOK, "overview", p)
}

// --- pool ---

type poolPage struct {
	scheduler.PoolDetail
	Local map[string][]scheduler.LocalJobView // jobs followed here, by node
}

func (c *Console) pool(w http.ResponseWriter, req *http.Request) {
	name := req.URL.Query().Get("name")
	if name != "" {
		if err := scheduler.CheckID("name", name); err != nil {
			c.fail(w, req, http.StatusBadRequest, "pool "+err.Error())
			return
		}
	}
	pd, err := c.d.Pool(req.Context(), name)
	if err != nil {
		c.fail(w, req, http.StatusServiceUnavailable, "reading the pool: "+err.Error())
		return
	}
	p := &poolPage{PoolDetail: pd, Local: map[string][]scheduler.LocalJobView{}}
	if ov, err := c.d.Overview(req.Context()); err == nil {
		for _, n := range ov.Nodes {
			p.Local[n.Info.NodeID] = n.Jobs
		}
	}
	c.render(w, req, http.StatusOK, "pool", p)
}

// --- jobs ---

type jobsPage struct {
	scheduler.JobPage
	State  fsm.State
	States []stateCount
}

type stateCount struct {
	State fsm.State
	N     int
}

// inFlight are the states of a job that is not over, in lifecycle order.
var inFlight = []fsm.State{fsm.Created, fsm.Dispatched, fsm.Accepted, fsm.Running, fsm.Finished}

func (c *Console) jobs(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	state := fsm.State(q.Get("state"))
	if state != "" && !state.Valid() {
		c.fail(w, req, http.StatusBadRequest, fmt.Sprintf("state: unknown state %q", state))
		return
	}
	page, err := c.d.Jobs(req.Context(), scheduler.JobQuery{State: state, After: q.Get("after"), Limit: c.cfg.PageSize})
	if err != nil {
		c.fail(w, req, http.StatusServiceUnavailable, "reading the jobs: "+err.Error())
		return
	}
	p := &jobsPage{JobPage: page, State: state}
	for _, s := range inFlight {
		p.States = append(p.States, stateCount{s, page.Counts[s]})
	}
	c.render(w, req, http.StatusOK, "jobs", p)
}

// --- inboxes ---

type inboxesPage struct {
	Inboxes []scheduler.InboxView
}

// pendingShown is the number of pending entries listed per inbox.
const pendingShown = 20

func (c *Console) inboxes(w http.ResponseWriter, req *http.Request) {
	in, err := c.d.Inboxes(req.Context(), pendingShown)
	if err != nil {
		c.fail(w, req, http.StatusServiceUnavailable, "reading the inboxes: "+err.Error())
		return
	}
	c.render(w, req, http.StatusOK, "inboxes", &inboxesPage{Inboxes: in})
}

// --- dead letters ---

type dlqPage struct {
	pageCtx
	Instance  string
	Instances []string
	Letters   []scheduler.DeadLetter
	More      bool // the queue holds more than shown
}

func (c *Console) dlq(w http.ResponseWriter, req *http.Request) {
	inst := req.URL.Query().Get("instance")
	if inst == "" {
		inst = c.d.InstanceID()
	}
	if err := scheduler.CheckID("instance", inst); err != nil {
		c.fail(w, req, http.StatusBadRequest, err.Error())
		return
	}
	p := &dlqPage{Instance: inst}
	if ov, err := c.d.Overview(req.Context()); err == nil {
		for _, i := range ov.Instances {
			p.Instances = append(p.Instances, i.ID)
		}
	}
	if !contains(p.Instances, inst) {
		p.Instances = append(p.Instances, inst)
		sort.Strings(p.Instances)
	}
	dls, err := c.d.DeadLetters(req.Context(), inst, c.cfg.PageSize+1)
	if err != nil {
		c.fail(w, req, http.StatusServiceUnavailable, "reading the dead letters: "+err.Error())
		return
	}
	if len(dls) > c.cfg.PageSize {
		dls, p.More = dls[:c.cfg.PageSize], true
	}
	p.Letters = dls
	c.render(w, req, http.StatusOK, "dlq", p)
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// dlqTarget reads the instance and id of a dead-letter action.
func (c *Console) dlqTarget(w http.ResponseWriter, req *http.Request) (inst, id string, ok bool) {
	inst, id = req.PostFormValue("instance"), req.PostFormValue("id")
	if err := scheduler.CheckID("instance", inst); err != nil {
		c.fail(w, req, http.StatusBadRequest, err.Error())
		return "", "", false
	}
	if err := scheduler.CheckID("id", id); err != nil {
		c.fail(w, req, http.StatusBadRequest, err.Error())
		return "", "", false
	}
	return inst, id, true
}

func (c *Console) requeue(w http.ResponseWriter, req *http.Request) {
	inst, id, ok := c.dlqTarget(w, req)
	if !ok {
		return
	}
	newID, err := c.d.RequeueDeadLetter(req.Context(), inst, id)
	if err != nil {
		c.actionFailed(w, req, "requeue", err)
		return
	}
	c.log.Info("console: dead letter requeued", "instance_id", inst, "id", id, "new_id", newID, "remote", req.RemoteAddr)
	c.setFlash(w, req, fmt.Sprintf("Dead letter %s requeued to the inbox of %s as %s.", id, inst, newID))
	http.Redirect(w, req, mount(req)+"/dlq?instance="+url.QueryEscape(inst), http.StatusSeeOther)
}

func (c *Console) deleteDL(w http.ResponseWriter, req *http.Request) {
	inst, id, ok := c.dlqTarget(w, req)
	if !ok {
		return
	}
	if err := c.d.DeleteDeadLetter(req.Context(), inst, id); err != nil {
		c.actionFailed(w, req, "delete", err)
		return
	}
	c.log.Info("console: dead letter deleted", "instance_id", inst, "id", id, "remote", req.RemoteAddr)
	c.setFlash(w, req, fmt.Sprintf("Dead letter %s of %s deleted.", id, inst))
	http.Redirect(w, req, mount(req)+"/dlq?instance="+url.QueryEscape(inst), http.StatusSeeOther)
}

func (c *Console) actionFailed(w http.ResponseWriter, req *http.Request, what string, err error) {
	switch {
	case errors.Is(err, scheduler.ErrNoDeadLetter):
		c.fail(w, req, http.StatusNotFound, "no such dead letter (already requeued or deleted?)")
	case errors.Is(err, scheduler.ErrNotSupported):
		c.fail(w, req, http.StatusNotImplemented, "the store of this plane cannot "+what+" dead letters")
	case errors.Is(err, scheduler.ErrInboxFull):
		c.fail(w, req, http.StatusConflict, "the inbox is full: the dead letter stays")
	default:
		c.log.Warn("console: dead letter "+what, "err", err)
		c.fail(w, req, http.StatusServiceUnavailable, what+" failed: "+err.Error())
	}
}
