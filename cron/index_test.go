package cron

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestIDIndex checks the id index against a map through random puts and
// deletes, on tables small enough for long probe runs.
func TestIDIndex(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	var tab table
	var x idIndex
	ref := map[string]int32{}
	var live []string
	for step := range 20000 {
		if len(live) > 0 && rng.IntN(3) == 0 {
			k := rng.IntN(len(live))
			id := live[k]
			live[k] = live[len(live)-1]
			live = live[:len(live)-1]
			idx := ref[id]
			x.del(id, idx)
			tab.release(idx)
			delete(ref, id)
		} else {
			id := fmt.Sprintf("id-%d", step)
			idx, e := tab.alloc()
			e.id = id
			x.put(id, idx)
			ref[id] = idx
			live = append(live, id)
		}
		if step%97 == 0 {
			for id, want := range ref {
				if got, ok := x.get(&tab, id); !ok || got != want {
					t.Fatalf("step %d: get(%q) = %d, %v; want %d", step, id, got, ok, want)
				}
			}
			if _, ok := x.get(&tab, fmt.Sprintf("id-%d", step+1_000_000)); ok {
				t.Fatalf("step %d: found an id never put", step)
			}
			if x.len() != len(ref) {
				t.Fatalf("step %d: len %d, want %d", step, x.len(), len(ref))
			}
		}
	}
}

// TestIDIndexBatched puts many ids with no lookup in between, so that they
// are placed in batches ordered by hash, then checks every id, deletes half
// and checks again.
func TestIDIndexBatched(t *testing.T) {
	var tab table
	var x idIndex
	const n = 200_000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("job-%d", i)
		idx, e := tab.alloc()
		e.id = ids[i]
		x.put(ids[i], idx)
	}
	if len(x.pending) == 0 || len(x.pending) >= len(x.slots)/64 {
		t.Fatalf("%d ids pending in a table of %d: want some, fewer than a 64th", len(x.pending), len(x.slots))
	}
	check := func(from int) {
		t.Helper()
		for i := from; i < n; i++ {
			if got, ok := x.get(&tab, ids[i]); !ok || got != int32(i) {
				t.Fatalf("get(%q) = %d, %v; want %d", ids[i], got, ok, i)
			}
		}
		if _, ok := x.get(&tab, "job-none"); ok {
			t.Fatal("found an id never put")
		}
		if x.len() != n-from {
			t.Fatalf("len %d, want %d", x.len(), n-from)
		}
	}
	check(0)
	if len(x.pending) != 0 {
		t.Fatalf("%d ids still pending after a lookup", len(x.pending))
	}
	for i := range n / 2 {
		x.del(ids[i], int32(i))
	}
	check(n / 2)
	for i := range n / 2 {
		if _, ok := x.get(&tab, ids[i]); ok {
			t.Fatalf("found %q after its delete", ids[i])
		}
	}
}
