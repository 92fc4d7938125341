package claim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
)

// ErrRunning is returned by [Loop.Run] when the loop already runs.
var ErrRunning = errors.New("claim: loop already running")

// Report is what one cycle did, given to the [Observer] and returned by
// [Loop.Cycle].
type Report struct {
	Start    time.Time     // when the cycle began (time.Now)
	Duration time.Duration // how long it took
	// Active is the number of active node-units seen.
	Active int
	// Deployments is the number of enabled deployments read: every one
	// without a [Viewer]; with one, this node's rows, the daemons, the
	// rows of invalid type and the candidates read.
	Deployments int
	// ProbeFailures is the number of usage probes that failed or timed out.
	ProbeFailures int
	// Eligible reports whether this node was eligible to claim.
	Eligible bool
	// Claimed are the ids this node bound to itself.
	Claimed []string
	// Conflicts are the ids another node claimed first (ERR_CLAIM_CONFLICT).
	Conflicts []string
	// Released are the ids released by the rebalance opt-in.
	Released []string
	// RebalanceHeld says why the rebalance opt-in holds on this overloaded
	// node ([Actions.RebalanceHeld]); "" when it does not.
	RebalanceHeld string
	// Started and Stopped are the ids started and stopped on the Runner.
	Started []string
	Stopped []string
	// Missing are the enabled daemons found not running and started again
	// (ERR_DAEMON_MISSING).
	Missing []string
	// Restarted are the ids restarted because what they run changed.
	Restarted []string
	// Declined are the waiting deployments this node did not consider for
	// a claim because its Runner's [Admitter] refused them.
	Declined []string
	// Problems are the errors about single records: ERR_INVALID_TYPE,
	// ERR_DAEMON_ADDRESS_SET, ERR_DAEMON_MISSING ([*Error]s), and Runner
	// failures.
	Problems []error
	// Fenced reports that self-fencing stopped this node's deployments.
	Fenced bool
	// Err is the cycle's error, also returned by Cycle: the membership or
	// the store could not be read, or a claim or release failed.
	Err error
}

// Loop is one node-unit's claim loop. Create it with [New]; call [Loop.Run]
// once, or [Loop.Cycle] to drive cycles one at a time. Its methods must not
// be called concurrently with each other.
type Loop struct {
	store   Store
	members Membership
	runner  Runner
	probe   UsageProbe
	cfg     Config
	log     *slog.Logger

	running atomic.Bool

	mu          sync.Mutex // serializes cycles
	state       State
	lastRenewed time.Time
	types       map[string]Type // type of every id seen in the latest list
	logged      map[string]bool // problems already logged, by key
	refused     map[string]bool // refusals already logged, by id and version
	stallKey    string          // the waiting deployments this node could run, last cycle
	stallCycles int             // consecutive cycles they stayed waiting, unclaimed
	noneLogged  bool
	held        bool                  // the rebalance opt-in was held last cycle (logged)
	local       map[string]Deployment // a Viewer's cycle: the rows read, by id
	confirm     map[string]bool       // rows of local to read in full again
}

// New returns a loop over store, members and runner. probe is needed only
// when the policy uses resource usage (nil then is an error). cfg is
// validated; a bad field is an [*ConfigError] naming it.
func New(store Store, members Membership, runner Runner, probe UsageProbe, cfg Config) (*Loop, error) {
	switch {
	case store == nil:
		return nil, &ConfigError{Name: "store", Value: "nil", Err: errors.New("a Store is required")}
	case members == nil:
		return nil, &ConfigError{Name: "members", Value: "nil", Err: errors.New("a Membership is required")}
	case runner == nil:
		return nil, &ConfigError{Name: "runner", Value: "nil", Err: errors.New("a Runner is required")}
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	if probe == nil && UsesResourceUsage(c.Policy) {
		return nil, &ConfigError{Name: "probe", Value: "nil", Err: fmt.Errorf("policy %s needs a UsageProbe", c.Policy.Name())}
	}
	return &Loop{
		store: store, members: members, runner: runner, probe: probe, cfg: c,
		log:         c.Logger.With("address", c.Address),
		lastRenewed: time.Now(),
		types:       map[string]Type{},
		logged:      map[string]bool{},
		refused:     map[string]bool{},
	}, nil
}

// Run runs a cycle at once and then every Config.Interval until ctx ends.
// A failed cycle is logged and the loop goes on. When ctx ends, Run stops
// the node's processes of type deployment, leaves the membership so that
// other nodes can take them over, and returns nil. Daemons are left to the
// Runner's owner.
func (l *Loop) Run(ctx context.Context) error {
	if !l.running.CompareAndSwap(false, true) {
		return ErrRunning
	}
	defer l.running.Store(false)
	t := time.NewTicker(l.cfg.Interval)
	defer t.Stop()
	for {
		if _, err := l.Cycle(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("claim cycle failed", "err", err)
		}
		select {
		case <-ctx.Done():
			l.shutdown()
			return nil
		case <-t.C:
		}
	}
}

// membershipTimeout bounds one membership call: the longer of Interval and
// half the membership TTL, so a slow database round trip under load does not
// fail a heartbeat that still has time to land, while a hung call still ends
// before the node's membership would lapse.
func (l *Loop) membershipTimeout() time.Duration {
	return max(l.cfg.Interval, l.cfg.MembershipTTL/2)
}

func (l *Loop) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), l.membershipTimeout())
	defer cancel()
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, id := range l.stopDeployments(ctx) {
		l.log.Info("stopped deployment on shutdown", "id", id)
	}
	if err := l.members.Leave(ctx, l.cfg.Address); err != nil {
		l.log.Warn("leaving the membership failed", "err", err)
	}
}

// stopDeployments stops every running id that is not a known daemon.
func (l *Loop) stopDeployments(ctx context.Context) []string {
	var stopped []string
	for _, id := range l.runner.Running() {
		if l.types[id] == TypeDaemon {
			continue
		}
		if err := l.runner.Stop(ctx, id); err != nil {
			l.log.Error("stopping deployment failed", "id", id, "err", err)
			continue
		}
		stopped = append(stopped, id)
	}
	slices.Sort(stopped)
	return stopped
}

// Cycle runs exactly one cycle: membership, deployments, usage probes (under
// resource_usage), [Plan], claims and releases, and the Runner's reconcile.
func (l *Loop) Cycle(ctx context.Context) (Report, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := Report{Start: time.Now()}
	err := l.cycle(ctx, &r)
	r.Err = err
	r.Duration = time.Since(r.Start)
	if l.cfg.Observer != nil {
		l.cfg.Observer.ObserveCycle(r)
	}
	return r, err
}

func (l *Loop) cycle(ctx context.Context, r *Report) error {
	var (
		in  Inputs
		err error
	)
	if v, ok := l.store.(Viewer); ok && v.Shares(l.members) {
		in, err = l.readView(ctx, v, r)
	} else {
		in, err = l.readAll(ctx, r)
	}
	if err != nil {
		return err
	}
	return l.apply(ctx, in, r)
}

// fence stops this node's deployments when self-fencing is on and its
// membership has not been renewed for half the TTL.
func (l *Loop) fence(ctx context.Context, r *Report) {
	// Under none nobody takes deployments over, so there is nothing to
	// fence against (R2: bound deployments keep running).
	if l.cfg.SelfFence && !IsNone(l.cfg.Policy) && time.Since(l.lastRenewed) >= l.cfg.MembershipTTL/2 {
		r.Stopped = l.stopDeployments(ctx)
		r.Fenced = true
		if len(r.Stopped) > 0 {
			l.log.Warn("membership not renewed; fenced: stopped deployments", "since", l.lastRenewed, "stopped", r.Stopped)
		}
	}
}

func (l *Loop) self() NodeUnit {
	return NodeUnit{Address: l.cfg.Address, UsageEndpoint: l.cfg.UsageEndpoint, StartedAt: l.cfg.StartedAt}
}

func (l *Loop) usesProbes() bool {
	return !IsNone(l.cfg.Policy) && UsesResourceUsage(l.cfg.Policy)
}

// inputs returns Plan's inputs from what the cycle read.
func (l *Loop) inputs(nodes []NodeUnit, deps []Deployment, usage map[string]Usage) Inputs {
	active := make([]string, len(nodes))
	for i, n := range nodes {
		active[i] = n.Address
	}
	return Inputs{
		Self:              l.cfg.Address,
		Policy:            l.cfg.Policy,
		Active:            active,
		Deployments:       deps,
		Usage:             usage,
		ProbeFailure:      l.cfg.ProbeFailure,
		Running:           l.runner.Running(),
		LostAfter:         l.cfg.LostAfter,
		MaxClaimsPerCycle: l.cfg.MaxClaimsPerCycle,
		Rebalance:         l.cfg.Rebalance,
		State:             l.state,
	}
}

func (l *Loop) noteTypes(deps []Deployment) {
	clear(l.types)
	for _, d := range deps {
		l.types[d.ID] = d.Type
	}
}

// readAll is the cycle's read without a Viewer: the membership, then every
// enabled row.
func (l *Loop) readAll(ctx context.Context, r *Report) (Inputs, error) {
	nodes, err := l.heartbeat(ctx, l.self())
	if err != nil {
		l.fence(ctx, r)
		return Inputs{}, fmt.Errorf("claim: membership: %w", err)
	}
	l.lastRenewed = r.Start
	r.Active = len(nodes)

	deps, err := l.store.Deployments(ctx)
	if err != nil {
		return Inputs{}, fmt.Errorf("claim: listing deployments: %w", err)
	}
	r.Deployments = len(deps)
	l.noteTypes(deps)

	var usage map[string]Usage
	if l.usesProbes() {
		usage, r.ProbeFailures = l.probeAll(ctx, nodes)
	}
	return l.inputs(nodes, deps, usage), nil
}

// readView is the cycle's read through a Viewer: one consistent view with
// the heartbeat, the summary, the versions of this node's rows (those that
// changed in full) and the window of candidates it may claim.
func (l *Loop) readView(ctx context.Context, v Viewer, r *Report) (Inputs, error) {
	vctx, cancel := context.WithTimeout(ctx, l.membershipTimeout())
	defer cancel()
	view, err := v.View(vctx, l.self(), l.cfg.MembershipTTL, l.usesProbes())
	if err != nil {
		l.fence(ctx, r)
		return Inputs{}, fmt.Errorf("claim: membership: %w", err)
	}
	defer view.Close()
	committed := false
	commit := func() error {
		if committed {
			return nil
		}
		if err := view.Commit(vctx); err != nil {
			l.fence(ctx, r)
			return fmt.Errorf("claim: membership: %w", err)
		}
		committed = true
		l.lastRenewed = r.Start
		return nil
	}
	fail := func(what string, err error) (Inputs, error) {
		if !committed {
			l.fence(ctx, r)
		}
		return Inputs{}, fmt.Errorf("claim: %s: %w", what, err)
	}
	sum := view.Summary()
	r.Active = len(sum.Active)

	local, err := l.readLocal(vctx, view)
	if err != nil {
		return fail("reading this node's deployments", err)
	}
	l.noteTypes(local)
	r.Deployments = len(local)

	var usage map[string]Usage
	rctx := vctx
	if l.usesProbes() {
		// No transaction stays open while the probes wait.
		if err := commit(); err != nil {
			return Inputs{}, err
		}
		usage, r.ProbeFailures = l.probeAll(ctx, sum.Active)
		rctx = ctx
	}
	in := l.inputs(sum.Active, local, usage)
	in.Partial = &Partial{Bound: sum.Bound, Unassigned: sum.Unassigned}
	w := ClaimWindow(in, r.Start)
	if w.CountUpTo > 0 {
		n, err := view.CountCandidates(rctx, w.Lost, w.CountUpTo)
		if err != nil {
			return fail("counting candidates", err)
		}
		in.Partial.Total, in.Partial.Counted = n, true
		w = ClaimWindow(in, r.Start)
	}
	if _, admits := l.runner.(Admitter); admits && w.Limit == 0 {
		// A runner that refuses some deployments looks at the first
		// waiting ones even when this node claims none: to report what it
		// refuses, and to take one the eligible node-units all leave
		// waiting (see unstall).
		w = AdmitWindow(in, r.Start, admitWindow)
	}
	if w.Limit > 0 {
		cands, err := view.Candidates(rctx, w.Lost, w.Offset, w.Limit)
		if err != nil {
			return fail("reading candidates", err)
		}
		in.Partial.Offset, in.Partial.Candidates = w.Offset, cands
		r.Deployments += len(cands)
	}
	if err := commit(); err != nil {
		return Inputs{}, err
	}
	return in, nil
}

// readLocal returns the rows this node runs or reports, reading in full
// only those whose version (id and updated_at) differs from the one it
// holds. A row read in full because it changed is read in full once more
// the next cycle: a second update stamped with the same time as the first
// (within the clock's resolution) leaves the version as it was, and that
// next read, a cycle later, sees it.
func (l *Loop) readLocal(ctx context.Context, view View) ([]Deployment, error) {
	vs, err := view.Versions(ctx, l.cfg.Address)
	if err != nil {
		return nil, err
	}
	var need []string
	for _, v := range vs {
		if d, ok := l.local[v.ID]; !ok || !d.UpdatedAt.Equal(v.UpdatedAt) || l.confirm[v.ID] {
			need = append(need, v.ID)
		}
	}
	fresh := map[string]Deployment{}
	if len(need) > 0 {
		got, err := view.Get(ctx, need)
		if err != nil {
			return nil, err
		}
		for _, d := range got {
			fresh[d.ID] = d
		}
	}
	next := make(map[string]Deployment, len(vs))
	confirm := map[string]bool{}
	out := make([]Deployment, 0, len(vs))
	for _, v := range vs {
		d, ok := fresh[v.ID]
		if ok {
			if held, had := l.local[v.ID]; !had || !held.UpdatedAt.Equal(d.UpdatedAt) {
				confirm[v.ID] = true
			}
		} else if d, ok = l.local[v.ID]; !ok || !d.UpdatedAt.Equal(v.UpdatedAt) {
			continue // gone between the two reads
		}
		if _, dup := next[d.ID]; dup {
			continue
		}
		next[d.ID] = d
		out = append(out, d)
	}
	l.local, l.confirm = next, confirm
	return out, nil
}

// apply plans the cycle from in and carries the plan out: stops, releases,
// claims and starts.
func (l *Loop) apply(ctx context.Context, in Inputs, r *Report) error {
	// A runner that can tell which deployments it would refuse keeps this
	// node from claiming them: they stay waiting for a node that can run
	// them. Through a Viewer the waiting deployments are the window of
	// candidates read.
	ad, admits := l.runner.(Admitter)
	admits = admits && !IsNone(l.cfg.Policy)
	if admits {
		in.Deployments, r.Declined = l.admit(ad, in.Deployments, in.Active)
		if in.Partial != nil && len(in.Partial.Candidates) > 0 {
			var declined []string
			in.Partial.Candidates, declined = l.admit(ad, in.Partial.Candidates, in.Active)
			r.Declined = append(r.Declined, declined...)
		}
	}
	act := Plan(in, r.Start)
	l.state = act.State
	if admits {
		planned := in.Deployments
		if in.Partial != nil {
			planned = append(slices.Clone(in.Deployments), in.Partial.Candidates...)
		}
		l.unstall(&act, planned)
	}
	r.Eligible = act.Eligible
	r.RebalanceHeld = act.RebalanceHeld
	if held := act.RebalanceHeld != ""; held != l.held {
		l.held = held
		if held {
			l.log.Info("rebalancing held: no deployment is released while", "reason", act.RebalanceHeld)
		} else {
			l.log.Info("rebalancing no longer held")
		}
	}
	r.Missing = act.Missing
	r.Restarted = act.Restart
	for _, id := range act.Restart {
		l.log.Info("deployment changed; restarting it", "id", id)
	}
	r.Problems = act.Problems
	l.logProblems(act)

	// Stop first: what should not run, and what is about to be released.
	for _, id := range act.Stop {
		if err := l.runner.Stop(ctx, id); err != nil {
			r.Problems = append(r.Problems, fmt.Errorf("claim: stopping %q: %w", id, err))
			l.log.Error("stopping deployment failed", "id", id, "err", err)
			continue
		}
		r.Stopped = append(r.Stopped, id)
	}

	var applyErr error
	for _, d := range act.Release {
		ok, err := l.store.Release(ctx, d.ID, l.cfg.Address)
		if err != nil {
			applyErr = fmt.Errorf("claim: releasing %q: %w", d.ID, err)
			break
		}
		if ok {
			r.Released = append(r.Released, d.ID)
			l.log.Info("released deployment to rebalance", "id", d.ID)
		}
	}

	start := act.Start
	if len(act.Claim) > 0 && applyErr == nil {
		claimed, err := l.claim(ctx, act)
		if err != nil {
			applyErr = err
		}
		won := map[string]bool{}
		for _, id := range claimed {
			won[id] = true
		}
		for _, d := range act.Claim {
			if won[d.ID] {
				r.Claimed = append(r.Claimed, d.ID)
				d.Address = l.cfg.Address
				start = append(start, d)
				continue
			}
			if err == nil {
				r.Conflicts = append(r.Conflicts, d.ID)
				l.log.Debug("claim lost to another node", "code", CodeClaimConflict, "id", d.ID)
			}
		}
		if len(r.Claimed) > 0 {
			l.log.Info("claimed deployments", "ids", r.Claimed)
		}
	}

	for _, d := range start {
		if err := l.runner.Start(ctx, d); err != nil {
			r.Problems = append(r.Problems, fmt.Errorf("claim: starting %q: %w", d.ID, err))
			key := d.ID + "\x00" + d.UpdatedAt.String()
			if errors.Is(err, ErrRefused) {
				if !l.refused[key] {
					l.refused[key] = true
					l.log.Warn("runner refused deployment", "id", d.ID, "err", err)
				}
				continue
			}
			l.log.Error("starting deployment failed", "id", d.ID, "err", err)
			continue
		}
		r.Started = append(r.Started, d.ID)
	}
	return applyErr
}

// admitWindow is how many waiting deployments a node-unit whose runner is
// an [Admitter] reads through a [Viewer] when it claims none itself.
const admitWindow = 16

// stallLimit is how many consecutive cycles the same waiting deployments
// must stay unclaimed before a node-unit that is not eligible claims one.
const stallLimit = 3

// unstall lets this node claim a waiting deployment that it can run when
// the same waiting deployments have stayed unclaimed for stallLimit
// cycles while this node was not eligible: the eligible node-units refuse
// them (their Runners' Admit), and without this nobody would ever run
// them. Only loops whose Runner is an [Admitter] do this.
func (l *Loop) unstall(act *Actions, planned []Deployment) {
	if act.PolicyDisabled || len(act.Claim) > 0 || act.Eligible {
		l.stallKey, l.stallCycles = "", 0
		return
	}
	waiting := Candidates(planned, act.Lost)
	if len(waiting) == 0 {
		l.stallKey, l.stallCycles = "", 0
		return
	}
	ids := make([]string, len(waiting))
	for i, d := range waiting {
		ids[i] = d.ID
	}
	key := strings.Join(ids, "\x00")
	if key != l.stallKey {
		l.stallKey, l.stallCycles = key, 1
		return
	}
	l.stallCycles++
	if l.stallCycles < stallLimit {
		return
	}
	l.stallKey, l.stallCycles = "", 0
	act.Claim = waiting[:1]
	l.log.Info("claiming a deployment the eligible node-units leave waiting", "id", waiting[0].ID, "cycles", stallLimit)
}

// admit returns deps without the waiting deployments that ad refuses, and
// their ids. A waiting deployment is an enabled one of type deployment that
// is unassigned or bound to a node-unit not in active. A refusal is logged
// once per deployment version.
func (l *Loop) admit(ad Admitter, deps []Deployment, active []string) ([]Deployment, []string) {
	live := make(map[string]bool, len(active))
	for _, a := range active {
		live[a] = true
	}
	var declined []string
	var kept []Deployment
	for i, d := range deps {
		waiting := d.Type == TypeDeployment && d.Enabled && d.Address != l.cfg.Address && !live[d.Address]
		if !waiting {
			if kept != nil {
				kept = append(kept, d)
			}
			continue
		}
		err := ad.Admit(d)
		if err == nil {
			if kept != nil {
				kept = append(kept, d)
			}
			continue
		}
		if !errors.Is(err, ErrRefused) {
			l.log.Warn("runner could not tell whether it would run deployment; claiming it anyway", "id", d.ID, "err", err)
			if kept != nil {
				kept = append(kept, d)
			}
			continue
		}
		if kept == nil {
			kept = append(make([]Deployment, 0, len(deps)), deps[:i]...)
		}
		declined = append(declined, d.ID)
		key := d.ID + "\x00" + d.UpdatedAt.String()
		if !l.refused[key] {
			l.refused[key] = true
			l.log.Warn("not claiming deployment: the runner refuses it", "id", d.ID, "err", err)
		}
	}
	if kept == nil {
		return deps, nil
	}
	return kept, declined
}

func (l *Loop) heartbeat(ctx context.Context, self NodeUnit) ([]NodeUnit, error) {
	ctx, cancel := context.WithTimeout(ctx, l.membershipTimeout())
	defer cancel()
	if ha, ok := l.members.(HeartbeatActiver); ok {
		return ha.HeartbeatActive(ctx, self, l.cfg.MembershipTTL)
	}
	if err := l.members.Heartbeat(ctx, self); err != nil {
		return nil, err
	}
	return l.members.Active(ctx, l.cfg.MembershipTTL)
}

// probeAll reads every node's usage at once under ProbeTimeout; a node whose
// probe fails has no entry.
func (l *Loop) probeAll(ctx context.Context, nodes []NodeUnit) (map[string]Usage, int) {
	ctx, cancel := context.WithTimeout(ctx, l.cfg.ProbeTimeout)
	defer cancel()
	readings := make([]Usage, len(nodes))
	errs := make([]error, len(nodes))
	var g errgroup.Group
	for i, n := range nodes {
		g.Go(func() error {
			readings[i], errs[i] = l.probe.Usage(ctx, n)
			return nil
		})
	}
	_ = g.Wait() // the goroutines never fail; errors are per node
	usage := make(map[string]Usage, len(nodes))
	failures := 0
	for i, n := range nodes {
		if errs[i] != nil {
			failures++
			l.log.Debug("usage probe failed", "node", n.Address, "err", errs[i])
			continue
		}
		usage[n.Address] = readings[i]
	}
	return usage, failures
}

func (l *Loop) claim(ctx context.Context, act Actions) ([]string, error) {
	if len(act.Claim) == 1 {
		ok, err := l.store.Claim(ctx, act.Claim[0].ID, l.cfg.Address, act.Lost)
		if err != nil {
			return nil, fmt.Errorf("claim: claiming %q: %w", act.Claim[0].ID, err)
		}
		if ok {
			return []string{act.Claim[0].ID}, nil
		}
		return nil, nil
	}
	ids := make([]string, len(act.Claim))
	for i, d := range act.Claim {
		ids[i] = d.ID
	}
	claimed, err := l.store.ClaimMany(ctx, ids, l.cfg.Address, act.Lost)
	if err != nil {
		return nil, fmt.Errorf("claim: claiming %d deployments: %w", len(ids), err)
	}
	return claimed, nil
}

// logProblems logs each record problem when it first appears (again after
// it was fixed), ERR_DAEMON_MISSING every time, and ERR_POLICY_DISABLED once.
func (l *Loop) logProblems(act Actions) {
	if act.PolicyDisabled && !l.noneLogged {
		l.noneLogged = true
		l.log.Info("claim policy is none: claims are skipped", "code", CodePolicyDisabled)
	}
	current := map[string]bool{}
	for _, p := range act.Problems {
		var e *Error
		if !errors.As(p, &e) {
			continue
		}
		if e.Code == CodeDaemonMissing {
			l.log.Warn("enabled daemon not running; starting it again", "code", e.Code, "id", e.ID)
			continue
		}
		key := string(e.Code) + "\x00" + e.ID + "\x00" + e.Field + "\x00" + e.Value
		current[key] = true
		if !l.logged[key] {
			l.log.Error("invalid deployment record", "code", e.Code, "id", e.ID, "field", e.Field, "value", e.Value, "err", e)
		}
	}
	l.logged = current
}
