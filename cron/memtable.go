package cron

import (
	"encoding/json"
	"hash/maphash"
	"reflect"
	"time"
)

// memTable holds the jobs of a [MemStore] in compact records: in chunks of
// memChunkLen jobs, in creation order, each field of the jobs of a chunk
// in a column (see [memCol]) that holds one value for all of them while
// they have the same; with an index from id to position.
type memTable struct {
	chunks []*memChunk
	n      int32 // positions handed out
	holes  int   // positions of deleted jobs
	index  memIndex
	// recent are the configurations saved last, newest first, which a
	// job saved next shares when it has the same.
	recent [memRecent]*memConfig
}

// memChunkLen is how many jobs a chunk holds: jobs live in fixed chunks,
// not one allocation each, which keeps a store of a million jobs cheap to
// build and to garbage-collect.
const memChunkLen = 256

// memRecent is how many configurations a memTable remembers for sharing.
const memRecent = 8

// memChunk is the records of memChunkLen jobs. An id "" marks a free
// position: a deleted job's, or one not handed out yet.
type memChunk struct {
	id    *[memChunkLen]string
	name  memCol[string]
	cfg   memCol[*memConfig]
	start memCol[int64] // the schedule's run_at (kind once) or start_at (others), see packTime
	next  memCol[int64] // next_run_at
	last  memCol[int64] // last_run_at
	flags memCol[uint8] // the status (memStatusMask) and memPaused
	rest  memCol[*memRest]
}

const (
	memStatusMask uint8 = 7 // an index in statusNames, or memOddStatus
	memOddStatus  uint8 = 7 // a status not in statusNames: in memRest.status
	memPaused     uint8 = 8
)

// memCol is one field of the jobs of a chunk: one value for all of them
// while they have the same, else one per job.
type memCol[T comparable] struct {
	all  T
	each *[memChunkLen]T // nil while every job of the chunk has all
}

func (c *memCol[T]) get(k int32) T {
	if c.each != nil {
		return c.each[k]
	}
	return c.all
}

func (c *memCol[T]) set(k int32, v T) {
	if c.each == nil {
		if v == c.all {
			return
		}
		c.each = new([memChunkLen]T)
		for i := range c.each {
			c.each[i] = c.all
		}
	}
	c.each[k] = v
}

// add sets the value of position k, which is handed out now: the
// positions after it are free.
func (c *memCol[T]) add(k int32, v T) {
	if k == 0 {
		c.all, c.each = v, nil
		return
	}
	c.set(k, v)
}

// free drops the value of position k, whose job is deleted.
func (c *memCol[T]) free(k int32) {
	if c.each != nil {
		var zero T
		c.each[k] = zero
	}
}

// memConfig is what a job calls, how it retries and when it runs, but
// for the times of its schedule. It is immutable once built: jobs that
// have the same share one.
type memConfig struct {
	typ                     string
	http                    HTTPConfig
	args                    json.RawMessage
	sched                   ScheduleSpec // Kind, Every, Jitter, Cron and TZ; no times
	timeout, backoff, grace Duration
	retries, keep           int
	alert                   *AlertConfig // a copy of the alert of the job that made c
}

func newMemConfig(j *Job) *memConfig {
	c := &memConfig{typ: j.Type, http: j.HTTP, args: j.Args, sched: j.Schedule,
		timeout: j.Timeout, backoff: j.RetryBackoff, grace: j.MisfireGrace,
		retries: j.MaxRetries, keep: j.KeepRuns}
	c.sched.RunAt, c.sched.StartAt = time.Time{}, time.Time{}
	if j.Alert != nil {
		a := *j.Alert
		c.alert = &a
	}
	return c
}

// fits reports whether c holds j's values: the same header map and the
// same args (not equal ones: the jobs that share c are loaded with them),
// an equal alert.
func (c *memConfig) fits(j *Job) bool {
	h, s := &j.HTTP, &j.Schedule
	if c.typ != j.Type || c.http.Method != h.Method || c.http.URL != h.URL || c.http.Body != h.Body ||
		c.sched.Kind != s.Kind || c.sched.Every != s.Every || c.sched.Jitter != s.Jitter ||
		c.sched.Cron != s.Cron || c.sched.TZ != s.TZ ||
		c.timeout != j.Timeout || c.backoff != j.RetryBackoff || c.grace != j.MisfireGrace ||
		c.retries != j.MaxRetries || c.keep != j.KeepRuns {
		return false
	}
	if (c.alert == nil) != (j.Alert == nil) || (c.alert != nil && *c.alert != *j.Alert) {
		return false
	}
	return sameMap(c.http.Headers, h.Headers) && sameBytes(c.args, j.Args)
}

// sameMap reports whether a and b are the same map (or both nil).
func sameMap(a, b map[string]string) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// sameBytes reports whether a and b are the same slice: the same array,
// length and capacity, or both nil.
func sameBytes(a, b []byte) bool {
	switch {
	case a == nil || b == nil:
		return a == nil && b == nil
	case len(a) != len(b) || cap(a) != cap(b):
		return false
	}
	return cap(a) == 0 || &a[:1][0] == &b[:1][0]
}

// memRest is what few jobs have: a pause, the last error and alert, a
// streak of failures, a status of another name, the schedule's other time
// (the start_at of a once job, the run_at of others: normally none), and
// times that have no exact form in Unix nanoseconds (see packTime).
type memRest struct {
	lastErr, lastAlert string
	failures           int
	status             Status
	times              [3]int64 // memOther, memUntil, memPausedAt as packTime gives them
	odd                *[memTimes]time.Time
}

// The times of a job, as indexes of memRest.odd.
const (
	memStart    = iota // the schedule's run_at (kind once) or start_at
	memNext            // next_run_at
	memLast            // last_run_at
	memOther           // the schedule's other time
	memUntil           // paused_until
	memPausedAt        // paused_at
	memTimes
)

// empty reports whether r holds nothing, so that the job needs none.
func (r *memRest) empty() bool {
	return r.lastErr == "" && r.lastAlert == "" && r.failures == 0 && r.status == "" &&
		r.times == [3]int64{} && r.odd == nil
}

// packTime returns t as Unix nanoseconds, 0 for the zero time, and whether
// that form gives t back exactly (see unpackTime): false for a time out of
// its range, in another location than UTC or with a monotonic clock
// reading.
func packTime(t time.Time) (int64, bool) {
	if t == (time.Time{}) {
		return 0, true
	}
	n := t.UnixNano()
	return n, n != 0 && fromNano(n) == t
}

// unpackTime is the time of packTime's n.
func unpackTime(n int64) time.Time { return fromNano(n) }

func (m *memTable) chunk(i int32) (*memChunk, int32) {
	return m.chunks[i/memChunkLen], i % memChunkLen
}

func (m *memTable) id(i int32) string { return m.chunks[i/memChunkLen].id[i%memChunkLen] }

// find returns the position of job id.
func (m *memTable) find(id string) (int32, bool) { return m.index.get(m, id) }

// save creates or replaces job j.
func (m *memTable) save(j *Job) {
	i, found := m.find(j.ID)
	if !found {
		i = m.n
		if int(i) == len(m.chunks)*memChunkLen {
			m.chunks = append(m.chunks, &memChunk{id: new([memChunkLen]string)})
		}
		m.n++
		m.index.put(m, j.ID, i)
	}
	c, k := m.chunk(i)
	added := !found
	c.id[k] = j.ID
	memPut(&c.name, k, j.Name, added)
	memPut(&c.cfg, k, m.config(j), added)
	var r memRest
	var odd [memTimes]time.Time
	pack := func(f int, t time.Time) int64 {
		n, exact := packTime(t)
		if !exact {
			odd[f], n = t, 0
		}
		return n
	}
	start, other := j.Schedule.StartAt, j.Schedule.RunAt
	if j.Schedule.Kind == KindOnce {
		start, other = other, start
	}
	memPut(&c.start, k, pack(memStart, start), added)
	memPut(&c.next, k, pack(memNext, j.NextRunAt), added)
	memPut(&c.last, k, pack(memLast, j.LastRunAt), added)
	r.times = [3]int64{pack(memOther, other), pack(memUntil, j.PausedUntil), pack(memPausedAt, j.PausedAt)}
	if odd != ([memTimes]time.Time{}) {
		o := odd
		r.odd = &o
	}
	r.lastErr, r.lastAlert, r.failures = j.LastError, j.LastAlert, j.Failures
	f := memStatus(j.LastStatus)
	if f == memOddStatus {
		r.status = j.LastStatus
	}
	if j.Paused {
		f |= memPaused
	}
	memPut(&c.flags, k, f, added)
	var rest *memRest
	if !r.empty() {
		rest = new(memRest)
		*rest = r
	}
	memPut(&c.rest, k, rest, added)
}

// memPut sets the value of position k of c: one handed out now (added),
// or one that holds a job.
func memPut[T comparable](c *memCol[T], k int32, v T, added bool) {
	if added {
		c.add(k, v)
	} else {
		c.set(k, v)
	}
}

// config returns a configuration that holds j's values: a recent one when
// one does.
func (m *memTable) config(j *Job) *memConfig {
	for i, c := range m.recent {
		if c == nil {
			break
		}
		if c.fits(j) {
			copy(m.recent[1:i+1], m.recent[:i])
			m.recent[0] = c
			return c
		}
	}
	c := newMemConfig(j)
	copy(m.recent[1:], m.recent[:])
	m.recent[0] = c
	return c
}

// memStatus returns the index of s in statusNames, or memOddStatus.
func memStatus(s Status) uint8 {
	for i, n := range statusNames {
		if n == s {
			return uint8(i)
		}
	}
	return memOddStatus
}

// record stores b as the bookkeeping of the job at i. It allocates only
// the first time the job has a field that few jobs have.
func (m *memTable) record(i int32, b *Bookkeeping) {
	c, k := m.chunk(i)
	r := c.rest.get(k)
	f := c.flags.get(k)&^memStatusMask | memStatus(b.LastStatus)
	next, nextExact := packTime(b.NextRunAt)
	last, lastExact := packTime(b.LastRunAt)
	if r == nil {
		if b.LastError == "" && b.LastAlert == "" && b.Failures == 0 && f&memStatusMask != memOddStatus && nextExact && lastExact {
			c.next.set(k, next)
			c.last.set(k, last)
			c.flags.set(k, f)
			return
		}
		r = &memRest{}
		c.rest.set(k, r)
	}
	r.lastErr, r.lastAlert, r.failures, r.status = b.LastError, b.LastAlert, b.Failures, ""
	if f&memStatusMask == memOddStatus {
		r.status = b.LastStatus
	}
	if !nextExact || !lastExact || r.odd != nil {
		if r.odd == nil {
			r.odd = new([memTimes]time.Time)
		}
		r.odd[memNext], r.odd[memLast] = time.Time{}, time.Time{}
		if !nextExact {
			r.odd[memNext], next = b.NextRunAt, 0
		}
		if !lastExact {
			r.odd[memLast], last = b.LastRunAt, 0
		}
	}
	c.next.set(k, next)
	c.last.set(k, last)
	c.flags.set(k, f)
}

// job returns the job at i.
func (m *memTable) job(i int32) Job {
	c, k := m.chunk(i)
	cfg := c.cfg.get(k)
	f := c.flags.get(k)
	j := Job{
		ID: c.id[k], Name: c.name.get(k), Paused: f&memPaused != 0,
		Type: cfg.typ, HTTP: cfg.http, Args: cfg.args, Schedule: cfg.sched,
		Timeout: cfg.timeout, MaxRetries: cfg.retries, RetryBackoff: cfg.backoff,
		MisfireGrace: cfg.grace, KeepRuns: cfg.keep,
		NextRunAt: unpackTime(c.next.get(k)), LastRunAt: unpackTime(c.last.get(k)),
		LastStatus: statusNames[min(int(f&memStatusMask), len(statusNames)-1)],
	}
	start, other := &j.Schedule.StartAt, &j.Schedule.RunAt
	if j.Schedule.Kind == KindOnce {
		start, other = other, start
	}
	*start = unpackTime(c.start.get(k))
	if cfg.alert != nil {
		a := *cfg.alert // the jobs that share cfg may have had other, equal ones
		j.Alert = &a
	}
	r := c.rest.get(k)
	if r == nil {
		return j
	}
	if f&memStatusMask == memOddStatus {
		j.LastStatus = r.status
	}
	j.LastError, j.LastAlert, j.Failures = r.lastErr, r.lastAlert, r.failures
	*other, j.PausedUntil, j.PausedAt = unpackTime(r.times[0]), unpackTime(r.times[1]), unpackTime(r.times[2])
	if r.odd != nil {
		for f, t := range [memTimes]*time.Time{start, &j.NextRunAt, &j.LastRunAt, other, &j.PausedUntil, &j.PausedAt} {
			if r.odd[f] != (time.Time{}) {
				*t = r.odd[f]
			}
		}
	}
	return j
}

// all returns every job, in creation order.
func (m *memTable) all() []Job {
	out := make([]Job, 0, int(m.n)-m.holes)
	for i := range m.n {
		if m.id(i) != "" {
			out = append(out, m.job(i))
		}
	}
	return out
}

// keepRuns returns the KeepRuns of the job at i.
func (m *memTable) keepRuns(i int32) int {
	c, k := m.chunk(i)
	return c.cfg.get(k).keep
}

// remove deletes job id, and reports whether there was one.
func (m *memTable) remove(id string) bool {
	i, ok := m.find(id)
	if !ok {
		return false
	}
	m.index.del(id, i)
	c, k := m.chunk(i)
	c.id[k] = ""
	c.name.free(k)
	c.cfg.free(k)
	c.rest.free(k)
	m.holes++
	if m.holes > memChunkLen && m.holes > int(m.n)/2 {
		m.compact()
	}
	return true
}

// compact closes the holes left by deleted jobs, keeping the order.
func (m *memTable) compact() {
	old, oldN := m.chunks, m.n
	m.chunks, m.n, m.holes = nil, 0, 0
	m.index = memIndex{seed: m.index.seed}
	for i := range oldN {
		c, k := old[i/memChunkLen], i%memChunkLen
		id := c.id[k]
		if id == "" {
			continue
		}
		n := m.n
		if int(n) == len(m.chunks)*memChunkLen {
			m.chunks = append(m.chunks, &memChunk{id: new([memChunkLen]string)})
		}
		d, dk := m.chunk(n)
		d.id[dk] = id
		d.name.add(dk, c.name.get(k))
		d.cfg.add(dk, c.cfg.get(k))
		d.start.add(dk, c.start.get(k))
		d.next.add(dk, c.next.get(k))
		d.last.add(dk, c.last.get(k))
		d.flags.add(dk, c.flags.get(k))
		d.rest.add(dk, c.rest.get(k))
		m.n++
		m.index.put(m, id, n)
	}
}

// memIndex maps job ids to positions in a memTable: an open-addressing
// hash table with linear probing, as [idIndex], whose slots hold a
// 32-bit hash and the position (8 bytes, no pointers). It grows by half
// when three quarters full, and maps a hash to its home slot by a
// multiplication, so that its length need not be a power of two.
type memIndex struct {
	slots []uint64 // 0: empty; else hash32<<32 | (position+1)
	n     int
	seed  maphash.Seed
}

func (x *memIndex) hash(id string) uint32 { return uint32(maphash.String(x.seed, id)) }

func (x *memIndex) home(h uint32) int { return int(uint64(h) * uint64(len(x.slots)) >> 32) }

// get returns the position of id.
func (x *memIndex) get(m *memTable, id string) (int32, bool) {
	if x.n == 0 {
		return 0, false
	}
	h := x.hash(id)
	for i := x.home(h); ; {
		s := x.slots[i]
		if s == 0 {
			return 0, false
		}
		if uint32(s>>32) == h {
			if p := int32(uint32(s)) - 1; m.id(p) == id {
				return p, true
			}
		}
		if i++; i == len(x.slots) {
			i = 0
		}
	}
}

// put adds id -> p; id must not be present.
func (x *memIndex) put(m *memTable, id string, p int32) {
	if x.slots == nil {
		if x.seed == (maphash.Seed{}) {
			x.seed = maphash.MakeSeed()
		}
		x.slots = make([]uint64, 64)
	}
	if (x.n+1)*4 > len(x.slots)*3 {
		old := x.slots
		x.slots = make([]uint64, len(old)+len(old)/2)
		for _, s := range old {
			if s != 0 {
				x.insert(s)
			}
		}
	}
	x.insert(uint64(x.hash(id))<<32 | uint64(uint32(p+1)))
	x.n++
}

func (x *memIndex) insert(s uint64) {
	i := x.home(uint32(s >> 32))
	for x.slots[i] != 0 {
		if i++; i == len(x.slots) {
			i = 0
		}
	}
	x.slots[i] = s
}

// del removes id, which is at position p, shifting later slots of its
// probe run back so that no tombstones are left.
func (x *memIndex) del(id string, p int32) {
	h := x.hash(id)
	want := uint64(h)<<32 | uint64(uint32(p+1))
	n := len(x.slots)
	i := x.home(h)
	for x.slots[i] != want {
		if x.slots[i] == 0 {
			return // not present
		}
		if i++; i == n {
			i = 0
		}
	}
	x.n--
	// Backward-shift deletion (Knuth 6.4, Algorithm R).
	for {
		x.slots[i] = 0
		j := i
		for {
			if j++; j == n {
				j = 0
			}
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
