package affinity

import (
	"errors"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func set(nodes ...string) func(string) bool {
	m := map[string]bool{}
	for _, n := range nodes {
		m[n] = true
	}
	return func(n string) bool { return m[n] }
}

// lastPick is a Random whose IntN always takes the last index and records n.
func lastPick(seen *[]int) Random {
	return Random{IntN: func(n int) int { *seen = append(*seen, n); return n - 1 }}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		affinity  string
		pool      []string
		online    []string
		want      Decision
		wantPicks []int // the n passed to IntN
		wantErr   error
	}{
		{"affinity online and in pool", "b", []string{"a", "b", "c"}, []string{"a", "b", "c"}, Decision{"b", true}, nil, nil},
		{"affinity offline: random among online", "b", []string{"a", "b", "c"}, []string{"a", "c"}, Decision{"c", false}, []int{2}, nil},
		{"affinity not in pool: random", "x", []string{"a", "b"}, []string{"a", "b", "x"}, Decision{"b", false}, []int{2}, nil},
		{"no affinity: random", "", []string{"a", "b", "c"}, []string{"b"}, Decision{"b", false}, []int{1}, nil},
		{"no node online", "a", []string{"a", "b"}, []string{"c"}, Decision{}, nil, ErrNoOnlineNode},
		{"empty pool", "a", nil, []string{"a"}, Decision{}, nil, ErrNoOnlineNode},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var picks []int
			got, err := Select("t1", tt.affinity, tt.pool, set(tt.online...), lastPick(&picks))
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("Select error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Select mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantPicks, picks); diff != "" {
				t.Errorf("IntN calls mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestSelectDefaultRandomCoversPool(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for i := 0; i < 1000 && len(seen) < 3; i++ {
		d, err := Select("t", "", []string{"a", "b", "c", "d"}, set("a", "b", "c"), nil)
		if err != nil {
			t.Fatal(err)
		}
		seen[d.NodeID] = true
	}
	if diff := cmp.Diff(map[string]bool{"a": true, "b": true, "c": true}, seen); diff != "" {
		t.Errorf("nodes chosen in 1000 draws (-want +got):\n%s", diff)
	}
}

func nodes(n int) []string {
	var s []string
	for i := range n {
		s = append(s, fmt.Sprintf("node-%d", i))
	}
	return s
}

func choose(turn string, pool []string) string {
	d, err := Select(turn, "", pool, func(string) bool { return true }, Rendezvous{})
	if err != nil {
		panic(err)
	}
	return d.NodeID
}

func TestRendezvousReproducibleAndOrderFree(t *testing.T) {
	t.Parallel()
	pool := nodes(7)
	rev := append([]string(nil), pool...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	counts := map[string]int{}
	for i := range 7000 {
		turn := fmt.Sprintf("turn-%d", i)
		a, b := choose(turn, pool), choose(turn, rev)
		if a != b {
			t.Fatalf("turn %s: %s in pool order, %s in reverse order", turn, a, b)
		}
		counts[a]++
	}
	// Each node should get about 1000 turns; require a loose spread.
	for _, n := range pool {
		if c := counts[n]; c < 700 || c > 1300 {
			t.Errorf("node %s won %d of 7000 turns, want about 1000", n, c)
		}
	}
}

// TestRendezvousMinimalMovement: removing a node moves only the turns it
// held; adding one moves turns only onto it.
func TestRendezvousMinimalMovement(t *testing.T) {
	t.Parallel()
	pool := nodes(8)
	without := append(append([]string(nil), pool[:3]...), pool[4:]...) // node-3 gone
	with := append(append([]string(nil), pool...), "node-new")
	moved, gained := 0, 0
	for i := range 4000 {
		turn := fmt.Sprintf("turn-%d", i)
		before := choose(turn, pool)
		if after := choose(turn, without); after != before {
			if before != "node-3" {
				t.Errorf("turn %s moved %s -> %s when node-3 left", turn, before, after)
			}
			moved++
		} else if before == "node-3" {
			t.Errorf("turn %s stayed on removed node-3", turn)
		}
		if after := choose(turn, with); after != before {
			if after != "node-new" {
				t.Errorf("turn %s moved %s -> %s when node-new came", turn, before, after)
			}
			gained++
		}
	}
	if moved == 0 || gained == 0 {
		t.Errorf("moved %d turns on removal, %d on addition; want some of each", moved, gained)
	}
}

func TestRecord(t *testing.T) {
	t.Parallel()
	tests := []struct {
		current, assigned string
		want              string
		wantWrite         bool
	}{
		{"", "n1", "n1", true},    // first job: write
		{"n1", "n2", "n1", false}, // later job on another node: never overwrite
		{"n1", "n1", "n1", false}, // later job on the same node: nothing to write
		{"", "", "", false},       // nothing assigned
	}
	for _, tt := range tests {
		got, write := Record(tt.current, tt.assigned)
		if got != tt.want || write != tt.wantWrite {
			t.Errorf("Record(%q, %q) = %q, %v; want %q, %v", tt.current, tt.assigned, got, write, tt.want, tt.wantWrite)
		}
	}
}

// TestWriteRuleWholeTurn runs a turn of five jobs where the first node goes
// offline mid-turn: later jobs go elsewhere but the affinity stays.
func TestWriteRuleWholeTurn(t *testing.T) {
	t.Parallel()
	online := map[string]bool{"a": true, "b": true, "c": true}
	pool := []string{"a", "b", "c"}
	aff := ""
	var got []Decision
	for job := range 5 {
		if job == 2 {
			online["b"] = false
		}
		if job == 4 {
			online["b"] = true
		}
		d, err := Select("t", aff, pool, func(n string) bool { return online[n] }, Random{IntN: func(n int) int { return n / 2 }})
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, d)
		aff, _ = Record(aff, d.NodeID)
	}
	want := []Decision{{"b", false}, {"b", true}, {"c", false}, {"c", false}, {"b", true}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decisions (-want +got):\n%s", diff)
	}
	if aff != "b" {
		t.Errorf("affinity after the turn = %q, want b", aff)
	}
}

func TestShouldBindJobToNodeManualNoBind(t *testing.T) {
	t.Parallel()
	testBind(t, Manual, false)
}

func TestShouldBindJobToNodeMaxDurationBind(t *testing.T) {
	t.Parallel()
	testBind(t, MaxDuration, true)
}

func TestShouldBindJobToNodeTimeoutNoBind(t *testing.T) {
	t.Parallel()
	testBind(t, Timeout, false)
}

func testBind(t *testing.T, r Reason, want bool) {
	t.Helper()
	got, err := ShouldBindJobToNode(r)
	if err != nil || got != want {
		t.Errorf("ShouldBindJobToNode(%q) = %v, %v; want %v, nil", r, got, err, want)
	}
	ends, err := EndsTurn(r)
	if err != nil || ends != !want {
		t.Errorf("EndsTurn(%q) = %v, %v; want %v, nil", r, ends, err, !want)
	}
	parsed, err := ParseReason(string(r))
	if err != nil || parsed != r {
		t.Errorf("ParseReason(%q) = %q, %v", r, parsed, err)
	}
}

func TestUnknownReason(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"", "MANUAL", "max-duration"} {
		if _, err := ShouldBindJobToNode(Reason(s)); !errors.Is(err, ErrUnknownReason) {
			t.Errorf("ShouldBindJobToNode(%q) error = %v, want ErrUnknownReason", s, err)
		}
		if ends, err := EndsTurn(Reason(s)); !errors.Is(err, ErrUnknownReason) || ends {
			t.Errorf("EndsTurn(%q) = %v, %v; want false, ErrUnknownReason", s, ends, err)
		}
		if _, err := ParseReason(s); !errors.Is(err, ErrUnknownReason) {
			t.Errorf("ParseReason(%q) error = %v, want ErrUnknownReason", s, err)
		}
	}
}
