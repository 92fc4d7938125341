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
// adapters in store/redisstore behave the same): the request id is bound
// to one job, the job goes to the turn's node, holds a slot there, and
// frees it when its result arrives.
func Example_jobLifecycle() {
	ctx := context.Background()
	jobs, _ := scheduler.NewMemJobs(scheduler.MemJobsConfig{})
	slots := scheduler.NewMemReservations(scheduler.MemReservationsConfig{})
	requests, _ := scheduler.NewMemRequests(scheduler.MemRequestsConfig{})
	turns := scheduler.NewMemTurns(func(string) bool { return true })
	pool := []string{"node-a", "node-b"}
	pickFirst := affinity.Random{IntN: func(int) int { return 0 }}

	handle := func(requestID string) {
		b, created, err := requests.Bind(ctx, requestID, func(ctx context.Context) (scheduler.RequestBinding, error) {
			d, err := turns.SelectNode(ctx, "turn-1", pool, pickFirst, nil)
			if err != nil {
				return scheduler.RequestBinding{}, err
			}
			jobID := "job-for-" + requestID
			if _, _, err := jobs.CreateJob(ctx, jobID); err != nil {
				return scheduler.RequestBinding{}, err
			}
			if err := slots.Reserve(ctx, d.NodeID, jobID, 4, time.Minute); err != nil {
				return scheduler.RequestBinding{}, err
			}
			if _, err := jobs.ApplyJob(ctx, jobID, fsm.Dispatch, 1, d.NodeID); err != nil {
				return scheduler.RequestBinding{}, err
			}
			// The write rule: right after the turn's first job is assigned.
			turns.SetTurnAffinity(ctx, "session-1", "turn-1", d.NodeID)
			return scheduler.RequestBinding{JobID: jobID, NodeID: d.NodeID}, nil
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("%s -> %s on %s (new: %v)\n", requestID, b.JobID, b.NodeID, created)
	}
	handle("req-1")
	handle("req-1") // a retried request gets the same job

	tr, _ := jobs.ApplyJob(ctx, "job-for-req-1", fsm.Result, 1, "")
	fmt.Println("after result:", tr.Job.State, "free slot on", tr.FreeNode)
	slots.Release(ctx, tr.FreeNode, "job-for-req-1")
	tr, _ = jobs.ApplyJob(ctx, "job-for-req-1", fsm.Release, 1, "")
	n, _ := slots.Count(ctx, "node-a")
	fmt.Println("after release:", tr.Job.State, "slots held on node-a:", n)
	// Output:
	// req-1 -> job-for-req-1 on node-a (new: true)
	// req-1 -> job-for-req-1 on node-a (new: false)
	// after result: FINISHED free slot on node-a
	// after release: RELEASED slots held on node-a: 0
}
