package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
)

// SnapshotHarness is one empty [scheduler.NodeSnapshots] and a probe of its
// three structures.
type SnapshotHarness struct {
	// Store is the empty fleet under test.
	Store scheduler.NodeSnapshots
	// Structures reports, for each of ids, whether it is in the set of
	// all nodes, in the last-seen index, and whether it still has a
	// presence or a snapshot key.
	Structures func(ctx context.Context, ids []string) (map[string]NodeStructures, error)
}

// NodeStructures says where one node id is still stored.
type NodeStructures struct {
	InAll       bool // in {prefix}:v1:nodes:all
	InLastSeen  bool // in {prefix}:v1:nodes:last_seen
	HasPresence bool // its presence key is alive
	HasSnapshot bool // its snapshot key is alive
}

// TestNodeSnapshots checks a [scheduler.NodeSnapshots]: round trip, online
// flags, and removal of stale nodes from every structure.
func TestNodeSnapshots(t *testing.T, newHarness func(t *testing.T) SnapshotHarness) {
	ctx := context.Background()
	t.Run("RoundTrip", func(t *testing.T) {
		h := newHarness(t)
		now := time.UnixMilli(time.Now().UnixMilli())
		in := []scheduler.NodeSnapshot{
			{NodeID: "n2", InstanceID: "inst-a", Status: "ready", Pools: []string{"zh-en"}, Models: []string{"asr", "mt"},
				MaxConcurrency: 4, Running: 1, Attrs: map[string]string{"gpu": "a10"}},
			{NodeID: "n1", InstanceID: "inst-b", Status: "busy"},
		}
		if err := h.Store.Upsert(ctx, now, time.Minute, time.Minute, in...); err != nil {
			t.Fatal(err)
		}
		got, err := h.Store.Fleet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := []scheduler.NodeSnapshot{in[1], in[0]}
		for i := range want {
			want[i].LastSeenMS = now.UnixMilli()
			want[i].Online = true
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("Fleet (-want +got):\n%s", d)
		}
		// An upsert replaces the snapshot.
		upd := in[1]
		upd.Status = "ready"
		if err := h.Store.Upsert(ctx, now.Add(time.Second), time.Minute, time.Minute, upd); err != nil {
			t.Fatal(err)
		}
		got, err = h.Store.Fleet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want[0].Status, want[0].LastSeenMS = "ready", now.Add(time.Second).UnixMilli()
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("Fleet after update (-want +got):\n%s", d)
		}
	})
	t.Run("PresenceExpiresBeforeSnapshot", func(t *testing.T) {
		h := newHarness(t)
		if err := h.Store.Upsert(ctx, time.Now(), shortTTL, time.Minute, scheduler.NodeSnapshot{NodeID: "n1", InstanceID: "i"}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "node goes offline when its presence expires", func() (bool, error) {
			f, err := h.Store.Fleet(ctx)
			if err != nil || len(f) != 1 {
				return false, fmt.Errorf("fleet %v, %v; want one node", f, err)
			}
			return !f[0].Online, nil
		})
	})
	t.Run("RemoveStale", func(t *testing.T) {
		h := newHarness(t)
		now := time.Now()
		old := now.Add(-time.Hour)
		var fresh, stale []scheduler.NodeSnapshot
		for i := range 5 {
			fresh = append(fresh, scheduler.NodeSnapshot{NodeID: fmt.Sprintf("fresh-%d", i), InstanceID: "i"})
			stale = append(stale, scheduler.NodeSnapshot{NodeID: fmt.Sprintf("stale-%d", i), InstanceID: "i"})
		}
		if err := h.Store.Upsert(ctx, old, time.Minute, time.Minute, stale...); err != nil {
			t.Fatal(err)
		}
		if err := h.Store.Upsert(ctx, now, time.Minute, time.Minute, fresh...); err != nil {
			t.Fatal(err)
		}
		removed, err := h.Store.RemoveStale(ctx, now.Add(-10*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		var wantRemoved, ids []string
		for i := range 5 {
			wantRemoved = append(wantRemoved, stale[i].NodeID)
			ids = append(ids, stale[i].NodeID, fresh[i].NodeID)
		}
		if d := cmp.Diff(wantRemoved, removed); d != "" {
			t.Errorf("RemoveStale (-want +got):\n%s", d)
		}
		got, err := h.Structures(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]NodeStructures{}
		for i := range 5 {
			want[stale[i].NodeID] = NodeStructures{}
			want[fresh[i].NodeID] = NodeStructures{InAll: true, InLastSeen: true, HasPresence: true, HasSnapshot: true}
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("structures after RemoveStale (-want +got):\n%s", d)
		}
		removed, err = h.Store.RemoveStale(ctx, now.Add(-10*time.Minute))
		if err != nil || len(removed) != 0 {
			t.Errorf("second RemoveStale = %v, %v; want nothing", removed, err)
		}
	})
	t.Run("LargeFleet", func(t *testing.T) {
		h := newHarness(t)
		const n = 1200 // more than one read batch
		snaps := make([]scheduler.NodeSnapshot, n)
		for i := range snaps {
			snaps[i] = scheduler.NodeSnapshot{NodeID: fmt.Sprintf("node-%04d", i), InstanceID: "i", Running: i}
		}
		if err := h.Store.Upsert(ctx, time.Now(), time.Minute, time.Minute, snaps...); err != nil {
			t.Fatal(err)
		}
		got, err := h.Store.Fleet(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != n {
			t.Fatalf("Fleet returned %d nodes, want %d", len(got), n)
		}
		for i, s := range got {
			if s.NodeID != snaps[i].NodeID || s.Running != i || !s.Online {
				t.Fatalf("Fleet[%d] = %+v, want node %s running %d online", i, s, snaps[i].NodeID, i)
			}
		}
	})
}
