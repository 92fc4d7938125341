package main

import (
	"errors"
	"hash/fnv"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"
)

// TestShardsOrderAndIdle: the handlers of one key run in order, a key
// whose handler blocks does not hold up another lane's, and once every
// handler has run no goroutine is left: an idle connection costs none.
func TestShardsOrderAndIdle(t *testing.T) {
	lane := func(key string) uint32 {
		h := fnv.New32a()
		h.Write([]byte(key))
		return h.Sum32() % 8
	}
	a, b := "job-a", "job-b"
	for i := 0; lane(a) == lane(b); i++ {
		b = "job-b" + string(rune('a'+i))
	}
	before := runtime.NumGoroutine()
	s := newShards(8, 4)
	release := make(chan struct{})
	s.run(b, func() { <-release })
	var mu sync.Mutex
	var got []int
	for i := range 100 {
		s.run(a, func() {
			mu.Lock()
			got = append(got, i)
			mu.Unlock()
		})
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(got)
		mu.Unlock()
		if n == 100 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of key a's 100 handlers ran while key b's blocked, want all", n)
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	want := make([]int, 100)
	for i := range want {
		want[i] = i
	}
	if !slices.Equal(got, want) {
		t.Errorf("key a's handlers ran in the order %v, want the order they were queued", got)
	}
	for deadline := time.Now().Add(5 * time.Second); runtime.NumGoroutine() > before; {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after every handler ran, want %d (none left per lane)", runtime.NumGoroutine(), before)
		}
		time.Sleep(time.Millisecond)
	}
	s.stop()
}

// TestSendQueueBound: a connection holds at most its queue's bound of
// messages not yet written, those its writer took and is writing
// included; one more closes it (the peer reads too slowly).
func TestSendQueueBound(t *testing.T) {
	conn := func() *wsConn {
		// No writer: the test takes and writes in its place.
		return &wsConn{max: 3, wake: make(chan struct{}, 1), stop: make(chan struct{})}
	}
	fill := func(c *wsConn) {
		for i := range 3 {
			if err := c.enqueue([]byte{byte(i)}); err != nil {
				t.Fatalf("message %d of 3: %v", i, err)
			}
		}
	}
	c := conn()
	fill(c)
	if err := c.enqueue([]byte("x")); !errors.Is(err, errQueueFull) {
		t.Fatalf("a fourth message: %v, want errQueueFull", err)
	}
	if err := c.enqueue([]byte("y")); !errors.Is(err, errClosed) {
		t.Errorf("after the queue overflowed: %v, want errClosed", err)
	}

	c = conn()
	fill(c)
	if n := len(c.take()); n != 3 {
		t.Fatalf("took %d, want 3", n)
	}
	if err := c.enqueue([]byte("x")); !errors.Is(err, errQueueFull) {
		t.Fatalf("with 3 taken and not written: %v, want errQueueFull", err)
	}

	c = conn()
	fill(c)
	c.take()
	for range 3 {
		c.wrote()
	}
	fill(c) // written: room again
}
