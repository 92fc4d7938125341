package claimtest_test

import (
	"context"
	"fmt"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// The store settles a race the way a database does: the second claim of an
// unassigned deployment finds it taken.
func Example() {
	ctx := context.Background()
	db := claimtest.NewStore()
	db.Put(claim.Deployment{ID: "web", Type: claim.TypeDeployment, Enabled: true})

	first, _ := db.Claim(ctx, "web", "node-a", nil)
	second, _ := db.Claim(ctx, "web", "node-b", nil)
	d, _ := db.Get("web")
	fmt.Println(first, second, d.Address)

	// node-a leaves the membership; node-b takes web over by naming node-a
	// as lost.
	taken, _ := db.Claim(ctx, "web", "node-b", []string{"node-a"})
	d, _ = db.Get("web")
	fmt.Println(taken, d.Address, db.Statements())
	// Output:
	// true false node-a
	// true node-b 3
}
