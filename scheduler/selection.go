package scheduler

import (
	"math/rand/v2"
	"slices"
	"sort"

	"github.com/ksana-dev/ksana/affinity"
)

// The selection of a node for a job reads an index of the fleet, not the
// fleet: for each (pool, model) a job asks for, the ids of the nodes that
// are online, serve the pool and have the model, sorted. A list is built
// from this instance's fleet view the first time a job asks for its key
// after the view changed (a node attached or went offline here, or a
// refresh of the shared view changed a node's presence, pools or
// models), and is then shared, unchanged, by every selection until the
// next change. A selection holds the Dispatcher's lock only to fetch the
// list and to read the load of the two nodes of [SelectTwoChoices]: its
// cost does not grow with the fleet, nor with the pool, while no node is
// to be left out; a retry that leaves nodes out (refused in this round,
// or tried in earlier attempts) filters the pool's list once. The woken
// rounds of the queues of waiting jobs leave out the nodes believed full
// (believedFull): one pass over the pool's list under the lock, which
// spares a reservation tried on each of them.

// poolModel is the key of a list of candidates.
type poolModel struct{ pool, model string }

// fleetIndex is the candidates of each key asked for since the fleet view
// last changed. Guarded by Dispatcher.mu; its lists are never modified.
type fleetIndex map[poolModel][]string

// candidates returns the sorted ids of the nodes eligible for spec by
// presence, pool and model, from the index. d.mu is held.
func (d *Dispatcher) candidates(spec JobSpec) []string {
	k := poolModel{spec.Pool, spec.Model}
	if c, ok := d.index[k]; ok {
		return c
	}
	c := []string{}
	for id, n := range d.fleet {
		if eligible(n, spec, nil) {
			c = append(c, id)
		}
	}
	sort.Strings(c)
	if d.index == nil {
		d.index = fleetIndex{}
	}
	d.index[k] = c
	return c
}

// fleetChanged drops the index after a change of the fleet view that may
// change who is eligible. d.mu is held.
func (d *Dispatcher) fleetChanged() { d.index = nil }

// sameEligibility reports whether a and b are eligible for the same jobs.
func sameEligibility(a, b NodeSnapshot) bool {
	return a.Online == b.Online && slices.Equal(a.Pools, b.Pools) && slices.Equal(a.Models, b.Models)
}

// selectFrom is the Dispatcher's choice of a node for a job, a pure
// function of the sorted candidates (the nodes online, in the job's pool
// and with its model), the job, the nodes to leave out, the turn's node,
// the load of a node (for [SelectTwoChoices]) and a random source:
//
//   - the nodes in skip (refused in this round: full, or the model marked
//     unavailable there) are left out;
//   - the nodes of earlier attempts (tried) are passed over while another
//     node is left, and taken again when none is;
//   - the turn's node (turnNode) is taken while it is left
//     ([affinity.Select]);
//   - otherwise one node left is drawn from rnd, uniformly
//     ([SelectRandom]) or as the less loaded of two drawn
//     ([SelectTwoChoices]: Running / MaxConcurrency).
//
// ok is false when no node is left.
func selectFrom(cands []string, spec JobSpec, skip, tried map[string]bool, turnNode, strategy string, load func(nodeID string) float64, rnd *rand.Rand) (d affinity.Decision, ok bool) {
	left := cands
	if len(skip) > 0 || len(tried) > 0 {
		var all, fresh []string
		for _, id := range cands {
			if skip[id] {
				continue
			}
			all = append(all, id)
			if !tried[id] {
				fresh = append(fresh, id)
			}
		}
		left = all
		if len(fresh) > 0 {
			left = fresh
		}
	}
	if len(left) == 0 {
		return affinity.Decision{}, false
	}
	var s affinity.Strategy = affinity.Random{IntN: rnd.IntN}
	if strategy == SelectTwoChoices {
		s = twoChoices{rnd: rnd, load: load}
	}
	// The rule of affinity.Select, without its scan: left is sorted, and
	// every node in it is up.
	if turnNode != "" && inSorted(left, turnNode) {
		return affinity.Decision{NodeID: turnNode, Affinity: true}, true
	}
	return affinity.Decision{NodeID: s.Choose(spec.TurnID, left)}, true
}

// selectNode is selectFrom over a fleet given whole: the rules of
// selection on their own, as its tests check them.
func selectNode(fleet []NodeSnapshot, spec JobSpec, skip, tried map[string]bool, turnNode, strategy string, rnd *rand.Rand) (affinity.Decision, bool) {
	byID := make(map[string]NodeSnapshot, len(fleet))
	var cands []string
	for _, n := range fleet {
		byID[n.NodeID] = n
		if eligible(n, spec, nil) {
			cands = append(cands, n.NodeID)
		}
	}
	sort.Strings(cands) // the draw depends on the fleet, not on its order
	return selectFrom(cands, spec, skip, tried, turnNode, strategy, func(id string) float64 { return load(byID[id]) }, rnd)
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
	rnd  *rand.Rand
	load func(nodeID string) float64
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
	a, b := online[i], online[j]
	if c.load(b) < c.load(a) {
		return b
	}
	return a
}

func load(n NodeSnapshot) float64 { return float64(n.Running) / float64(max(n.MaxConcurrency, 1)) }

// nodeLoad is the share of node id's capacity in use: the live count of
// a node attached here, the shared view's of another.
func (d *Dispatcher) nodeLoad(id string) float64 {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.fleet[id]
	if n := d.nodes[id]; n != nil {
		s.Running = len(n.jobs)
	}
	return load(s)
}

// believedFull adds to skip the candidates of spec that this instance
// believes full: those attached here with as many jobs as their capacity,
// and the others whose last published snapshot said so.
func (d *Dispatcher) believedFull(spec JobSpec, skip map[string]bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, id := range d.candidates(spec) {
		s := d.fleet[id]
		if n := d.nodes[id]; n != nil {
			s.Running = len(n.jobs)
		}
		limit := s.MaxConcurrency
		if limit <= 0 {
			limit = d.dc.DefaultCapacity // as capacity reads it
		}
		if s.Running >= limit {
			skip[id] = true
		}
	}
}

// choose runs selectFrom over the index, with the Dispatcher's random
// source, and returns the candidates it chose from.
func (d *Dispatcher) choose(spec JobSpec, skip, tried map[string]bool, turnNode string) (affinity.Decision, []string, bool) {
	d.mu.Lock()
	cands := d.candidates(spec)
	d.mu.Unlock()
	d.rndMu.Lock()
	defer d.rndMu.Unlock()
	dec, ok := selectFrom(cands, spec, skip, tried, turnNode, d.dc.Selection, d.nodeLoad, d.rnd)
	return dec, cands, ok
}

// capacity is node id's capacity as the fleet view has it, or def.
func (d *Dispatcher) capacity(id string, def int) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	if n, ok := d.fleet[id]; ok && n.MaxConcurrency > 0 {
		return n.MaxConcurrency
	}
	return def
}

// inSorted reports whether id is in the sorted list ids.
func inSorted(ids []string, id string) bool {
	_, found := slices.BinarySearch(ids, id)
	return found
}
