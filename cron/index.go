package cron

import "hash/maphash"

// idIndex maps job ids to table slots: an open-addressing hash table with
// linear probing whose slots hold only a 32-bit hash and the slot number
// (8 bytes, no pointers: the garbage collector never scans it). The id
// itself is read from the entry on a hash match, so it is stored once.
type idIndex struct {
	slots []uint64 // 0: empty; else hash32<<32 | (idx+1)
	n     int
	seed  maphash.Seed
}

func (x *idIndex) hash(id string) uint32 {
	return uint32(maphash.String(x.seed, id))
}

// get returns the slot of id.
func (x *idIndex) get(tab *table, id string) (int32, bool) {
	if x.n == 0 {
		return 0, false
	}
	h := x.hash(id)
	mask := uint32(len(x.slots) - 1)
	for i := h & mask; ; i = (i + 1) & mask {
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
	}
	if (x.n+1)*4 > len(x.slots)*3 {
		x.grow()
	}
	x.insert(uint64(x.hash(id))<<32 | uint64(uint32(idx+1)))
	x.n++
}

func (x *idIndex) insert(s uint64) {
	mask := uint32(len(x.slots) - 1)
	i := uint32(s>>32) & mask
	for x.slots[i] != 0 {
		i = (i + 1) & mask
	}
	x.slots[i] = s
}

func (x *idIndex) grow() {
	old := x.slots
	x.slots = make([]uint64, 2*len(old))
	for _, s := range old {
		if s != 0 {
			x.insert(s)
		}
	}
}

// del removes id (which is in slot idx), shifting later entries of its
// probe run back so that no tombstones are left.
func (x *idIndex) del(id string, idx int32) {
	h := x.hash(id)
	want := uint64(h)<<32 | uint64(uint32(idx+1))
	mask := uint32(len(x.slots) - 1)
	i := h & mask
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
			home := uint32(s>>32) & mask
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
