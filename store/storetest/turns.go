package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
)

// TurnHarness is a [scheduler.TurnStore] under test and a probe of the
// session's current turn, which the store writes beside a turn's affinity.
type TurnHarness struct {
	Store       scheduler.TurnStore
	CurrentTurn func(t *testing.T, sessionID string) string
}

// TestTurnStore runs the conformance suite of [scheduler.TurnStore].
// newHarness returns an empty store; each call must give a store that
// shares no ids with the others.
func TestTurnStore(t *testing.T, newHarness func(t *testing.T) TurnHarness) {
	t.Run("WriteOnce", func(t *testing.T) { t.Parallel(); testTurnWriteOnce(t, newHarness(t)) })
	t.Run("ManyTurns", func(t *testing.T) { t.Parallel(); testTurnMany(t, newHarness(t)) })
	t.Run("BadInput", func(t *testing.T) { t.Parallel(); testTurnBadInput(t, newHarness(t)) })
}

func testTurnWriteOnce(t *testing.T, h TurnHarness) {
	s := h.Store
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
	if cur := h.CurrentTurn(t, "s1"); cur != "t1" {
		t.Errorf("current turn of s1 = %q; want t1", cur)
	}
	// The next turn of the session starts without affinity.
	if aff, err := s.TurnAffinity(ctx, "t2"); err != nil || aff != "" {
		t.Errorf("TurnAffinity(t2) = %q, %v; want empty (no inheritance across turns)", aff, err)
	}
	aff, wrote, err = s.SetTurnAffinity(ctx, "s1", "t2", "node-c")
	check("write of the next turn", aff, wrote, err, res{"node-c", true})
	if cur := h.CurrentTurn(t, "s1"); cur != "t2" {
		t.Errorf("current turn of s1 = %q; want t2", cur)
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
	if cur := h.CurrentTurn(t, "s-none"); cur != "" {
		t.Errorf("current turn of an unknown session = %q; want empty", cur)
	}
}

// testTurnMany runs 100 turns at once, each with 8 concurrent first
// writers: one write wins per turn, every writer sees it, every turn then
// reads its node back, and cleared turns read none.
func testTurnMany(t *testing.T, h TurnHarness) {
	ctx := context.Background()
	s := h.Store
	pool := []string{"m0", "m1", "m2", "m3", "m4", "m5", "m6", "m7"}
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
			aff, err := s.TurnAffinity(ctx, turn)
			want := winner[i]
			if i%2 == 1 {
				want = ""
			}
			if err == nil && aff != want {
				err = fmt.Errorf("TurnAffinity = %q, want %q", aff, want)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("turn %d: %v", i, err)
		}
		if cur := h.CurrentTurn(t, fmt.Sprintf("sess-%d", i)); cur != fmt.Sprintf("turn-%d", i) {
			t.Errorf("current turn of sess-%d = %q, want turn-%d", i, cur, i)
		}
	}
}

func testTurnBadInput(t *testing.T, h TurnHarness) {
	ctx := context.Background()
	s := h.Store
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
		{"clear empty turn", "turn_id", func() error { return s.ClearTurnAffinity(ctx, "") }},
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
	if cur := h.CurrentTurn(t, "s"); cur != "t" {
		t.Errorf("current turn after bad input = %q; want t", cur)
	}
}
