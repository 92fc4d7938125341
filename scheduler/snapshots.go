package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// NodeSnapshot is what one instance publishes about a node it holds, so
// that every instance shares one view of the fleet. It is stored as JSON
// (in Redis a field of its instance's hash
// {prefix}:v1:nodes:by_instance:<instance_id>).
type NodeSnapshot struct {
	// NodeID identifies the node; required.
	NodeID string `json:"node_id"`
	// InstanceID is the instance holding the node's connection.
	InstanceID string `json:"instance_id"`
	// Status is the node's own status word, such as "ready".
	Status string `json:"status,omitempty"`
	// Pools are the pools the node serves.
	Pools []string `json:"pools,omitempty"`
	// Models are the models installed on the node.
	Models []string `json:"models,omitempty"`
	// MaxConcurrency and Running describe the node's capacity.
	MaxConcurrency int `json:"max_concurrency,omitempty"`
	Running        int `json:"running,omitempty"`
	// Attrs carries anything else the dispatch plane needs.
	Attrs map[string]string `json:"attrs,omitempty"`
	// LastSeenMS is the Unix time in milliseconds of the last upsert; the
	// store sets it.
	LastSeenMS int64 `json:"last_seen_ms"`
	// Online reports, in [NodeSnapshots.Fleet] results, whether the node's
	// presence key is alive. It is not stored in the JSON.
	Online bool `json:"-"`
}

// NodeSnapshots stores the fleet view: {prefix}:v1:nodes:all (SET of ids),
// {prefix}:v1:nodes:last_seen (ZSET of ids scored by last-seen ms), and
// each node's presence (online for presenceTTL) and snapshot (kept for
// snapshotTTL). The Redis store keeps presence and snapshots per instance,
// not per node, so that its cost grows with the instances.
type NodeSnapshots interface {
	// Upsert records snaps as seen at now: adds their ids to the set, sets
	// their last-seen score, their presence key for presenceTTL and their
	// snapshot (LastSeenMS = now) for snapshotTTL.
	Upsert(ctx context.Context, now time.Time, presenceTTL, snapshotTTL time.Duration, snaps ...NodeSnapshot) error
	// Fleet returns every node of the set whose snapshot is still stored,
	// sorted by id, with Online set from its presence key. Snapshots that do
	// not decode are skipped.
	Fleet(ctx context.Context) ([]NodeSnapshot, error)
	// Offline deletes nodeID's presence if instanceID published it
	// (compare-and-delete), so that a node whose connection closed is not
	// selected, while a node that reconnected to another instance stays
	// online.
	Offline(ctx context.Context, nodeID, instanceID string) error
	// RemoveStale removes the nodes last seen before cutoff from the set,
	// the last-seen ZSET and their keys, and returns their ids, sorted.
	RemoveStale(ctx context.Context, cutoff time.Time) ([]string, error)
}

// SnapshotSync shares this instance's nodes with the fleet: every
// Fleet.RefreshInterval it upserts the nodes that local returns, reads the
// whole fleet and hands it to apply, and removes the nodes not seen for
// Fleet.RemoveStaleAfter.
type SnapshotSync struct {
	s        NodeSnapshots
	local    func() []NodeSnapshot
	apply    func([]NodeSnapshot)
	interval time.Duration
	presence time.Duration
	stale    time.Duration
	log      *slog.Logger
}

// NewSnapshotSync returns the sync loop. local lists this instance's nodes
// (it may return nil); apply, when not nil, receives the fleet after each
// refresh (the node registry's upsert). Both are called from Run only.
func NewSnapshotSync(s NodeSnapshots, cfg Config, local func() []NodeSnapshot, apply func([]NodeSnapshot)) (*SnapshotSync, error) {
	if s == nil {
		return nil, errors.New("scheduler: NewSnapshotSync: nil NodeSnapshots")
	}
	if local == nil {
		return nil, errors.New("scheduler: NewSnapshotSync: nil local")
	}
	ns := cfg.WithDefaults().Fleet
	return &SnapshotSync{
		s: s, local: local, apply: apply,
		interval: ns.RefreshInterval, presence: ns.PresenceTTL, stale: ns.RemoveStaleAfter,
		log: logger(cfg.Logger),
	}, nil
}

// Refresh runs one round: upsert, stale removal, fleet read and apply.
func (s *SnapshotSync) Refresh(ctx context.Context) error {
	now := time.Now()
	if snaps := s.local(); len(snaps) > 0 {
		if err := s.s.Upsert(ctx, now, s.presence, s.stale, snaps...); err != nil {
			return fmt.Errorf("scheduler: upsert node snapshots: %w", err)
		}
	}
	if _, err := s.s.RemoveStale(ctx, now.Add(-s.stale)); err != nil {
		return fmt.Errorf("scheduler: remove stale nodes: %w", err)
	}
	fleet, err := s.s.Fleet(ctx)
	if err != nil {
		return fmt.Errorf("scheduler: read node fleet: %w", err)
	}
	if s.apply != nil {
		s.apply(fleet)
	}
	return nil
}

// Run refreshes at once and then every interval until ctx ends; it returns
// nil. Failed rounds are logged and retried at the next tick.
func (s *SnapshotSync) Run(ctx context.Context) error {
	t := time.NewTicker(s.interval)
	defer t.Stop()
	for {
		if err := s.Refresh(ctx); err != nil && ctx.Err() == nil {
			s.log.Warn("scheduler: node snapshot refresh", "err", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
