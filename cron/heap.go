package cron

// item is an element of the runner's heap: a run time (Unix nanoseconds) and
// the table slot of the job, with the slot's generation. An item is live
// while its slot holds the same generation and the entry's queuedAt equals
// at; a job that is rescheduled, paused or removed leaves its old item
// behind as stale, and the heap drops stale items when they reach the top
// (or all at once when they come to outnumber the live ones). Items hold no
// pointers: the garbage collector never scans the heap, and sifting moves
// 16-byte values in one array without touching the entries.
type item struct {
	at  int64
	idx int32
	gen uint32
}

// heapBase is the index of the root in timeHeap.items. With the root at 3,
// the four children of node k (at index 3+k) sit at indices 4k+4 to 4k+7:
// 64 bytes that start on a 64-byte boundary, so each level of a sift reads
// one cache line.
const heapBase = 3

// timeHeap is a 4-ary min-heap of items ordered by at. A 4-ary heap is half
// as deep as a binary one, which keeps a pop cheap at a million entries.
type timeHeap struct {
	tab   *table
	items []item // items[:heapBase] are padding
	stale int    // items known to be stale (an estimate; recounted on compaction)
	// holdTop says the root is being fired: the next push replaces it and
	// sifts down once, instead of a pop and a push sifting twice.
	holdTop bool
}

func (h *timeHeap) live(it item) bool {
	e := h.tab.at(it.idx)
	return e.gen == it.gen && e.queuedAt == it.at
}

// len returns the number of items, stale ones included.
func (h *timeHeap) len() int { return max(len(h.items)-heapBase, 0) }

// push adds it.
func (h *timeHeap) push(it item) {
	if h.holdTop {
		h.holdTop = false
		h.items[heapBase] = it
		h.down(0)
		return
	}
	if h.items == nil {
		h.items = make([]item, heapBase, 64)
	}
	h.items = append(h.items, it)
	h.up(len(h.items) - 1 - heapBase)
}

// peek returns the earliest live item, dropping stale items on the way.
func (h *timeHeap) peek() (item, bool) {
	for h.len() > 0 {
		if top := h.items[heapBase]; h.live(top) {
			return top, true
		}
		h.pop()
		if h.stale > 0 {
			h.stale--
		}
	}
	return item{}, false
}

// pop removes and returns the top item (live or not); the heap is not empty.
func (h *timeHeap) pop() item {
	last := len(h.items) - 1
	top := h.items[heapBase]
	h.items[heapBase] = h.items[last]
	h.items = h.items[:last]
	if h.len() > 0 {
		h.down(0)
	}
	return top
}

// markStale notes that one item became stale, and compacts the heap when
// stale items are more than half of it.
func (h *timeHeap) markStale() {
	h.stale++
	if h.stale > 64 && h.stale > h.len()/2 {
		h.compact()
	}
}

// hold marks the root as being fired (see holdTop); release drops it if no
// push replaced it.
func (h *timeHeap) hold() { h.holdTop = true }

func (h *timeHeap) release() {
	if h.holdTop {
		h.holdTop = false
		h.pop()
	}
}

// compact drops every stale item and restores the heap order in O(n).
func (h *timeHeap) compact() {
	h.release()
	live := h.items[:heapBase]
	for _, it := range h.items[heapBase:] {
		if h.live(it) {
			live = append(live, it)
		}
	}
	h.items = live
	h.stale = 0
	for k := (h.len() - 2) / 4; k >= 0; k-- {
		h.down(k)
	}
}

// up moves node k (0 = root) toward the root.
func (h *timeHeap) up(k int) {
	items := h.items
	x := items[heapBase+k]
	for k > 0 {
		p := (k - 1) / 4
		if items[heapBase+p].at <= x.at {
			break
		}
		items[heapBase+k] = items[heapBase+p]
		k = p
	}
	items[heapBase+k] = x
}

// down moves node k toward the leaves.
func (h *timeHeap) down(k int) {
	items := h.items
	n := len(items) - heapBase
	x := items[heapBase+k]
	for {
		c := 4*k + 1
		if c >= n {
			break
		}
		m := c
		end := min(c+4, n)
		for j := c + 1; j < end; j++ {
			if items[heapBase+j].at < items[heapBase+m].at {
				m = j
			}
		}
		if items[heapBase+m].at >= x.at {
			break
		}
		items[heapBase+k] = items[heapBase+m]
		k = m
	}
	items[heapBase+k] = x
}
