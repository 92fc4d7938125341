package claim_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// admitting is a fake Runner that is also an Admitter: it refuses every
// deployment whose command starts with "bad", with an error wrapping
// ErrRefused, and fails to tell for commands starting with "unknown".
type admitting struct {
	*claimtest.Runner
	asked []string
}

func (a *admitting) Admit(d claim.Deployment) error {
	a.asked = append(a.asked, d.ID)
	switch {
	case strings.HasPrefix(d.Command, "bad"):
		return fmt.Errorf("%w: command %q is not trusted", claim.ErrRefused, d.Command)
	case strings.HasPrefix(d.Command, "unknown"):
		return errors.New("cannot tell")
	}
	return nil
}

func withCommand(d claim.Deployment, cmd string) claim.Deployment {
	d.Command = cmd
	return d
}

// TestAdmitterBeforeClaim: a node-unit whose runner refuses a deployment
// never claims it; a node-unit that can run it does, also when it was held
// by a lost node-unit.
func TestAdmitterBeforeClaim(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		deps       []claim.Deployment
		wantClaim  []string
		wantDecl   []string
		wantAsked  []string
		wantAddrs  map[string]string
		wantStarts map[string]int
	}{
		{
			name:      "the refused candidate comes first: the next one is claimed",
			deps:      []claim.Deployment{withCommand(at("b", "", 0), "bad"), withCommand(at("g", "", 1), "good")},
			wantClaim: []string{"g"}, wantDecl: []string{"b"}, wantAsked: []string{"b", "g"},
			wantAddrs:  map[string]string{"b": "", "g": "n1"},
			wantStarts: map[string]int{"g": 1},
		},
		{
			name:      "held by a lost node-unit: not taken over",
			deps:      []claim.Deployment{withCommand(at("b", "gone", 0), "bad")},
			wantDecl:  []string{"b"},
			wantAsked: []string{"b"},
			wantAddrs: map[string]string{"b": "gone"},
		},
		{
			name:      "already bound here: not asked, started and refused as before",
			deps:      []claim.Deployment{withCommand(at("b", "n1", 0), "bad"), withCommand(at("g", "", 1), "good")},
			wantClaim: []string{"g"}, wantAsked: []string{"g"},
			wantAddrs:  map[string]string{"b": "n1", "g": "n1"},
			wantStarts: map[string]int{"g": 1},
		},
		{
			name:      "an error that is not a refusal does not hold the claim back",
			deps:      []claim.Deployment{withCommand(at("u", "", 0), "unknown")},
			wantClaim: []string{"u"}, wantAsked: []string{"u"},
			wantAddrs:  map[string]string{"u": "n1"},
			wantStarts: map[string]int{"u": 1},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := claimtest.NewStore()
			for _, d := range tt.deps {
				s.Put(d)
			}
			r := &admitting{Runner: claimtest.NewRunner()}
			r.StartErr = func(d claim.Deployment) error {
				if strings.HasPrefix(d.Command, "bad") {
					return fmt.Errorf("%w: untrusted", claim.ErrRefused)
				}
				return nil
			}
			loop, err := claim.New(s, s, r, nil, claim.Config{Address: "n1"})
			if err != nil {
				t.Fatal(err)
			}
			rep, err := loop.Cycle(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.wantClaim, rep.Claimed); diff != "" {
				t.Errorf("Claimed (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantDecl, rep.Declined); diff != "" {
				t.Errorf("Declined (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAsked, r.asked); diff != "" {
				t.Errorf("Admit asked about (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantAddrs, s.Addresses()); diff != "" {
				t.Errorf("addresses (-want +got):\n%s", diff)
			}
			starts := map[string]int{}
			for _, d := range tt.deps {
				if n := r.Starts(d.ID); n > 0 {
					starts[d.ID] = n
				}
			}
			if len(tt.wantStarts) == 0 {
				tt.wantStarts = map[string]int{}
			}
			if diff := cmp.Diff(tt.wantStarts, starts); diff != "" {
				t.Errorf("starts (-want +got):\n%s", diff)
			}
		})
	}
}

// TestAdmitterTwoNodes: of two node-units, only the one that can run a
// deployment ends up with it, and the other's load does not count it.
func TestAdmitterTwoNodes(t *testing.T) {
	t.Parallel()
	s := claimtest.NewStore()
	s.Put(withCommand(at("b", "", 0), "bad"))
	s.Put(withCommand(at("g1", "", 1), "good"))
	s.Put(withCommand(at("g2", "", 2), "good"))
	strict := &admitting{Runner: claimtest.NewRunner()}
	n1, err := claim.New(s, s, strict, nil, claim.Config{Address: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	n2 := newNode(t, s, s, nil, claim.Config{Address: "n2"})
	for range 4 {
		if _, err := n1.Cycle(context.Background()); err != nil {
			t.Fatal(err)
		}
		n2.cycle(t)
	}
	got := s.Addresses()
	if got["b"] != "n2" {
		t.Errorf("b is at %q, want n2 (n1 refuses it)", got["b"])
	}
	if strict.Starts("b") != 0 {
		t.Errorf("n1 started b %d times, want 0", strict.Starts("b"))
	}
	per := map[string]int{}
	for _, a := range got {
		per[a]++
	}
	if diff := cmp.Diff(map[string]int{"n1": 1, "n2": 2}, per); diff != "" && !cmp.Equal(map[string]int{"n1": 2, "n2": 1}, per) {
		t.Errorf("deployments per node-unit (-want +got):\n%s", diff)
	}
}

// admitAll is a fake Runner that is an Admitter accepting everything.
type admitAll struct{ *claimtest.Runner }

func (admitAll) Admit(claim.Deployment) error { return nil }

// TestAdmitterUnstalls: when the only eligible node-unit refuses the only
// waiting deployment, a node-unit that can run it claims it after the
// deployment stayed waiting for three of its cycles, although it is not
// eligible; until then it waits.
func TestAdmitterUnstalls(t *testing.T) {
	t.Parallel()
	s := claimtest.NewStore()
	s.Put(withCommand(at("held", "n2", 0), "good")) // n2 holds one: n1 is the least loaded
	s.Put(withCommand(at("b", "", 1), "bad"))
	strict := &admitting{Runner: claimtest.NewRunner()}
	n1, err := claim.New(s, s, strict, nil, claim.Config{Address: "n1"})
	if err != nil {
		t.Fatal(err)
	}
	n2, err := claim.New(s, s, admitAll{claimtest.NewRunner()}, nil, claim.Config{Address: "n2"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := s.Heartbeat(ctx, claim.NodeUnit{Address: "n2"}); err != nil { // n2 is active from the start
		t.Fatal(err)
	}
	var claimedAt int
	for i := 1; i <= 5 && claimedAt == 0; i++ {
		r1, err := n1.Cycle(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !r1.Eligible || len(r1.Claimed) > 0 {
			t.Fatalf("cycle %d: n1 eligible %v, claimed %v; want eligible, nothing claimed", i, r1.Eligible, r1.Claimed)
		}
		r2, err := n2.Cycle(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if r2.Eligible {
			t.Fatalf("cycle %d: n2 eligible, want not (it holds more)", i)
		}
		if len(r2.Claimed) > 0 {
			if diff := cmp.Diff([]string{"b"}, r2.Claimed); diff != "" {
				t.Fatalf("n2 claimed (-want +got):\n%s", diff)
			}
			claimedAt = i
		}
	}
	if claimedAt != 3 {
		t.Errorf("n2 claimed the stalled deployment in its cycle %d, want 3", claimedAt)
	}
}
