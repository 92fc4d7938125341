package cron

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

// DefaultAuditKeep is how many audit entries an [AuditBuffer] keeps when
// its Keep is 0 (and so [MemStore] and store/jsonstore).
const DefaultAuditKeep = 10000

// AuditEntry records one write made through a management API (as
// cron/httpapi's): who made it, what it was, when, and the job before and
// after.
type AuditEntry struct {
	// ID numbers the entries of a log from 1, in the order they were
	// appended; it is the cursor of [AuditQuery.After]. The log gives it.
	ID int64 `json:"id"`
	// Time is when the write was answered.
	Time time.Time `json:"time"`
	// Who names the caller (a token's name), "" when unknown.
	Who string `json:"who"`
	// Role is the caller's role, "" when unknown.
	Role string `json:"role,omitempty"`
	// Method and Path are the request's (the path without the query).
	Method string `json:"method"`
	Path   string `json:"path"`
	// JobID is the job written, "" for a write of no job (a pause of the
	// whole service).
	JobID string `json:"job_id"`
	// Status is the HTTP status answered.
	Status int `json:"status"`
	// Before and After are the JSON of the job just before and just after
	// the write (absent before a create and after a delete), with its
	// secrets hidden ([Job.Redacted]).
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

// AuditLog is an optional capability of a [Store]: an audit log of the
// writes made through a management API, kept with the jobs (durably in
// store/jsonstore and store/sqlstore; on a database shared by several
// processes, one log that every process appends to and reads). cmd/ksana
// hands it to cron/httpapi when the store has it. Every adapter passes
// store/storetest.TestAuditLog.
type AuditLog interface {
	// AppendAudit stores e with the next ID (e.ID is ignored), durably,
	// and returns it with its ID and Time in UTC. A store may drop its
	// oldest entries beyond a bound it documents.
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
