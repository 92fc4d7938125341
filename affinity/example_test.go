package affinity_test

import (
	"fmt"

	"github.com/ksana-dev/ksana/affinity"
)

// One turn cut into three jobs by max_duration and ended manually: the first
// job picks a node, the affinity is recorded before the second is selected,
// and the later jobs follow it until the turn ends.
func Example() {
	pool := []string{"node-a", "node-b", "node-c"}
	online := func(string) bool { return true }
	pick := affinity.Random{IntN: func(n int) int { return 1 }} // deterministic for the example

	aff := ""
	for _, reason := range []affinity.Reason{affinity.MaxDuration, affinity.MaxDuration, affinity.Manual} {
		d, err := affinity.Select("turn-1", aff, pool, online, pick)
		if err != nil {
			fmt.Println(err)
			return
		}
		var wrote bool
		aff, wrote = affinity.Record(aff, d.NodeID)
		ends, _ := affinity.EndsTurn(reason)
		fmt.Printf("job on %s (affinity %v, wrote %v), finalized by %s, turn ends: %v\n", d.NodeID, d.Affinity, wrote, reason, ends)
		if ends {
			aff = "" // clear on finalize
		}
	}
	fmt.Printf("affinity after the turn: %q\n", aff)
	// Output:
	// job on node-b (affinity false, wrote true), finalized by max_duration, turn ends: false
	// job on node-b (affinity true, wrote false), finalized by max_duration, turn ends: false
	// job on node-b (affinity true, wrote false), finalized by manual, turn ends: true
	// affinity after the turn: ""
}

// Rendezvous hashing gives every instance the same node for a turn without
// any shared state.
func ExampleRendezvous() {
	pool := []string{"node-a", "node-b", "node-c"}
	online := func(string) bool { return true }
	d1, _ := affinity.Select("turn-42", "", pool, online, affinity.Rendezvous{})
	d2, _ := affinity.Select("turn-42", "", []string{"node-c", "node-b", "node-a"}, online, affinity.Rendezvous{})
	fmt.Println(d1.NodeID == d2.NodeID)
	// Output:
	// true
}
