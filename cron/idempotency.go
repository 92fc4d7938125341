package cron

import (
	"context"
	"sync"
	"time"
)

// IdempotencyWindow is how long an idempotency key of a run-now holds: an
// entry reserved this long or longer before a new reservation of its key
// does not count, and a store deletes such entries now and then.
const IdempotencyWindow = 24 * time.Hour

// DefaultIdempotencyKeys is how many keys an [IdempotencyMemory] keeps
// when its Max is 0.
const DefaultIdempotencyKeys = 100_000

// IdempotencyEntry is what an [IdempotencyStore] keeps for one key of one
// job: the request that reserved it and, once it was answered, its run.
type IdempotencyEntry struct {
	// Sum is the SHA-256 of the request's body: a repeat with another
	// body is not a repeat.
	Sum [32]byte
	// RunID is the id of the run the request queued, "" while the request
	// that reserved the key is still being answered.
	RunID string
	// At is when the key was reserved. With the job and the key it names
	// the reservation: [IdempotencyStore.CompleteIdempotencyKey] and
	// [IdempotencyStore.ForgetIdempotencyKey] act on that reservation
	// only.
	At time.Time
}

// IdempotencyStore is an optional capability of a [Store]: the
// idempotency keys of run-now requests (the Idempotency-Key header of
// cron/httpapi), so that a request sent again with the same key answers
// as the first did without a second run. On a database shared by several
// processes (store/sqlstore) every process reserves keys in the same
// table, so that a repeat that reaches another process is still known,
// and the keys survive a restart; [MemStore] and store/jsonstore keep
// them in memory ([IdempotencyMemory]): they are lost with the process.
// cmd/ksana hands it to cron/httpapi when the store has it. Every adapter
// passes the Idempotency case of store/storetest.TestCronStore.
//
// Keys are per job: the same key for two jobs is two keys. An entry of a
// deleted job is harmless: it expires with the others.
type IdempotencyStore interface {
	// ReserveIdempotencyKey reserves key for job with e's Sum and At (its
	// RunID is ignored) and returns the entry kept and true, unless an
	// entry that counts holds the key: then it returns that entry and
	// false, and changes nothing. An entry reserved [IdempotencyWindow]
	// or more before e.At does not count: the reservation replaces it.
	// Of concurrent reservations of one key, by any number of processes
	// on the store, exactly one gets true. At is kept to the microsecond
	// at least, in UTC; give the At returned to the two calls below.
	ReserveIdempotencyKey(ctx context.Context, job, key string, e IdempotencyEntry) (IdempotencyEntry, bool, error)
	// CompleteIdempotencyKey records runID in the entry of job and key
	// reserved at at, once the request that reserved it has queued its
	// run. It does nothing when that reservation is gone or already has
	// a run.
	CompleteIdempotencyKey(ctx context.Context, job, key string, at time.Time, runID string) error
	// ForgetIdempotencyKey deletes the entry of job and key reserved at
	// at if it has no run yet, so that the key may be sent again: the
	// request that reserved it failed, or never finished.
	ForgetIdempotencyKey(ctx context.Context, job, key string, at time.Time) error
}

// IdempotencyMemory is an [IdempotencyStore] in the memory of one
// process: its keys are lost with it. It keeps at most Max entries,
// dropping the oldest answered ones first, and drops an entry once it is
// past [IdempotencyWindow] at a later reservation. The zero value is
// ready to use; it is safe for concurrent use. [MemStore] and
// store/jsonstore keep their keys in one.
type IdempotencyMemory struct {
	// Max is how many keys are kept at most. Set it before first use.
	// Default (0) [DefaultIdempotencyKeys].
	Max int

	mu    sync.Mutex
	m     map[idemKey]IdempotencyEntry
	order []idemRef // in the order they were reserved, for expiry and the bound
}

type idemKey struct{ job, key string }

// idemRef is a reservation in IdempotencyMemory.order: stale once its key
// is forgotten or reserved again.
type idemRef struct {
	k  idemKey
	at time.Time
}

var _ IdempotencyStore = (*IdempotencyMemory)(nil)

// ReserveIdempotencyKey reserves key for job (see [IdempotencyStore]),
// after dropping the entries that are past the window or beyond Max.
func (c *IdempotencyMemory) ReserveIdempotencyKey(_ context.Context, job, key string, e IdempotencyEntry) (IdempotencyEntry, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = make(map[idemKey]IdempotencyEntry)
	}
	e.RunID = ""
	e.At = e.At.UTC()
	limit := c.Max
	if limit <= 0 {
		limit = DefaultIdempotencyKeys
	}
	for n := len(c.order); n > 0; n-- {
		r := c.order[0]
		old, ok := c.m[r.k]
		if ok && old.At.Equal(r.at) {
			young := e.At.Sub(old.At) < IdempotencyWindow
			if young && len(c.m) < limit {
				break
			}
			if young && old.RunID == "" {
				// Beyond the bound but being answered: kept until it
				// is, behind the others.
				c.order = append(c.order[1:], r)
				continue
			}
			delete(c.m, r.k)
		}
		c.order = c.order[1:]
	}
	if len(c.order) > 2*len(c.m)+1024 {
		// Forgotten reservations behind a live one: drop their refs.
		live := c.order[:0]
		for _, r := range c.order {
			if old, ok := c.m[r.k]; ok && old.At.Equal(r.at) {
				live = append(live, r)
			}
		}
		clear(c.order[len(live):])
		c.order = live
	}
	k := idemKey{job, key}
	if old, ok := c.m[k]; ok && e.At.Sub(old.At) < IdempotencyWindow {
		return old, false, nil
	}
	// None, or one past the window not yet reached above (behind a
	// younger one being answered): replaced.
	c.m[k] = e
	c.order = append(c.order, idemRef{k, e.At})
	return e, true, nil
}

// CompleteIdempotencyKey records runID in the reservation of job and key
// made at at.
func (c *IdempotencyMemory) CompleteIdempotencyKey(_ context.Context, job, key string, at time.Time, runID string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := idemKey{job, key}
	if e, ok := c.m[k]; ok && e.At.Equal(at) && e.RunID == "" {
		e.RunID = runID
		c.m[k] = e
	}
	return nil
}

// ForgetIdempotencyKey deletes the reservation of job and key made at at
// if it has no run.
func (c *IdempotencyMemory) ForgetIdempotencyKey(_ context.Context, job, key string, at time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := idemKey{job, key}
	if e, ok := c.m[k]; ok && e.At.Equal(at) && e.RunID == "" {
		delete(c.m, k)
	}
	return nil
}

// Len returns the number of keys kept.
func (c *IdempotencyMemory) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}
