package scheduler

import (
	"context"

	"github.com/ksana-dev/ksana/affinity"
)

// TurnStore keeps turn affinity (see package affinity): in Redis the hash
// {prefix}:scheduler:turn:<turn_id> with field affinity_node_id and the
// hash {prefix}:scheduler:session:<session_id> with field current_turn_id.
// Keys carry no TTL unless the store is configured with one.
// Implementations: [MemTurns]; store/redisstore.Turns. Each passes
// store/storetest.TestTurnStore.
type TurnStore interface {
	// SetTurnAffinity is the write rule ([affinity.Record]): it sets the
	// turn's affinity node to nodeID unless the turn has one already (never
	// overwriting it), and when it wrote, sets the session's current turn
	// to turnID. It returns the turn's affinity node after the call and
	// whether this call wrote it.
	SetTurnAffinity(ctx context.Context, sessionID, turnID, nodeID string) (affinityNodeID string, wrote bool, err error)
	// TurnAffinity returns the turn's affinity node, "" when it has none.
	TurnAffinity(ctx context.Context, turnID string) (string, error)
	// CurrentTurn returns the session's current turn, "" when none.
	CurrentTurn(ctx context.Context, sessionID string) (string, error)
	// ClearTurnAffinity removes the turn's affinity (HDEL affinity_node_id)
	// when a finalize reason ends the turn ([affinity.EndsTurn]).
	ClearTurnAffinity(ctx context.Context, turnID string) error
	// SelectNode (select_node in the dispatch plane's vocabulary) applies
	// [affinity.Select] to the stored
	// affinity and the nodes' presence: the turn's affinity node when it is
	// online, in pool and eligible, else a node chosen by s (nil:
	// [affinity.Random]) among pool's online, eligible nodes. eligible
	// (nil: every node) is the caller's own filter: a node below its
	// capacity, not marked unavailable for the job's model by the storm
	// guard, not tried before. It writes nothing. No online, eligible node
	// is [affinity.ErrNoOnlineNode].
	SelectNode(ctx context.Context, turnID string, pool []string, s affinity.Strategy, eligible func(nodeID string) bool) (affinity.Decision, error)
}

// CheckTurnWrite validates the arguments of [TurnStore.SetTurnAffinity].
func CheckTurnWrite(sessionID, turnID, nodeID string) error {
	if err := checkID("session_id", sessionID); err != nil {
		return err
	}
	if err := checkID("turn_id", turnID); err != nil {
		return err
	}
	return checkID("node_id", nodeID)
}

// CheckTurnID validates a turn id argument.
func CheckTurnID(turnID string) error { return checkID("turn_id", turnID) }

// CheckSessionID validates a session id argument.
func CheckSessionID(sessionID string) error { return checkID("session_id", sessionID) }

// CheckPool refuses a pool with an empty node id.
func CheckPool(pool []string) error {
	for _, n := range pool {
		if n == "" {
			return argErr("pool", "contains an empty node id")
		}
	}
	return nil
}
