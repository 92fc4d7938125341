package scheduler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"
)

// JobSpec is what a job is about: the request it was made for and what a
// node needs to run it. It is written once, when the job is opened, and
// read by whichever instance dispatches the job again after a failover.
type JobSpec struct {
	RequestID string `json:"request_id"`
	SessionID string `json:"session_id"`
	TurnID    string `json:"turn_id,omitempty"`
	Pool      string `json:"pool,omitempty"`
	Model     string `json:"model,omitempty"`
	// Reason is the finalize reason: manual and timeout end the turn,
	// max_duration (or none) keeps it going.
	Reason  string `json:"reason,omitempty"`
	Payload []byte `json:"payload,omitempty"`
	// Instance is the instance the request came through: where the
	// answer goes when the session's owner binding is missing.
	Instance string `json:"instance,omitempty"`
}

// Outcome statuses.
const (
	OutcomeResult = "result" // the node sent a result
	OutcomeFailed = "failed" // the job failed; Error says why
)

// Outcome is how a job ended: written once, and returned to every session
// that asks for the job afterwards.
type Outcome struct {
	Status  string `json:"status"` // OutcomeResult or OutcomeFailed
	NodeID  string `json:"node_id,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Payload []byte `json:"payload,omitempty"`
	Error   string `json:"error,omitempty"`
}

// BookEntry is everything a [JobBook] holds about a job.
type BookEntry struct {
	Spec JobSpec
	// Tried lists the nodes the job was dispatched to, oldest first.
	Tried []string
	// Waiters are the sessions to answer, the opener first.
	Waiters []string
	// Outcome is set once the job ended.
	Outcome *Outcome
}

// ErrBookCorrupt: a stored book entry does not decode. It is left as it is.
var ErrBookCorrupt = errors.New("corrupt job book entry")

// JobBook keeps, per job, what the lifecycle in [JobStore] does not: the
// job's spec, the nodes it was tried on, the sessions waiting for it and
// its outcome. In Redis it is the hash {prefix}:v1:jobs:{job:<job_id>}:book,
// in the same Redis Cluster slot as the job's lifecycle hash. Every method
// is atomic. Implementations: [MemBook]; store/redisstore.Book. Each passes
// store/storetest.TestJobBook.
type JobBook interface {
	// Open stores spec as jobID's spec, with spec.SessionID as its first
	// waiter, unless the job has a spec already. It returns the stored
	// entry and whether this call created it: of any number of concurrent
	// Opens of one job id exactly one gets true.
	Open(ctx context.Context, jobID string, spec JobSpec, ttl time.Duration) (BookEntry, bool, error)
	// Entry returns the job's entry, or [ErrJobNotFound].
	Entry(ctx context.Context, jobID string) (BookEntry, error)
	// AddTried appends nodeID to the job's tried nodes (once).
	AddTried(ctx context.Context, jobID, nodeID string) error
	// Watch adds sessionID to the job's waiters, unless the job has an
	// outcome already: then it returns the outcome and true, and adds
	// nothing. Exactly one of Watch and [JobBook.Finish] sees a session
	// that races with the job's end: Watch returns the outcome, or Finish
	// lists the session.
	Watch(ctx context.Context, jobID, sessionID string) (Outcome, bool, error)
	// Finish stores out as the job's outcome unless it has one, and returns
	// the job's entry: its spec, its waiters and the stored outcome. A
	// second Finish changes nothing and returns the first outcome.
	Finish(ctx context.Context, jobID string, out Outcome) (BookEntry, error)
}

// CheckSpec validates a job spec for [JobBook.Open].
func CheckSpec(jobID string, spec JobSpec) error {
	if err := checkID("job_id", jobID); err != nil {
		return err
	}
	if err := checkID("request_id", spec.RequestID); err != nil {
		return err
	}
	return checkID("session_id", spec.SessionID)
}

// MemBook is the in-memory [JobBook]: the reference implementation. It is
// safe for concurrent use; entries expire after the ttl given to Open.
type MemBook struct {
	mu      sync.Mutex
	entries map[string]*memBookEntry
}

type memBookEntry struct {
	e       BookEntry
	expires time.Time
}

var _ JobBook = (*MemBook)(nil)

// NewMemBook returns an empty book.
func NewMemBook() *MemBook { return &MemBook{entries: map[string]*memBookEntry{}} }

func (b *MemBook) get(jobID string) *memBookEntry {
	e := b.entries[jobID]
	if e != nil && !time.Now().Before(e.expires) {
		delete(b.entries, jobID)
		return nil
	}
	return e
}

func cloneEntry(e BookEntry) BookEntry {
	e.Tried = slices.Clone(e.Tried)
	e.Waiters = slices.Clone(e.Waiters)
	e.Spec.Payload = slices.Clone(e.Spec.Payload)
	if e.Outcome != nil {
		o := *e.Outcome
		o.Payload = slices.Clone(o.Payload)
		e.Outcome = &o
	}
	return e
}

// Open implements [JobBook].
func (b *MemBook) Open(ctx context.Context, jobID string, spec JobSpec, ttl time.Duration) (BookEntry, bool, error) {
	if err := CheckSpec(jobID, spec); err != nil {
		return BookEntry{}, false, err
	}
	if ttl <= 0 {
		return BookEntry{}, false, argErr("ttl", fmt.Sprintf("%v is not positive", ttl))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.get(jobID); e != nil {
		return cloneEntry(e.e), false, nil
	}
	// Round-trip through JSON, as a store would.
	data, err := json.Marshal(spec)
	if err != nil {
		return BookEntry{}, false, err
	}
	var stored JobSpec
	if err := json.Unmarshal(data, &stored); err != nil {
		return BookEntry{}, false, err
	}
	e := &memBookEntry{e: BookEntry{Spec: stored, Waiters: []string{spec.SessionID}}, expires: time.Now().Add(ttl)}
	b.entries[jobID] = e
	return cloneEntry(e.e), true, nil
}

// Entry implements [JobBook].
func (b *MemBook) Entry(ctx context.Context, jobID string) (BookEntry, error) {
	if err := checkID("job_id", jobID); err != nil {
		return BookEntry{}, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(jobID)
	if e == nil {
		return BookEntry{}, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
	return cloneEntry(e.e), nil
}

// AddTried implements [JobBook].
func (b *MemBook) AddTried(ctx context.Context, jobID, nodeID string) error {
	if err := checkID("job_id", jobID); err != nil {
		return err
	}
	if err := checkID("node_id", nodeID); err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(jobID)
	if e == nil {
		return fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
	if !slices.Contains(e.e.Tried, nodeID) {
		e.e.Tried = append(e.e.Tried, nodeID)
	}
	return nil
}

// Watch implements [JobBook].
func (b *MemBook) Watch(ctx context.Context, jobID, sessionID string) (Outcome, bool, error) {
	if err := checkID("job_id", jobID); err != nil {
		return Outcome{}, false, err
	}
	if err := checkID("session_id", sessionID); err != nil {
		return Outcome{}, false, err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(jobID)
	if e == nil {
		return Outcome{}, false, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
	if e.e.Outcome != nil {
		return *cloneEntry(e.e).Outcome, true, nil
	}
	if !slices.Contains(e.e.Waiters, sessionID) {
		e.e.Waiters = append(e.e.Waiters, sessionID)
	}
	return Outcome{}, false, nil
}

// Finish implements [JobBook].
func (b *MemBook) Finish(ctx context.Context, jobID string, out Outcome) (BookEntry, error) {
	if err := checkID("job_id", jobID); err != nil {
		return BookEntry{}, err
	}
	if out.Status != OutcomeResult && out.Status != OutcomeFailed {
		return BookEntry{}, argErr("status", fmt.Sprintf("%q (result|failed)", out.Status))
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.get(jobID)
	if e == nil {
		return BookEntry{}, fmt.Errorf("job %q: %w", jobID, ErrJobNotFound)
	}
	if e.e.Outcome == nil {
		o := out
		o.Payload = slices.Clone(out.Payload)
		e.e.Outcome = &o
	}
	return cloneEntry(e.e), nil
}
