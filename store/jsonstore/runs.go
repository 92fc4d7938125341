package jsonstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/ksana-dev/ksana/cron"
)

// A line of runs.jsonl is one run: the JSON form of [cron.Run] with one
// more field first, "prev": the offset + 1 of the previous line of the same
// job in the file (0: none). The lines of a job form a chain from its
// newest, whose offset the store keeps, so that a job's history is read
// from the file when asked, line by line, newest first.
type runLine struct {
	Prev int64 `json:"prev"`
	cron.Run
}

// appendRunLine appends the line of run r with prev to b.
func appendRunLine(b []byte, prev int64, r *cron.Run) ([]byte, error) {
	enc, err := json.Marshal(r)
	if err != nil {
		return b, err
	}
	b = append(b, `{"prev":`...)
	b = strconv.AppendInt(b, prev, 10)
	b = append(b, ',')
	b = append(b, enc[1:]...)
	return append(b, '\n'), nil
}

// appendRunLines appends runs as lines without "prev" (the form of older
// versions, which a start compacts into the current one).
func appendRunLines(b []byte, runs []cron.Run) ([]byte, error) {
	for i := range runs {
		line, err := json.Marshal(&runs[i])
		if err != nil {
			return b, err
		}
		b = append(b, line...)
		b = append(b, '\n')
	}
	return b, nil
}

// AppendRun adds r to the history of r.JobID. It returns at once; the run
// reaches runs.jsonl with the next flush. An unknown job is
// cron.ErrNotFound.
func (s *Store) AppendRun(ctx context.Context, r cron.Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if s.index.get(r.JobID) == nil {
		return cron.ErrNotFound
	}
	if s.cfg.RunHistory < 0 {
		return nil
	}
	s.newRuns = append(s.newRuns, r)
	s.scheduleLocked()
	return nil
}

// Runs returns up to limit of the newest runs of job id, newest first
// (limit <= 0 or above [Config.RunHistory]: RunHistory). The runs not yet
// written come from memory, the others from runs.jsonl. An unknown job is
// cron.ErrNotFound.
func (s *Store) Runs(ctx context.Context, id string, limit int) ([]cron.Run, error) {
	s.rmu.RLock()
	defer s.rmu.RUnlock()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, ErrClosed
	}
	e := s.index.get(id)
	if e == nil {
		s.mu.Unlock()
		return nil, cron.ErrNotFound
	}
	hist := int(s.histOf(e))
	if limit <= 0 || limit > hist {
		limit = hist
	}
	out := []cron.Run{}
	for _, rs := range [][]cron.Run{s.newRuns, s.writing} {
		for i := len(rs) - 1; i >= 0 && len(out) < limit; i-- {
			if rs[i].JobID == id {
				out = append(out, rs[i])
			}
		}
	}
	head, first, f := e.rhead, e.rfirst, s.rf
	s.mu.Unlock()
	var buf []byte
	for head != 0 && head >= first && len(out) < limit && f != nil {
		line, err := readLineAt(f, head-1, buf)
		if err != nil {
			return out, fmt.Errorf("jsonstore: read %s at %d: %w", RunsFile, head-1, err)
		}
		buf = line[:0]
		var rl runLine
		if err := json.Unmarshal(line, &rl); err != nil || rl.JobID != id || rl.Prev >= head {
			return out, fmt.Errorf("jsonstore: %s at %d: not a run of job %s", RunsFile, head-1, id)
		}
		out = append(out, rl.Run)
		head = rl.Prev
	}
	return out, nil
}

// readLineAt reads the line at off (without its newline).
func readLineAt(f *os.File, off int64, buf []byte) ([]byte, error) {
	size := 512
	for {
		if cap(buf) < size {
			buf = make([]byte, size)
		}
		buf = buf[:size]
		n, err := f.ReadAt(buf, off)
		if i := bytes.IndexByte(buf[:n], '\n'); i >= 0 {
			return buf[:i], nil
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		size *= 4
	}
}

// runScratch is where a job's lines go in a write to runs.jsonl.
type runScratch struct {
	head, first int64 // offsets + 1 of its newest and oldest lines written
	seen, kept  uint32
}

// appendRuns appends the runs taken since the last flush to runs.jsonl and
// syncs it. It runs on the flushing goroutine, the only writer of the file.
func (s *Store) appendRuns() error {
	s.mu.Lock()
	runs := s.newRuns
	if len(runs) == 0 || s.rf == nil {
		s.mu.Unlock()
		return nil
	}
	s.newRuns = nil
	s.writing = runs
	var buf []byte
	var touched []*entry
	scr := make(map[*entry]*runScratch)
	var err error
	offs := make([]int64, len(runs)) // of each run's line, -1: none
	for i := range runs {
		offs[i] = -1
		e := s.index.get(runs[i].JobID)
		if e == nil {
			continue // deleted since
		}
		c := scr[e]
		prev := e.rhead
		if c != nil {
			prev = c.head
		} else {
			c = &runScratch{}
			scr[e] = c
			touched = append(touched, e)
		}
		off := s.rsize + int64(len(buf))
		if buf, err = appendRunLine(buf, prev, &runs[i]); err != nil {
			break
		}
		offs[i] = off
		if c.seen == 0 {
			c.first = off + 1
		}
		c.head = off + 1
		c.seen++
	}
	f := s.rf
	s.mu.Unlock()
	if err == nil {
		if _, err = f.Write(buf); err == nil {
			err = f.Sync()
		}
		if err != nil {
			// Leave no torn line behind, to be glued to the next one.
			_ = f.Truncate(s.rsize)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil && s.refsBuilt {
		seen := make(map[*entry]uint32, len(touched))
		for i := range runs {
			if e := s.index.get(runs[i].JobID); e != nil && offs[i] >= 0 && scr[e] != nil {
				n := seen[e]
				seen[e] = n + 1
				s.addRef(s.newRef(&runs[i], e, offs[i], e.rcount+n))
			}
		}
	}
	for _, e := range touched {
		c := scr[e]
		if err == nil && !e.deleted {
			hist := s.histOf(e)
			before := min(e.rcount, hist)
			e.rhead = c.head
			if e.rfirst == 0 {
				e.rfirst = c.first
			}
			e.rcount += c.seen
			s.runKept += int(min(e.rcount, hist) - before)
			s.runLines += int(c.seen)
		}
	}
	s.writing = nil
	if err != nil {
		s.newRuns = append(runs, s.newRuns...)
		return err
	}
	s.rsize += int64(len(buf))
	return nil
}

// runsNeedCompaction reports whether runs.jsonl has grown well past what
// is kept: twice the kept lines and 4096 more.
func (s *Store) runsNeedCompaction() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rf != nil && s.runLines > 2*s.runKept+4096
}

// lineJobID returns the job id of a line of runs.jsonl.
func lineJobID(line []byte) (string, bool) {
	const key = `,"job_id":"`
	if i := bytes.Index(line, []byte(key)); i >= 0 {
		rest := line[i+len(key):]
		if j := bytes.IndexByte(rest, '"'); j >= 0 && bytes.IndexByte(rest[:j], '\\') < 0 {
			return string(rest[:j]), true
		}
	}
	var r struct {
		JobID string `json:"job_id"`
	}
	if err := json.Unmarshal(line, &r); err != nil {
		return "", false
	}
	return r.JobID, true
}

// lineHead reads the "prev" and "job_id" fields of a line of runs.jsonl
// as the store writes it, {"prev":N,"run_id":"...","job_id":"...",...
// with strings that hold no escape (and a job id of valid UTF-8), without
// decoding the line. It reports
// false for any other line.
func lineHead(b []byte) (prev int64, jobID []byte, ok bool) {
	const p = `{"prev":`
	if !bytes.HasPrefix(b, []byte(p)) {
		return 0, nil, false
	}
	b = b[len(p):]
	i := 0
	for ; i < len(b) && b[i] >= '0' && b[i] <= '9'; i++ {
		if i == 18 { // past what an int64 surely holds
			return 0, nil, false
		}
		prev = prev*10 + int64(b[i]-'0')
	}
	if i == 0 {
		return 0, nil, false
	}
	b = b[i:]
	str := func(key string) []byte {
		if !bytes.HasPrefix(b, []byte(key)) {
			return nil
		}
		b = b[len(key):]
		j := bytes.IndexByte(b, '"')
		if j < 0 || bytes.IndexByte(b[:j], '\\') >= 0 {
			return nil
		}
		v := b[:j]
		b = b[j+1:]
		return v
	}
	if str(`,"run_id":"`) == nil {
		return 0, nil, false
	}
	// Invalid UTF-8 decodes to U+FFFD: the decoding path has it.
	if jobID = str(`,"job_id":"`); jobID == nil || !utf8.Valid(jobID) {
		return 0, nil, false
	}
	return prev, jobID, true
}

// lineBody returns a line of runs.jsonl without its opening brace and its
// "prev" field: what follows them in a rewritten line.
func lineBody(line []byte) []byte {
	const p = `{"prev":`
	if bytes.HasPrefix(line, []byte(p)) {
		if i := bytes.IndexByte(line, ','); i >= 0 {
			return line[i+1:]
		}
	}
	return line[1:]
}

// compactRuns rewrites runs.jsonl with the newest RunHistory runs of each
// job, in two passes over the file: the store knows how many lines each
// job has, so one sequential read decides each line. It runs on the
// flushing goroutine; Runs reads the old file until the new one is in.
//
// With strict, each line is decoded as a start does, and those that do not
// decode are dropped (the file came from disk, not from this store);
// else the job id is all that is read.
func (s *Store) compactRuns(strict bool) error {
	s.mu.Lock()
	scr := make(map[*entry]*runScratch, s.index.len())
	for e := range s.index.all() {
		if e.rcount > 0 {
			scr[e] = &runScratch{}
		}
	}
	src, end := s.rf, s.rsize
	s.mu.Unlock()

	tmp := filepath.Join(s.dir, RunsFile+".tmp")
	out, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	fail := func(err error) error {
		out.Close()
		_ = os.Remove(tmp)
		return err
	}
	r := bufio.NewReaderSize(io.NewSectionReader(src, 0, end), 1<<20)
	w := bufio.NewWriterSize(&syncingWriter{f: out}, 1<<20)
	var off, wsize int64
	var nb []byte
	lines := 0
	locked := false
	for {
		line, rerr := readLine(r)
		if rerr != nil && rerr != io.EOF {
			if locked {
				s.mu.Unlock()
			}
			return fail(rerr)
		}
		lineOff := off
		off += int64(len(line))
		body := bytes.TrimRight(line, "\n")
		if len(body) > 1 && body[0] == '{' {
			id, ok := lineJobID(body)
			if ok && strict {
				var rl runLine
				ok = json.Unmarshal(body, &rl) == nil && rl.JobID == id
			}
			if ok {
				if !locked {
					s.mu.Lock()
					locked = true
				}
				e := s.index.get(id)
				if c := scr[e]; c != nil && e.rcount > 0 && lineOff+1 >= e.rfirst {
					hist := s.histOf(e)
					keep := e.rcount <= hist || c.seen >= e.rcount-hist
					c.seen++
					if keep {
						nb = append(nb[:0], `{"prev":`...)
						nb = strconv.AppendInt(nb, c.head, 10)
						nb = append(nb, ',')
						nb = append(nb, lineBody(body)...)
						nb = append(nb, '\n')
						w.Write(nb)
						if c.first == 0 {
							c.first = wsize + 1
						}
						c.head = wsize + 1
						c.kept++
						wsize += int64(len(nb))
					}
				}
				if lines++; lines%4096 == 0 {
					s.mu.Unlock()
					locked = false
				}
			}
		}
		if rerr == io.EOF {
			break
		}
	}
	if locked {
		s.mu.Unlock()
	}
	if err := w.Flush(); err != nil {
		return fail(err)
	}
	if err := out.Sync(); err != nil {
		return fail(err)
	}
	// runs.idx describes the old file: it goes first, so that no start
	// applies it to the new one.
	s.mu.Lock()
	s.dropRunsIndex()
	s.mu.Unlock()
	// The swap: no Runs reads the old file from here on. A background
	// build of the history index gives way, and starts again after.
	s.swapping.Add(1)
	s.rmu.Lock()
	s.swapping.Add(-1)
	defer func() {
		s.rmu.Unlock()
		if !s.cfg.noPrebuild {
			go s.prebuildRefs()
		}
	}()
	if err := os.Rename(tmp, filepath.Join(s.dir, RunsFile)); err != nil {
		return fail(err)
	}
	if _, err := out.Seek(0, io.SeekEnd); err != nil {
		return fail(err)
	}
	s.mu.Lock()
	kept, keptLines := 0, 0
	for e := range s.index.all() {
		var c runScratch
		if p := scr[e]; p != nil {
			c = *p
		}
		e.rhead, e.rfirst, e.rcount = c.head, c.first, c.kept
		kept += int(min(c.kept, s.histOf(e)))
		keptLines += int(c.kept)
	}
	s.runKept, s.runLines = kept, keptLines
	// The lines moved: the history index is built again when asked for.
	s.refs, s.refMax, s.longIDs, s.refsBuilt = nil, nil, nil, false
	old := s.rf
	s.rf = out
	st, _ := out.Stat()
	if st != nil {
		s.rsize = st.Size()
	}
	s.mu.Unlock()
	old.Close()
	return syncDir(s.dir)
}

// loadRuns opens runs.jsonl and finds each job's lines. Lines that do not
// parse, runs of unknown jobs and lines of an older form are dropped by a
// compaction at once; a last line cut short by a crash is cut off.
func (s *Store) loadRuns() error {
	if s.cfg.RunHistory < 0 {
		return nil
	}
	path := filepath.Join(s.dir, RunsFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("jsonstore: open %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("jsonstore: open %s: %w", path, err)
	}
	s.rf = f
	from, refs, err := s.readRunsIndex(f, st.Size())
	idxErr := err
	if err != nil {
		s.log.Warn("jsonstore: runs index not used; reading runs.jsonl whole", "error", err)
		for e := range s.index.all() {
			e.rhead, e.rfirst, e.rcount = 0, 0, 0
		}
		s.runLines, from = 0, 0
	}
	// Without runs.idx the scan builds the history index too (from 0):
	// the first query after the start finds it built.
	refs = refs || from == 0
	good, compact, err := s.scanRuns(f, from, st.Size(), refs)
	if err != nil {
		return fmt.Errorf("jsonstore: read %s: %w", path, err)
	}
	if refs && !compact {
		// The history index covers the whole file: runs.idx up to from,
		// and the lines scanned after it.
		s.refsBuilt = true
	} else {
		s.refs, s.refMax, s.longIDs = nil, nil, nil
	}
	if good < st.Size() {
		// A last line cut short by a crash.
		if err := f.Truncate(good); err != nil {
			return fmt.Errorf("jsonstore: cut the torn end of %s: %w", path, err)
		}
	}
	// runs.idx stays for the next start, even after a crash: runs are
	// only appended to the part it covers (it checks that part is
	// unchanged), and what would make it wrong for that part removes it
	// first (a compaction, the deletion of a job with runs).
	if idxErr == nil {
		s.runsIdx = true
	} else {
		s.dropRunsIndex()
	}
	s.rsize = good
	s.runKept = 0
	for e := range s.index.all() {
		s.runKept += int(min(e.rcount, s.histOf(e)))
	}
	if compact || s.runLines > 2*s.runKept+4096 {
		if err := s.compactRuns(compact); err != nil {
			return fmt.Errorf("jsonstore: compact %s: %w", path, err)
		}
	}
	if _, err := s.rf.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	return nil
}

// scanRuns reads the lines of runs.jsonl from offset from to size and
// links them to their jobs, and with index adds them to the history index
// (restored from runs.idx up to from). It returns the end of the last
// whole line and whether a compaction is needed (lines that do not parse,
// of unknown jobs or without a right "prev").
func (s *Store) scanRuns(f *os.File, from, size int64, index bool) (good int64, compact bool, err error) {
	// The checking goroutines also find each line's job and read what the
	// history index holds of it: nothing changes the jobs meanwhile.
	blocks, recycle, stop := checkRuns(f, from, size, runBlockSize, func(l *checkedLine, body []byte) {
		l.e = s.index.getBytes(l.id)
		if index && l.e != nil {
			if fl, ok := refFields(body); ok {
				l.ref, l.long = fl.ref()
				l.inst, l.refOK = fl.inst, true
			}
		}
	})
	defer stop()
	off := from
	for b := range blocks {
		<-b.done
		if b.err != nil {
			return 0, false, b.err
		}
		if index && cap(s.refs) == len(s.refs) && len(b.lines) > 0 {
			// Room for the lines of the rest of the file (a guess from
			// this block's), instead of growing by copies.
			more := int(float64(size-off) / float64(len(b.buf)) * float64(len(b.lines)) * 1.05)
			s.refs = slices.Grow(s.refs, more)
		}
		for i := range b.lines {
			l := &b.lines[i]
			line := l.line
			lineOff := off
			off += int64(len(line))
			body := bytes.TrimSpace(line)
			if len(body) == 0 {
				compact = true
				continue
			}
			s.runLines++
			// A line as the store writes it gives its two fields without a
			// decoding (checked whole, still, by checkRuns); any other
			// line is decoded.
			var e *entry
			var prev *int64
			var run cron.Run
			decoded := false
			if l.head {
				e, prev = l.e, &l.prev
			} else {
				var rl struct {
					Prev *int64 `json:"prev"`
					cron.Run
				}
				if err := json.Unmarshal(body, &rl); err != nil {
					compact = true
					continue
				}
				e, prev, run, decoded = s.index.get(rl.JobID), rl.Prev, rl.Run, true
			}
			if e == nil {
				compact = true
				continue
			}
			if prev != nil && *prev == 0 && e.rhead != 0 {
				// A new chain: the job was deleted and made again with its id,
				// and a crash came before a compaction dropped the old job's
				// lines. They are not its runs: the compaction drops them.
				e.rfirst, e.rhead, e.rcount = 0, 0, 0
				compact = true
			}
			if prev == nil || *prev != e.rhead || len(body) != len(line)-1 {
				compact = true // relinked by the compaction
			}
			if index && !compact {
				switch {
				case l.refOK:
					ref := l.ref
					ref.e, ref.off, ref.seq = e, lineOff, e.rcount
					s.nameRef(&ref, l.long, l.inst)
					s.addRef(ref)
				case decoded || json.Unmarshal(body, &run) == nil:
					s.addRef(s.newRef(&run, e, lineOff, e.rcount))
				default:
					compact = true
					continue
				}
			}
			if e.rfirst == 0 {
				e.rfirst = lineOff + 1
			}
			e.rhead = lineOff + 1
			e.rcount++
		}
		recycle(b) // what the lines gave is copied
		if b.tail != nil {
			// The end of the file, with no newline: a line cut short.
			return off, compact || len(bytes.TrimSpace(b.tail)) > 0, nil
		}
	}
	return off, compact, nil
}

// runBlock is a run of whole lines of runs.jsonl, checked by checkRuns:
// done is closed once lines (or err) is set.
type runBlock struct {
	buf   []byte
	lines []checkedLine
	tail  []byte // the last block only: what follows the last newline
	err   error
	done  chan struct{}
	mem   []byte // what buf is cut from, whole: for the next block
}

// checkedLine is a line of a runBlock, its newline included, and what
// lineHead read of it when it is a line as the store writes it and valid
// JSON (head); scanRuns's check adds its job and, for the history index,
// what refFields read (refOK: ref, without its job, offset and place,
// and the run id and instance for nameRef).
type checkedLine struct {
	line       []byte
	id         []byte
	prev       int64
	head       bool
	refOK      bool
	e          *entry
	ref        runRef
	long, inst []byte
}

// runBlockSize is how much of runs.jsonl a runBlock holds, or more for a
// longer line.
const runBlockSize = 4 << 20

// checkRuns reads runs.jsonl from offset from to size in blocks of whole
// lines (of blockSize bytes, or more for a longer line), on a goroutine of its own, and checks each line (lineHead, and
// json.Valid for the whole line, the costly part of a start) on two more,
// which then call check (unless nil) with each line that passed and its
// text without the newline: a start over a million runs reads the file at
// the pace of the two processors, and scanRuns only links the lines. The
// blocks come in file order; recycle gives a block done with (nothing
// points into it any more) back for a later one, so that a read of the
// file touches a few blocks' memory instead of the file's size of it.
// stop ends the goroutines early (scanRuns calls it when it returns).
func checkRuns(f *os.File, from, size int64, blockSize int, check func(l *checkedLine, body []byte)) (blocks <-chan *runBlock, recycle func(*runBlock), stop func()) {
	const inFlight = 4
	ordered := make(chan *runBlock, inFlight)
	work := make(chan *runBlock, inFlight)
	free := make(chan *runBlock, 2*inFlight+2)
	quit := make(chan struct{})
	var wg sync.WaitGroup
	for range 2 {
		wg.Go(func() {
			for b := range work {
				b.lines = splitRunLines(b.lines, b.buf, check)
				close(b.done)
			}
		})
	}
	// block returns a block whose memory holds carry and then n bytes.
	block := func(carry []byte, n int) *runBlock {
		select {
		case b := <-free:
			if cap(b.mem) >= len(carry)+n {
				// carry may lie in b.mem, past where it goes: append
				// moves it as copy does.
				b.mem = append(b.mem[:0], carry...)
				b.buf, b.tail, b.err, b.done = nil, nil, nil, make(chan struct{})
				return b
			}
		default:
		}
		mem := make([]byte, len(carry), len(carry)+n)
		copy(mem, carry)
		return &runBlock{mem: mem, done: make(chan struct{})}
	}
	go func() {
		defer close(ordered)
		defer close(work)
		send := func(b *runBlock) bool {
			select {
			case ordered <- b:
			case <-quit:
				return false
			}
			if b.err != nil || b.tail != nil {
				close(b.done)
				return false
			}
			select {
			case work <- b:
				return true
			case <-quit:
				close(b.done)
				return false
			}
		}
		r := io.NewSectionReader(f, from, size-from)
		var carry []byte // a line begun in the last block
		for {
			b := block(carry, blockSize)
			buf := b.mem
			n, err := io.ReadFull(r, buf[len(buf):cap(buf)])
			buf = buf[:len(buf)+n]
			if err != nil && err != io.EOF && err != io.ErrUnexpectedEOF {
				send(&runBlock{err: err, done: make(chan struct{})})
				return
			}
			if err != nil { // the end of the section
				cut := bytes.LastIndexByte(buf, '\n') + 1
				b.buf = buf[:cut]
				if cut > 0 && !send(b) {
					return
				}
				send(&runBlock{tail: append([]byte{}, buf[cut:]...), done: make(chan struct{})})
				return
			}
			cut := bytes.LastIndexByte(buf, '\n') + 1
			if cut == 0 {
				// One line longer than a block: read on, into more memory.
				carry = buf
				continue
			}
			carry = buf[cut:]
			b.mem, b.buf = buf, buf[:cut:cut]
			if !send(b) {
				return
			}
		}
	}()
	return ordered, func(b *runBlock) {
			select {
			case free <- b:
			default:
			}
		}, func() {
			close(quit)
			for range ordered {
			}
			wg.Wait()
		}
}

// splitRunLines cuts buf (whole lines) into its lines and reads each (see
// checkRuns).
func splitRunLines(lines []checkedLine, buf []byte, check func(l *checkedLine, body []byte)) []checkedLine {
	lines = slices.Grow(lines[:0], bytes.Count(buf, []byte{'\n'}))[:bytes.Count(buf, []byte{'\n'})]
	clear(lines)
	for k := range lines {
		i := bytes.IndexByte(buf, '\n') + 1
		l := &lines[k]
		l.line = buf[:i]
		body := bytes.TrimSpace(l.line)
		if p, id, ok := lineHead(body); ok && json.Valid(body) {
			l.prev, l.id, l.head = p, id, true
			if check != nil {
				check(l, body)
			}
		}
		buf = buf[i:]
	}
	return lines
}

// closeRuns closes runs.jsonl.
func (s *Store) closeRuns() {
	s.rmu.Lock()
	defer s.rmu.Unlock()
	if s.rf != nil {
		s.rf.Close()
		s.rf = nil
	}
}

// readLine reads up to and including the next '\n' from r, as
// ReadSlice does; a line longer than r's buffer is read whole, into a new
// slice. The slice is valid until the next read.
func readLine(r *bufio.Reader) ([]byte, error) {
	line, err := r.ReadSlice('\n')
	if !errors.Is(err, bufio.ErrBufferFull) {
		return line, err
	}
	long := append([]byte(nil), line...)
	for errors.Is(err, bufio.ErrBufferFull) {
		line, err = r.ReadSlice('\n')
		long = append(long, line...)
	}
	return long, err
}
