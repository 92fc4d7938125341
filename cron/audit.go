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
//
// Its memory grows with the entries it keeps, and an entry is kept
// compactly: entries are encoded in blocks of up to 64, and within a
// block each entry's job id, run id, overrides and JSON are stored as
// the differences from what came before them in the block (the JSON of
// jobs made from one template, or of one job before and after a change,
// differ in a few fields). A block is dropped once all its entries are
// beyond Keep. An entry is decoded when it is read, and reads the same
// as it was appended.
type AuditBuffer struct {
	// Keep is how many entries are kept (the newest). Set it before first
	// use. Default (0) [DefaultAuditKeep].
	Keep int

	mu     sync.Mutex
	blocks []auditBlock // oldest first; the last one is open while not full
	skip   int          // entries of blocks[0] dropped (beyond Keep)
	n      int          // entries kept
	lastID int64
	enc    auditCoder // the state of the open block
	// times holds, by ID, the times of the entries kept whose time is
	// not in UTC (a Restore may give any), for the block keeps only the
	// instant.
	times map[int64]time.Time
}

// auditBlock is a run of encoded entries (see auditCoder.encode).
type auditBlock struct {
	data            []byte
	count           int
	firstID, lastID int64
	open            bool // the data is the coder's buffer
}

const (
	auditBlockLen    = 64       // entries per block at most
	auditBlockStream = 64 << 10 // bytes of fields per block beyond which it closes
)

var _ AuditLog = (*AuditBuffer)(nil)

// AppendAudit keeps e with the next ID, dropping the oldest entry beyond
// Keep.
func (b *AuditBuffer) AppendAudit(_ context.Context, e AuditEntry) (AuditEntry, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.lastID++
	e.ID = b.lastID
	e.Time = e.Time.UTC()
	b.put(&e)
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
	b.put(&e)
	return nil
}

// put keeps e, dropping the oldest entry beyond Keep. mu is held.
func (b *AuditBuffer) put(e *AuditEntry) {
	keep := b.Keep
	if keep <= 0 {
		keep = DefaultAuditKeep
	}
	if k := len(b.blocks); k == 0 || !b.blocks[k-1].open {
		b.enc.reset()
		b.blocks = append(b.blocks, auditBlock{firstID: e.ID, open: true})
	}
	blk := &b.blocks[len(b.blocks)-1]
	if e.Time.Location() != time.UTC {
		if b.times == nil {
			b.times = map[int64]time.Time{}
		}
		b.times[e.ID] = e.Time
	}
	b.enc.buf = b.enc.encode(b.enc.buf, e)
	blk.data = b.enc.buf
	blk.count++
	blk.lastID = e.ID
	if blk.count == auditBlockLen || len(b.enc.stream) > auditBlockStream {
		// Closed: its data gets an array of its own size, and the
		// coder's buffer serves the next block.
		blk.data = append(make([]byte, 0, len(blk.data)), blk.data...)
		blk.open = false
		b.enc.buf = b.enc.buf[:0]
	}
	b.n++
	for b.n > keep {
		b.n--
		b.skip++
		if first := &b.blocks[0]; b.skip == first.count && !first.open {
			for id := range b.times {
				if id <= first.lastID {
					delete(b.times, id)
				}
			}
			b.blocks[0] = auditBlock{}
			b.blocks = b.blocks[1:]
			b.skip = 0
		}
	}
}

// each calls fn with every entry kept whose ID is above after, oldest
// first, until fn returns false. The JSON fields of the entry are valid
// only during the call: fn copies an entry it keeps (see own). mu is held.
func (b *AuditBuffer) each(after int64, fn func(e *AuditEntry) bool) {
	var dec auditCoder
	for k := range b.blocks {
		blk := &b.blocks[k]
		if blk.lastID <= after {
			continue
		}
		dec.reset()
		data := blk.data
		for i := range blk.count {
			var e AuditEntry
			data = dec.decode(data, &e)
			if k == 0 && i < b.skip || e.ID <= after {
				continue
			}
			if t, ok := b.times[e.ID]; ok {
				e.Time = t
			}
			if !fn(&e) {
				return
			}
		}
	}
}

// Audit returns the page of entries q selects, oldest first.
func (b *AuditBuffer) Audit(_ context.Context, q AuditQuery) ([]AuditEntry, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	limit := q.limit()
	out := []AuditEntry{}
	more := false
	b.each(q.After, func(e *AuditEntry) bool {
		if !q.Matches(e) {
			return true
		}
		if len(out) == limit {
			more = true
			return false
		}
		out = append(out, own(e))
		return true
	})
	return out, more, nil
}

// Len returns the number of entries kept.
func (b *AuditBuffer) Len() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.n
}

// Entries returns every entry kept, oldest first.
func (b *AuditBuffer) Entries() []AuditEntry {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]AuditEntry, 0, b.n)
	b.each(0, func(e *AuditEntry) bool {
		out = append(out, own(e))
		return true
	})
	return out
}

// own returns e with JSON fields of its own.
func own(e *AuditEntry) AuditEntry {
	c := *e
	c.Overrides, c.Before, c.After = cloneRaw(e.Overrides), cloneRaw(e.Before), cloneRaw(e.After)
	return c
}
