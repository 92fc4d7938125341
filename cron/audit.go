package cron

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// AuditEntry records one change made through a [Runner]: who asked
// (the [Actor] of the change's context), what it was, when, the job (or
// the service pause) before and after, with its secrets hidden
// ([Job.Redacted]). The runner writes exactly one entry per change,
// whoever asks: the REST API, the console, a Go caller or the runner
// itself ([ActorRunner]).
type AuditEntry struct {
	// ID numbers the entries of a log from 1, in the order they were
	// appended; it is the cursor of [AuditQuery.After]. The log gives it.
	ID int64 `json:"id"`
	// Time is when the change was made.
	Time time.Time `json:"time"`
	// Who names the actor ([Actor.Name]).
	Who string `json:"who"`
	// Role is the actor's role, "" when unknown.
	Role string `json:"role,omitempty"`
	// Action is what was done: create, update, delete, pause, resume,
	// run-now, pause-all or resume-all (see [Action]).
	Action Action `json:"action"`
	// JobID is the job changed, "" for a change of the service (a
	// service-wide pause).
	JobID string `json:"job_id"`
	// RunID is the run a run-now queued.
	RunID string `json:"run_id,omitempty"`
	// Replay marks a run-now sent again with the Idempotency-Key of an
	// earlier one: it queued no run, RunID is the earlier one's.
	Replay bool `json:"replay,omitempty"`
	// Overrides are the options of a run-now (see [RunOptions]): the
	// names of the headers it replaced, whether it replaced the body or
	// the args (their values hidden), force and the idempotency key.
	Overrides json.RawMessage `json:"overrides,omitempty"`
	// Before and After are the JSON of the job just before and just after
	// the change (absent before a create and after a delete), with its
	// secrets hidden, or of the service pause for pause-all and
	// resume-all.
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// AuditQuery selects a page of an [AuditLog]: the entries with an ID
// above After that match every filter set, oldest first, at most Limit.
type AuditQuery struct {
	// JobID keeps the entries of that job; "" any.
	JobID string
	// Who keeps the entries of that caller; "" any.
	Who string
	// Since keeps the entries made at or after it; zero any.
	Since time.Time
	// After keeps the entries with a higher ID: the ID of the last entry
	// of the previous page, 0 from the first.
	After int64
	// Limit is the most entries returned; <= 0 is 100.
	Limit int
}

// Matches reports whether e passes q's filters (JobID, Who, Since and
// After).
func (q *AuditQuery) Matches(e *AuditEntry) bool {
	return e.ID > q.After && (q.JobID == "" || e.JobID == q.JobID) && (q.Who == "" || e.Who == q.Who) &&
		(q.Since.IsZero() || !e.Time.Before(q.Since))
}

// limit returns q.Limit with its default.
func (q *AuditQuery) limit() int {
	if q.Limit <= 0 {
		return 100
	}
	return q.Limit
}

// AuditLog keeps the audit records of a [Runner]. It is an optional
// capability of a [Store], kept with the jobs (durably in store/jsonstore
// and store/sqlstore; on a database shared by several processes, one log
// that every process appends to and reads): the runner writes to its
// store's log when it has one, to [Config.AuditLog] when set, and to an
// [AuditBuffer] otherwise. Every adapter passes store/storetest.TestAuditLog.
type AuditLog interface {
	// AppendAudit stores e with the next ID (e.ID is ignored) and returns
	// it with its ID and Time in UTC. The record is durable when it
	// returns, or within a short bound the store documents (so that the
	// records of concurrent changes share their syncs). A store may drop
	// its oldest entries beyond a bound it documents.
	AppendAudit(ctx context.Context, e AuditEntry) (AuditEntry, error)
	// Audit returns the page of entries q selects, oldest first, and
	// whether more entries match after the last one returned.
	Audit(ctx context.Context, q AuditQuery) (entries []AuditEntry, more bool, err error)
}

// AuditBuffer is an [AuditLog] in memory that keeps the newest Keep
// entries. The zero value is ready to use; it is safe for concurrent use.
// [MemStore] keeps its audit log in one.
type AuditBuffer struct {
	// Keep is how many entries are kept (the newest). Set it before first
	// use. Default (0) [DefaultAuditKeep].
	Keep int

	mu      sync.Mutex
	entries []AuditEntry // ring, oldest at start once full
	start   int
	lastID  int64
}

var _ AuditLog = (*AuditBuffer)(nil)

// AppendAudit keeps e with the next ID, dropping the oldest entry beyond
// Keep.
func (b *AuditBuffer) AppendAudit(_ context.Context, e AuditEntry) (AuditEntry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastID++
	e.ID = b.lastID
	e.Time = e.Time.UTC()
	b.put(e)
	return e, nil
}

// Restore keeps e with the ID it has, as a store does that reloads its
// log: the next entry appended gets the ID after it. An ID not above the
// last one kept is an error.
func (b *AuditBuffer) Restore(e AuditEntry) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e.ID <= b.lastID {
		return fmt.Errorf("cron: audit entry %d follows entry %d", e.ID, b.lastID)
	}
	b.lastID = e.ID
	b.put(e)
	return nil
}

// put keeps e in the ring. mu is held.
func (b *AuditBuffer) put(e AuditEntry) {
	keep := b.Keep
	if keep <= 0 {
		keep = DefaultAuditKeep
	}
	if len(b.entries) < keep {
		b.entries = append(b.entries, e)
		return
	}
	b.entries[b.start] = e
	b.start = (b.start + 1) % len(b.entries)
}

// Audit returns the page of entries q selects, oldest first.
func (b *AuditBuffer) Audit(_ context.Context, q AuditQuery) ([]AuditEntry, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := q.limit()
	out := []AuditEntry{}
	n := len(b.entries)
	for i := range n {
		e := &b.entries[(b.start+i)%n]
		if !q.Matches(e) {
			continue
		}
		if len(out) == limit {
			return out, true, nil
		}
		out = append(out, *e)
	}
	return out, false, nil
}

// Len returns the number of entries kept.
func (b *AuditBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.entries)
}

// Entries returns every entry kept, oldest first.
func (b *AuditBuffer) Entries() []AuditEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := len(b.entries)
	out := make([]AuditEntry, 0, n)
	for i := range n {
		out = append(out, b.entries[(b.start+i)%n])
	}
	return out
}
