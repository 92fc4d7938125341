package sqlstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// Two node-units share one SQLite file: each opens it, and their claim
// loops place the deployments added through the same database.
func Example() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlstore-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	url := "sqlite:" + filepath.Join(dir, "nodeunit.db")

	admin, err := sqlstore.Open(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer admin.Close()
	for _, id := range []string{"api", "worker", "cron"} {
		d := claim.Deployment{ID: id, Enabled: true, Command: "/usr/local/bin/" + id}
		if err := admin.Deployments().Add(ctx, d); err != nil {
			log.Fatal(err)
		}
	}
	agent := claim.Deployment{ID: "agent", Type: claim.TypeDaemon, Enabled: true, Command: "/usr/local/bin/agent"}
	if err := admin.Deployments().Add(ctx, agent); err != nil {
		log.Fatal(err)
	}

	var loops []*claim.Loop
	for _, addr := range []string{"node-a", "node-b"} {
		db, err := sqlstore.Open(ctx, url) // one per node-unit process
		if err != nil {
			log.Fatal(err)
		}
		defer db.Close()
		loop, err := claim.New(db.Deployments(), db.Membership(), claimtest.NewRunner(), nil,
			claim.Config{Address: addr, Interval: time.Second})
		if err != nil {
			log.Fatal(err)
		}
		loops = append(loops, loop)
	}
	for range 3 { // a few cycles, driven by hand
		for _, l := range loops {
			if _, err := l.Cycle(ctx); err != nil {
				log.Fatal(err)
			}
		}
	}

	all, err := admin.Deployments().List(ctx)
	if err != nil {
		log.Fatal(err)
	}
	perNode := map[string]int{}
	for _, d := range all {
		if d.Type == claim.TypeDaemon {
			fmt.Printf("%s is a daemon, address %q\n", d.ID, d.Address)
			continue
		}
		perNode[d.Address]++
	}
	fmt.Println("unassigned:", perNode[""])
	fmt.Println("node-a:", perNode["node-a"], "node-b:", perNode["node-b"])
	// Output:
	// agent is a daemon, address ""
	// unassigned: 0
	// node-a: 2 node-b: 1
}
