package cron

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
)

// Role is what an [Actor] may do. Each role may do what the roles below
// it may.
type Role string

// The roles, from least to most.
const (
	// RoleViewer reads: jobs, runs, the audit log, previews. It sees no
	// secret (see [Job.RedactedFor]).
	RoleViewer Role = "viewer"
	// RoleOperator also runs (run-now), pauses and resumes jobs. It sees
	// no secret but the excerpts of callbacks' replies.
	RoleOperator Role = "operator"
	// RoleAdmin may do everything: create, update and delete jobs, pause
	// and resume the whole service, and replace a header of a job for one
	// run. It sees every secret.
	RoleAdmin Role = "admin"
)

// rank orders the roles; 0 is no valid role.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleOperator:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Includes reports whether a holder of role r may do what a holder of
// role o may: viewer < operator < admin. An unknown role includes none,
// and none includes an unknown role.
func (r Role) Includes(o Role) bool {
	return r.rank() > 0 && o.rank() > 0 && r.rank() >= o.rank()
}

// ParseRole returns the role named s ("viewer", "operator" or "admin").
func ParseRole(s string) (Role, error) {
	if r := Role(s); r.rank() > 0 {
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q: want viewer, operator or admin", s)
}

// Actor is who asks the runner for a change: it is authorized by the
// runner's [Authorizer] and named in the audit log.
type Actor struct {
	// Name names the actor in the audit log (a token's name, a user); it
	// is never a secret.
	Name string `json:"name"`
	// Role is what the actor may do.
	Role Role `json:"role"`
}

// The actors a change has when its context names none ([WithActor]),
// and the built-in [Authorizer].
var (
	// RoleRules is the built-in [Authorizer] (the default of
	// [Config.Authorizer]): an action needs the role [Action.NeedRole]
	// names, and an actor with that role or a higher one may make it on
	// every job; a refusal is a *[ForbiddenError].
	RoleRules Authorizer = roleRules{}
	// ActorLocal is the embedding program itself: a Go call of a
	// [Runner] method with a context that carries no actor. It may do
	// everything.
	ActorLocal = Actor{Name: "local", Role: RoleAdmin}
	// ActorRunner is the runner acting on its own: the pause of a job
	// after failures in a row (see [AlertConfig]) and the end of a timed
	// pause of a job ([Runner.Pause] with an until) or of the service
	// ([Runner.PauseAll]).
	ActorRunner = Actor{Name: "runner", Role: RoleAdmin}
)

type actorKey struct{}

// WithActor returns a copy of ctx that makes the runner's changes in it
// on behalf of a: they are authorized for a and audited under its name.
// The REST API (cron/httpapi) and the console (cron/console) call the
// runner so for the caller they authenticated.
func WithActor(ctx context.Context, a Actor) context.Context {
	return context.WithValue(ctx, actorKey{}, a)
}

// ActorFrom returns the actor of ctx ([WithActor]), or [ActorLocal] when
// it names none.
func ActorFrom(ctx context.Context) Actor {
	if a, ok := ctx.Value(actorKey{}).(Actor); ok {
		return a
	}
	return ActorLocal
}

// Action names a change the runner makes for an [Actor], in the audit log
// and to the [Authorizer].
type Action string

// The actions.
const (
	ActionCreate    Action = "create"     // [Runner.Add]
	ActionUpdate    Action = "update"     // [Runner.Update]
	ActionDelete    Action = "delete"     // [Runner.Remove]
	ActionPause     Action = "pause"      // [Runner.Pause]
	ActionResume    Action = "resume"     // [Runner.Resume], and the end of a timed pause
	ActionRunNow    Action = "run-now"    // [Runner.RunNow]
	ActionPauseAll  Action = "pause-all"  // [Runner.PauseAll]
	ActionResumeAll Action = "resume-all" // [Runner.ResumeAll], and the end of a timed service pause
	// ActionReplaceHeader is asked, beside ActionRunNow, by a run-now
	// whose [RunOptions.Headers] replace a header the job sets: the job's
	// author (an admin) may have put a credential there.
	ActionReplaceHeader Action = "replace-header"
)

// ForbiddenError is the error of a change refused by the [Authorizer]:
// who asked, what for, and the role it needs.
type ForbiddenError struct {
	Actor  Actor
	Action Action
	// Need is the least role that may make the change; "" when no role
	// may (an Authorizer of its own may refuse for other reasons).
	Need Role
}

func (e *ForbiddenError) Error() string {
	if e.Need == "" {
		return fmt.Sprintf("cron: %s is not allowed for %s", e.Action, e.Actor.Name)
	}
	return fmt.Sprintf("cron: %s needs the %s role; %s has %s", e.Action, e.Need, e.Actor.Name, roleName(e.Actor.Role))
}

// Is makes a ForbiddenError match [ErrForbidden].
func (e *ForbiddenError) Is(target error) bool { return target == ErrForbidden }

func roleName(r Role) string {
	if r == "" {
		return "none"
	}
	return string(r)
}

// Authorizer decides whether an actor may make a change. The runner asks
// it before every change of a job or of the service, whoever asks: the
// REST API, the console, a Go caller or the runner itself. jobID is the
// job changed ("" for the service and for a create of a job without id).
// A nil error allows the change; any other error refuses it and is
// returned to the caller as it is (a *[ForbiddenError] is what the front
// ends translate into 403). It must be safe for concurrent use.
type Authorizer interface {
	Authorize(ctx context.Context, a Actor, act Action, jobID string) error
}

// roleRules is [RoleRules].
type roleRules struct{}

// Authorize allows act when a's role includes act.NeedRole().
func (roleRules) Authorize(_ context.Context, a Actor, act Action, _ string) error {
	need := act.NeedRole()
	if a.Role.Includes(need) {
		return nil
	}
	return &ForbiddenError{Actor: a, Action: act, Need: need}
}

// NeedRole is the least role that may make act under [RoleRules]:
// operator for run-now, pause and resume of a job, admin for every other
// change (the service-wide pause and resume among them).
func (act Action) NeedRole() Role {
	switch act {
	case ActionRunNow, ActionPause, ActionResume:
		return RoleOperator
	}
	return RoleAdmin
}

// authorize asks the runner's Authorizer whether the actor of ctx may
// make act on job id, and returns that actor.
func (r *Runner) authorize(ctx context.Context, act Action, id string) (Actor, error) {
	a := ActorFrom(ctx)
	if err := r.authz.Authorize(ctx, a, act, id); err != nil {
		return a, err
	}
	return a, nil
}

// auditor writes the audit records of a runner: to its AuditLog, then to
// its sink, one record at a time so that the sink sees them in order.
type auditor struct {
	mu     sync.Mutex
	log    AuditLog
	sink   func(ctx context.Context, e AuditEntry)
	lastID int64 // the id of the last record, when no log numbers them
}

// auditOn reports whether the runner keeps or sends audit records: the
// callers of audit look first, so that a runner without a log pays
// nothing for the records it does not keep.
func (r *Runner) auditOn() bool { return r.auditor.log != nil || r.auditor.sink != nil }

// change describes one change for its audit record.
type change struct {
	actor     Actor
	action    Action
	jobID     string
	runID     string
	replay    bool
	overrides json.RawMessage
	before    any // a Job, a PauseState, or nil
	after     any
}

// audit writes the record of c. The change was made and answered: a
// record the log fails to store is logged, not returned.
func (r *Runner) audit(ctx context.Context, c change) {
	a := &r.auditor
	e := AuditEntry{
		Time: r.now().UTC(), Who: c.actor.Name, Role: string(c.actor.Role), Action: c.action,
		JobID: c.jobID, RunID: c.runID, Replay: c.replay, Overrides: c.overrides,
		Before: auditJSON(c.before), After: auditJSON(c.after),
	}
	ctx = context.WithoutCancel(ctx)
	if a.sink != nil {
		// The sink sees the records in the order of their ids; without
		// one, records are appended side by side (a store may commit
		// them together).
		a.mu.Lock()
		defer a.mu.Unlock()
	}
	if a.log != nil {
		stored, err := a.log.AppendAudit(ctx, e)
		if err != nil {
			r.log.Error("cron: audit record not stored", "action", string(c.action), "job_id", c.jobID, "who", c.actor.Name, "error", err)
		} else {
			e = stored
		}
	} else {
		// No log gives ids: the sink's records are numbered here (a.mu
		// is held: there is a sink).
		a.lastID++
		e.ID = a.lastID
	}
	if a.sink != nil {
		a.sink(ctx, e)
	}
}

// auditJSON is the JSON of a job (with its secrets hidden) or of a
// service pause, for an audit record; nil for none.
func auditJSON(v any) json.RawMessage {
	var b []byte
	switch x := v.(type) {
	case nil:
		return nil
	case Job:
		b, _ = x.Redacted().MarshalJSON()
	case *Job:
		if x == nil {
			return nil
		}
		b, _ = x.Redacted().MarshalJSON()
	case PauseState:
		b, _ = x.MarshalJSON()
	}
	return b
}

// Audit returns the page of the audit log that q selects, oldest first,
// and whether more records match after it: every change made through the
// runner, by whom, with the job before and after (its secrets hidden). A
// runner that keeps no audit log (see [Config.AuditLog]) returns none.
func (r *Runner) Audit(ctx context.Context, q AuditQuery) ([]AuditEntry, bool, error) {
	if r.auditor.log == nil {
		return []AuditEntry{}, false, nil
	}
	return r.auditor.log.Audit(ctx, q)
}

// overridesJSON is the audit form of run-now options: what they change,
// with every value that may hold a secret hidden.
func overridesJSON(o *RunOptions) json.RawMessage {
	if o == nil {
		return nil
	}
	type wire struct {
		Body           string            `json:"body,omitempty"`
		Headers        map[string]string `json:"headers,omitempty"`
		Args           string            `json:"args,omitempty"`
		Force          bool              `json:"force,omitempty"`
		IdempotencyKey string            `json:"idempotency_key,omitempty"`
	}
	w := wire{Force: o.Force, IdempotencyKey: o.IdempotencyKey}
	if o.Body != nil {
		w.Body = Hidden
	}
	if len(o.Headers) > 0 {
		w.Headers = make(map[string]string, len(o.Headers))
		for k := range o.Headers {
			w.Headers[k] = Hidden
		}
	}
	if len(o.Args) > 0 {
		w.Args = Hidden
	}
	if w.Body == "" && w.Headers == nil && w.Args == "" && !w.Force && w.IdempotencyKey == "" {
		return nil
	}
	b, _ := json.Marshal(w)
	return b
}

// changeOf is the change act of job id by a, from before to after.
func changeOf(a Actor, act Action, id string, before, after Job) change {
	return change{actor: a, action: act, jobID: id, before: before, after: after}
}

// Authorize reports whether the actor of ctx ([WithActor]) may make act
// on job id ("" for the service), by the runner's [Authorizer]: nil when
// it may. Every change asks it by itself; front ends ask it beforehand to
// refuse a request before they read it, or to offer only the actions a
// user may take.
func (r *Runner) Authorize(ctx context.Context, act Action, id string) error {
	_, err := r.authorize(ctx, act, id)
	return err
}
