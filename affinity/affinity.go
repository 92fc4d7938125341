package affinity

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
)

// Errors of the selection and binding rules.
var (
	// ErrNoOnlineNode: no node of the job's candidate pool is online.
	ErrNoOnlineNode = errors.New("affinity: no online node in the candidate pool")
	// ErrUnknownReason: a finalize reason other than manual, max_duration, timeout.
	ErrUnknownReason = errors.New("affinity: unknown finalize reason")
)

// Strategy picks a node among the online nodes of a pool when the turn's
// affinity does not apply. online is never empty and keeps the pool's order.
type Strategy interface {
	Choose(turnID string, online []string) string
}

// Random picks uniformly at random: the default strategy. The zero
// value uses math/rand/v2.
type Random struct {
	// IntN returns a number in [0, n). Default: math/rand/v2.IntN.
	// Tests inject a deterministic one.
	IntN func(n int) int
}

// Choose implements [Strategy].
func (r Random) Choose(_ string, online []string) string {
	intn := r.IntN
	if intn == nil {
		intn = rand.IntN
	}
	return online[intn(len(online))]
}

// Rendezvous picks by rendezvous (highest random weight) hashing of the turn
// id over the online nodes: the same turn and nodes always give the same
// node, whatever their order, and when a node goes or comes only the turns
// that it wins or loses move. It is the opt-in alternative to [Random].
type Rendezvous struct{}

// Choose implements [Strategy].
func (Rendezvous) Choose(turnID string, online []string) string {
	best, bestW := "", uint64(0)
	for i, n := range online {
		w := Weight(turnID, n)
		if i == 0 || w > bestW || (w == bestW && n < best) {
			best, bestW = n, w
		}
	}
	return best
}

// Weight is the rendezvous weight of node for turnID: FNV-1a 64 of both,
// with a length prefix so ("ab","c") and ("a","bc") differ, finished by the
// splitmix64 mixer for an even spread.
func Weight(turnID, nodeID string) uint64 {
	h := fnv.New64a()
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(turnID)))
	h.Write(n[:])
	h.Write([]byte(turnID))
	h.Write([]byte(nodeID))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// Decision is the node chosen for a job.
type Decision struct {
	NodeID string
	// Affinity is true when the node is the turn's affinity node; false
	// when the strategy chose it.
	Affinity bool
}

// Select (select_node) picks the turn's affinity node
// (affinityNodeID, "" when the turn has none) when it is online and in the
// job's candidate pool; otherwise a node chosen by s (nil: [Random]) among
// the pool's online nodes. It writes nothing back: the caller records the
// affinity with [Record] only after a turn's first job. It is
// [ErrNoOnlineNode] when no node of the pool is online.
func Select(turnID, affinityNodeID string, pool []string, online func(nodeID string) bool, s Strategy) (Decision, error) {
	if s == nil {
		s = Random{}
	}
	var up []string
	for _, n := range pool {
		if online(n) {
			if n == affinityNodeID {
				return Decision{NodeID: n, Affinity: true}, nil
			}
			up = append(up, n)
		}
	}
	if len(up) == 0 {
		return Decision{}, fmt.Errorf("affinity: turn %q over %d pool nodes: %w", turnID, len(pool), ErrNoOnlineNode)
	}
	return Decision{NodeID: s.Choose(turnID, up)}, nil
}

// Record is the write rule: a turn's affinity is written once, right after
// its first job is assigned (and before any later job of the turn is
// selected); later jobs never overwrite it. Given the turn's current
// affinity ("" for none) and the node a job was just assigned to, it
// returns the affinity to keep and whether to write it.
func Record(current, assignedNodeID string) (affinityNodeID string, write bool) {
	if current != "" || assignedNodeID == "" {
		return current, false
	}
	return assignedNodeID, true
}

// Reason is why a turn's audio was finalized into a job.
type Reason string

// The finalize reasons: why a turn's job ended.
const (
	Manual      Reason = "manual"       // isManualFinalize: the speaker ended the turn
	Timeout     Reason = "timeout"      // timeoutFinalize: silence ended the turn
	MaxDuration Reason = "max_duration" // the segment reached its maximum length: the turn goes on
)

// ParseReason returns the reason spelled s, or an error wrapping
// [ErrUnknownReason].
func ParseReason(s string) (Reason, error) {
	switch r := Reason(s); r {
	case Manual, Timeout, MaxDuration:
		return r, nil
	}
	return "", fmt.Errorf("affinity: finalize reason %q: %w", s, ErrUnknownReason)
}

// ShouldBindJobToNode is the binding rule: whether the turn's later jobs
// stay bound to the node of this one. A [MaxDuration] cut binds (the turn
// goes on); [Manual] and [Timeout] do not (they end the turn).
func ShouldBindJobToNode(r Reason) (bool, error) {
	switch r {
	case MaxDuration:
		return true, nil
	case Manual, Timeout:
		return false, nil
	}
	return false, fmt.Errorf("affinity: finalize reason %q: %w", r, ErrUnknownReason)
}

// EndsTurn reports whether r ends the turn: then the caller clears the
// turn's affinity (HDEL affinity_node_id) and the next utterance starts a
// new turn without one. It is the negation of [ShouldBindJobToNode].
func EndsTurn(r Reason) (bool, error) {
	bind, err := ShouldBindJobToNode(r)
	return !bind && err == nil, err
}
