package scheduler

import (
	"context"
	"sync"

	"github.com/ksana-dev/ksana/affinity"
)

// MemTurns is the in-memory [TurnStore]: the reference implementation.
// It keeps no TTL. It is safe for concurrent use.
type MemTurns struct {
	mu       sync.Mutex
	turns    map[string]string // turn -> affinity_node_id
	sessions map[string]string // session -> current_turn_id
}

var _ TurnStore = (*MemTurns)(nil)

// NewMemTurns returns an empty store.
func NewMemTurns() *MemTurns {
	return &MemTurns{turns: map[string]string{}, sessions: map[string]string{}}
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

// CurrentTurn returns the session's current turn, "" when none.
func (s *MemTurns) CurrentTurn(sessionID string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sessions[sessionID]
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
