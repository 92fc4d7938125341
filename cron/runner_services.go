package cron

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
)

// services are the goroutines a runner owns while it runs, beside the
// timer goroutine (Run's own): the workers, the recorder, the alert
// senders, the claimer (over a SharedStore that claims ahead) and the
// pause timer. startServices starts them; stop ends them in the order a
// shutdown needs, each waited for before the next is told.
type services struct {
	r *Runner
	// loops are the claimer and the pause timer: they end with Run's
	// context.
	loops *errgroup.Group
	// The workers call the runs; cancelRuns cuts those still running
	// after DrainTimeout.
	workers    sync.WaitGroup
	cancelRuns context.CancelFunc
	// The recorder writes the bookkeeping and the history until recStop
	// is closed.
	recorder sync.WaitGroup
	recStop  chan struct{}
	// The alert senders deliver until alertStop is closed, then what is
	// queued, until cancelAlerts.
	senders      sync.WaitGroup
	alertStop    chan struct{}
	cancelAlerts context.CancelFunc
	bg           context.Context
}

// startServices starts the runner's goroutines for a Run with context
// ctx: the loops end with ctx, the others when stop tells them.
func (r *Runner) startServices(ctx context.Context) *services {
	bg := context.WithoutCancel(ctx)
	s := &services{r: r, bg: bg, recStop: make(chan struct{}), alertStop: make(chan struct{})}
	runCtx, cancelRuns := context.WithCancel(bg)
	s.cancelRuns = cancelRuns
	for range r.cfg.Workers {
		s.workers.Go(func() { r.worker(runCtx) })
	}
	s.recorder.Go(func() { r.recorder(bg, s.recStop) })
	alertCtx, cancelAlerts := context.WithCancel(bg)
	s.cancelAlerts = cancelAlerts
	s.senders.Go(func() { r.alertLoop(alertCtx, s.alertStop) })
	s.loops = &errgroup.Group{}
	if r.lead > 0 {
		s.loops.Go(func() error { r.claimLoop(ctx); return nil })
	}
	s.loops.Go(func() error { r.pauseLoop(ctx); return nil })
	return s
}

// stop ends the services once Run's context has ended and the timer
// goroutine has returned: the loops, then the runs queued but not
// started (dropped, but for the slots claimed, which are still called),
// then the workers (cut after DrainTimeout), the recorder, the alert
// senders (what is queued is delivered within DrainTimeout), and last
// the store's buffers are flushed.
func (s *services) stop() error {
	r := s.r
	defer s.cancelRuns()
	defer s.cancelAlerts()
	_ = s.loops.Wait()
	r.finishClaimed()

	r.mu.Lock()
	r.state = stateStopping
	var claimed []task
	for {
		t, ok := r.dequeue()
		if !ok {
			break
		}
		if t.claimed && t.e.gen == t.gen {
			claimed = append(claimed, t)
			continue
		}
		r.dropTask(t)
	}
	r.queue = append(r.queue, claimed...)
	r.work.Broadcast()
	r.mu.Unlock()

	if !waitFor(&s.workers, r.cfg.DrainTimeout) {
		r.log.Warn("cron: drain timeout: cancelling runs in flight")
		s.cancelRuns()
		s.workers.Wait()
	}
	// The skips gathered (a service pause or a run in flight that has not
	// ended) are recorded now: a restarted runner would not know them.
	r.mu.Lock()
	r.endSkips()
	r.mu.Unlock()
	close(s.recStop)
	s.recorder.Wait()
	close(s.alertStop)
	if !waitFor(&s.senders, r.cfg.DrainTimeout) {
		r.log.Warn("cron: drain timeout: alerts not delivered are left in the outbox")
		s.cancelAlerts()
		s.senders.Wait()
	}
	if err := r.sh.Flush(s.bg); err != nil {
		return fmt.Errorf("cron: flush store: %w", err)
	}
	return nil
}

// waitFor waits for wg up to d, and reports whether it was done.
func waitFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}
