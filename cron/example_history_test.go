package cron_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// The run history of every job, a page at a time: the runs that failed or
// were not called, newest first, with why.
func ExampleRunner_QueryRuns() {
	ctx := context.Background()
	st := cron.NewMemStore()
	t0 := time.Date(2026, 5, 1, 9, 0, 0, 0, time.UTC)
	for _, id := range []string{"report", "sync"} {
		_ = st.Save(ctx, cron.Job{ID: id, HTTP: cron.HTTPConfig{URL: "http://svc.internal/" + id}, Schedule: cron.Every(time.Hour)})
	}
	_ = st.AppendRun(ctx, cron.Run{ID: "r1", JobID: "report", ScheduledAt: t0, Status: cron.StatusSuccess})
	_ = st.AppendRun(ctx, cron.Run{ID: "r2", JobID: "sync", ScheduledAt: t0, Status: cron.StatusFailed, Error: "http 503"})
	_ = st.AppendRun(ctx, cron.Run{ID: "r3", JobID: "report", ScheduledAt: t0.Add(time.Hour), Status: cron.StatusMissed,
		Reason: cron.ReasonDowntime, Slots: 5})
	r, err := cron.New(st, nil, cron.Config{})
	if err != nil {
		panic(err)
	}
	q := cron.RunQuery{Statuses: []cron.Status{cron.StatusFailed, cron.StatusMissed}, Limit: 1}
	for {
		runs, next, err := r.QueryRuns(ctx, q)
		if err != nil {
			panic(err)
		}
		for _, run := range runs {
			fmt.Printf("%s %s %s reason=%q slots=%d error=%q\n", run.ScheduledAt.Format(time.Kitchen), run.JobID, run.Status,
				run.Reason, run.Slots, run.Error)
		}
		if next.IsZero() {
			break
		}
		q.After = next
	}
	// Output:
	// 10:00AM report missed reason="downtime" slots=5 error=""
	// 9:00AM sync failed reason="" slots=0 error="http 503"
}
