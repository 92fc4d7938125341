package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/redisstore"
	"github.com/redis/rueidis"
)

// The transition script begins with tables generated from package fsm's
// table: here, the moves it knows for a RUNNING job ({to, starts a new
// attempt, takes the job off its node}).
func ExampleGenerateFSMLua() {
	src := redisstore.GenerateFSMLua()
	for _, line := range strings.Split(src, "\n") {
		if strings.HasPrefix(line, `  ["RUNNING"] = {`) {
			moves := strings.TrimSuffix(strings.TrimPrefix(line, `  ["RUNNING"] = {`), "},")
			for _, move := range strings.SplitAfter(moves, "}, ") {
				fmt.Println(strings.TrimSuffix(move, ", "))
			}
			break
		}
	}
	// Output:
	// ["job_result"] = {"FINISHED", false, true}
	// ["timeout"] = {"CREATED", true, true}
	// ["failover"] = {"CREATED", true, true}
}

// Where the adapters keep their state.
func ExampleKeys_jobsAndTurns() {
	k := redisstore.NewKeys("prod")
	fmt.Println(k.JobFSM("j1"))
	fmt.Println(k.NodeReserved("n1"))
	fmt.Println(k.Turn("t1"))
	fmt.Println(k.Session("s1"))
	fmt.Println(k.NodesOf("i1"))
	// Output:
	// prod:v1:jobs:{due:4}:{job:j1}:fsm
	// prod:v1:nodes:{node:n1}:reserved
	// prod:scheduler:turn:t1
	// prod:scheduler:session:s1
	// prod:v1:nodes:by_instance:i1
}

// Wiring the job store and the reservations on one client (a standalone
// server here; a cluster client works the same). Needs a server, so it is
// not run as a test.
func ExampleNewJobs() {
	ctx := context.Background()
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{"127.0.0.1:6379"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	jobs, _ := redisstore.NewJobs(c, redisstore.JobsConfig{Prefix: "prod", MaxAttempts: 3})
	slots, _ := redisstore.NewReservations(c, redisstore.ReservationsConfig{Prefix: "prod"})

	jobs.Open(ctx, "j1", scheduler.JobSpec{RequestID: "r1", SessionID: "s1"}, "", time.Now().Add(time.Hour))
	if err := slots.Reserve(ctx, "node-a", "j1", 4, time.Minute); err != nil {
		log.Fatal(err) // scheduler.ErrNodeFull when the node is busy
	}
	jobs.ApplyJob(ctx, "j1", fsm.Dispatch, 1, "node-a")
	// The result and its outcome in one step; the book lists whom to answer.
	tr, book, _ := jobs.Finish(ctx, "j1", fsm.Result, 1, "node-a", scheduler.Outcome{Status: scheduler.OutcomeResult, Payload: []byte("ok")})
	log.Println("answer", book.Waiters)
	slots.Release(ctx, tr.FreeNode, "j1")
	jobs.ApplyJob(ctx, "j1", fsm.Release, 1, "")
}
