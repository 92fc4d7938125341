package cron_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// A maintenance window: the whole runner pauses (until resumed, or
// until a time), run-now is refused meanwhile, and each job keeps its own
// enabled flag.
func ExampleRunner_PauseAll() {
	ctx := context.Background()
	r, err := cron.New(nil, nil, cron.Config{})
	if err != nil {
		panic(err)
	}
	job, _ := r.Add(ctx, cron.Job{ID: "report", HTTP: cron.HTTPConfig{URL: "https://example.com/report"},
		Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour)}})
	p, _ := r.PauseAll(ctx, time.Time{}, "database upgrade")
	fmt.Println("paused:", p.Paused, p.Reason)
	_, err = r.RunNow(ctx, job.ID, cron.RunOptions{Force: true})
	fmt.Println("run-now refused:", errors.Is(err, cron.ErrServicePaused))
	j, _ := r.Get(ctx, job.ID)
	fmt.Println("job still enabled:", !j.Paused)
	_, _ = r.ResumeAll(ctx)
	fmt.Println("paused:", r.Paused().Paused)
	// Output:
	// paused: true database upgrade
	// run-now refused: true
	// job still enabled: true
	// paused: false
}
