package scheduler

import "context"

// TurnStore keeps turn affinity (see package affinity; the choice of a
// node from it is [affinity.Select], applied by the Dispatcher to its own
// fleet view): in Redis the hash
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
	// ClearTurnAffinity removes the turn's affinity (HDEL affinity_node_id)
	// when a finalize reason ends the turn ([affinity.EndsTurn]).
	ClearTurnAffinity(ctx context.Context, turnID string) error
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
