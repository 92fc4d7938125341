package cron

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// TestIdempotencyMemoryBound: beyond Max the oldest answered keys are
// dropped, one being answered is kept; the references of forgotten
// reservations do not pile up.
func TestIdempotencyMemoryBound(t *testing.T) {
	ctx := context.Background()
	at := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	c := &idempotencyMemory{Max: 3}
	reserve := func(key string) (IdempotencyEntry, bool) {
		t.Helper()
		e, first, err := c.ReserveIdempotencyKey(ctx, "j", key, IdempotencyEntry{At: at})
		if err != nil {
			t.Fatal(err)
		}
		return e, first
	}
	pending, _ := reserve("pending") // never answered
	for i := range 3 {
		e, _ := reserve(fmt.Sprint("k", i))
		if err := c.CompleteIdempotencyKey(ctx, "j", fmt.Sprint("k", i), e.At, "run"); err != nil {
			t.Fatal(err)
		}
	}
	reserve("k3")
	if n := c.Len(); n != 3 {
		t.Errorf("%d keys kept with Max 3, want 3", n)
	}
	if _, first := reserve("pending"); first {
		t.Errorf("the key being answered was dropped by the bound")
	}
	if _, first := reserve("k0"); !first {
		t.Errorf("the oldest answered key k0 was kept beyond the bound")
	}
	if err := c.ForgetIdempotencyKey(ctx, "j", "pending", pending.At); err != nil {
		t.Fatal(err)
	}

	// Keys reserved and forgotten over and over behind a live one.
	c = &idempotencyMemory{}
	reserve("live")
	for i := range 10_000 {
		e, _ := reserve(fmt.Sprint("f", i))
		if err := c.ForgetIdempotencyKey(ctx, "j", fmt.Sprint("f", i), e.At); err != nil {
			t.Fatal(err)
		}
	}
	c.mu.Lock()
	refs := len(c.order)
	c.mu.Unlock()
	if c.Len() != 1 || refs > 2*c.Len()+1024+1 {
		t.Errorf("after 10000 forgotten reservations: %d keys, %d references; want 1 key and at most %d references", c.Len(), refs, 2*c.Len()+1025)
	}
}
