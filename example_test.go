package ksana_test

import (
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/fsm"
)

// The core packages' decisions are pure functions of their inputs: a
// schedule's next run, a job's next state. Nothing here needs a clock, a
// goroutine or a server.
func Example() {
	weekdays, err := cron.ParseCron("CRON_TZ=Europe/Berlin 30 9 * * MON-FRI")
	if err != nil {
		panic(err)
	}
	friday := time.Date(2030, 3, 29, 12, 0, 0, 0, time.UTC)
	fmt.Println("next:", weekdays.Next(friday).UTC().Format(time.RFC3339))

	job := fsm.New()
	for _, ev := range []fsm.Event{fsm.Dispatch, fsm.Ack, fsm.Start} {
		out, err := fsm.Apply(job, ev, job.Attempt)
		if err != nil {
			panic(err)
		}
		job = out.Job
	}
	fmt.Println("state:", job.State)
	// Output:
	// next: 2030-04-01T07:30:00Z
	// state: RUNNING
}
