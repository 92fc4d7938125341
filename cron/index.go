package cron

import "hash/maphash"

// idIndex maps job ids to table slots: an open-addressing hash table with
// linear probing whose slots hold only a 32-bit hash and the slot number
// (8 bytes, no pointers: the garbage collector never scans it). The id
// itself is read from the entry on a hash match, so it is stored once.
//
// A slot's home is given by the top bits of its hash, so the table is
// ordered by hash (but for probe runs). An id put is not placed at once:
// it waits in pending, in no order, until pending holds a 64th of the
// table's length or an id is looked up or deleted (or the runner loads);
// then the pending ids are ordered by the top bits of their hash and
// placed in that order. A table of a million ids is 16 MB, and an id
// placed alone at a random home misses the processor's caches; placed in
// order, the ids bound for one region of the table are placed together.
type idIndex struct {
	slots   []uint64 // 0: empty; else hash32<<32 | (idx+1)
	shift   uint8    // home = hash32 >> shift; len(slots) = 1 << (32-shift)
	n       int      // ids held, pending ones included
	pending []uint64 // ids put, not placed yet, as their slot values
	seed    maphash.Seed
}

func (x *idIndex) hash(id string) uint32 {
	return uint32(maphash.String(x.seed, id))
}

func (x *idIndex) home(h uint32) uint32 { return h >> x.shift }

// get returns the slot of id.
func (x *idIndex) get(tab *table, id string) (int32, bool) {
	if x.n == 0 {
		return 0, false
	}
	x.place()
	h := x.hash(id)
	mask := uint32(len(x.slots) - 1)
	for i := x.home(h); ; i = (i + 1) & mask {
		s := x.slots[i]
		if s == 0 {
			return 0, false
		}
		if uint32(s>>32) == h {
			idx := int32(uint32(s)) - 1
			if tab.at(idx).id == id {
				return idx, true
			}
		}
	}
}

// put adds id -> idx; id must not be present.
func (x *idIndex) put(id string, idx int32) {
	if x.slots == nil {
		x.seed = maphash.MakeSeed()
		x.slots = make([]uint64, 64)
		x.shift = 32 - 6
	}
	x.pending = append(x.pending, uint64(x.hash(id))<<32|uint64(uint32(idx+1)))
	x.n++
	if len(x.pending) >= len(x.slots)/64 {
		x.place()
	}
}

// sortBits is the most top bits of the hash that place orders the
// pending ids by: 2,048 regions, of 8 KB each in a table of 16 MB.
const sortBits = 11

// place puts the pending ids in the table, growing it first as needed
// (at most three quarters full).
func (x *idIndex) place() {
	p := x.pending
	if len(p) == 0 {
		return
	}
	for x.n*4 > len(x.slots)*3 {
		x.grow()
	}
	if len(p) > 64 {
		// One counting-sort pass on the top bits of the hash.
		bits := min(32-uint32(x.shift), sortBits)
		sh := 32 - bits
		var at [1 << sortBits]int32
		for _, s := range p {
			at[uint32(s>>32)>>sh]++
		}
		sum := int32(0)
		for k, c := range at[:1<<bits] {
			at[k] = sum
			sum += c
		}
		sorted := make([]uint64, len(p))
		for _, s := range p {
			k := uint32(s>>32) >> sh
			sorted[at[k]] = s
			at[k]++
		}
		for _, s := range sorted {
			x.insert(s)
		}
		// Both arrays go: the next ids pending grow a new one, so that
		// an index that is not growing keeps none.
		x.pending = nil
		return
	}
	for _, s := range p {
		x.insert(s)
	}
	x.pending = p[:0]
}

func (x *idIndex) insert(s uint64) {
	mask := uint32(len(x.slots) - 1)
	i := x.home(uint32(s >> 32))
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = s
}

// grow doubles the table. The old slots are read in order, so their new
// homes come in order too.
func (x *idIndex) grow() {
	old := x.slots
	x.slots = make([]uint64, 2*len(old))
	x.shift--
	for _, s := range old {
		if s != 0 {
			x.insert(s)
		}
	}
}

// del removes id (which is in slot idx), shifting later entries of its
// probe run back so that no tombstones are left.
func (x *idIndex) del(id string, idx int32) {
	if x.n == 0 {
		return
	}
	x.place()
	h := x.hash(id)
	want := uint64(h)<<32 | uint64(uint32(idx+1))
	mask := uint32(len(x.slots) - 1)
	i := x.home(h)
	for x.slots[i] != want {
		if x.slots[i] == 0 {
			return // not present
		}
		i = (i + 1) & mask
	}
	x.n--
	// Backward-shift deletion (Knuth 6.4, Algorithm R).
	for {
		x.slots[i] = 0
		j := i
		for {
			j = (j + 1) & mask
			s := x.slots[j]
			if s == 0 {
				return
			}
			home := x.home(uint32(s >> 32))
			// Move s into the hole at i unless its home lies cyclically in (i, j].
			if (i <= j && (home <= i || home > j)) || (i > j && home <= i && home > j) {
				x.slots[i] = s
				i = j
				break
			}
		}
	}
}

// len returns the number of ids.
func (x *idIndex) len() int { return x.n }
