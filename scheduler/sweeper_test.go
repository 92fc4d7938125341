package scheduler_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

// slowJobs makes every read of a job record take readDelay, as a store
// under load does.
type slowJobs struct {
	scheduler.JobStore
}

const readDelay = 40 * time.Millisecond

func (s slowJobs) Job(ctx context.Context, jobID string) (scheduler.JobRecord, error) {
	time.Sleep(readDelay)
	return s.JobStore.Job(ctx, jobID)
}

// TestSweepDrainsBacklog: a backlog of deadlines that takes longer to
// settle one by one than a claim holds them off (600 jobs whose queue
// timeout passed at once, 40 ms a record read) is still drained: every
// request is answered no_node and no deadline is left. A sweep that
// settled the whole backlog before releasing any of it went round the
// same jobs for ever, their claims running out before it came back.
func TestSweepDrainsBacklog(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st, err := scheduler.NewMemStores(storetest.DispatchTestConfig("x"))
		if err != nil {
			t.Fatal(err)
		}
		st.Jobs = slowJobs{st.Jobs}
		p := storetest.NewTestPlane(t, storetest.DispatcherHarness{Stores: func() scheduler.Stores { return st }})
		d := p.Start("inst-a", false, nil)
		s := storetest.NewTestSession("s1")
		s.Attach(t, d)
		const n = 600
		var reqs []string
		for i := range n {
			r := fmt.Sprintf("r%d", i)
			reqs = append(reqs, r)
			go s.Submit(t, scheduler.Request{RequestID: r, Model: "none", Payload: []byte(r)})
		}
		synctest.Wait()
		got := s.WaitAnswers(t, reqs, 2*time.Minute)
		for _, r := range reqs {
			if a := got[r]; len(a) != 1 || a[0].Type != scheduler.TypeJobFailed || a[0].Error[:len(scheduler.FailNoNode)] != scheduler.FailNoNode {
				t.Fatalf("answers of %s: %+v, want one job_failed no_node", r, a)
			}
		}
		due := st.Due.(storetest.DueProbe)
		storetest.Eventually(t, "no deadline left", time.Minute, func() bool {
			for _, r := range reqs {
				if _, ok, err := due.Due(context.Background(), scheduler.JobIDFor(r)); err != nil || ok {
					return false
				}
			}
			return true
		})
		p.StopAll()
	})
}
