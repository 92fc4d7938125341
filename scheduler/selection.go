package scheduler

import (
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/ksana-dev/ksana/affinity"
)

// selectNode is the Dispatcher's choice of a node for a job, a pure
// function of a fleet snapshot, the job, the nodes to leave out, the
// turn's node and a random source:
//
//   - a node is eligible when it is online, serves the job's pool and has
//     its model, and is not in skip (refused in this round: full, or the
//     model marked unavailable there);
//   - the nodes of earlier attempts (tried) are passed over while another
//     node is eligible, and taken again when none is;
//   - the turn's node (turnNode) is taken while it is eligible
//     ([affinity.Select]);
//   - otherwise one eligible node is drawn from rnd, uniformly
//     ([SelectRandom]) or as the less loaded of two drawn
//     ([SelectTwoChoices]: Running / MaxConcurrency of the snapshot).
//
// ok is false when no node is eligible.
func selectNode(fleet []NodeSnapshot, spec JobSpec, skip, tried map[string]bool, turnNode, strategy string, rnd *rand.Rand) (d affinity.Decision, ok bool) {
	var byID map[string]NodeSnapshot // the loads two choices compare
	if strategy == SelectTwoChoices {
		byID = make(map[string]NodeSnapshot, len(fleet))
	}
	var cands, fresh []string
	for _, n := range fleet {
		if !eligible(n, spec, skip) {
			continue
		}
		if byID != nil {
			byID[n.NodeID] = n
		}
		cands = append(cands, n.NodeID)
		if !tried[n.NodeID] {
			fresh = append(fresh, n.NodeID)
		}
	}
	if len(fresh) > 0 {
		cands = fresh
	}
	if len(cands) == 0 {
		return affinity.Decision{}, false
	}
	sort.Strings(cands) // the draw depends on the fleet, not on its order
	var s affinity.Strategy = affinity.Random{IntN: rnd.IntN}
	if strategy == SelectTwoChoices {
		s = twoChoices{rnd: rnd, fleet: byID}
	}
	d, err := affinity.Select(spec.TurnID, turnNode, cands, func(string) bool { return true }, s)
	return d, err == nil
}

// eligible reports whether node n may take the job: online, in its pool,
// with its model, not in skip.
func eligible(n NodeSnapshot, spec JobSpec, skip map[string]bool) bool {
	return n.Online && !skip[n.NodeID] &&
		(spec.Pool == "" || slices.Contains(n.Pools, spec.Pool)) &&
		(spec.Model == "" || slices.Contains(n.Models, spec.Model))
}

// twoChoices draws two nodes and takes the one with the lower share of its
// capacity in use.
type twoChoices struct {
	rnd   *rand.Rand
	fleet map[string]NodeSnapshot
}

func (c twoChoices) Choose(_ string, online []string) string {
	if len(online) == 1 {
		return online[0]
	}
	i := c.rnd.IntN(len(online))
	j := c.rnd.IntN(len(online) - 1)
	if j >= i {
		j++
	}
	a, b := c.fleet[online[i]], c.fleet[online[j]]
	if load(b) < load(a) {
		return b.NodeID
	}
	return a.NodeID
}

func load(n NodeSnapshot) float64 { return float64(n.Running) / float64(max(n.MaxConcurrency, 1)) }

// fleetView returns the fleet as selection sees it: the shared view, with
// the live load of the nodes attached here.
func (d *Dispatcher) fleetView() []NodeSnapshot {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]NodeSnapshot, 0, len(d.fleet))
	for id, s := range d.fleet {
		if n := d.nodes[id]; n != nil {
			s.Running = len(n.jobs)
		}
		out = append(out, s)
	}
	return out
}

// choose runs selectNode with the Dispatcher's random source.
func (d *Dispatcher) choose(fleet []NodeSnapshot, spec JobSpec, skip, tried map[string]bool, turnNode string) (affinity.Decision, bool) {
	d.rndMu.Lock()
	defer d.rndMu.Unlock()
	return selectNode(fleet, spec, skip, tried, turnNode, d.dc.Selection, d.rnd)
}

func capacityOf(fleet []NodeSnapshot, nodeID string, def int) int {
	for _, n := range fleet {
		if n.NodeID == nodeID && n.MaxConcurrency > 0 {
			return n.MaxConcurrency
		}
	}
	return def
}
