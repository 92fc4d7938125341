package claim

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Sanitize applies the data rules to the deployments read
// from the store: a record with an invalid type is skipped (R11,
// ERR_INVALID_TYPE); a daemon's address is ignored, that is set to "" in the
// returned copy (R12, ERR_DAEMON_ADDRESS_SET); a record without an id, or
// with an id seen before, is skipped. Each problem is returned as an
// [*Error]. The input is not modified; when it has no problem it is
// returned as is.
func Sanitize(deployments []Deployment) (valid []Deployment, problems []error) {
	seen := make(map[string]bool, len(deployments))
	clean := true
	for i := range deployments {
		d := &deployments[i]
		if seen[d.ID] || d.ID == "" || !d.Type.Valid() || (d.Type == TypeDaemon && d.Address != "") {
			clean = false
			break
		}
		seen[d.ID] = true
	}
	if clean {
		return deployments, nil // the common case: nothing to copy
	}
	clear(seen)
	valid = make([]Deployment, 0, len(deployments))
	for _, d := range deployments {
		if err := d.Validate(); err != nil {
			problems = append(problems, err)
			if d.ID == "" || !d.Type.Valid() {
				continue
			}
			d.Address = "" // ERR_DAEMON_ADDRESS_SET: ignore the address
		}
		if seen[d.ID] {
			problems = append(problems, &Error{ID: d.ID, Field: "id", Value: d.ID, Err: ErrInvalidDeployment})
			continue
		}
		seen[d.ID] = true
		valid = append(valid, d)
	}
	return valid, problems
}

// LostAddresses returns, sorted and without repeats, the addresses that
// deployments of type deployment are bound to but that are not in active.
// Daemons never make an address lost (R9); records are used as given, so
// pass them through [Sanitize] first.
func LostAddresses(deployments []Deployment, active []string) []string {
	in := make(map[string]bool, len(active))
	for _, a := range active {
		in[a] = true
	}
	var lost []string
	seen := map[string]bool{}
	for _, d := range deployments {
		if d.Type != TypeDeployment || d.Address == "" || in[d.Address] || seen[d.Address] {
			continue
		}
		seen[d.Address] = true
		lost = append(lost, d.Address)
	}
	slices.Sort(lost)
	return lost
}

// DeploymentCounts returns, for every active address, the number of
// deployments of type deployment bound to it: every active node is present,
// with 0 when it has none; daemons, empty addresses and addresses not in
// active are not counted.
func DeploymentCounts(deployments []Deployment, active []string) map[string]int {
	counts := make(map[string]int, len(active))
	for _, a := range active {
		counts[a] = 0
	}
	for _, d := range deployments {
		if d.Type != TypeDeployment || d.Address == "" {
			continue
		}
		if _, ok := counts[d.Address]; ok {
			counts[d.Address]++
		}
	}
	return counts
}

// CompareCandidates orders deployments for claiming: updated_at, then
// created_at, then id, all ascending. It returns -1, 0 or +1.
func CompareCandidates(a, b Deployment) int { return compareCandidates(&a, &b) }

func compareCandidates(a, b *Deployment) int {
	if c := a.UpdatedAt.Compare(b.UpdatedAt); c != 0 {
		return c
	}
	if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
		return c
	}
	return cmp.Compare(a.ID, b.ID)
}

// Candidates returns the deployments this cycle may claim, in claim order:
// first those bound to an address in lost, then the unassigned ones, each
// group in candidate order ([CompareCandidates]). Only enabled deployments
// of type deployment are candidates.
func Candidates(deployments []Deployment, lost []string) []Deployment {
	ptrs := candidates(deployments, lost)
	out := make([]Deployment, len(ptrs))
	for i, d := range ptrs {
		out[i] = *d
	}
	return out
}

// candidates is Candidates without copying the records (a record is a few
// hundred bytes; a cycle may see tens of thousands).
func candidates(deployments []Deployment, lost []string) []*Deployment {
	isLost := make(map[string]bool, len(lost))
	for _, a := range lost {
		isLost[a] = true
	}
	var takeover, free []*Deployment
	for i := range deployments {
		d := &deployments[i]
		if d.Type != TypeDeployment || !d.Enabled {
			continue
		}
		switch {
		case d.Address == "":
			free = append(free, d)
		case isLost[d.Address]:
			takeover = append(takeover, d)
		}
	}
	slices.SortFunc(takeover, compareCandidates)
	slices.SortFunc(free, compareCandidates)
	return append(takeover, free...)
}

// Snapshots evaluates every provider of p for every node.
func Snapshots(p Policy, nodes []string, c MetricContext) map[string][]MetricSnapshot {
	out := make(map[string][]MetricSnapshot, len(nodes))
	for _, n := range nodes {
		for _, pr := range p.Providers() {
			out[n] = append(out[n], pr.Evaluate(n, c))
		}
	}
	return out
}

// UsesResourceUsage reports whether p has a provider of the resource_usage
// metric, that is whether the loop must probe node usage for it.
func UsesResourceUsage(p Policy) bool {
	for _, pr := range p.Providers() {
		if pr.Key() == MetricResourceUsage {
			return true
		}
	}
	return false
}

// FairShares spreads n new deployments over nodes with the given current
// counts so that the result is as even as possible ("water-filling"): the
// least loaded nodes are raised first, and when the last level does not
// divide evenly the extra deployments go to the tied nodes in address order.
// It returns how many each node gets; nodes absent from counts count 0.
func FairShares(counts map[string]int, nodes []string, n int) map[string]int {
	type node struct {
		addr  string
		count int
	}
	ns := make([]node, 0, len(nodes))
	for _, a := range nodes {
		ns = append(ns, node{a, counts[a]})
	}
	sort.Slice(ns, func(i, j int) bool {
		if ns[i].count != ns[j].count {
			return ns[i].count < ns[j].count
		}
		return ns[i].addr < ns[j].addr
	})
	out := make(map[string]int, len(ns))
	if len(ns) == 0 || n <= 0 {
		return out
	}
	remaining, level, group := n, ns[0].count, 1
	for {
		// Bring the group (ns[:group], all at level) up to the next node's count.
		if group < len(ns) {
			need := group * (ns[group].count - level)
			if need <= remaining {
				remaining -= need
				level = ns[group].count
				group++
				continue
			}
		}
		add, extra := remaining/group, remaining%group
		level += add
		tied := slices.Clone(ns[:group])
		sort.Slice(tied, func(i, j int) bool { return tied[i].addr < tied[j].addr })
		for i, t := range tied {
			final := level
			if i < extra {
				final++
			}
			if final > t.count {
				out[t.addr] = final - t.count
			}
		}
		return out
	}
}

// Inputs are everything one cycle of the loop decides from.
type Inputs struct {
	// Self is this node's address. It always counts as active.
	Self string
	// Policy decides eligibility; nil means [DeploymentCountPolicy].
	Policy Policy
	// Active are the active node-units' addresses, in any order.
	Active []string
	// Deployments are the enabled deployments as read from the store
	// (Plan sanitizes them). With Partial set, only the rows this node
	// runs or reports: its deployments of type deployment, every enabled
	// daemon and every enabled row of invalid type.
	Deployments []Deployment
	// Partial, when set, stands for the rest of the table: the counts per
	// address, whether anything is unassigned, and the window of
	// candidates [ClaimWindow] asked for. Nil: Deployments is every
	// enabled row.
	Partial *Partial
	// Usage holds the successful usage readings, by address.
	Usage map[string]Usage
	// ProbeFailure says how a node without a reading counts.
	ProbeFailure ProbeFailure
	// Running are the ids the local runner runs.
	Running []string
	// LostAfter, MaxClaimsPerCycle and Rebalance are the opt-ins of
	// [Config], with the same defaults (0 or 1 claims means one).
	LostAfter         time.Duration
	MaxClaimsPerCycle int
	Rebalance         Rebalance
	// State is what the previous cycle's Actions.State carried over; the
	// zero value is the state of a fresh loop.
	State State
}

// State is what a loop remembers between cycles.
type State struct {
	// MissingSince records when each missing address (bound to by a
	// deployment but not active) was first seen missing, for LostAfter.
	MissingSince map[string]time.Time
	// Imbalanced counts the consecutive cycles the rebalance condition held.
	Imbalanced int
	// Desired are the ids that were to run after the previous cycle.
	Desired map[string]bool
	// Specs fingerprint what each desired deployment runs (package,
	// version, command, args, env), to restart it when that changes.
	Specs map[string]uint64
}

// Actions are one cycle's decisions.
type Actions struct {
	// PolicyDisabled is set under the none policy (ERR_POLICY_DISABLED):
	// Claim and Release are then always empty.
	PolicyDisabled bool
	// Eligible reports whether this node may claim this cycle.
	Eligible bool
	// Lost are the addresses whose deployments may be taken over now: the
	// lost argument of [Store.Claim] and [Store.ClaimMany].
	Lost []string
	// Claim are the deployments to claim, in order: one, or up to
	// MaxClaimsPerCycle. Start each one claimed successfully.
	Claim []Deployment
	// Release are the deployments to stop and then release (rebalance; at
	// most one).
	Release []Deployment
	// Stop are the running ids that should not run, released ones
	// included. Stop them before releasing.
	Stop []string
	// Start are the deployments that should run and do not.
	Start []Deployment
	// Missing are the enabled daemons that were to run but do not
	// (ERR_DAEMON_MISSING); they are in Start too.
	Missing []string
	// Restart are the running ids whose package, version, command, args or
	// env changed since the previous cycle; they are in Stop and in Start,
	// so the new version replaces the old one.
	Restart []string
	// Problems are the invalid records (see [Sanitize]) and the
	// ERR_DAEMON_MISSING errors.
	Problems []error
	// RebalanceHeld, under the rebalance opt-in, says why this node does
	// not rebalance although it holds Rebalance.Threshold more
	// deployments than the least loaded node: deployments wait to be
	// claimed, or node-units bound to deployments are missing. "" when
	// rebalancing is off, not needed, or under way.
	RebalanceHeld string
	// State is the state to pass to the next cycle.
	State State
}

// Plan turns one cycle's inputs into that cycle's actions. It is pure: it
// reads only in and now.
//
// Claims: under the none policy, nothing. Otherwise the candidates are the
// enabled deployments of type deployment bound to a lost address (missing
// from Active for at least LostAfter) and then the unassigned ones, each in
// candidate order. With MaxClaimsPerCycle <= 1 (the default),
// the policy picks the eligible nodes (those at the minimum metric) and a
// node at rank r among them, in address order, claims candidate r if there
// is one, so k tied nodes place k deployments per cycle without racing for
// the same one. With MaxClaimsPerCycle > 1, each node's fair share
// ([FairShares] by deployment count over the active nodes), capped at
// MaxClaimsPerCycle, is claimed in one statement; the shares of the nodes
// that act this cycle are laid out on the candidate list in address order.
// Under deployment_count every node below its fair share acts; under other
// policies only the eligible nodes do, with at least one claim each.
//
// Rebalance (opt-in): when no candidate is waiting and no address is
// missing, and this node has at least Rebalance.Threshold more deployments
// than the least loaded active node for Rebalance.Cycles consecutive cycles,
// it releases its last deployment in candidate order. While a candidate
// waits or an address is missing, such a node holds and says why in
// Actions.RebalanceHeld.
//
// With in.Partial the counts and the missing addresses come from
// Partial.Bound and the candidates from the window read at Partial.Offset;
// the decisions are the same as from every row.
//
// Reconcile: every enabled daemon (once per id) and every deployment of type
// deployment bound to Self should run; Start are those not running, Stop
// the running ids that should not run, and Restart (in both) those whose
// package, version, command, args or env changed since the previous cycle.
func Plan(in Inputs, now time.Time) Actions {
	policy := in.Policy
	if policy == nil {
		policy = DeploymentCountPolicy()
	}
	deps, problems := Sanitize(in.Deployments)
	act := Actions{Problems: problems}
	t := assess(in, deps, now)
	act.State.MissingSince = t.missingSince
	act.Lost = t.lost

	var release []Deployment
	if IsNone(policy) {
		act.PolicyDisabled = true
		act.Lost = nil
	} else {
		var cands []*Deployment
		n := 0
		switch {
		case in.Partial == nil:
			cands = candidates(deps, act.Lost)
			n = len(cands)
		case len(act.Lost) > 0 || in.Partial.Unassigned:
			n = partialTotal(in)
			for i := range in.Partial.Candidates {
				cands = append(cands, &in.Partial.Candidates[i])
			}
		}
		lo, hi, eligible := claimRange(in, policy, deps, t.active, t.counts, n)
		act.Eligible = eligible
		if in.Partial != nil {
			// The window read holds ranks Offset.. of the whole list.
			off := in.Partial.Offset
			lo, hi = min(max(lo-off, 0), len(cands)), min(hi-off, len(cands))
		}
		for _, d := range cands[lo:max(lo, hi)] {
			act.Claim = append(act.Claim, *d)
		}
		if len(act.Claim) == 0 {
			act.Lost = nil
		}
		if in.Rebalance.Enabled {
			if n == 0 && len(t.missing) == 0 {
				release, act.State.Imbalanced = rebalance(in, deps, t.counts)
			} else if overloaded(in, t.counts) {
				act.RebalanceHeld = heldReason(n, cands, t.missing)
			}
		}
	}
	act.Release = release

	// Reconcile.
	released := map[string]bool{}
	for _, d := range release {
		released[d.ID] = true
	}
	desired := map[string]Deployment{}
	for _, d := range deps {
		if d.Type == TypeDaemon || (d.Address == in.Self && !released[d.ID]) {
			desired[d.ID] = d
		}
	}
	running := make(map[string]bool, len(in.Running))
	for _, id := range in.Running {
		running[id] = true
	}
	act.State.Desired = make(map[string]bool, len(desired))
	act.State.Specs = make(map[string]uint64, len(desired))
	for id, d := range desired {
		act.State.Desired[id] = true
		spec := fingerprint(&d)
		act.State.Specs[id] = spec
		if running[id] {
			if prev, ok := in.State.Specs[id]; ok && prev != spec {
				act.Restart = append(act.Restart, id)
				act.Stop = append(act.Stop, id)
				act.Start = append(act.Start, d)
			}
			continue
		}
		act.Start = append(act.Start, d)
		if d.Type == TypeDaemon && in.State.Desired[id] {
			act.Missing = append(act.Missing, id)
		}
	}
	for id := range running {
		if _, ok := desired[id]; !ok {
			act.Stop = append(act.Stop, id)
		}
	}
	slices.SortFunc(act.Start, func(a, b Deployment) int { return cmp.Compare(a.ID, b.ID) })
	slices.Sort(act.Stop)
	slices.Sort(act.Missing)
	slices.Sort(act.Restart)
	for _, id := range act.Missing {
		act.Problems = append(act.Problems, &Error{Code: CodeDaemonMissing, ID: id, Err: ErrDaemonMissing})
	}
	return act
}

// fingerprint hashes what a deployment runs: not its address, state or
// timestamps.
func fingerprint(d *Deployment) uint64 {
	h := fnv.New64a()
	field := func(s string) {
		h.Write([]byte(s))
		h.Write([]byte{0})
	}
	field(string(d.Type))
	field(d.PackageName)
	field(d.PackageVersion)
	field(d.Command)
	field(strconv.Itoa(len(d.Args)))
	for _, a := range d.Args {
		field(a)
	}
	keys := make([]string, 0, len(d.Env))
	for k := range d.Env {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	field(strconv.Itoa(len(keys)))
	for _, k := range keys {
		field(k)
		field(d.Env[k])
	}
	return h.Sum64()
}

// table is what a cycle derives from the membership and the deployments
// before it decides.
type table struct {
	active       []string // sorted, Self included
	missing      []string // bound to but not active, sorted
	lost         []string // missing for at least LostAfter
	missingSince map[string]time.Time
	counts       map[string]int // every active address
}

// assess derives the active set, the missing and lost addresses and the
// counts from in (deps are in.Deployments sanitized).
func assess(in Inputs, deps []Deployment, now time.Time) table {
	var t table
	seen := map[string]bool{}
	for _, a := range append(slices.Clone(in.Active), in.Self) {
		if a != "" && !seen[a] {
			seen[a] = true
			t.active = append(t.active, a)
		}
	}
	slices.Sort(t.active)
	if in.Partial == nil {
		t.missing = LostAddresses(deps, t.active)
		t.counts = DeploymentCounts(deps, t.active)
	} else {
		for a, n := range in.Partial.Bound {
			if a != "" && n > 0 && !seen[a] {
				t.missing = append(t.missing, a)
			}
		}
		slices.Sort(t.missing)
		t.counts = make(map[string]int, len(t.active))
		for _, a := range t.active {
			t.counts[a] = max(in.Partial.Bound[a], 0)
		}
	}
	t.missingSince = make(map[string]time.Time, len(t.missing))
	for _, a := range t.missing {
		since, ok := in.State.MissingSince[a]
		if !ok {
			since = now
		}
		t.missingSince[a] = since
		if now.Sub(since) >= in.LostAfter {
			t.lost = append(t.lost, a)
		}
	}
	return t
}

// partialTotal is the number of candidates a Partial stands for: the
// counted total, or, with one claim per cycle where only the rank matters,
// "more than any rank".
func partialTotal(in Inputs) int {
	if in.MaxClaimsPerCycle > 1 {
		return in.Partial.Total
	}
	return math.MaxInt
}

// ClaimWindow returns, for a cycle whose in.Partial holds a [Summary] but
// no candidates yet, the candidates it must read before [Plan] decides: the
// ranks this node would claim, or first a count of the candidates when
// MaxClaimsPerCycle is above 1 and in.Partial.Counted is false. It is pure
// and decides exactly as Plan does, so that reading the window and then
// calling Plan claims what Plan would claim from the whole candidate list.
// Without a Partial, under the none policy, or when nothing can be claimed
// it returns the zero Window.
func ClaimWindow(in Inputs, now time.Time) Window {
	policy := in.Policy
	if policy == nil {
		policy = DeploymentCountPolicy()
	}
	if in.Partial == nil || IsNone(policy) {
		return Window{}
	}
	deps, _ := Sanitize(in.Deployments)
	t := assess(in, deps, now)
	if len(t.lost) == 0 && !in.Partial.Unassigned {
		return Window{}
	}
	if in.MaxClaimsPerCycle > 1 && !in.Partial.Counted {
		return Window{Lost: t.lost, CountUpTo: countCap(t.counts, t.active, in.MaxClaimsPerCycle)}
	}
	lo, hi, _ := claimRange(in, policy, deps, t.active, t.counts, partialTotal(in))
	if hi <= lo {
		return Window{}
	}
	return Window{Lost: t.lost, Offset: lo, Limit: hi - lo}
}

// AdmitWindow returns the window of the first n candidates (waiting
// deployments, in claim order) whatever this node claims: a node whose
// runner refuses some deployments reads them to report its refusals. It is
// empty without a Partial, under none, or when nothing waits.
func AdmitWindow(in Inputs, now time.Time, n int) Window {
	policy := in.Policy
	if policy == nil {
		policy = DeploymentCountPolicy()
	}
	if in.Partial == nil || IsNone(policy) || n <= 0 {
		return Window{}
	}
	deps, _ := Sanitize(in.Deployments)
	t := assess(in, deps, now)
	if len(t.lost) == 0 && !in.Partial.Unassigned {
		return Window{}
	}
	return Window{Lost: t.lost, Limit: n}
}

// countCap is a number of candidates past which more candidates change no
// node's claims: every active node's fair share is then at least max, the
// most it claims.
func countCap(counts map[string]int, active []string, most int) int {
	top := 0
	for _, a := range active {
		top = max(top, counts[a])
	}
	n := most * len(active)
	for _, a := range active {
		n += top - counts[a]
	}
	return max(n, 1)
}

// claimRange returns the ranks [lo, hi) of the candidates this node claims
// out of n, and whether it is eligible.
func claimRange(in Inputs, policy Policy, deps []Deployment, active []string, counts map[string]int, n int) (lo, hi int, ok bool) {
	// The nodes that take part in the eligibility decision.
	nodes := active
	if in.ProbeFailure == ProbeFailureNotEligible && UsesResourceUsage(policy) {
		nodes = nil
		for _, a := range active {
			if _, ok := in.Usage[a]; ok {
				nodes = append(nodes, a)
			}
		}
	}
	mc := MetricContext{Deployments: deps, DeploymentCounts: counts, ResourceUsage: in.Usage}
	eligible := slices.Clone(policy.PickEligible(nodes, Snapshots(policy, nodes, mc)))
	slices.Sort(eligible)
	isEligible := slices.Contains(eligible, in.Self)

	if in.MaxClaimsPerCycle <= 1 {
		if !isEligible {
			return 0, 0, false
		}
		rank := slices.Index(eligible, in.Self)
		if rank >= n {
			return 0, 0, true
		}
		return rank, rank + 1, true
	}

	shares := FairShares(counts, active, n)
	var acting []string
	quota := map[string]int{}
	if policy.Name() == PolicyDeploymentCount {
		for _, a := range active {
			if shares[a] > 0 && slices.Contains(nodes, a) {
				acting = append(acting, a)
				quota[a] = min(shares[a], in.MaxClaimsPerCycle)
			}
		}
	} else {
		for _, a := range eligible {
			acting = append(acting, a)
			quota[a] = min(max(shares[a], 1), in.MaxClaimsPerCycle)
		}
	}
	offset := 0
	for _, a := range acting {
		if a == in.Self {
			lo := min(offset, n)
			hi := min(offset+quota[a], n)
			return lo, hi, true
		}
		offset += quota[a]
	}
	return 0, 0, false
}

// overloaded reports whether this node holds at least Rebalance.Threshold
// more deployments than the least loaded active node.
func overloaded(in Inputs, counts map[string]int) bool {
	threshold := max(in.Rebalance.Threshold, 2)
	mine := counts[in.Self]
	least := mine
	for _, c := range counts {
		least = min(least, c)
	}
	return mine-least >= threshold
}

// heldReason says why an overloaded node does not rebalance: n
// deployments wait to be claimed (the first of them in cands; n is
// math.MaxInt when a Partial did not count them), or node-units bound to
// deployments are missing.
func heldReason(n int, cands []*Deployment, missing []string) string {
	if n > 0 {
		var ids []string
		for _, d := range cands[:min(len(cands), 3)] {
			ids = append(ids, d.ID)
		}
		var msg string
		switch {
		case n == math.MaxInt:
			msg = "deployments wait to be claimed"
		case n == 1:
			msg = "1 deployment waits to be claimed"
		default:
			msg = fmt.Sprintf("%d deployments wait to be claimed", n)
		}
		if len(ids) == 0 {
			return msg
		}
		if n > len(ids) {
			ids = append(ids, "...")
		}
		return msg + " (" + strings.Join(ids, ", ") + ")"
	}
	return "deployments are bound to node-units that are not active: " + strings.Join(missing, ", ")
}

func rebalance(in Inputs, deps []Deployment, counts map[string]int) ([]Deployment, int) {
	cycles := in.Rebalance.Cycles
	if cycles < 1 {
		cycles = 3
	}
	if !overloaded(in, counts) {
		return nil, 0
	}
	imbalanced := in.State.Imbalanced + 1
	if imbalanced < cycles {
		return nil, imbalanced
	}
	var own []Deployment
	for _, d := range deps {
		if d.Type == TypeDeployment && d.Address == in.Self {
			own = append(own, d)
		}
	}
	slices.SortFunc(own, CompareCandidates)
	return own[len(own)-1:], 0
}
