package scheduler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
)

// Two instances share the stores (in memory here; store/redisstore in
// production). Node n1 is connected to instance a; instance b routes a
// message for it to a's inbox, where a's Deliverer hands it to the handler.
func Example() {
	ctx := context.Background()
	owners := scheduler.NewMemOwners()
	presence := scheduler.NewMemPresence()
	streams := scheduler.NewMemStreams(0, 0)

	cfgA := scheduler.Config{InstanceID: "a"}.WithDefaults()

	// Instance a: announce itself and bind the node that connected to it.
	_ = presence.Announce(ctx, "a", cfgA.OwnerTTL)
	bindings, _ := scheduler.NewBindings(owners, cfgA, nil)
	_ = bindings.Connect(ctx, scheduler.OwnerNode, "n1")

	// Instance b: find the owner of n1, check that it is alive, send.
	owner, _ := owners.Owner(ctx, scheduler.OwnerNode, "n1")
	alive, _ := presence.Alive(ctx, owner)
	fmt.Printf("n1 is owned by %s (alive: %v)\n", owner, alive)
	_, _ = streams.Send(ctx, owner, scheduler.Fields{{Name: "type", Value: "job_assign"}, {Name: "job_id", Value: "j1"}, {Name: "node_id", Value: "n1"}})

	// Instance a consumes its inbox.
	runCtx, stop := context.WithCancel(ctx)
	d, _ := scheduler.NewDeliverer(streams.Inbox("a", "scheduler"), "a-1", func(ctx context.Context, m scheduler.Message) error {
		fmt.Printf("a handles %s of job %s for node %s\n", m.Fields.Get("type"), m.Fields.Get("job_id"), m.Fields.Get("node_id"))
		stop()
		return nil
	}, cfgA)
	_ = d.Run(runCtx)

	// The node disconnects from a: a releases the binding it still holds.
	released, _ := bindings.Disconnect(ctx, scheduler.OwnerNode, "n1")
	fmt.Println("released:", released)
	// Output:
	// n1 is owned by a (alive: true)
	// a handles job_assign of job j1 for node n1
	// released: true
}

// A storm of MODEL_NOT_AVAILABLE reports from one node acts once.
func ExampleStormGuard() {
	ctx := context.Background()
	g := scheduler.NewMemStorm(scheduler.StormWindows{Debounce: 5 * time.Second, Cooldown: 30 * time.Second, ActionsPerSecond: 20})
	for range 3 {
		d, _ := g.Report(ctx, "n1", "whisper-large")
		fmt.Println(d.Action, d.Reports)
	}
	skip, _ := g.Unavailable(ctx, "n1", "whisper-large")
	fmt.Println("skip n1 for whisper-large:", skip)
	// Output:
	// marked 1
	// debounced 2
	// debounced 3
	// skip n1 for whisper-large: true
}
