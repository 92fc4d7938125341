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
