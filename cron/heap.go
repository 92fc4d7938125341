package cron

import (
	"math"
	"math/bits"
)

// item is an element of the runner's time queue: a run time (Unix
// nanoseconds) and the table slot of the job, with the slot's generation. An
// item is live while its slot holds the same generation and the entry's
// queuedAt equals at; a job that is rescheduled, paused or removed leaves
// its old item behind as stale, and the queue drops stale items when they
// reach the top of the heap (or all at once when they come to outnumber the
// live ones). Items hold no pointers: the garbage collector never scans
// them, and sifting moves 16-byte values in one array without touching the
// entries.
type item struct {
	at  int64
	idx int32
	gen uint32
}

// The runner orders its jobs in one min-heap keyed by next_run_at. Only
// jobs due soon are in it: a job whose next run lies further ahead waits,
// unsorted, in a slot of a two-level timing wheel, and a slot's items enter
// the heap when the clock reaches the slot. A fire then works on a heap of
// the jobs due within about a second, and parks the job's next run with an
// append, so its cost hardly grows with the number of jobs.
//
// Time is cut into ticks of 2^tickShift ns (about 1.07 s), and ticks into
// periods of wheelSize ticks (about 73 minutes). With p the period of cur:
//
//   - the heap holds the items of the ticks before cur;
//   - level 0 has a slot per tick, for the rest of period p and all of p+1;
//   - level 1 has a slot per period, for periods p+2 to p+1+wheelSize
//     (about 208 days);
//   - far holds the rest, unsorted, and spreads into the wheel when the
//     wheel comes within reach of its earliest item.
//
// Entering period p+1 spreads level 1's slot for p+2 into level 0, so an
// item is copied once on its way in when it is due within 73 minutes, and
// twice when it is due within 208 days.
const (
	tickShift = 30
	wheelBits = 12
	wheelSize = 1 << wheelBits
)

// heapBase is the index of the root in timeHeap.items. With the root at 3,
// the four children of node k (at index 3+k) sit at indices 4k+4 to 4k+7:
// 64 bytes that start on a 64-byte boundary, so each level of a sift reads
// one cache line.
const heapBase = 3

// wheel is one level of slots, with a bitmap of the non-empty ones. Its
// size is a power of two, and a slot is found by masking.
type wheel struct {
	slots [][]item
	used  []uint64
	mask  int64
	// spare holds the arrays of emptied slots for reuse, so that slots
	// filling and emptying every second do not reallocate. Only arrays of
	// up to maxSpareCap items are kept; larger ones go to the collector.
	spare [][]item
}

const (
	maxSpare    = 256
	maxSpareCap = 4096
)

func newWheel(size int) *wheel {
	return &wheel{slots: make([][]item, size), used: make([]uint64, size/64), mask: int64(size - 1)}
}

func (w *wheel) add(s int, it item) {
	its := w.slots[s]
	if len(its) == 0 {
		w.used[s>>6] |= 1 << (s & 63)
		if cap(its) == 0 && len(w.spare) > 0 {
			its = w.spare[len(w.spare)-1]
			w.spare[len(w.spare)-1] = nil
			w.spare = w.spare[:len(w.spare)-1]
		}
	}
	w.slots[s] = append(its, it)
}

func (w *wheel) isUsed(s int) bool { return w.used[s>>6]&(1<<(s&63)) != 0 }

// first returns the first non-empty slot in [s, len(slots)), or -1.
func (w *wheel) first(s int) int {
	for s < len(w.slots) {
		if word := w.used[s>>6] >> (s & 63); word != 0 {
			return s + bits.TrailingZeros64(word)
		}
		s = (s | 63) + 1
	}
	return -1
}

// after returns how many slots past s, going round, the first non-empty
// slot lies (0 when s itself is used); the wheel is not empty.
func (w *wheel) after(s int) int64 {
	if f := w.first(s); f >= 0 {
		return int64(f - s)
	}
	return int64(len(w.slots)-s) + int64(w.first(0))
}

// take empties slot s and returns its items. The caller hands the array
// back with recycle once it has read them.
func (w *wheel) take(s int) []item {
	its := w.slots[s]
	w.used[s>>6] &^= 1 << (s & 63)
	w.slots[s] = nil
	return its
}

// recycle keeps the array of its for reuse, or lets it go.
func (w *wheel) recycle(its []item) {
	if cap(its) == 0 || cap(its) > maxSpareCap || len(w.spare) == maxSpare {
		return
	}
	clear(its)
	w.spare = append(w.spare, its[:0])
}

// timeHeap is the runner's time queue: a 4-ary min-heap of the items due
// before tick cur (a 4-ary heap is half as deep as a binary one), fed by
// the timing wheel that holds the later ones. Its methods run under the
// runner's mu.
type timeHeap struct {
	tab   *table
	items []item // the heap; items[:heapBase] are padding
	stale int    // items known to be stale (an estimate; recounted on compaction)
	// holdTop says the root is being fired: the next push into the heap
	// replaces it and sifts down once, instead of a pop and a push sifting
	// twice.
	holdTop bool

	cur    int64  // first tick not moved into the heap
	w0, w1 *wheel // level 0 (2*wheelSize slots) and level 1; allocated on first use
	n0, n1 int    // items in w0 and w1
	far    []item // items beyond level 1
	farMin int64  // earliest period in far, when far is not empty
}

func (h *timeHeap) live(it item) bool {
	e := h.tab.at(it.idx)
	return e.gen == it.gen && e.queuedAt == it.at
}

// len returns the number of items in the heap, stale ones included.
func (h *timeHeap) len() int { return max(len(h.items)-heapBase, 0) }

// total returns the number of items held anywhere, stale ones included.
func (h *timeHeap) total() int { return h.len() + h.n0 + h.n1 + len(h.far) }

// push adds it.
func (h *timeHeap) push(it item) {
	if t := it.at >> tickShift; t >= h.cur {
		h.park(it, t)
		return
	}
	if h.holdTop {
		h.holdTop = false
		h.items[heapBase] = it
		h.down(0)
		return
	}
	h.heapPush(it)
}

func (h *timeHeap) heapPush(it item) {
	if h.items == nil {
		h.items = make([]item, heapBase, 64)
	}
	h.items = append(h.items, it)
	h.up(len(h.items) - 1 - heapBase)
}

// park puts it, of tick t >= cur, in the wheel or in far.
func (h *timeHeap) park(it item, t int64) {
	p, q := h.cur>>wheelBits, t>>wheelBits
	switch {
	case q < p+2:
		if h.w0 == nil {
			h.w0 = newWheel(2 * wheelSize)
		}
		h.w0.add(int(t&h.w0.mask), it)
		h.n0++
	case q < p+2+wheelSize:
		if h.w1 == nil {
			h.w1 = newWheel(wheelSize)
		}
		h.w1.add(int(q&h.w1.mask), it)
		h.n1++
	default:
		if len(h.far) == 0 || q < h.farMin {
			h.farMin = q
		}
		h.far = append(h.far, it)
	}
}

// peek returns the earliest live item, dropping stale items on the way. It
// moves wheel slots that start no later than a tick after now into the
// heap as the heap runs dry. When the earliest items wait in a slot that
// starts later, it returns an item with idx -1 whose at is a time after now
// at which to look again (a tick before that slot starts). ok is false when
// nothing is queued.
func (h *timeHeap) peek(now int64) (it item, ok bool) {
	for {
		for h.len() > 0 {
			if top := h.items[heapBase]; h.live(top) {
				return top, true
			}
			h.pop()
			if h.stale > 0 {
				h.stale--
			}
		}
		// A slot moves into the heap a tick ahead of its time, so that the
		// move is done while the timer would otherwise wait, and not
		// while the slot's first runs are due.
		next, moved, parked := h.refill(now>>tickShift + 1)
		if !parked {
			return item{}, false
		}
		if !moved {
			return item{at: startOfTick(next - 1), idx: -1}, true
		}
	}
}

// startOfTick returns the first Unix nanosecond of tick t.
func startOfTick(t int64) int64 {
	if t > math.MaxInt64>>tickShift {
		return math.MaxInt64
	}
	return t << tickShift
}

// refill moves the earliest non-empty level-0 slot into the heap when its
// tick is at most limit (moved). When the earliest parked items lie after
// limit, it moves nothing and returns the tick next where they start.
// parked is false when nothing is parked. The heap is empty.
func (h *timeHeap) refill(limit int64) (next int64, moved, parked bool) {
	for {
		if h.n0 > 0 {
			t := h.cur + h.w0.after(int(h.cur&h.w0.mask))
			if t > limit {
				return t, false, true
			}
			p := h.cur >> wheelBits
			its := h.w0.take(int(t & h.w0.mask))
			h.n0 -= len(its)
			// The heap is empty: the slot's live items are appended whole
			// and the heap built in O(n). Stale items stop here. Reading
			// every entry of the slot in one pass lets their cache misses
			// overlap, and leaves the entries in cache for the fires that
			// follow.
			if h.items == nil {
				h.items = make([]item, heapBase, heapBase+max(len(its), 64))
			}
			for _, it := range its {
				if h.live(it) {
					h.items = append(h.items, it)
				} else if h.stale > 0 {
					h.stale--
				}
			}
			h.heapify()
			h.w0.recycle(its)
			h.cur = t + 1
			if h.cur>>wheelBits != p {
				h.enterPeriod()
			}
			return 0, true, true
		}
		// Level 0 is empty: the next items are in the earliest level-1
		// slot, or else in far.
		var q int64
		switch {
		case h.n1 > 0:
			first := h.cur>>wheelBits + 2
			q = first + h.w1.after(int(first&h.w1.mask))
		case len(h.far) > 0:
			q = h.farMin
		default:
			return 0, false, false
		}
		start := q << wheelBits
		if start > limit {
			return start, false, true
		}
		h.cur = start
		h.enterPeriod()
	}
}

// enterPeriod is called when cur has moved into a new period p: level 1's
// slots for p and p+1 spread into level 0, and far items that come within
// reach of level 1 move into the wheel. cur only moves to the start of the
// earliest parked item's tick or period, so none of them is before cur.
func (h *timeHeap) enterPeriod() {
	p := h.cur >> wheelBits
	for q := p; q < p+2 && h.n1 > 0; q++ {
		if s := int(q & h.w1.mask); h.w1.isUsed(s) {
			its := h.w1.take(s)
			h.n1 -= len(its)
			for _, it := range its {
				h.park(it, it.at>>tickShift)
			}
			h.w1.recycle(its)
		}
	}
	if len(h.far) > 0 && h.farMin < p+2+wheelSize {
		far := h.far
		h.far = nil
		for _, it := range far {
			h.park(it, it.at>>tickShift)
		}
		clear(far)
		if h.far == nil {
			h.far = far[:0]
		}
	}
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

// markStale notes that one item became stale, and compacts the queue when
// stale items are more than half of it.
func (h *timeHeap) markStale() {
	h.stale++
	if h.stale > 64 && h.stale > h.total()/2 {
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

// compact drops every stale item, from the heap, the wheel and far, and
// restores the heap order in O(n).
func (h *timeHeap) compact() {
	h.release()
	if h.len() > 0 {
		live := h.items[:heapBase]
		for _, it := range h.items[heapBase:] {
			if h.live(it) {
				live = append(live, it)
			}
		}
		clear(h.items[len(live):])
		h.items = live
		h.heapify()
	}
	h.n0 = h.compactWheel(h.w0)
	h.n1 = h.compactWheel(h.w1)
	far := h.far[:0]
	for _, it := range h.far {
		if h.live(it) {
			if q := it.at >> tickShift >> wheelBits; len(far) == 0 || q < h.farMin {
				h.farMin = q
			}
			far = append(far, it)
		}
	}
	clear(h.far[len(far):])
	h.far = far
	h.stale = 0
}

// compactWheel drops the stale items of w and returns how many are left.
func (h *timeHeap) compactWheel(w *wheel) int {
	if w == nil {
		return 0
	}
	n := 0
	for s := w.first(0); s >= 0; s = w.first(s + 1) {
		its := w.slots[s]
		live := its[:0]
		for _, it := range its {
			if h.live(it) {
				live = append(live, it)
			}
		}
		clear(its[len(live):])
		w.slots[s] = live
		if len(live) == 0 {
			w.recycle(w.take(s))
		}
		n += len(live)
	}
	return n
}

// heapify restores the heap order of all items in O(n).
func (h *timeHeap) heapify() {
	if h.len() < 2 {
		return
	}
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
