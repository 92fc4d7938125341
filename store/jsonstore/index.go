package jsonstore

import (
	"hash/maphash"
	"iter"
	"unsafe"
)

// jobIndex maps job ids to their entries: an open-addressing hash table
// with linear probing whose slots hold only the entry (the id is read from
// it), at most three quarters full, and beside each slot a byte of its
// id's hash, so that a probe reads the entry of a slot (at a random place
// of the heap, and its id at another) only when that byte matches. At a
// million jobs it takes 19 MB, a third of a Go map of strings to pointers;
// a lookup usually reads one entry, an insertion of a new id none.
type jobIndex struct {
	slots []*entry // nil: empty
	tags  []uint8  // tags[i]: the tag of the id of slots[i]
	n     int
	seed  maphash.Seed
}

// newJobIndex returns an index sized for n entries.
func newJobIndex(n int) jobIndex {
	size := 16
	for size*3 < n*4 {
		size *= 2
	}
	return jobIndex{slots: make([]*entry, size), tags: make([]uint8, size), seed: maphash.MakeSeed()}
}

// hash returns the home slot of id and its tag (the hash's top byte).
func (x *jobIndex) hash(id string) (int, uint8) {
	h := maphash.String(x.seed, id)
	return int(h & uint64(len(x.slots)-1)), uint8(h >> 56)
}

func (x *jobIndex) home(id string) int {
	h, _ := x.hash(id)
	return h
}

// find returns the slot of id, or the empty slot where it would go, and
// the id's tag.
func (x *jobIndex) find(id string) (int, uint8) {
	mask := len(x.slots) - 1
	i, tag := x.hash(id)
	for e := x.slots[i]; e != nil && (x.tags[i] != tag || e.id != id); e = x.slots[i] {
		i = (i + 1) & mask
	}
	return i, tag
}

// get returns the entry of id, nil when there is none.
func (x *jobIndex) get(id string) *entry {
	if x.n == 0 {
		return nil
	}
	i, _ := x.find(id)
	return x.slots[i]
}

// getBytes is get of an id held in bytes, without copying them.
func (x *jobIndex) getBytes(id []byte) *entry {
	if len(id) == 0 {
		return x.get("")
	}
	return x.get(unsafe.String(&id[0], len(id))) // get keeps nothing of it
}

// put makes e the entry of its id, in place of any other.
func (x *jobIndex) put(e *entry) {
	x.room()
	i, tag := x.find(e.id)
	if x.slots[i] == nil {
		x.n++
	}
	x.slots[i], x.tags[i] = e, tag
}

// add makes e the entry of its id and reports true, unless the id has
// one already (which stays).
func (x *jobIndex) add(e *entry) bool {
	x.room()
	i, tag := x.find(e.id)
	if x.slots[i] != nil {
		return false
	}
	x.n++
	x.slots[i], x.tags[i] = e, tag
	return true
}

// room grows the table, when one more entry would fill it past three
// quarters.
func (x *jobIndex) room() {
	if x.slots == nil {
		*x = newJobIndex(0)
	}
	if (x.n+1)*4 > len(x.slots)*3 {
		old := x.slots
		x.slots, x.tags = make([]*entry, 2*len(old)), make([]uint8, 2*len(old))
		for _, o := range old {
			if o != nil {
				i, tag := x.find(o.id)
				x.slots[i], x.tags[i] = o, tag
			}
		}
	}
}

// del removes id, shifting the later entries of its probe run back so
// that no tombstone is left (Knuth 6.4, Algorithm R).
func (x *jobIndex) del(id string) {
	if x.n == 0 {
		return
	}
	i, _ := x.find(id)
	if x.slots[i] == nil {
		return
	}
	x.n--
	mask := len(x.slots) - 1
	for {
		x.slots[i] = nil
		j := i
		for {
			j = (j + 1) & mask
			e := x.slots[j]
			if e == nil {
				return
			}
			// Move e into the hole at i unless its home lies cyclically
			// in (i, j].
			h := x.home(e.id)
			if (i <= j && (h <= i || h > j)) || (i > j && h <= i && h > j) {
				x.slots[i], x.tags[i] = e, x.tags[j]
				i = j
				break
			}
		}
	}
}

// len returns the number of entries.
func (x *jobIndex) len() int { return x.n }

// all yields every entry, in no order. The index must not change
// meanwhile.
func (x *jobIndex) all() iter.Seq[*entry] {
	return func(yield func(*entry) bool) {
		for _, e := range x.slots {
			if e != nil && !yield(e) {
				return
			}
		}
	}
}

// indexSet is the firstSet of a decoding of jobs.json that fills an index
// with the entries kept, at(part, k) being the k-th of part.
type indexSet struct {
	x  *jobIndex
	at func(part, k int) *entry
}

func (s indexSet) first(part, k int, _ string) bool { return s.x.add(s.at(part, k)) }
