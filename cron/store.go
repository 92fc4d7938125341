package cron

import (
	"context"
	"time"
)

// Store keeps jobs across restarts. The runner calls it; adapters implement
// it (store/jsonstore; [MemStore] in memory). Every implementation passes the
// conformance suite in store/storetest.
//
// Save and Delete are durable: they return once the change would survive a
// crash. Record carries run bookkeeping and need not be durable when it
// returns: a store may batch it with later changes, until Flush.
type Store interface {
	// Load returns every stored job, in creation order.
	Load(ctx context.Context) ([]Job, error)
	// Save creates or replaces the job with j.ID, durably. A new job goes
	// after all existing ones in creation order; a replaced one keeps its place.
	Save(ctx context.Context, j Job) error
	// Delete removes the job durably; an unknown id is ErrNotFound.
	Delete(ctx context.Context, id string) error
	// Record stores the bookkeeping of job id; an unknown id is ErrNotFound.
	Record(ctx context.Context, id string, b Bookkeeping) error
	// Flush makes everything written so far durable (the batched Records
	// and [RunStore.AppendRun]s); the runner calls it on shutdown. A store
	// that batches nothing returns nil.
	Flush(ctx context.Context) error
}

// Bookkeeping is the part of a job the runner writes after each run or
// reschedule.
type Bookkeeping struct {
	LastRunAt  time.Time
	NextRunAt  time.Time
	LastStatus Status
	LastError  string
	// Failures is the runs in a row that failed, LastAlert the last
	// transition alerted (see [AlertConfig]): they go with the last-run
	// fields.
	Failures  int
	LastAlert string
}

// Apply copies b into j's system fields.
func (b Bookkeeping) Apply(j *Job) {
	j.LastRunAt, j.NextRunAt, j.LastStatus, j.LastError = b.LastRunAt, b.NextRunAt, b.LastStatus, b.LastError
	j.Failures, j.LastAlert = b.Failures, b.LastAlert
}

// Bookkeeping returns j's system fields.
func (j *Job) Bookkeeping() Bookkeeping {
	return Bookkeeping{LastRunAt: j.LastRunAt, NextRunAt: j.NextRunAt, LastStatus: j.LastStatus, LastError: j.LastError,
		Failures: j.Failures, LastAlert: j.LastAlert}
}

// Run is the record of one run of a job, kept in a job's run history.
type Run struct {
	ID          string    `json:"run_id"`
	JobID       string    `json:"job_id"`
	ScheduledAt time.Time `json:"scheduled_at"`
	TriggeredAt time.Time `json:"triggered_at"`
	FinishedAt  time.Time `json:"finished_at"`
	Status      Status    `json:"status"`
	Attempts    int       `json:"attempts"`
	HTTPStatus  int       `json:"http_status,omitempty"`
	Error       string    `json:"error,omitempty"`
	Latency     Duration  `json:"latency"`
	// Instance names the runner (the process) that claimed the run, in a
	// store shared by several (see [SharedStore]); empty otherwise.
	Instance string `json:"instance,omitempty"`
	// Reason says why a skipped or missed slot was not called, in a few
	// fixed words (see [ReasonDowntime] and the other Reason constants);
	// empty for a run that was called.
	Reason string `json:"reason,omitempty"`
	// Slots is the number of consecutive slots of the job that this one
	// record stands for, when more than one: a burst not called for one
	// reason (a downtime, a pause, a long overlap) is one record,
	// ScheduledAt its first slot. 0 means one.
	Slots int `json:"slots,omitempty"`
	// Alert is the change of the job's health this run caused and that
	// was alerted (failing, failing_streak, recovered, paused: see
	// [AlertConfig]); empty for none.
	Alert string `json:"alert,omitempty"`
	// Trigger says what started a run that was called: [TriggerSchedule]
	// (a slot of the job's schedule) or [TriggerRunNow]. Empty for a
	// slot not called (skipped or missed: see Reason), and in records
	// stored before the trigger was kept.
	Trigger string `json:"trigger,omitempty"`
	// TriggeredBy names who asked for a run-now ([Actor.Name]: a token's
	// name, "local" for a Go call); empty for other triggers.
	TriggeredBy string `json:"triggered_by,omitempty"`
	// AttemptLog lists each attempt of a run that was tried more than
	// once (see [Job].MaxRetries), in order; the last one's outcome is the
	// run's. Empty for a run tried once: the run's own fields say it all.
	AttemptLog []Attempt `json:"attempt_log,omitempty"`
}

// Attempt is one try of a run (see [Run.AttemptLog]).
type Attempt struct {
	// StartedAt is when the try began.
	StartedAt time.Time `json:"started_at"`
	// Duration is how long it took.
	Duration Duration `json:"duration"`
	// Status is its outcome: success, failed or timeout.
	Status Status `json:"status"`
	// HTTPStatus is the callback's answer, 0 for none.
	HTTPStatus int `json:"http_status,omitempty"`
	// Error says why it failed, as [Run.Error] does.
	Error string `json:"error,omitempty"`
}

// RunStore is an optional capability of a Store: a bounded history of runs
// per job. The runner appends each finished run when its Store implements
// it, and answers [Runner.Runs], [Runner.QueryRuns] and [Runner.RunByID]
// from it. Its answers hold the runs the store keeps (the newest of each
// job, up to its limit) that finished: a run claimed and in flight is left
// out.
type RunStore interface {
	// AppendRun adds r to the history of r.JobID, dropping the oldest runs
	// beyond the store's limit. Like Record, it need not be durable at once.
	AppendRun(ctx context.Context, r Run) error
	// Runs returns up to limit of the most recent runs of job id, newest first.
	Runs(ctx context.Context, id string, limit int) ([]Run, error)
	// QueryRuns returns the page of q (q passed [RunQuery.Check]) from the
	// history of every job: the runs that match its filters and come after
	// q.After, newest first, at most its page size; and the cursor of the
	// next page, zero when no run follows. A cursor of a run removed since
	// still works: the page starts after its position.
	QueryRuns(ctx context.Context, q RunQuery) ([]Run, RunCursor, error)
	// RunByID returns the finished run with id runID, whichever job it
	// belongs to; a run unknown, dropped from the history or not finished
	// is an error wrapping [ErrNotFound].
	RunByID(ctx context.Context, runID string) (Run, error)
}

// Recorded is the bookkeeping of one job, as [SharedStore.RecordBatch]
// stores it.
type Recorded struct {
	ID string
	Bookkeeping
	// Version is the version of the job's row that the bookkeeping was
	// computed from (see [SharedStore]): the store writes it only while the
	// row still has that version, so that an acknowledged write of the job
	// (a pause, a resume, a PATCH) is never overwritten by the bookkeeping
	// of a run that ended before it.
	Version int64
	// LastOnly marks the bookkeeping of a run of a job this runner does
	// not fire (a run-now of a job another runner holds, or a slot claimed
	// before the job's partition moved away): only LastRunAt, LastStatus
	// and LastError are written, NextRunAt is the firing runner's.
	LastOnly bool
}
