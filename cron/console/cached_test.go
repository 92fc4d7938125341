package console

import (
	"testing"
	"testing/synctest"
	"time"
)

// TestCachedAnswersWhileComputing: the first get waits for the value;
// once it is older than its max age, a get answers the old value at
// once and computes the next in the background; computations start at
// most every ten times the last one took.
func TestCachedAnswersWhileComputing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var c cached[int]
		n := 0
		compute := func() int {
			time.Sleep(time.Second)
			n++
			return n
		}
		start := time.Now()
		if v := c.get(time.Millisecond, compute); v != 1 || time.Since(start) != time.Second {
			t.Fatalf("first get: %d after %v, want 1 after the computation (1s)", v, time.Since(start))
		}
		time.Sleep(5 * time.Second) // older than the max age, not than 10 computations
		if v := c.get(time.Millisecond, compute); v != 1 {
			t.Errorf("get 5s later: %d, want 1", v)
		}
		synctest.Wait()
		if n != 1 {
			t.Errorf("%d computations 5s after one that took 1s, want 1 (at most one per 10s)", n)
		}
		time.Sleep(5 * time.Second)
		start = time.Now()
		if v := c.get(time.Millisecond, compute); v != 1 || time.Since(start) != 0 {
			t.Errorf("stale get: %d after %v, want 1 at once", v, time.Since(start))
		}
		if v := c.get(time.Millisecond, compute); v != 1 {
			t.Errorf("get while computing: %d, want 1", v)
		}
		time.Sleep(time.Second)
		synctest.Wait()
		if v := c.get(time.Hour, compute); v != 2 || n != 2 {
			t.Errorf("after the background computation: %d (%d computations), want 2 (2)", v, n)
		}
	})
}
