package cron

import (
	"context"
	"errors"
	"time"
)

// ErrNotFound is returned for an id that no job has.
var ErrNotFound = errors.New("cron: job not found")

// ErrExists is returned when a job is added with an id already in use.
var ErrExists = errors.New("cron: job id already exists")

// Store keeps jobs across restarts. The runner calls it; adapters implement
// it (store/jsonstore; [MemStore] in memory). Every implementation passes the
// conformance suite in store/storetest.
//
// Save and Delete are durable: they return once the change would survive a
// crash. Record carries run bookkeeping and need not be durable when it
// returns: a store may batch it with later changes.
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
}

// Bookkeeping is the part of a job the runner writes after each run or
// reschedule.
type Bookkeeping struct {
	LastRunAt  time.Time
	NextRunAt  time.Time
	LastStatus Status
	LastError  string
}

// Apply copies b into j's system fields.
func (b Bookkeeping) Apply(j *Job) {
	j.LastRunAt, j.NextRunAt, j.LastStatus, j.LastError = b.LastRunAt, b.NextRunAt, b.LastStatus, b.LastError
}

// BookkeepingOf returns j's system fields.
func BookkeepingOf(j *Job) Bookkeeping {
	return Bookkeeping{LastRunAt: j.LastRunAt, NextRunAt: j.NextRunAt, LastStatus: j.LastStatus, LastError: j.LastError}
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
}

// RunStore is an optional capability of a Store: a bounded history of runs
// per job. The runner appends each finished run when its Store implements it.
type RunStore interface {
	// AppendRun adds r to the history of r.JobID, dropping the oldest runs
	// beyond the store's limit. Like Record, it need not be durable at once.
	AppendRun(ctx context.Context, r Run) error
	// Runs returns up to limit of the most recent runs of job id, newest first.
	Runs(ctx context.Context, id string, limit int) ([]Run, error)
}

// Flusher is an optional capability of a Store that buffers writes: Flush
// makes everything written so far durable. The runner calls it on shutdown.
type Flusher interface {
	Flush(ctx context.Context) error
}

// Recorded is the bookkeeping of one job, as [BatchRecorder.RecordBatch]
// stores it.
type Recorded struct {
	ID string
	Bookkeeping
}

// BatchRecorder is an optional capability of a [Store] for which one write
// of many rows costs much less than as many writes of one row, as in a
// database. The runner's recorder then writes each of its passes with one
// RecordBatch call (for the bookkeeping of every job that changed) and one
// AppendRuns call (for every run that ended), in place of a [Store.Record]
// per job and a [RunStore.AppendRun] per run; and it starts a pass at most
// every [BatchEvery], so that each pass gathers what ended in that time.
// That delay is all the bookkeeping and history of a batch store lag behind
// the runs: [Runner.Get] of a job the runner fires answers from memory, and
// stopping the runner writes what is left. When a batch call fails, the
// recorder writes that batch again one row at a time, so a bad row costs
// only itself.
type BatchRecorder interface {
	// RecordBatch stores the bookkeeping of each job in recs, as Record
	// does; an id that no job has is skipped. An id appears at most once.
	RecordBatch(ctx context.Context, recs []Recorded) error
	// AppendRuns adds each run to its job's history, in order, as
	// [RunStore.AppendRun] does; a run of a job no longer stored is
	// skipped. It is called only on a store that is also a RunStore.
	AppendRuns(ctx context.Context, runs []Run) error
}

// BatchEvery is the least time between the starts of two passes of the
// recorder of a runner over a [BatchRecorder].
const BatchEvery = 100 * time.Millisecond
