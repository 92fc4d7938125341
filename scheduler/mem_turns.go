package scheduler

import (
	"context"
	"sync"

	"github.com/ksana-dev/ksana/affinity"
)

// MemTurns is the in-memory [TurnStore]: the reference implementation.
// Node presence comes from the function given to [NewMemTurns]. It keeps
// no TTL. It is safe for concurrent use.
type MemTurns struct {
	online func(nodeID string) bool

	mu       sync.Mutex
	turns    map[string]string // turn -> affinity_node_id
	sessions map[string]string // session -> current_turn_id
}

var _ TurnStore = (*MemTurns)(nil)

// NewMemTurns returns an empty store that asks online whether a node is
// online. online must be safe for concurrent use.
func NewMemTurns(online func(nodeID string) bool) *MemTurns {
	return &MemTurns{online: online, turns: map[string]string{}, sessions: map[string]string{}}
}

// SetTurnAffinity implements [TurnStore].
func (s *MemTurns) SetTurnAffinity(ctx context.Context, sessionID, turnID, nodeID string) (string, bool, error) {
	if err := CheckTurnWrite(sessionID, turnID, nodeID); err != nil {
		return "", false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	aff, write := affinity.Record(s.turns[turnID], nodeID)
	if write {
		s.turns[turnID] = aff
		s.sessions[sessionID] = turnID
	}
	return aff, write, nil
}

// TurnAffinity implements [TurnStore].
func (s *MemTurns) TurnAffinity(ctx context.Context, turnID string) (string, error) {
	if err := CheckTurnID(turnID); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turns[turnID], nil
}

// CurrentTurn implements [TurnStore].
func (s *MemTurns) CurrentTurn(ctx context.Context, sessionID string) (string, error) {
	if err := CheckSessionID(sessionID); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[sessionID], nil
}

// ClearTurnAffinity implements [TurnStore].
func (s *MemTurns) ClearTurnAffinity(ctx context.Context, turnID string) error {
	if err := CheckTurnID(turnID); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.turns, turnID)
	return nil
}

// SelectNode implements [TurnStore].
func (s *MemTurns) SelectNode(ctx context.Context, turnID string, pool []string, st affinity.Strategy, eligible func(nodeID string) bool) (affinity.Decision, error) {
	if err := CheckTurnID(turnID); err != nil {
		return affinity.Decision{}, err
	}
	if err := CheckPool(pool); err != nil {
		return affinity.Decision{}, err
	}
	s.mu.Lock()
	aff := s.turns[turnID]
	s.mu.Unlock()
	return affinity.Select(turnID, aff, pool, func(n string) bool { return s.online(n) && (eligible == nil || eligible(n)) }, st)
}
