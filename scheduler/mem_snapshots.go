package scheduler

import (
	"context"
	"maps"
	"sort"
	"sync"
	"time"
)

// MemSnapshots is the in-memory reference implementation of
// [NodeSnapshots], with the same three structures as the Redis layout: the
// set of ids, their last-seen times, and per node a presence and a snapshot
// with TTLs. Time comes from time.Now, so it runs under testing/synctest.
type MemSnapshots struct {
	mu       sync.Mutex
	all      map[string]struct{}
	lastSeen map[string]int64
	presence memTTL
	snaps    map[string]memSnap
}

type memSnap struct {
	s     NodeSnapshot
	until time.Time
}

var _ NodeSnapshots = (*MemSnapshots)(nil)

// NewMemSnapshots returns an empty fleet.
func NewMemSnapshots() *MemSnapshots {
	return &MemSnapshots{all: map[string]struct{}{}, lastSeen: map[string]int64{}, snaps: map[string]memSnap{}}
}

// Upsert implements [NodeSnapshots].
func (m *MemSnapshots) Upsert(ctx context.Context, now time.Time, presenceTTL, snapshotTTL time.Duration, snaps ...NodeSnapshot) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.presence.mu.Lock()
	defer m.presence.mu.Unlock()
	for _, s := range snaps {
		s.LastSeenMS = now.UnixMilli()
		s.Online = false
		s.Pools = append([]string(nil), s.Pools...)
		s.Models = append([]string(nil), s.Models...)
		if s.Attrs != nil {
			s.Attrs = maps.Clone(s.Attrs)
		}
		m.all[s.NodeID] = struct{}{}
		m.lastSeen[s.NodeID] = s.LastSeenMS
		m.presence.set(s.NodeID, s.InstanceID, presenceTTL)
		m.snaps[s.NodeID] = memSnap{s: s, until: time.Now().Add(snapshotTTL)}
	}
	return nil
}

// Fleet implements [NodeSnapshots].
func (m *MemSnapshots) Fleet(ctx context.Context) ([]NodeSnapshot, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.presence.mu.Lock()
	defer m.presence.mu.Unlock()
	out := []NodeSnapshot{}
	now := time.Now()
	for id := range m.all {
		sn, ok := m.snaps[id]
		if !ok || !now.Before(sn.until) {
			continue
		}
		s := sn.s
		_, s.Online = m.presence.get(id)
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].NodeID < out[j].NodeID })
	return out, nil
}

// Offline implements [NodeSnapshots].
func (m *MemSnapshots) Offline(ctx context.Context, nodeID, instanceID string) error {
	m.presence.mu.Lock()
	defer m.presence.mu.Unlock()
	if v, ok := m.presence.get(nodeID); ok && v == instanceID {
		delete(m.presence.m, nodeID)
	}
	return nil
}

// Online reports whether nodeID's presence is alive: the online function
// of a [MemTurns] over this fleet.
func (m *MemSnapshots) Online(nodeID string) bool {
	m.presence.mu.Lock()
	defer m.presence.mu.Unlock()
	_, ok := m.presence.get(nodeID)
	return ok
}

// RemoveStale implements [NodeSnapshots].
func (m *MemSnapshots) RemoveStale(ctx context.Context, cutoff time.Time) ([]string, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.presence.mu.Lock()
	defer m.presence.mu.Unlock()
	c := cutoff.UnixMilli()
	removed := []string{}
	for id, ms := range m.lastSeen {
		if ms < c {
			removed = append(removed, id)
			delete(m.lastSeen, id)
			delete(m.all, id)
			delete(m.snaps, id)
			delete(m.presence.m, id)
		}
	}
	sort.Strings(removed)
	return removed, nil
}

// Has reports where id is still stored: in the set of all nodes, in the
// last-seen index, as a live presence and as a live snapshot. Tests use it to
// check that stale nodes leave every structure.
func (m *MemSnapshots) Has(id string) (inAll, inLastSeen, hasPresence, hasSnapshot bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.presence.mu.Lock()
	defer m.presence.mu.Unlock()
	_, inAll = m.all[id]
	_, inLastSeen = m.lastSeen[id]
	_, hasPresence = m.presence.get(id)
	sn, ok := m.snaps[id]
	hasSnapshot = ok && time.Now().Before(sn.until)
	return
}
