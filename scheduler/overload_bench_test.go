package scheduler_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
)

// BenchmarkSaturated offers 1,000 jobs at once to one Dispatcher over the
// in-memory stores with 10 nodes of capacity 1, each taking 2ms per job,
// and waits until every job is answered: 990 jobs wait for a slot at
// first. It reports, per answered job, the processor time of the process
// (cpu-µs/job), the slot reservations tried (reserves/job, the selections
// that went to the store, a full node's refusals included), the calls to
// the deadline index (due-ops/job) and reads of job records
// (job-reads/job), and the wall time to answer all of them (ms/round).
func BenchmarkSaturated(b *testing.B) {
	const (
		nodes  = 10
		offer  = 1000
		runFor = 2 * time.Millisecond
	)
	cfg := scheduler.Config{InstanceID: "a"}
	cfg.Dispatch.QueueTimeout = time.Minute // every job is answered with a result
	base, err := scheduler.NewMemStores(cfg)
	if err != nil {
		b.Fatal(err)
	}
	var c storeCounts
	st := base
	st.Reservations = countingReservations{base.Reservations, &c}
	st.Due = countingDue{base.Due, &c}
	st.Jobs = readCountingJobs{base.Jobs, &c}
	d, err := scheduler.NewDispatcher(st, cfg)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ran := make(chan error, 1)
	go func() { ran <- d.Run(ctx) }()
	defer func() {
		cancel()
		<-ran
	}()
	for i := range nodes {
		id := fmt.Sprintf("n%02d", i)
		if err := d.AttachNode(ctx, scheduler.NodeInfo{NodeID: id, Capacity: 1}, &slowNode{d: d, id: id, runFor: runFor}); err != nil {
			b.Fatal(err)
		}
	}
	s := &countingSession{answered: make(chan struct{}, offer)}
	if err := d.AttachSession(ctx, "s", s); err != nil {
		b.Fatal(err)
	}
	seq := 0
	round := func() {
		for range offer {
			seq++
			if _, err := d.Submit(ctx, "s", scheduler.Request{RequestID: fmt.Sprintf("r%d", seq), Payload: []byte("x")}); err != nil {
				b.Fatal(err)
			}
		}
		timeout := time.After(2 * time.Minute)
		for range offer {
			select {
			case <-s.answered:
			case <-timeout:
				b.Fatal("a round not answered within two minutes")
			}
		}
	}
	c.reset()
	cpu0, began, rounds := cpuTime(), time.Now(), 0
	for b.Loop() {
		round()
		rounds++
	}
	busy, took := cpuTime()-cpu0, time.Since(began)
	if f := s.failed.Load(); f > 0 {
		b.Fatalf("%d jobs failed", f)
	}
	jobs := float64(rounds * offer)
	b.ReportMetric(float64(busy.Microseconds())/jobs, "cpu-µs/job")
	b.ReportMetric(float64(c.reserves.Load())/jobs, "reserves/job")
	b.ReportMetric(float64(c.due.Load())/jobs, "due-ops/job")
	b.ReportMetric(float64(c.reads.Load())/jobs, "job-reads/job")
	b.ReportMetric(float64(took.Milliseconds())/float64(rounds), "ms/round")
}

type storeCounts struct{ reserves, due, reads atomic.Int64 }

func (c *storeCounts) reset() {
	c.reserves.Store(0)
	c.due.Store(0)
	c.reads.Store(0)
}

type countingReservations struct {
	scheduler.ReservationStore
	c *storeCounts
}

func (r countingReservations) Reserve(ctx context.Context, nodeID, jobID string, capacity int, ttl time.Duration) error {
	r.c.reserves.Add(1)
	return r.ReservationStore.Reserve(ctx, nodeID, jobID, capacity, ttl)
}

type countingDue struct {
	scheduler.DueIndex
	c *storeCounts
}

func (x countingDue) Set(ctx context.Context, jobID string, at time.Time) error {
	x.c.due.Add(1)
	return x.DueIndex.Set(ctx, jobID, at)
}

func (x countingDue) Claim(ctx context.Context, now time.Time, lease time.Duration, n int) ([]string, error) {
	x.c.due.Add(1)
	return x.DueIndex.Claim(ctx, now, lease, n)
}

func (x countingDue) Remove(ctx context.Context, jobIDs ...string) error {
	x.c.due.Add(1)
	return x.DueIndex.Remove(ctx, jobIDs...)
}

type readCountingJobs struct {
	scheduler.JobStore
	c *storeCounts
}

func (j readCountingJobs) Job(ctx context.Context, jobID string) (scheduler.JobRecord, error) {
	j.c.reads.Add(1)
	return j.JobStore.Job(ctx, jobID)
}

func (j readCountingJobs) Entry(ctx context.Context, jobID string) (scheduler.BookEntry, error) {
	j.c.reads.Add(1)
	return j.JobStore.Entry(ctx, jobID)
}

// slowNode answers each job_assign with job_result after runFor.
type slowNode struct {
	d      *scheduler.Dispatcher
	id     string
	runFor time.Duration
}

func (n *slowNode) Send(_ context.Context, m scheduler.Envelope) error {
	if m.Type != scheduler.TypeJobAssign {
		return nil
	}
	time.AfterFunc(n.runFor, func() {
		n.d.NodeEvent(context.Background(), n.id, scheduler.Envelope{Type: scheduler.TypeJobResult, JobID: m.JobID, Attempt: m.Attempt, NodeID: n.id, Payload: m.Payload})
	})
	return nil
}
