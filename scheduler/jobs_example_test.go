package scheduler_test

import (
	"context"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/affinity"
	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
)

// The lifecycle of one request through the in-memory stores (the Redis
// adapters in store/redisstore behave the same): the request id names one
// job, the job goes to the turn's node, holds a slot there, and frees it
// when its result arrives.
func Example_jobLifecycle() {
	ctx := context.Background()
	jobs, _ := scheduler.NewMemJobs(scheduler.MemJobsConfig{})
	slots := scheduler.NewMemReservations(scheduler.MemReservationsConfig{})
	turns := scheduler.NewMemTurns()
	pool := []string{"node-a", "node-b"}
	pickFirst := affinity.Random{IntN: func(int) int { return 0 }}

	handle := func(requestID string) {
		jobID := scheduler.JobIDFor(requestID) // duplicates name the same job
		rec, _, created, err := jobs.Open(ctx, jobID, scheduler.JobSpec{RequestID: requestID, SessionID: "session-1", TurnID: "turn-1"}, "", time.Now().Add(time.Hour))
		if err != nil || !created {
			fmt.Printf("%s: job exists (%s), nothing to do\n", requestID, rec.State)
			return
		}
		aff, _ := turns.TurnAffinity(ctx, "turn-1")
		d, _ := affinity.Select("turn-1", aff, pool, func(string) bool { return true }, pickFirst)
		if err := slots.Reserve(ctx, d.NodeID, jobID, 4, time.Minute); err != nil {
			fmt.Println(err)
			return
		}
		if _, err := jobs.ApplyJob(ctx, jobID, fsm.Dispatch, 1, d.NodeID); err != nil {
			fmt.Println(err)
			return
		}
		// The write rule: right after the turn's first job is assigned.
		turns.SetTurnAffinity(ctx, "session-1", "turn-1", d.NodeID)
		fmt.Printf("%s: dispatched to %s\n", requestID, d.NodeID)
	}
	handle("req-1")
	handle("req-1") // a retried request finds its job

	jobID := scheduler.JobIDFor("req-1")
	tr, book, _ := jobs.Finish(ctx, jobID, fsm.Result, 1, "", scheduler.Outcome{Status: scheduler.OutcomeResult, Payload: []byte("hello")})
	fmt.Println("after result:", tr.Job.State, "free slot on", tr.FreeNode, "answer", book.Waiters, string(book.Outcome.Payload))
	slots.Release(ctx, tr.FreeNode, jobID)
	tr, _ = jobs.ApplyJob(ctx, jobID, fsm.Release, 1, "")
	n, _ := slots.Count(ctx, "node-a")
	fmt.Println("after release:", tr.Job.State, "slots held on node-a:", n)
	// Output:
	// req-1: dispatched to node-a
	// req-1: job exists (DISPATCHED), nothing to do
	// after result: FINISHED free slot on node-a answer [session-1] hello
	// after release: RELEASED slots held on node-a: 0
}
