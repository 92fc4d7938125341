package sqlstore

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// BenchmarkStatementsPerSlot counts the statements a runner over [Jobs]
// sends per fired slot, on both databases: 200 every-1s jobs fire for
// three slots each through a recording driver (with the executor answering
// at once); the statements from the load to the end of the shutdown, less
// the load's one, are divided by the calls. Expected: fewer than one on
// PostgreSQL (each claim, result, bookkeeping and trim statement covers
// the slots of a batch); on SQLite a statement per row and kind, in one
// transaction per batch.
//
//	go test -run XXX -bench StatementsPerSlot -benchtime 1x ./store/sqlstore/
func BenchmarkStatementsPerSlot(b *testing.B) {
	for _, be := range backends {
		b.Run(be.name, func(b *testing.B) {
			for b.Loop() {
				db, rec := openRecorded(b, be)
				jobs := mustJobs(b, db, JobsConfig{})
				var calls atomic.Int64
				exec := cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
					calls.Add(1)
					return cron.Result{Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200}
				})
				r, err := cron.New(jobs, exec, cron.Config{Workers: 8})
				if err != nil {
					b.Fatal(err)
				}
				ctx := context.Background()
				start := time.Now().Add(time.Second).Truncate(time.Second)
				for i := range 200 {
					j := testJob(fmt.Sprintf("j%03d", i))
					j.Schedule.StartAt = start.Add(time.Duration(i) * 5 * time.Millisecond)
					if _, err := r.Add(ctx, j); err != nil {
						b.Fatal(err)
					}
				}
				// Everything from the load to the last write of the
				// shutdown, over every call in between.
				rec.takeCounts()
				rctx, cancel := context.WithCancel(ctx)
				done := make(chan error, 1)
				go func() { done <- r.Run(rctx) }()
				time.Sleep(time.Until(start) + 3*time.Second - 500*time.Millisecond)
				cancel()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
				stmts, _ := rec.takeCounts()
				n := calls.Load()
				b.ReportMetric(float64(stmts-1)/float64(n), "stmts/slot")
				b.Logf("%s: %d statements (1 to load) for %d calls", be.name, stmts, n)
			}
		})
	}
}
