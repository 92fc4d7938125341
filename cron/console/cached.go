package console

import (
	"sync"
	"time"
)

// cached is a value the console computes from a scan of the service (the
// overview's counts and charts, the jobs list's totals), shared by every
// request. Once it is older than its max age, the next request starts a
// computation in the background and is answered from the value there
// is: only the very first request waits for one. A computation is
// started at most every ten times the last one took, so that the scans
// of a large service take at most a tenth of a core, however short the
// max age.
type cached[T any] struct {
	mu    sync.Mutex
	val   T
	at    time.Time     // when val was computed; zero before
	every time.Duration // ten times the last computation
	busy  bool          // a computation runs
	first chan struct{} // closed when the first computation ends
}

// get returns the value, computing it with compute when there is none
// yet, and starting a computation in the background when it is older
// than maxAge.
func (c *cached[T]) get(maxAge time.Duration, compute func() T) T {
	c.mu.Lock()
	if !c.at.IsZero() {
		v := c.val
		if !c.busy && time.Since(c.at) >= max(maxAge, c.every) {
			c.busy = true
			go c.run(compute)
		}
		c.mu.Unlock()
		return v
	}
	if !c.busy {
		c.busy, c.first = true, make(chan struct{})
		go c.run(compute)
	}
	first := c.first
	c.mu.Unlock()
	<-first
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.val
}

func (c *cached[T]) run(compute func() T) {
	start := time.Now()
	v := compute()
	took := time.Since(start)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.val, c.at, c.every, c.busy = v, time.Now(), 10*took, false
	if c.first != nil {
		close(c.first)
		c.first = nil
	}
}
