package jsonstore

import (
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestJobIndexAgreesWithMap runs random puts, replacements and deletions
// through the index and a Go map side by side, through growth and long
// probe runs, and checks that every id reads back alike.
func TestJobIndexAgreesWithMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, ids := range []int{10, 1000, 20000} {
		var x jobIndex
		model := map[string]*entry{}
		for op := range 8 * ids {
			id := "job-" + strconv.Itoa(rng.IntN(ids))
			switch rng.IntN(4) {
			case 0, 1:
				e := &entry{id: id}
				x.put(e)
				model[id] = e
			case 2:
				e := &entry{id: id}
				_, had := model[id]
				if added := x.add(e); added == had {
					t.Fatalf("%d ids: add(%s) = %v with the id held: %v", ids, id, added, had)
				}
				if !had {
					model[id] = e
				}
			case 3:
				x.del(id)
				delete(model, id)
			}
			if op%(ids/4+1) == 0 || op == 8*ids-1 {
				if x.len() != len(model) {
					t.Fatalf("%d ids: after %d ops len %d, want %d", ids, op, x.len(), len(model))
				}
				for k := range ids {
					id := "job-" + strconv.Itoa(k)
					if got := x.get(id); got != model[id] {
						t.Fatalf("%d ids: after %d ops get(%s) = %p, want %p", ids, op, id, got, model[id])
					}
				}
				n := 0
				for e := range x.all() {
					if model[e.id] != e {
						t.Fatalf("%d ids: all() yields %s, not the entry held", ids, e.id)
					}
					n++
				}
				if n != len(model) {
					t.Fatalf("%d ids: all() yields %d entries, want %d", ids, n, len(model))
				}
			}
		}
	}
	var empty jobIndex
	if empty.get("x") != nil || empty.len() != 0 {
		t.Fatal("the zero index holds something")
	}
	empty.del("x") // no effect, no panic
}
