package cron_test

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// ExampleRunner_Handle schedules a Go function: a handler registered for
// the type "report" runs each job of that type, with the job's args
// decoded into a struct. It stops the runner after the second run.
func ExampleRunner_Handle() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := cron.New(nil, nil, cron.Config{MinInterval: -1})
	if err != nil {
		panic(err)
	}
	type reportArgs struct {
		Team string `json:"team"`
	}
	runs := 0
	r.Handle("report", cron.Typed(func(ctx context.Context, args reportArgs, c *cron.Call) error {
		runs++
		fmt.Printf("report for %s, run %d, attempt %d\n", args.Team, runs, c.Attempt)
		if runs == 2 {
			cancel()
		}
		return nil
	}))
	j, err := r.Add(ctx, cron.Job{Name: "daily report", Type: "report",
		Args: json.RawMessage(`{"team": "core"}`), Schedule: cron.Every(50 * time.Millisecond)})
	if err != nil {
		panic(err)
	}
	fmt.Printf("added: type %s, args %s\n", j.Type, j.Args)
	if err := r.Run(ctx); err != nil {
		panic(err)
	}
	// Output:
	// added: type report, args {"team":"core"}
	// report for core, run 1, attempt 1
	// report for core, run 2, attempt 1
}
