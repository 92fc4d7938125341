package jsonstore

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

var _ cron.RunStore = (*Store)(nil)

// runRef is the history index's record of one line of runs.jsonl: what a
// query filters and orders on, and where the line is. 48 bytes, no
// pointer but the entry's: a run id of 32 lowercase hex digits (the ones
// a runner makes) is held as its 16 bytes, another one in long.
type runRef struct {
	at     int64  // scheduled_at, Unix ns
	off    int64  // offset of the line in runs.jsonl
	e      *entry // the job
	id     [16]byte
	long   int32  // 1 + index in Store.longIDs; 0: id holds the run id
	seq    uint32 // the line's place among the job's lines (rcount before it)
	status uint8  // index in refStatuses
	inst   uint16 // 1 + index in Store.instances; 0: none
}

var refStatuses = []cron.Status{"", cron.StatusSuccess, cron.StatusFailed, cron.StatusTimeout, cron.StatusSkipped, cron.StatusMissed}

func statusRef[T ~string | ~[]byte](st T) uint8 {
	for i, s := range refStatuses {
		if string(s) == string(st) {
			return uint8(i)
		}
	}
	return 0
}

// newRef makes the ref of run r, whose line is at off and is the seq-th
// of its job e. mu is held.
func (s *Store) newRef(r *cron.Run, e *entry, off int64, seq uint32) runRef {
	ref := runRef{at: r.ScheduledAt.UnixNano(), off: off, e: e, seq: seq, status: statusRef(r.Status)}
	id := []byte(r.ID)
	if hexRunID(&ref, id) {
		id = nil
	}
	s.nameRef(&ref, id, []byte(r.Instance))
	return ref
}

// hexRunID holds id in ref.id and reports true when it is 32 lowercase
// hex digits (as a runner makes them).
func hexRunID(ref *runRef, id []byte) bool {
	if len(id) != 32 {
		return false
	}
	for _, c := range id {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	hex.Decode(ref.id[:], id)
	return true
}

// nameRef sets the run id of ref that hexRunID could not hold (long, nil
// when it did) and its instance (inst, empty for none), kept once in the
// store's lists. mu is held.
func (s *Store) nameRef(ref *runRef, long, inst []byte) {
	if long != nil {
		s.longIDs = append(s.longIDs, string(long))
		ref.long = int32(len(s.longIDs))
	}
	if len(inst) > 0 {
		i := s.instIdx[string(inst)]
		if i == 0 && len(s.instances) < 1<<16-1 {
			if s.instIdx == nil {
				s.instIdx = make(map[string]uint16)
			}
			s.instances = append(s.instances, string(inst))
			i = uint16(len(s.instances))
			s.instIdx[s.instances[i-1]] = i
		}
		ref.inst = i
	}
}

// runID returns the run id of ref.
func (s *Store) runID(ref *runRef) string {
	if ref.long != 0 {
		return s.longIDs[ref.long-1]
	}
	return hex.EncodeToString(ref.id[:])
}

// compareIDs orders the run ids of a and b as strings do.
func (s *Store) compareIDs(a, b *runRef) int {
	if a.long == 0 && b.long == 0 {
		return bytes.Compare(a.id[:], b.id[:])
	}
	x, y := s.runID(a), s.runID(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

// buildRefs indexes runs.jsonl, once after a start or a compaction (in
// the background, or for a query that finds no index): one sequential
// read of the file,
// taking mu only for each batch of lines it indexes, so that writes go
// on meanwhile; the lines appended during the read are read too, and the
// index is complete (refsBuilt) when the read has caught up with the
// file under mu. rmu is held (read), so no compaction swaps the file.
//
// A background build (background) stops, with errYield, as soon as a
// compaction waits for rmu, so that it never holds up the flush; the
// compaction starts it again once the file is swapped.
func (s *Store) buildRefs(background bool) error {
	s.bmu.Lock()
	defer s.bmu.Unlock()
	s.mu.Lock()
	if s.refsBuilt {
		s.mu.Unlock()
		return nil
	}
	// As many refs as lines, and the lines appended meanwhile: the
	// index does not grow by copies.
	s.refs = make([]runRef, 0, s.runLines+s.runLines/16)
	s.refMax, s.longIDs = nil, nil
	f, end := s.rf, s.rsize
	s.mu.Unlock()
	if f == nil {
		s.mu.Lock()
		s.refsBuilt = true
		s.mu.Unlock()
		return nil
	}
	// A line's fields the index holds; the others are not decoded.
	type line struct {
		id         string
		ref        runRef
		long, inst []byte // for nameRef
	}
	var fields struct {
		ID          string      `json:"run_id"`
		ScheduledAt time.Time   `json:"scheduled_at"`
		Status      cron.Status `json:"status"`
		Instance    string      `json:"instance"`
	}
	seen := make(map[*entry]uint32)
	batch := make([]line, 0, 4096)
	// apply indexes the batch, under mu; it reports whether the read has
	// caught up with the file, and then leaves mu held. A store closed
	// meanwhile stops the build (stopped).
	stopped := false
	apply := func(off int64) bool {
		s.mu.Lock()
		for background && s.iterating > 0 && !s.closed {
			// A runner loads its jobs: the index waits, as the
			// runner's start matters more than the first query's.
			s.loadEnded.Wait()
		}
		if s.closed || background && s.swapping.Load() > 0 {
			s.mu.Unlock()
			stopped = true
			return false
		}
		for i := range batch {
			l := &batch[i]
			if e := s.index.get(l.id); e != nil && e.rfirst != 0 && l.ref.off+1 >= e.rfirst && l.ref.off+1 <= e.rhead {
				n := seen[e]
				seen[e] = n + 1
				l.ref.e, l.ref.seq = e, n
				s.nameRef(&l.ref, l.long, l.inst)
				s.addRef(l.ref)
			}
		}
		batch = batch[:0]
		if off >= s.rsize {
			return true
		}
		end = s.rsize
		s.mu.Unlock()
		return false
	}
	var off int64
	for {
		r := bufio.NewReaderSize(io.NewSectionReader(f, off, end-off), 1<<20)
		for {
			b, err := readLine(r)
			if len(b) > 0 && b[len(b)-1] == '\n' {
				if id, ok := lineJobID(b); ok {
					f, ok := refFields(b)
					if !ok {
						fields.ID, fields.ScheduledAt, fields.Status, fields.Instance = "", time.Time{}, "", ""
						ok = json.Unmarshal(b, &fields) == nil
						f = lineFields{at: fields.ScheduledAt, id: []byte(fields.ID), status: []byte(fields.Status), inst: []byte(fields.Instance)}
					}
					if ok {
						// b is read over: what the batch keeps is copied.
						l := line{id: id, inst: bytes.Clone(f.inst)}
						l.ref, l.long = f.ref()
						l.long = bytes.Clone(l.long)
						l.ref.off = off
						batch = append(batch, l)
					}
				}
				off += int64(len(b))
			}
			if err == io.EOF {
				break
			}
			if err != nil {
				return err
			}
			if len(batch) == cap(batch) {
				if apply(off) {
					s.refsBuilt = true
					s.mu.Unlock()
					return nil
				}
				if stopped {
					return errYield
				}
			}
		}
		if apply(off) {
			s.refsBuilt = true
			s.mu.Unlock()
			return nil
		}
		if stopped {
			return errYield
		}
	}
}

// lineFields is what the history index holds of a line of runs.jsonl,
// as refFields reads it: views of the line.
type lineFields struct {
	at         time.Time // scheduled_at
	id, status []byte
	inst       []byte // nil: none
}

// ref returns the ref of the line's fields (its job, offset and place
// left to set) and the run id when the ref cannot hold it (nameRef keeps
// it).
func (f *lineFields) ref() (runRef, []byte) {
	ref := runRef{at: f.at.UnixNano(), status: statusRef(f.status)}
	if hexRunID(&ref, f.id) {
		return ref, nil
	}
	return ref, f.id
}

// refFields reads the fields of a line of runs.jsonl the index holds
// (run_id, scheduled_at, status, instance) without decoding the line,
// for a line as the store writes it: "prev" and then the fields of a run
// in their order (run_id, job_id, scheduled_at, triggered_at,
// finished_at, status, ...), the first six as strings with no escape,
// and any instance before any attempt_log. It reports false for any other
// line, which json.Unmarshal then reads.
//
// The fields are matched where they must be, not searched for: a search
// stops at every quote of the line. In a JSON text a quote inside a
// string is escaped, so `"instance":` is found only where an object has
// that key.
func refFields(b []byte) (lineFields, bool) {
	var f lineFields
	// str returns the string value after key at the start of b (a value
	// with no escape), and the rest after its closing quote.
	str := func(b []byte, key string) ([]byte, []byte, bool) {
		if len(b) < len(key) || string(b[:len(key)]) != key {
			return nil, nil, false
		}
		b = b[len(key):]
		j := bytes.IndexByte(b, '"')
		if j < 0 || bytes.IndexByte(b[:j], '\\') >= 0 {
			return nil, nil, false
		}
		return b[:j], b[j+1:], true
	}
	const prev = `{"prev":`
	if len(b) < len(prev) || string(b[:len(prev)]) != prev {
		return f, false
	}
	i := bytes.IndexByte(b, ',')
	if i < 0 {
		return f, false
	}
	var at []byte
	var ok bool
	rest := b[i:]
	if f.id, rest, ok = str(rest, `,"run_id":"`); !ok {
		return f, false
	}
	if _, rest, ok = str(rest, `,"job_id":"`); !ok {
		return f, false
	}
	if at, rest, ok = str(rest, `,"scheduled_at":"`); !ok {
		return f, false
	}
	if _, rest, ok = str(rest, `,"triggered_at":"`); !ok {
		return f, false
	}
	if _, rest, ok = str(rest, `,"finished_at":"`); !ok {
		return f, false
	}
	if f.status, rest, ok = str(rest, `,"status":"`); !ok {
		return f, false
	}
	t, err := time.Parse(time.RFC3339Nano, string(at))
	if err != nil {
		return f, false
	}
	f.at = t
	if i := bytes.Index(rest, []byte(`"instance":`)); i >= 0 {
		// Only the run's own instance, before any attempt_log (whose
		// attempts may name one of their own).
		if bytes.Contains(rest[:i], []byte(`"attempt_log":`)) {
			return f, false
		}
		if f.inst, _, ok = str(rest[i:], `"instance":"`); !ok {
			return f, false
		}
	}
	return f, true
}

// errYield is the error of a build of the history index stopped because
// the store closed or a compaction waits.
var errYield = errors.New("jsonstore: history index build stopped")

// counter is a count safe for concurrent use.
type counter struct{ atomic.Int32 }

// prebuildRefs builds the history index in the background when a start
// or a compaction left it unbuilt (a start that compacted runs.jsonl, or
// restored a runs.idx written without it), so that the first query does
// not wait for a read of runs.jsonl; a query asked meanwhile waits for the
// build that runs. A store closed meanwhile stops it.
func (s *Store) prebuildRefs() {
	s.rmu.RLock()
	defer s.rmu.RUnlock()
	if err := s.buildRefs(true); err != nil && err != errYield {
		s.log.Warn("jsonstore: history index not built; the first query builds it", "error", err)
	}
}

// refBlock is the number of refs one entry of Store.refMax covers.
const refBlock = 1024

// addRef appends ref to the index. mu is held.
func (s *Store) addRef(ref runRef) {
	b := len(s.refs) / refBlock
	if b == len(s.refMax) {
		last := int64(-1 << 63)
		if b > 0 {
			last = s.refMax[b-1]
		}
		s.refMax = append(s.refMax, last)
	}
	s.refMax[b] = max(s.refMax[b], ref.at)
	s.refs = append(s.refs, ref)
}

// keptRef reports whether ref is a line the store keeps: of a job still
// stored, among its newest lines that it keeps (histOf). mu is held.
func (s *Store) keptRef(ref *runRef) bool {
	e := ref.e
	if e.deleted || e.rcount == 0 {
		return false
	}
	return e.rcount-ref.seq <= s.histOf(e)
}

// histOf returns how many runs of e's job the store keeps: its
// keep_runs, else Config.RunHistory (none when that is negative).
func (s *Store) histOf(e *entry) uint32 {
	if s.cfg.RunHistory < 0 {
		return 0
	}
	if k := e.keepRuns(); k > 0 {
		return uint32(k)
	}
	return uint32(s.cfg.RunHistory)
}

// refHeap holds the best refs found so far, the worst (the oldest) at
// the root.
type refHeap struct {
	s    *Store
	refs []runRef
}

func (h *refHeap) Len() int           { return len(h.refs) }
func (h *refHeap) Less(i, j int) bool { return h.s.compareRefs(&h.refs[i], &h.refs[j]) > 0 }
func (h *refHeap) Swap(i, j int)      { h.refs[i], h.refs[j] = h.refs[j], h.refs[i] }
func (h *refHeap) Push(x any)         { h.refs = append(h.refs, x.(runRef)) }
func (h *refHeap) Pop() any {
	x := h.refs[len(h.refs)-1]
	h.refs = h.refs[:len(h.refs)-1]
	return x
}

// compareRefs orders refs as a query does, newest first: negative when a
// comes before b.
func (s *Store) compareRefs(a, b *runRef) int {
	switch {
	case a.at > b.at:
		return -1
	case a.at < b.at:
		return 1
	}
	return -s.compareIDs(a, b)
}

// QueryRuns returns a page of the runs kept of every job, as
// [cron.RunStore.QueryRuns] describes. The store keeps an index of
// runs.jsonl in memory (48 bytes a run), which a start restores from
// runs.idx or builds in its read of runs.jsonl, and which is built again
// in the background by one read of the file after a compaction (a query
// of more than 16 jobs asked before it is done waits for it); a page
// scans it, newest appended first, and reads its runs from the file. A query of at most 16 jobs needs no index: it reads
// their runs along each job's chain in the file, newest first.
func (s *Store) QueryRuns(ctx context.Context, q cron.RunQuery) ([]cron.Run, cron.RunCursor, error) {
	s.rmu.RLock()
	defer s.rmu.RUnlock()
	s.mu.Lock()
	built, closed := s.refsBuilt, s.closed
	s.mu.Unlock()
	if closed {
		return nil, cron.RunCursor{}, ErrClosed
	}
	// A query of a few jobs reads their chains and needs no index.
	chains := len(q.JobIDs) > 0 && len(q.JobIDs) <= chainJobs
	if !built && !chains {
		if err := s.buildRefs(false); err == errYield {
			return nil, cron.RunCursor{}, ErrClosed
		} else if err != nil {
			return nil, cron.RunCursor{}, fmt.Errorf("jsonstore: index %s: %w", RunsFile, err)
		}
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, cron.RunCursor{}, ErrClosed
	}
	n := q.PageSize()
	// The runs not yet written, from memory.
	var pending []cron.Run
	for _, rs := range [][]cron.Run{s.newRuns, s.writing} {
		for i := range rs {
			if q.Match(&rs[i]) && q.After.Before(&rs[i]) {
				pending = append(pending, rs[i])
			}
		}
	}
	if chains {
		return s.queryChains(q, pending)
	}
	// The filters, as the index holds them.
	var jobs map[*entry]bool
	if len(q.JobIDs) > 0 {
		jobs = make(map[*entry]bool, len(q.JobIDs))
		for _, id := range q.JobIDs {
			if e := s.index.get(id); e != nil {
				jobs[e] = true
			}
		}
	}
	var statuses [8]bool
	for _, st := range q.Statuses {
		statuses[statusRef(st)] = true
	}
	var inst uint16
	if q.Instance != "" {
		inst = s.instIdx[q.Instance]
		if inst == 0 {
			jobs = map[*entry]bool{} // no run of that instance
		}
	}
	since, until := int64(-1<<63), int64(1<<63-1)
	if !q.Since.IsZero() {
		since = q.Since.UnixNano()
	}
	if !q.Until.IsZero() {
		until = q.Until.UnixNano()
	}
	c := q.After
	cAt := c.ScheduledAt.UnixNano()
	h := &refHeap{s: s, refs: make([]runRef, 0, n+2)}
	for i := len(s.refs) - 1; i >= 0; i-- {
		if i%refBlock == refBlock-1 || i == len(s.refs)-1 {
			// No ref up to here is scheduled later than latest: when
			// none of them can enter the page, the scan is over. Runs
			// are appended about in time order, so a page of the newest
			// runs reads the end of the index only.
			latest := s.refMax[i/refBlock]
			if latest < since || (len(h.refs) > n && latest < h.refs[0].at) {
				break
			}
		}
		ref := &s.refs[i]
		if ref.at < since || ref.at >= until || (jobs != nil && !jobs[ref.e]) || (len(q.Statuses) > 0 && !statuses[ref.status]) ||
			(inst != 0 && ref.inst != inst) {
			continue
		}
		if !c.IsZero() && (ref.at > cAt || (ref.at == cAt && s.runID(ref) >= c.RunID)) {
			continue
		}
		if len(h.refs) > n && s.compareRefs(ref, &h.refs[0]) >= 0 {
			continue
		}
		if !s.keptRef(ref) {
			continue
		}
		heap.Push(h, *ref)
		if len(h.refs) > n+1 {
			heap.Pop(h)
		}
	}
	refs := h.refs
	f := s.rf
	s.mu.Unlock()
	// Read the lines of the refs, and merge in the pending runs.
	all := pending
	var buf []byte
	for i := range refs {
		line, err := readLineAt(f, refs[i].off, buf)
		if err != nil {
			return nil, cron.RunCursor{}, fmt.Errorf("jsonstore: read %s at %d: %w", RunsFile, refs[i].off, err)
		}
		buf = line[:0]
		var rl runLine
		if err := json.Unmarshal(line, &rl); err != nil {
			return nil, cron.RunCursor{}, fmt.Errorf("jsonstore: %s at %d: %w", RunsFile, refs[i].off, err)
		}
		all = append(all, rl.Run)
	}
	q.After = cron.RunCursor{}
	runs, next := q.Page(all)
	return runs, next, nil
}

// chainJobs is the most jobs of a query that [Store.QueryRuns] reads
// through their chains in runs.jsonl (each at most the lines it keeps)
// rather than by a scan of the index.
const chainJobs = 16

// queryChains answers q, a query of a few jobs, from the runs of those
// jobs kept in runs.jsonl, read newest first along each job's chain, and
// from pending, the matching runs not yet written. mu is held; it is
// released.
func (s *Store) queryChains(q cron.RunQuery, pending []cron.Run) ([]cron.Run, cron.RunCursor, error) {
	type chain struct {
		id          string
		head, first int64
		n           uint32
	}
	var chains []chain
	for _, id := range q.JobIDs {
		if e := s.index.get(id); e != nil && e.rcount > 0 {
			chains = append(chains, chain{id: id, head: e.rhead, first: e.rfirst, n: min(e.rcount, s.histOf(e))})
		}
	}
	f := s.rf
	s.mu.Unlock()
	all := pending
	var buf []byte
	for _, c := range chains {
		head := c.head
		for range c.n {
			if head == 0 || head < c.first || f == nil {
				break
			}
			line, err := readLineAt(f, head-1, buf)
			if err != nil {
				return nil, cron.RunCursor{}, fmt.Errorf("jsonstore: read %s at %d: %w", RunsFile, head-1, err)
			}
			buf = line[:0]
			var rl runLine
			if err := json.Unmarshal(line, &rl); err != nil || rl.JobID != c.id || rl.Prev >= head {
				return nil, cron.RunCursor{}, fmt.Errorf("jsonstore: %s at %d: not a run of job %s", RunsFile, head-1, c.id)
			}
			if q.Match(&rl.Run) && q.After.Before(&rl.Run) {
				all = append(all, rl.Run)
			}
			head = rl.Prev
		}
	}
	runs, next := q.Page(all)
	return runs, next, nil
}

// RunByID returns the kept run with id runID, of any job: from memory
// when it is not written yet, else found in the history index and read
// from runs.jsonl. An unknown id, or a run dropped from its job's
// history, is cron.ErrNotFound.
func (s *Store) RunByID(ctx context.Context, runID string) (cron.Run, error) {
	s.rmu.RLock()
	defer s.rmu.RUnlock()
	s.mu.Lock()
	built, closed := s.refsBuilt, s.closed
	s.mu.Unlock()
	if closed {
		return cron.Run{}, ErrClosed
	}
	if !built {
		if err := s.buildRefs(false); err == errYield {
			return cron.Run{}, ErrClosed
		} else if err != nil {
			return cron.Run{}, fmt.Errorf("jsonstore: index %s: %w", RunsFile, err)
		}
	}
	var want runRef
	isShort := hexRunID(&want, []byte(runID))
	short := want.id
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return cron.Run{}, ErrClosed
	}
	for _, rs := range [][]cron.Run{s.newRuns, s.writing} {
		for i := len(rs) - 1; i >= 0; i-- {
			if rs[i].ID == runID && s.index.get(rs[i].JobID) != nil {
				r := rs[i]
				s.mu.Unlock()
				return r, nil
			}
		}
	}
	off := int64(-1)
	for i := len(s.refs) - 1; i >= 0; i-- {
		ref := &s.refs[i]
		if isShort && (ref.long != 0 || ref.id != short) || !isShort && (ref.long == 0 || s.longIDs[ref.long-1] != runID) {
			continue
		}
		if s.keptRef(ref) {
			off = ref.off
		}
		break
	}
	f := s.rf
	s.mu.Unlock()
	if off < 0 || f == nil {
		return cron.Run{}, fmt.Errorf("%w: run %q", cron.ErrNotFound, runID)
	}
	line, err := readLineAt(f, off, nil)
	if err != nil {
		return cron.Run{}, fmt.Errorf("jsonstore: read %s at %d: %w", RunsFile, off, err)
	}
	var rl runLine
	if err := json.Unmarshal(line, &rl); err != nil || rl.ID != runID {
		return cron.Run{}, fmt.Errorf("jsonstore: %s at %d: not the run %s", RunsFile, off, runID)
	}
	return rl.Run, nil
}
