package scheduler

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestInstanceAliveForgetsNo: an instance found not alive is asked about
// again at once, so an instance that (re)starts is routed to as soon as it
// announced itself; and the instances remembered do not grow with every
// instance ever seen.
func TestInstanceAliveForgetsNo(t *testing.T) {
	ctx := context.Background()
	st, err := NewMemStores(Config{InstanceID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	d, err := NewDispatcher(st, Config{InstanceID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	if d.instanceAlive(ctx, "b") {
		t.Fatal("b alive before it announced itself")
	}
	if err := st.Presence.Announce(ctx, "b", time.Minute); err != nil {
		t.Fatal(err)
	}
	if !d.instanceAlive(ctx, "b") {
		t.Error("b not alive right after it announced itself: a no was remembered")
	}
	for i := range 3 * aliveKept {
		id := fmt.Sprintf("i%d", i)
		st.Presence.Announce(ctx, id, time.Minute)
		d.instanceAlive(ctx, id)
		d.mu.Lock()
		for k := range d.alive {
			d.alive[k] = d.alive[k].Add(-aliveMemory) // as if asked long ago
		}
		d.mu.Unlock()
	}
	d.mu.Lock()
	n := len(d.alive)
	d.mu.Unlock()
	if n > aliveKept+1 {
		t.Errorf("%d instances remembered after asking about %d, want at most %d", n, 3*aliveKept, aliveKept+1)
	}
}
