package jsonstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// RunsIndexFile holds, after a clean stop, where each job's lines are in
// runs.jsonl and, when it was built, the history index (the scheduled
// time, status, run id and instance of each line), so that a start reads
// neither the run history nor builds the index, and the first history
// query after it is answered at once. It stays after a start, so that a
// start after a crash reads only the lines appended since, until Close
// writes it again; a compaction of runs.jsonl or the deletion of a job
// with runs removes it first. Without it a start reads runs.jsonl whole
// and builds the history index in that read. Its table of jobs follows
// the order of jobs.json, where a start finds them without a lookup.
const RunsIndexFile = "runs.idx"

const runsIndexMagic = "ksana runs.idx 3\n"

// tailSum is the checksum of the last bytes of runs.jsonl before end: an
// index applies to the file it was written for only.
func tailSum(f *os.File, end int64) (uint32, error) {
	n := min(end, 256)
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, end-n); err != nil {
		return 0, err
	}
	return crc32.ChecksumIEEE(buf), nil
}

// writeRunsIndex writes runs.idx for the current runs.jsonl. It runs once
// nothing appends any more (Close).
func (s *Store) writeRunsIndex() error {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.rf == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sum, err := tailSum(s.rf, s.rsize)
	if err != nil {
		return err
	}
	tmp := filepath.Join(s.dir, RunsIndexFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	// A checksum of the whole file ends it: a damaged index is not used.
	sumw := crc32.NewIEEE()
	w := bufio.NewWriterSize(io.MultiWriter(f, sumw), 1<<20)
	var b []byte
	b = append(b, runsIndexMagic...)
	b = binary.AppendUvarint(b, uint64(s.rsize))
	b = binary.AppendUvarint(b, uint64(sum))
	b = binary.AppendUvarint(b, uint64(s.runLines))
	n := 0
	for _, e := range s.order {
		if !e.deleted && e.rcount > 0 {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	w.Write(b)
	var ord map[*entry]uint64 // a job's place in the table, for the refs
	if s.refsBuilt {
		ord = make(map[*entry]uint64, n)
	}
	// The jobs come in the order of jobs.json, each with the number of
	// jobs without runs before it (gap): a start finds most of them at
	// that place in its own list instead of looking each up.
	gap := 0
	for _, e := range s.order {
		if e.deleted {
			continue
		}
		if e.rcount == 0 {
			gap++
			continue
		}
		id := e.id
		if ord != nil {
			ord[e] = uint64(len(ord))
		}
		b = binary.AppendUvarint(b[:0], uint64(gap))
		gap = 0
		b = binary.AppendUvarint(b, uint64(len(id)))
		b = append(b, id...)
		b = binary.AppendUvarint(b, uint64(e.rhead))
		b = binary.AppendUvarint(b, uint64(e.rfirst))
		b = binary.AppendUvarint(b, uint64(e.rcount))
		w.Write(b)
	}
	s.writeRefs(w, ord)
	err = w.Flush()
	if err == nil {
		_, err = f.Write(binary.LittleEndian.AppendUint32(nil, sumw.Sum32()))
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, filepath.Join(s.dir, RunsIndexFile))
	}
	if err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return syncDir(s.dir)
}

// dropRunsIndex removes runs.idx, if the store kept it from its start,
// durably (the directory is synced). A start after a crash then reads
// runs.jsonl whole. mu is held.
func (s *Store) dropRunsIndex() {
	if !s.runsIdx {
		return
	}
	s.runsIdx = false
	if err := os.Remove(filepath.Join(s.dir, RunsIndexFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.log.Warn("jsonstore: runs index not removed", "error", err)
		return
	}
	if err := syncDir(s.dir); err != nil {
		s.log.Warn("jsonstore: runs index removal not synced", "error", err)
	}
}

// writeRefs writes the history index after the table of jobs: 0 when it
// is not built (ord is nil), else 1, the long run ids, the instance names
// and the refs in file order, each with its job's place in the table
// (ord); the refs of jobs not in the table (deleted) are left out, as a
// build leaves them out.
func (s *Store) writeRefs(w *bufio.Writer, ord map[*entry]uint64) {
	var b []byte
	if ord == nil {
		w.Write(binary.AppendUvarint(b, 0))
		return
	}
	b = binary.AppendUvarint(b, 1)
	strs := func(l []string) {
		b = binary.AppendUvarint(b, uint64(len(l)))
		for _, v := range l {
			b = binary.AppendUvarint(b, uint64(len(v)))
			b = append(b, v...)
		}
	}
	strs(s.longIDs)
	strs(s.instances)
	n := 0
	for i := range s.refs {
		if _, ok := ord[s.refs[i].e]; ok {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	w.Write(b)
	var off, at int64
	for i := range s.refs {
		r := &s.refs[i]
		o, ok := ord[r.e]
		if !ok {
			continue
		}
		b = binary.AppendUvarint(b[:0], uint64(r.off-off))
		b = binary.AppendUvarint(b, o)
		b = binary.AppendVarint(b, r.at-at)
		b = binary.AppendUvarint(b, uint64(r.seq))
		b = append(b, r.status)
		b = binary.AppendUvarint(b, uint64(r.inst))
		b = binary.AppendUvarint(b, uint64(r.long))
		if r.long == 0 {
			b = append(b, r.id[:]...)
		}
		off, at = r.off, r.at
		w.Write(b)
	}
}

// readRunsIndex applies runs.idx to the jobs loaded and returns the offset
// of runs.jsonl it covers (0 when there is no index), and whether it
// restored the history index (s.refs, complete for that part of the file).
// An index that does not match runs.jsonl is an error: the caller then
// reads the file whole, and nothing of it is applied to the history index.
func (s *Store) readRunsIndex(f *os.File, size int64) (int64, bool, error) {
	data, release, err := mapFile(filepath.Join(s.dir, RunsIndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	defer release() // what the index keeps of it is copied
	if len(data) < len(runsIndexMagic)+4 || string(data[:len(runsIndexMagic)]) != runsIndexMagic {
		return 0, false, fmt.Errorf("%s: not an index", RunsIndexFile)
	}
	if sum := data[len(data)-4:]; binary.LittleEndian.Uint32(sum) != crc32.ChecksumIEEE(data[:len(data)-4]) {
		return 0, false, fmt.Errorf("%s: damaged (checksum)", RunsIndexFile)
	}
	r := &idxReader{p: data[len(runsIndexMagic) : len(data)-4]}
	bad := errors.New(RunsIndexFile + ": cut short")
	covered, sum, lines, n := int64(r.uvarint()), uint32(r.uvarint()), int(r.uvarint()), r.uvarint()
	if r.failed() {
		return 0, false, bad
	}
	if covered > size {
		return 0, false, fmt.Errorf("%s covers %d bytes, %s has %d", RunsIndexFile, covered, RunsFile, size)
	}
	if got, err := tailSum(f, covered); err != nil || got != sum {
		return 0, false, fmt.Errorf("%s was written for another %s", RunsIndexFile, RunsFile)
	}
	if n > uint64(len(r.p)) {
		return 0, false, bad
	}
	ents := make([]*entry, n) // the table's jobs, for the refs
	walk := newOrderWalk(s.order)
	for i := range ents {
		gap := r.uvarint()
		key := r.bytes(r.uvarint())
		head, first, count := int64(r.uvarint()), int64(r.uvarint()), uint32(r.uvarint())
		if r.failed() || gap > uint64(len(s.order)) {
			return 0, false, bad
		}
		// The job is found where the table says in the order of the jobs
		// loaded (reads of memory in its order), else looked up (a few
		// reads at random places of the heap: a million of them took
		// most of a start).
		e := walk.find(int(gap), key)
		if e == nil {
			e = s.index.getBytes(key)
		}
		// The runs of a job gone stay counted in lines: a compaction drops them.
		if e != nil {
			e.rhead, e.rfirst, e.rcount = head, first, count
			ents[i] = e
		}
	}
	s.runLines = lines
	refs, err := s.readRefs(r, ents, covered)
	if err != nil {
		return 0, false, err
	}
	return covered, refs, nil
}

// orderWalk finds the jobs of runs.idx's table in s.order, whose order
// the table keeps: at from on.
type orderWalk struct {
	order []*entry
	from  int
	// budget is how many more jobs the walk may read: a table that does
	// not match the order (jobs.json restored from elsewhere, say) costs
	// lookups then, not a read of the jobs for each of its lines.
	budget int
}

func newOrderWalk(order []*entry) *orderWalk {
	return &orderWalk{order: order, budget: 2*len(order) + 1024}
}

// orderSlack is how many jobs past the expected place the walk looks.
const orderSlack = 64

// find returns the job with id key when it is among the next gap+1 jobs
// after the last one found (deleted ones skipped), or a little further,
// and then goes on after it; else nil, and the walk stays where it is.
// The table's gap is the number of jobs before this one with no runs: a
// job deleted or made since the table was written shifts the place by a
// little, or the job is looked up.
func (w *orderWalk) find(gap int, key []byte) *entry {
	left := gap + 1 + orderSlack
	for i := w.from; i < len(w.order) && left > 0 && w.budget > 0; i++ {
		w.budget--
		e := w.order[i]
		if e.deleted {
			continue
		}
		left--
		if e.id == string(key) {
			w.from = i + 1
			return e
		}
	}
	return nil
}

// idxReader reads runs.idx: varints and byte strings. A read past the end
// sets p to nil, and every later read gives zero values.
type idxReader struct{ p []byte }

func (r *idxReader) failed() bool { return r.p == nil }

func (r *idxReader) uvarint() uint64 { return readVarint(r, binary.Uvarint) }

func (r *idxReader) varint() int64 { return readVarint(r, binary.Varint) }

// readVarint reads the next number of r with read (binary.Uvarint or
// binary.Varint).
func readVarint[T uint64 | int64](r *idxReader, read func([]byte) (T, int)) T {
	v, n := read(r.p)
	if n <= 0 {
		r.p = nil
		return 0
	}
	r.p = r.p[n:]
	return v
}

// bytes returns the next n bytes (valid while the file's data is).
func (r *idxReader) bytes(n uint64) []byte {
	if n > uint64(len(r.p)) {
		r.p = nil
		return nil
	}
	b := r.p[:n]
	r.p = r.p[n:]
	return b
}

// readRefs restores the history index that writeRefs wrote, the rest of
// runs.idx in r, with ents the jobs of the table (nil: a job not loaded)
// and covered the bytes of runs.jsonl the index covers (every line's
// offset is below it). It reports false when the index was not built at
// Close.
func (s *Store) readRefs(r *idxReader, ents []*entry, covered int64) (bool, error) {
	bad := errors.New(RunsIndexFile + ": history index cut short or damaged")
	strs := func() []string {
		n := r.uvarint()
		if n > uint64(len(r.p)) {
			r.p = nil
			return nil
		}
		l := make([]string, 0, min(n, 1<<16))
		for range n {
			l = append(l, string(r.bytes(r.uvarint())))
		}
		return l
	}
	if built := r.uvarint(); r.failed() || built != 1 {
		return false, nil // written without it (or by an older version)
	}
	longIDs, instances := strs(), strs()
	n := r.uvarint()
	if r.failed() || n > uint64(len(r.p)) || len(instances) >= 1<<16 {
		return false, bad
	}
	refs := make([]runRef, 0, n+n/16)
	var off, at int64
	for range n {
		doff, o, dat, seq := r.uvarint(), r.uvarint(), r.varint(), r.uvarint()
		status := r.bytes(1)
		inst, long := r.uvarint(), r.uvarint()
		if r.failed() || o >= uint64(len(ents)) || seq > 1<<32-1 || int(status[0]) >= len(refStatuses) ||
			inst > uint64(len(instances)) || long > uint64(len(longIDs)) {
			return false, bad
		}
		if doff >= uint64(covered-off) || len(refs) > 0 && doff == 0 {
			return false, bad // past the file, or not after the line before
		}
		off, at = off+int64(doff), at+dat
		ref := runRef{at: at, off: off, e: ents[o], seq: uint32(seq), status: status[0], inst: uint16(inst), long: int32(long)}
		if long == 0 {
			id := r.bytes(uint64(len(ref.id)))
			if r.failed() {
				return false, bad
			}
			copy(ref.id[:], id)
		}
		if ref.e != nil {
			refs = append(refs, ref)
		}
	}
	if r.failed() || len(r.p) != 0 {
		return false, bad
	}
	// addRef appends in place: the i-th ref is written over itself or an
	// earlier one.
	s.refs, s.refMax, s.longIDs = refs[:0], nil, longIDs
	for _, r := range refs {
		s.addRef(r)
	}
	s.instances, s.instIdx = instances, make(map[string]uint16, len(instances))
	for i, v := range instances {
		s.instIdx[v] = uint16(i + 1)
	}
	return true, nil
}
