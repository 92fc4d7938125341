package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/affinity"
	"github.com/ksana-dev/ksana/scheduler"
)

// TurnHarness is a [scheduler.TurnStore] under test and a way to set a
// node's presence as the store sees it.
type TurnHarness struct {
	Store     scheduler.TurnStore
	SetOnline func(t *testing.T, nodeID string, online bool)
}

// TestTurnStore runs the conformance suite of [scheduler.TurnStore].
// newHarness returns an empty store with no node online; each call must
// give a store that shares no ids with the others.
func TestTurnStore(t *testing.T, newHarness func(t *testing.T) TurnHarness) {
	t.Run("WriteOnce", func(t *testing.T) { testTurnWriteOnce(t, newHarness(t).Store) })
	t.Run("Select", func(t *testing.T) { testTurnSelect(t, newHarness(t)) })
	t.Run("ManyTurns", func(t *testing.T) { testTurnMany(t, newHarness(t)) })
	t.Run("BadInput", func(t *testing.T) { testTurnBadInput(t, newHarness(t).Store) })
}

func testTurnWriteOnce(t *testing.T, s scheduler.TurnStore) {
	ctx := context.Background()
	type res struct {
		Aff   string
		Wrote bool
	}
	check := func(what string, aff string, wrote bool, err error, want res) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if diff := cmp.Diff(want, res{aff, wrote}); diff != "" {
			t.Errorf("%s (-want +got):\n%s", what, diff)
		}
	}
	if aff, err := s.TurnAffinity(ctx, "t1"); err != nil || aff != "" {
		t.Errorf("TurnAffinity of a new turn = %q, %v; want empty", aff, err)
	}
	aff, wrote, err := s.SetTurnAffinity(ctx, "s1", "t1", "node-a")
	check("first write", aff, wrote, err, res{"node-a", true})
	aff, wrote, err = s.SetTurnAffinity(ctx, "s1", "t1", "node-b")
	check("second write", aff, wrote, err, res{"node-a", false})
	if aff, err := s.TurnAffinity(ctx, "t1"); err != nil || aff != "node-a" {
		t.Errorf("TurnAffinity(t1) = %q, %v; want node-a", aff, err)
	}
	if cur, err := s.CurrentTurn(ctx, "s1"); err != nil || cur != "t1" {
		t.Errorf("CurrentTurn(s1) = %q, %v; want t1", cur, err)
	}
	// The next turn of the session starts without affinity.
	if aff, err := s.TurnAffinity(ctx, "t2"); err != nil || aff != "" {
		t.Errorf("TurnAffinity(t2) = %q, %v; want empty (no inheritance across turns)", aff, err)
	}
	aff, wrote, err = s.SetTurnAffinity(ctx, "s1", "t2", "node-c")
	check("write of the next turn", aff, wrote, err, res{"node-c", true})
	if cur, err := s.CurrentTurn(ctx, "s1"); err != nil || cur != "t2" {
		t.Errorf("CurrentTurn(s1) = %q, %v; want t2", cur, err)
	}
	if err := s.ClearTurnAffinity(ctx, "t1"); err != nil {
		t.Fatal(err)
	}
	if aff, err := s.TurnAffinity(ctx, "t1"); err != nil || aff != "" {
		t.Errorf("TurnAffinity(t1) after clear = %q, %v; want empty", aff, err)
	}
	if aff, err := s.TurnAffinity(ctx, "t2"); err != nil || aff != "node-c" {
		t.Errorf("TurnAffinity(t2) after clearing t1 = %q, %v; want node-c", aff, err)
	}
	if err := s.ClearTurnAffinity(ctx, "t-none"); err != nil {
		t.Errorf("ClearTurnAffinity of an unknown turn: %v", err)
	}
	if cur, err := s.CurrentTurn(ctx, "s-none"); err != nil || cur != "" {
		t.Errorf("CurrentTurn of an unknown session = %q, %v; want empty", cur, err)
	}
}

// lastOnline is a deterministic Random: always the last online node.
var lastOnline = affinity.Random{IntN: func(n int) int { return n - 1 }}

func testTurnSelect(t *testing.T, h TurnHarness) {
	ctx := context.Background()
	s := h.Store
	if _, _, err := s.SetTurnAffinity(ctx, "s", "t", "b"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		online   []string
		pool     []string
		strategy affinity.Strategy
		want     affinity.Decision
		wantErr  error
	}{
		{"affinity online in pool", []string{"a", "b", "c"}, []string{"a", "b", "c"}, lastOnline, affinity.Decision{NodeID: "b", Affinity: true}, nil},
		{"affinity offline", []string{"a", "c"}, []string{"a", "b", "c"}, lastOnline, affinity.Decision{NodeID: "c"}, nil},
		{"affinity outside the pool", []string{"a", "b", "c"}, []string{"a", "c"}, lastOnline, affinity.Decision{NodeID: "c"}, nil},
		{"only the first online", []string{"a"}, []string{"a", "b", "c"}, lastOnline, affinity.Decision{NodeID: "a"}, nil},
		{"nobody online", nil, []string{"a", "b", "c"}, lastOnline, affinity.Decision{}, affinity.ErrNoOnlineNode},
		{"empty pool", []string{"a", "b"}, nil, lastOnline, affinity.Decision{}, affinity.ErrNoOnlineNode},
		{"rendezvous", []string{"a", "c", "d"}, []string{"a", "b", "c", "d"}, affinity.Rendezvous{}, affinity.Decision{NodeID: affinity.Rendezvous{}.Choose("t", []string{"a", "c", "d"})}, nil},
	}
	online := map[string]bool{}
	for _, tt := range tests {
		for _, n := range []string{"a", "b", "c", "d"} {
			want := false
			for _, o := range tt.online {
				want = want || o == n
			}
			if online[n] != want {
				h.SetOnline(t, n, want)
				online[n] = want
			}
		}
		got, err := s.SelectNode(ctx, "t", tt.pool, tt.strategy, nil)
		if !errors.Is(err, tt.wantErr) {
			t.Errorf("%s: error = %v, want %v", tt.name, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("%s: SelectNode (-want +got):\n%s", tt.name, diff)
		}
	}
	// The caller's eligibility (capacity, storm marks) applies to the
	// affinity node as to the others.
	for _, n := range []string{"a", "b", "c"} {
		h.SetOnline(t, n, true)
	}
	notB := func(n string) bool { return n != "b" }
	got, err := s.SelectNode(ctx, "t", []string{"a", "b", "c"}, lastOnline, notB)
	if err != nil || got != (affinity.Decision{NodeID: "c"}) {
		t.Errorf("SelectNode with the affinity node b not eligible = %+v, %v; want c by the strategy", got, err)
	}
	none := func(string) bool { return false }
	if _, err := s.SelectNode(ctx, "t", []string{"a", "b", "c"}, lastOnline, none); !errors.Is(err, affinity.ErrNoOnlineNode) {
		t.Errorf("SelectNode with no eligible node: error = %v, want ErrNoOnlineNode", err)
	}
	// Selecting writes nothing back.
	if aff, err := s.TurnAffinity(ctx, "t"); err != nil || aff != "b" {
		t.Errorf("TurnAffinity after selections = %q, %v; want b", aff, err)
	}
	if err := s.ClearTurnAffinity(ctx, "t"); err != nil {
		t.Fatal(err)
	}
	h.SetOnline(t, "b", false)
	got, err = s.SelectNode(ctx, "t", []string{"b", "a"}, lastOnline, nil) // a is online
	if err != nil || got != (affinity.Decision{NodeID: "a"}) {
		t.Errorf("SelectNode after clear = %+v, %v; want a by the strategy", got, err)
	}
}

// testTurnMany runs 100 turns at once, each with 8 concurrent first
// writers: one write wins per turn, every writer sees it, every turn then
// selects its node, and clearing half of them sends those to the strategy.
func testTurnMany(t *testing.T, h TurnHarness) {
	ctx := context.Background()
	s := h.Store
	pool := []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"}
	for _, n := range pool {
		h.SetOnline(t, n, true)
	}
	const turns, writers = 100, 8
	var wg sync.WaitGroup
	type res struct {
		aff   string
		wrote bool
		err   error
	}
	results := make([][writers]res, turns)
	for i := range turns {
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				aff, wrote, err := s.SetTurnAffinity(ctx, fmt.Sprintf("sess-%d", i), fmt.Sprintf("turn-%d", i), pool[w])
				results[i][w] = res{aff, wrote, err}
			}()
		}
	}
	wg.Wait()
	winner := make([]string, turns)
	for i := range turns {
		wrote := 0
		for w := range writers {
			r := results[i][w]
			if r.err != nil {
				t.Fatalf("turn %d writer %d: %v", i, w, r.err)
			}
			if r.wrote {
				wrote++
				winner[i] = r.aff
			}
		}
		if wrote != 1 {
			t.Fatalf("turn %d: %d writers wrote, want 1", i, wrote)
		}
		for w := range writers {
			if results[i][w].aff != winner[i] {
				t.Errorf("turn %d writer %d sees %q, winner wrote %q", i, w, results[i][w].aff, winner[i])
			}
		}
	}
	errs := make([]error, turns)
	for i := range turns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			turn := fmt.Sprintf("turn-%d", i)
			if i%2 == 1 {
				if err := s.ClearTurnAffinity(ctx, turn); err != nil {
					errs[i] = err
					return
				}
			}
			d, err := s.SelectNode(ctx, turn, pool, affinity.Rendezvous{}, nil)
			want := affinity.Decision{NodeID: winner[i], Affinity: true}
			if i%2 == 1 {
				want = affinity.Decision{NodeID: affinity.Rendezvous{}.Choose(turn, pool)}
			}
			if err == nil && d != want {
				err = fmt.Errorf("SelectNode = %+v, want %+v", d, want)
			}
			if cur, cerr := s.CurrentTurn(ctx, fmt.Sprintf("sess-%d", i)); err == nil && (cerr != nil || cur != turn) {
				err = fmt.Errorf("CurrentTurn = %q, %v; want %s", cur, cerr, turn)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("turn %d: %v", i, err)
		}
	}
}

func testTurnBadInput(t *testing.T, s scheduler.TurnStore) {
	ctx := context.Background()
	if _, _, err := s.SetTurnAffinity(ctx, "s", "t", "n"); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, arg string
		call      func() error
	}{
		{"write empty session", "session_id", func() error { _, _, err := s.SetTurnAffinity(ctx, "", "t", "x"); return err }},
		{"write empty turn", "turn_id", func() error { _, _, err := s.SetTurnAffinity(ctx, "s", "", "x"); return err }},
		{"write empty node", "node_id", func() error { _, _, err := s.SetTurnAffinity(ctx, "s", "t", ""); return err }},
		{"read empty turn", "turn_id", func() error { _, err := s.TurnAffinity(ctx, ""); return err }},
		{"current empty session", "session_id", func() error { _, err := s.CurrentTurn(ctx, ""); return err }},
		{"clear empty turn", "turn_id", func() error { return s.ClearTurnAffinity(ctx, "") }},
		{"select empty turn", "turn_id", func() error { _, err := s.SelectNode(ctx, "", []string{"n"}, nil, nil); return err }},
		{"select pool with empty id", "pool", func() error { _, err := s.SelectNode(ctx, "t", []string{"n", ""}, nil, nil); return err }},
	}
	for _, tt := range tests {
		err := tt.call()
		var ae *scheduler.ArgumentError
		if !errors.As(err, &ae) || ae.Name != tt.arg {
			t.Errorf("%s: error = %v, want an ArgumentError naming %s", tt.name, err, tt.arg)
		}
	}
	if aff, err := s.TurnAffinity(ctx, "t"); err != nil || aff != "n" {
		t.Errorf("TurnAffinity after bad input = %q, %v; want n", aff, err)
	}
	if cur, err := s.CurrentTurn(ctx, "s"); err != nil || cur != "t" {
		t.Errorf("CurrentTurn after bad input = %q, %v; want t", cur, err)
	}
}
