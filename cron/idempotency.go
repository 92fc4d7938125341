package cron

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"
	"time"
)

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
// them in memory: they are lost with the process.
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

// idempotencyMemory is an [IdempotencyStore] in the memory of one
// process: its keys are lost with it. It keeps at most Max entries,
// dropping the oldest answered ones first, and drops an entry once it is
// past [IdempotencyWindow] at a later reservation. The zero value is
// ready to use; it is safe for concurrent use. [MemStore] and
// store/jsonstore keep their keys in one.
type idempotencyMemory struct {
	// Max is how many keys are kept at most. Set it before first use.
	// Default (0) [DefaultIdempotencyKeys].
	Max int

	mu    sync.Mutex
	m     map[idemKey]IdempotencyEntry
	order []idemRef // in the order they were reserved, for expiry and the bound
}

type idemKey struct{ job, key string }

// idemRef is a reservation in idempotencyMemory.order: stale once its key
// is forgotten or reserved again.
type idemRef struct {
	k  idemKey
	at time.Time
}

var _ IdempotencyStore = (*idempotencyMemory)(nil)

// ReserveIdempotencyKey reserves key for job (see [IdempotencyStore]),
// after dropping the entries that are past the window or beyond Max.
func (c *idempotencyMemory) ReserveIdempotencyKey(_ context.Context, job, key string, e IdempotencyEntry) (IdempotencyEntry, bool, error) {
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
func (c *idempotencyMemory) CompleteIdempotencyKey(_ context.Context, job, key string, at time.Time, runID string) error {
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
func (c *idempotencyMemory) ForgetIdempotencyKey(_ context.Context, job, key string, at time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := idemKey{job, key}
	if e, ok := c.m[k]; ok && e.At.Equal(at) && e.RunID == "" {
		delete(c.m, k)
	}
	return nil
}

// Len returns the number of keys kept.
func (c *idempotencyMemory) Len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.m)
}

// A repeat of a run-now whose first request is still being answered (its
// key reserved, no run recorded yet) waits up to idempotencyWait for the
// answer, then is [ErrIdempotencyPending]. A reservation that has stayed
// without a run for idempotencyAbandon was left by a run-now that never
// finished (its runner stopped, or its store failed to record the run):
// the key is taken over.
const (
	idempotencyWait    = 10 * time.Second
	idempotencyAbandon = 5 * time.Minute
)

// idemSum is the sum that tells a repeat of a run-now from another use of
// its key: the SHA-256 of its options, the key aside.
func idemSum(o RunOptions) [32]byte {
	o.IdempotencyKey = ""
	type wire struct {
		Body    *string           `json:"body,omitempty"`
		Headers map[string]string `json:"headers,omitempty"`
		Args    json.RawMessage   `json:"args,omitempty"`
		Force   bool              `json:"force,omitempty"`
	}
	b, _ := json.Marshal(wire{Body: o.Body, Headers: o.Headers, Args: o.Args, Force: o.Force})
	return sha256.Sum256(b)
}

// runNowOnce answers a run-now with an idempotency key: the call that
// reserves the key queues the run and records it; a repeat (same job,
// key and options) answers the recorded run, waiting for it while the
// first call is being answered.
func (r *Runner) runNowOnce(ctx context.Context, id string, opts RunOptions) (RunTicket, error) {
	key, sum := opts.IdempotencyKey, idemSum(opts)
	var waitUntil time.Time
	pause := 5 * time.Millisecond
	for {
		now := r.now()
		e, first, err := r.idem.ReserveIdempotencyKey(ctx, id, key, IdempotencyEntry{Sum: sum, At: now})
		if err != nil {
			if ctx.Err() != nil {
				return RunTicket{}, ctx.Err()
			}
			return RunTicket{}, unavailable("idempotency key", err)
		}
		if first {
			runID, err := r.runNowFirst(ctx, id, key, e.At, opts)
			return RunTicket{RunID: runID}, err
		}
		if e.Sum != sum {
			return RunTicket{}, ErrIdempotencyKeyReused
		}
		if e.RunID != "" {
			return RunTicket{RunID: e.RunID, Replayed: true}, nil
		}
		// The first run-now with this key is being answered, here or on
		// another runner sharing the store.
		if now.Sub(e.At) >= r.idemAbandon() {
			if err := r.idem.ForgetIdempotencyKey(ctx, id, key, e.At); err != nil {
				return RunTicket{}, unavailable("idempotency key", err)
			}
			r.log.Warn("cron: an idempotency key reserved long ago has no run: the run-now that reserved it never finished; taken over",
				"job_id", id, "reserved_at", e.At)
			continue
		}
		if waitUntil.IsZero() {
			waitUntil = now.Add(r.idemWait())
		}
		if !now.Before(waitUntil) {
			return RunTicket{}, fmt.Errorf("%w (reserved at %s); send it again later", ErrIdempotencyPending, e.At.UTC().Format(time.RFC3339))
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return RunTicket{}, ctx.Err()
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// runNowFirst queues the run of the run-now that reserved key (at at)
// and records it; one that queued nothing (or panicked) gives the key
// up, so that it may be sent again. The record is written before it
// returns, and is not cut short by ctx ending.
func (r *Runner) runNowFirst(ctx context.Context, id, key string, at time.Time, opts RunOptions) (string, error) {
	var runID string
	defer func() {
		if runID != "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
		defer cancel()
		if err := r.idem.ForgetIdempotencyKey(ctx, id, key, at); err != nil {
			r.log.Error("cron: giving up an idempotency key failed: a repeat waits until the reservation is taken over",
				"job_id", id, "error", err)
		}
	}()
	runID, err := r.runNow(ctx, id, opts)
	if err != nil {
		return "", err
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storeTimeout)
	defer cancel()
	if err := r.idem.CompleteIdempotencyKey(cctx, id, key, at, runID); err != nil {
		// The run is queued: say so. A repeat waits until the
		// reservation is taken over.
		r.log.Error("cron: recording the run of an idempotency key failed", "job_id", id, "run_id", runID, "error", err)
	}
	return runID, nil
}

// idemTimes are the idempotency waits of a runner; tests shorten them.
type idemTimes struct{ wait, abandon time.Duration }

func (r *Runner) idemWait() time.Duration {
	if r.idemT.wait > 0 {
		return r.idemT.wait
	}
	return idempotencyWait
}

func (r *Runner) idemAbandon() time.Duration {
	if r.idemT.abandon > 0 {
		return r.idemT.abandon
	}
	return idempotencyAbandon
}
