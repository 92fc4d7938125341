package storetest

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

func cronCaseIdempotency(t *testing.T, s cron.Store) {
	is, ok := s.(cron.IdempotencyStore)
	if !ok {
		t.Skip("the store is no cron.IdempotencyStore")
	}
	ctx := context.Background()
	sumA, sumB := sha256.Sum256([]byte(`{"body":"a"}`)), sha256.Sum256(nil)
	reserve := func(job, key string, sum [32]byte, at time.Time) (cron.IdempotencyEntry, bool) {
		t.Helper()
		e, first, err := is.ReserveIdempotencyKey(ctx, job, key, cron.IdempotencyEntry{Sum: sum, At: at, RunID: "ignored"})
		if err != nil {
			t.Fatalf("ReserveIdempotencyKey(%s, %s): %v", job, key, err)
		}
		return e, first
	}
	same := func(what string, got, want cron.IdempotencyEntry) {
		t.Helper()
		if got.Sum != want.Sum || got.RunID != want.RunID || !got.At.Equal(want.At) || got.At.Location() != time.UTC {
			t.Errorf("%s: entry %x %q %v, want %x %q %v (UTC)", what, got.Sum[:4], got.RunID, got.At, want.Sum[:4], want.RunID, want.At)
		}
	}

	// The first reservation of a key wins; the next one gets it.
	e1, first := reserve("j1", "k", sumA, cronTime)
	if !first {
		t.Fatalf("first reservation of j1/k: not first")
	}
	same("first reservation", e1, cron.IdempotencyEntry{Sum: sumA, At: cronTime})
	if e, first := reserve("j1", "k", sumB, cronTime.Add(time.Minute)); first {
		t.Errorf("second reservation of j1/k: first, want the entry of the first")
	} else {
		same("second reservation (pending)", e, e1)
	}
	// Keys are per job.
	if _, first := reserve("j2", "k", sumB, cronTime); !first {
		t.Errorf("j2/k: not first; a key of another job is another key")
	}

	// Complete records the run of that reservation only, once.
	if err := is.CompleteIdempotencyKey(ctx, "j1", "k", e1.At.Add(time.Microsecond), "run-other"); err != nil {
		t.Fatal(err)
	}
	if e, _ := reserve("j1", "k", sumA, cronTime.Add(time.Minute)); e.RunID != "" {
		t.Errorf("after a Complete of another reservation: run %q, want none", e.RunID)
	}
	if err := is.CompleteIdempotencyKey(ctx, "j1", "k", e1.At, "run-1"); err != nil {
		t.Fatal(err)
	}
	if err := is.CompleteIdempotencyKey(ctx, "j1", "k", e1.At, "run-2"); err != nil {
		t.Fatal(err)
	}
	done := cron.IdempotencyEntry{Sum: sumA, RunID: "run-1", At: cronTime}
	if e, first := reserve("j1", "k", sumA, cronTime.Add(time.Hour)); first {
		t.Errorf("reservation after Complete: first")
	} else {
		same("after Complete", e, done)
	}
	// Forget leaves an entry with a run alone.
	if err := is.ForgetIdempotencyKey(ctx, "j1", "k", e1.At); err != nil {
		t.Fatal(err)
	}
	if e, first := reserve("j1", "k", sumA, cronTime.Add(time.Hour)); first {
		t.Errorf("Forget of an entry with a run deleted it")
	} else {
		same("after Forget of a completed entry", e, done)
	}

	// Forget frees a key reserved without a run (of that reservation only).
	e2, _ := reserve("j1", "k2", sumA, cronTime)
	if err := is.ForgetIdempotencyKey(ctx, "j1", "k2", e2.At.Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	if _, first := reserve("j1", "k2", sumA, cronTime.Add(time.Second)); first {
		t.Errorf("Forget of another reservation freed the key")
	}
	if err := is.ForgetIdempotencyKey(ctx, "j1", "k2", e2.At); err != nil {
		t.Fatal(err)
	}
	if e, first := reserve("j1", "k2", sumB, cronTime.Add(2*time.Second)); !first {
		t.Errorf("reservation after Forget: not first (%+v)", e)
	} else {
		same("reservation after Forget", e, cron.IdempotencyEntry{Sum: sumB, At: cronTime.Add(2 * time.Second)})
	}

	// An entry holds for the window, and is replaced once past it.
	if _, first := reserve("j1", "k", sumB, cronTime.Add(cron.IdempotencyWindow-time.Microsecond)); first {
		t.Errorf("reservation just inside the window: first")
	}
	later := cronTime.Add(cron.IdempotencyWindow)
	e3, first := reserve("j1", "k", sumB, later)
	if !first {
		t.Errorf("reservation at the end of the window: not first (%+v)", e3)
	}
	same("reservation past the window", e3, cron.IdempotencyEntry{Sum: sumB, At: later})
	if err := is.CompleteIdempotencyKey(ctx, "j1", "k", e1.At, "run-old"); err != nil {
		t.Fatal(err)
	}
	if e, _ := reserve("j1", "k", sumA, later.Add(time.Second)); e.RunID != "" {
		t.Errorf("Complete of the replaced reservation changed the new one: run %q", e.RunID)
	}

	// Of concurrent reservations of one key exactly one wins, and the
	// others get its entry.
	const n = 16
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		winner = -1
		got    []cron.IdempotencyEntry
	)
	for i := range n {
		wg.Go(func() {
			sum := sha256.Sum256([]byte(fmt.Sprint(i)))
			e, first, err := is.ReserveIdempotencyKey(ctx, "j3", "race", cron.IdempotencyEntry{Sum: sum, At: cronTime.Add(time.Duration(i) * time.Millisecond)})
			if err != nil {
				t.Errorf("concurrent ReserveIdempotencyKey: %v", err)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if first {
				if winner >= 0 {
					t.Errorf("reservations %d and %d both first", winner, i)
				}
				winner = i
			}
			got = append(got, e)
		})
	}
	wg.Wait()
	if winner < 0 {
		t.Fatalf("no concurrent reservation was first")
	}
	want := cron.IdempotencyEntry{Sum: sha256.Sum256([]byte(fmt.Sprint(winner))), At: cronTime.Add(time.Duration(winner) * time.Millisecond)}
	for _, e := range got {
		same("a concurrent reservation", e, want)
	}
}
