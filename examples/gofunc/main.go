package main

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	r, err := cron.New(nil, nil, cron.Config{}) // no store: jobs live in memory
	if err != nil {
		log.Fatal(err)
	}
	runs := 0
	r.Handle("report", cron.Func(func(ctx context.Context) error {
		runs++ // one job, one run at a time: no lock needed
		fmt.Println("report", runs)
		if runs == 3 {
			cancel() // enough: stop the runner
		}
		return nil
	}))
	if _, err := r.Add(ctx, cron.Job{Name: "report", Type: "report", Schedule: cron.Every(time.Second)}); err != nil {
		log.Fatal(err)
	}
	if err := r.Run(ctx); err != nil { // until ctx ends, then drains
		log.Fatal(err)
	}
	fmt.Println("done")
}
