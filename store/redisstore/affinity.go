package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// Field names of turn affinity in the turn and session hashes.
const (
	FieldAffinityNodeID = "affinity_node_id"
	FieldCurrentTurnID  = "current_turn_id"
)

// TurnsConfig configures [Turns].
type TurnsConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// TTL makes the turn and session hashes expire TTL after their
	// affinity is written, so that turns never ended by a finalize do not
	// stay for ever. Keep it far longer than any turn: a turn's affinity
	// must not time out while the turn goes on. Default (0):
	// a day.
	TTL time.Duration
	// OpHook observes every Redis operation ("turn_affinity_set",
	// "turn_affinity_get", "turn_affinity_clear"). Default (nil): none.
	OpHook OpHook
}

// Turns is the Redis [scheduler.TurnStore]: the hash
// {prefix}:scheduler:turn:<turn_id> with field affinity_node_id and the
// hash {prefix}:scheduler:session:<session_id> with field current_turn_id.
//
// The turn and session keys lie in different Redis Cluster slots, so no
// script spans them: the affinity is written with HSETNX (the write-once
// rule is the command's own) and the session's current turn with HSET in
// the same pipeline.
type Turns struct {
	c    rueidis.Client
	keys Keys
	ttl  time.Duration
	hook OpHook
}

var _ scheduler.TurnStore = (*Turns)(nil)

// NewTurns returns the turn store on c.
func NewTurns(c rueidis.Client, cfg TurnsConfig) (*Turns, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewTurns: nil client")
	}
	if cfg.TTL < 0 || (cfg.TTL > 0 && cfg.TTL < time.Millisecond) {
		return nil, fmt.Errorf("redisstore: TurnsConfig.TTL: %v is neither 0 nor at least 1ms", cfg.TTL)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 24 * time.Hour
	}
	return &Turns{c: c, keys: NewKeys(cfg.Prefix), ttl: cfg.TTL, hook: cfg.OpHook}, nil
}

func firstErr(rs []rueidis.RedisResult) error {
	for _, r := range rs {
		if err := r.Error(); err != nil && !isNil(err) {
			return err
		}
	}
	return nil
}

// SetTurnAffinity implements [scheduler.TurnStore]: HSETNX on the turn;
// when it wrote, HSET on the session (and PEXPIRE both when a TTL is set).
func (s *Turns) SetTurnAffinity(ctx context.Context, sessionID, turnID, nodeID string) (string, bool, error) {
	if err := scheduler.CheckTurnWrite(sessionID, turnID, nodeID); err != nil {
		return "", false, err
	}
	turnKey := s.keys.Turn(turnID)
	start := time.Now()
	wrote, err := s.c.Do(ctx, s.c.B().Hsetnx().Key(turnKey).Field(FieldAffinityNodeID).Value(nodeID).Build()).AsBool()
	if err == nil && !wrote {
		// Written before: never overwrite; report what is stored.
		var cur string
		cur, err = s.c.Do(ctx, s.c.B().Hget().Key(turnKey).Field(FieldAffinityNodeID).Build()).ToString()
		s.hook.observe("turn_affinity_set", start, err)
		if isNil(err) { // cleared in between
			return "", false, nil
		}
		if err != nil {
			return "", false, fmt.Errorf("redisstore: read affinity of turn %q: %w", turnID, err)
		}
		return cur, false, nil
	}
	if err == nil {
		sessKey := s.keys.Session(sessionID)
		cmds := rueidis.Commands{s.c.B().Hset().Key(sessKey).FieldValue().FieldValue(FieldCurrentTurnID, turnID).Build()}
		if s.ttl > 0 {
			ms := s.ttl.Milliseconds()
			cmds = append(cmds,
				s.c.B().Pexpire().Key(turnKey).Milliseconds(ms).Build(),
				s.c.B().Pexpire().Key(sessKey).Milliseconds(ms).Build())
		}
		err = firstErr(s.c.DoMulti(ctx, cmds...))
	}
	s.hook.observe("turn_affinity_set", start, err)
	if err != nil {
		return "", false, fmt.Errorf("redisstore: write affinity of turn %q: %w", turnID, err)
	}
	return nodeID, true, nil
}

func (s *Turns) hget(ctx context.Context, op, key, field string) (string, error) {
	start := time.Now()
	v, err := s.c.Do(ctx, s.c.B().Hget().Key(key).Field(field).Build()).ToString()
	s.hook.observe(op, start, err)
	if isNil(err) {
		return "", nil
	}
	return v, err
}

// TurnAffinity implements [scheduler.TurnStore].
func (s *Turns) TurnAffinity(ctx context.Context, turnID string) (string, error) {
	if err := scheduler.CheckTurnID(turnID); err != nil {
		return "", err
	}
	v, err := s.hget(ctx, "turn_affinity_get", s.keys.Turn(turnID), FieldAffinityNodeID)
	if err != nil {
		return "", fmt.Errorf("redisstore: read affinity of turn %q: %w", turnID, err)
	}
	return v, nil
}

// ClearTurnAffinity implements [scheduler.TurnStore] with HDEL.
func (s *Turns) ClearTurnAffinity(ctx context.Context, turnID string) error {
	if err := scheduler.CheckTurnID(turnID); err != nil {
		return err
	}
	start := time.Now()
	err := s.c.Do(ctx, s.c.B().Hdel().Key(s.keys.Turn(turnID)).Field(FieldAffinityNodeID).Build()).Error()
	s.hook.observe("turn_affinity_clear", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: clear affinity of turn %q: %w", turnID, err)
	}
	return nil
}
