package cron

import (
	"context"
	"errors"
	"log/slog"
	"time"
)

// ended is a run record on its way to the recorder. drop marks the run
// of a job removed while it ran: it goes to the observer only. The run is
// held by pointer: a start after a long stop hands the recorder one
// record a job, a million at a million jobs, and a slice of them by value
// would be copied over and over as it grows.
type ended struct {
	run  *Run
	drop bool
}

// markDirty queues e's bookkeeping for the recorder. mu is held.
func (r *Runner) markDirty(e *entry) {
	if e.dirty || e.id == "" || r.store == nil || e.pos < 0 || !r.mine(e.id) {
		return
	}
	e.dirty = true
	r.dirty = append(r.dirty, e)
	r.wakeRecorder()
}

// finish hands a run record to the recorder: a run a worker finished, or
// a slot skipped or missed. drop marks the run of a removed job, which
// only the observer sees. mu is held.
func (r *Runner) finish(run Run, drop bool) {
	if run.ID == "" {
		run.ID = newID()
	}
	r.ended = append(r.ended, ended{run: &run, drop: drop})
	r.wakeRecorder()
}

// wakeRecorder wakes the recorder when its work has just gone from none
// to some: each pass of the recorder takes all of it, so later additions
// before that pass need no wake of their own. mu is held.
func (r *Runner) wakeRecorder() {
	if len(r.dirty)+len(r.ended)+len(r.lastRuns) != 1 {
		return
	}
	select {
	case r.recWake <- struct{}{}:
	default:
	}
}

// recorder is the one goroutine that writes to the store while the runner
// runs (but for the durable writes of the API): the bookkeeping of the
// jobs marked dirty, and the run records that the workers and the timer
// goroutine hand it (into the runner's own history when it has no
// store); then it shows each run to the observer. It goes on until stop is closed, then writes what
// is left. Being the only writer of bookkeeping, and reading it when it
// writes, it never puts an older state after a newer one.
//
// Over a store of several members, a pass starts at most every
// [BatchEvery], so that it writes in one call what ended in that time
// ([SharedStore.RecordBatch] and AppendRuns); alone on its store, the
// runner writes at once (a store such as store/jsonstore groups the
// writes itself). The bookkeeping carries the version of the job it was
// computed from.
func (r *Runner) recorder(ctx context.Context, stop <-chan struct{}) {
	var w recorderBufs
	var last time.Time
	for {
		select {
		case <-r.recWake:
		case <-stop:
			r.flushDirty(ctx, &w)
			return
		}
		if wait := r.batchEvery - time.Since(last); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-stop:
				t.Stop()
			}
		}
		last = time.Now()
		r.flushDirty(ctx, &w)
	}
}

type record struct {
	id  string
	bk  Bookkeeping
	ver int64
}

// recorderBufs are the recorder's buffers, reused from one pass to the
// next, and its memory of the skip warnings.
type recorderBufs struct {
	recs  []record
	ended []ended
	batch []Recorded          // the recs of a pass
	runs  []Run               // the runs of a pass
	skips map[string]*skipLog // job id -> its last "slot skipped" warning
}

// skipLogEvery is the least time between two "slot skipped" warnings of
// one job: a job whose runs outlast its interval skips a slot each time,
// and the skips in between are counted into the next warning instead.
const skipLogEvery = time.Minute

type skipLog struct {
	last       time.Time
	suppressed int
}

// logSkip logs a skipped slot, at most once per skipLogEvery for a job.
func (w *recorderBufs) logSkip(log *slog.Logger, run Run) {
	now := run.FinishedAt
	s := w.skips[run.JobID]
	if s != nil && now.Sub(s.last) < skipLogEvery {
		s.suppressed++
		return
	}
	if s == nil {
		if w.skips == nil {
			w.skips = make(map[string]*skipLog)
		}
		if len(w.skips) >= 4096 {
			for id, o := range w.skips {
				if o.suppressed == 0 && now.Sub(o.last) >= skipLogEvery {
					delete(w.skips, id)
				}
			}
		}
		s = &skipLog{}
		w.skips[run.JobID] = s
	}
	log.Warn("cron: slot skipped", "job_id", run.JobID, "scheduled_at", run.ScheduledAt, "error", run.Error,
		"skipped_since_last_warning", s.suppressed)
	s.last, s.suppressed = now, 0
}

func (r *Runner) flushDirty(ctx context.Context, w *recorderBufs) {
	recs := w.recs[:0]
	r.mu.Lock()
	for _, e := range r.dirty {
		e.dirty = false
		if e.id == "" { // a freed slot
			continue
		}
		if e.pos < 0 {
			// Dropped since: its partition moved to another runner,
			// which writes next_run_at now.
			r.lastRuns = append(r.lastRuns, Recorded{ID: e.id, Bookkeeping: e.bookkeeping(), Version: r.version(e), LastOnly: true})
			continue
		}
		rec := record{id: e.id, bk: e.bookkeeping(), ver: r.version(e)}
		r.storedNext(e, &rec.bk)
		recs = append(recs, rec)
	}
	clear(r.dirty)
	r.dirty = r.dirty[:0]
	last := r.lastRuns
	r.lastRuns = nil
	if len(r.loose) > 0 {
		r.reap()
	}
	// Take the run records, leaving r.ended an empty buffer to fill.
	runs := r.ended
	r.ended = w.ended[:0]
	alerts := r.takeAlerts(runs)
	r.mu.Unlock()
	r.writeBatch(ctx, w, recs, last, runs)
	r.enqueueAlerts(ctx, alerts)
	for _, ev := range runs {
		if r.cfg.Observer != nil {
			r.cfg.Observer.RunFinished(*ev.run)
		}
		if ev.run.Status == StatusSkipped {
			w.logSkip(r.log, *ev.run)
		}
	}
	clear(recs)
	clear(runs)
	w.recs, w.ended = recs, runs[:0]
}

func (r *Runner) appendRun(ctx context.Context, run Run) {
	if err := r.sh.AppendRun(ctx, run); err != nil && !errors.Is(err, ErrNotFound) {
		r.log.Error("cron: append run", "job_id", run.JobID, "run_id", run.ID, "error", err)
	}
}

// writeBatch writes a pass through the [SharedStore]: one call for the
// bookkeeping (recs, and last, that of the runs of jobs this runner does
// not fire) and one for each runsPerCall runs. A batch whose call fails is
// written again one row at a time, so that a bad row costs only itself.
// runsPerCall bounds the runs of one AppendRuns call: a pass after a long
// stop, which has a run record for each job whose slots passed, writes
// them a few thousand at a time, not a million in one slice (and, on a
// database, one transaction). A variable for the tests only.
var runsPerCall = 4096

func (r *Runner) writeBatch(ctx context.Context, w *recorderBufs, recs []record, last []Recorded, runs []ended) {
	batch := w.batch[:0]
	for _, rec := range recs {
		batch = append(batch, Recorded{ID: rec.id, Bookkeeping: rec.bk, Version: rec.ver})
	}
	// An id appears once in a batch: the bookkeeping of a job this runner
	// fires has the last-run fields of its runs already, and of two
	// last-run records the later run's is kept.
	if len(last) > 0 {
		at := make(map[string]int, len(batch)+len(last))
		for i, b := range batch {
			at[b.ID] = i
		}
		for _, l := range last {
			if i, ok := at[l.ID]; ok {
				if batch[i].LastOnly && !l.LastRunAt.Before(batch[i].LastRunAt) {
					batch[i] = l
				}
				continue
			}
			at[l.ID] = len(batch)
			batch = append(batch, l)
		}
	}
	if len(batch) > 0 {
		if err := r.sh.RecordBatch(ctx, batch); err != nil {
			r.log.Warn("cron: record bookkeeping in a batch failed; writing it job by job", "jobs", len(batch), "error", err)
			for _, rec := range batch {
				if err := r.sh.RecordBatch(ctx, []Recorded{rec}); err != nil && !errors.Is(err, ErrNotFound) {
					r.log.Error("cron: record bookkeeping", "job_id", rec.ID, "error", err)
				}
			}
		}
	}
	clear(batch)
	w.batch = batch[:0]
	list := w.runs[:0]
	flush := func() {
		if len(list) == 0 {
			return
		}
		if err := r.sh.AppendRuns(ctx, list); err != nil {
			r.log.Warn("cron: append runs in a batch failed; writing them one by one", "runs", len(list), "error", err)
			for _, run := range list {
				r.appendRun(ctx, run)
			}
		}
		clear(list)
		list = list[:0]
	}
	for _, ev := range runs {
		if ev.drop {
			continue
		}
		list = append(list, *ev.run)
		if len(list) == runsPerCall {
			flush()
		}
	}
	flush()
	w.runs = list
}
