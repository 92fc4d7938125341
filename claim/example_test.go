package claim_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// Two node-units share one deployment table. Each cycle, the nodes with the
// fewest deployments claim one each (the tied nodes take different
// candidates), and every node runs the daemon.
func Example() {
	ctx := context.Background()
	db := claimtest.NewStore() // store/sqlstore in production
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	for i, id := range []string{"web", "worker", "cron", "mailer"} {
		db.Put(claim.Deployment{ID: id, Type: claim.TypeDeployment, Enabled: true,
			UpdatedAt: t0.Add(time.Duration(i) * time.Minute)})
	}
	db.Put(claim.Deployment{ID: "log-shipper", Type: claim.TypeDaemon, Enabled: true})

	policy, err := claim.ParsePolicy("deployment_count", claim.DefaultWeights)
	if err != nil {
		panic(err)
	}
	var loops []*claim.Loop
	var runners []*claimtest.Runner
	for _, addr := range []string{"node-a", "node-b"} {
		_ = db.Heartbeat(ctx, claim.NodeUnit{Address: addr})
		r := claimtest.NewRunner() // a process runner in production
		l, err := claim.New(db, db, r, nil, claim.Config{Address: addr, Policy: policy})
		if err != nil {
			panic(err)
		}
		loops, runners = append(loops, l), append(runners, r)
	}
	for cycle := 1; cycle <= 2; cycle++ {
		for i, l := range loops {
			rep, err := l.Cycle(ctx) // Run(ctx) calls this every Interval
			if err != nil {
				panic(err)
			}
			fmt.Printf("cycle %d node-%c claimed %v\n", cycle, 'a'+i, rep.Claimed)
		}
	}
	for i, r := range runners {
		fmt.Printf("node-%c runs %v\n", 'a'+i, r.Running())
	}
	// Output:
	// cycle 1 node-a claimed [web]
	// cycle 1 node-b claimed [worker]
	// cycle 2 node-a claimed [cron]
	// cycle 2 node-b claimed [mailer]
	// node-a runs [cron log-shipper web]
	// node-b runs [log-shipper mailer worker]
}
