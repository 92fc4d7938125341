package usage_test

import (
	"context"
	"fmt"
	"net/http/httptest"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/internal/nodeunit/usage"
)

func Example() {
	// A node-unit serves its latest reading (here a fixed one; in the
	// binary, a Collector's Usage method)...
	srv := httptest.NewServer(usage.Handler(func() claim.Usage {
		return claim.Usage{CPUPercent: 12.5, MemoryMB: 256}
	}))
	defer srv.Close()

	// ...and the claim loop of any node-unit reads it through a Probe.
	var probe claim.UsageProbe = &usage.Probe{}
	u, err := probe.Usage(context.Background(), claim.NodeUnit{
		Address:       "node-a",
		UsageEndpoint: srv.URL + usage.Path,
	})
	if err != nil {
		panic(err)
	}
	fmt.Printf("cpu_percent=%v memory_mb=%v\n", u.CPUPercent, u.MemoryMB)
	fmt.Println("score:", claim.DefaultWeights.Score(u))
	// Output:
	// cpu_percent=12.5 memory_mb=256
	// score: 6.375
}
