package jsonstore

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
)

// RunsIndexFile holds, after a clean stop, where each job's lines are in
// runs.jsonl, so that a start does not read the run history. It is removed
// at start (runs are then appended) and written again by Close; without it
// a start reads runs.jsonl whole.
const RunsIndexFile = "runs.idx"

const runsIndexMagic = "ksana runs.idx 1\n"

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
	w := bufio.NewWriterSize(f, 1<<20)
	var b []byte
	b = append(b, runsIndexMagic...)
	b = binary.AppendUvarint(b, uint64(s.rsize))
	b = binary.AppendUvarint(b, uint64(sum))
	b = binary.AppendUvarint(b, uint64(s.runLines))
	n := 0
	for _, e := range s.index {
		if e.rcount > 0 {
			n++
		}
	}
	b = binary.AppendUvarint(b, uint64(n))
	w.Write(b)
	for id, e := range s.index {
		if e.rcount == 0 {
			continue
		}
		b = binary.AppendUvarint(b[:0], uint64(len(id)))
		b = append(b, id...)
		b = binary.AppendUvarint(b, uint64(e.rhead))
		b = binary.AppendUvarint(b, uint64(e.rfirst))
		b = binary.AppendUvarint(b, uint64(e.rcount))
		w.Write(b)
	}
	err = w.Flush()
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

// readRunsIndex applies runs.idx to the jobs loaded and returns the offset
// of runs.jsonl it covers (0 when there is no index). An index that does
// not match runs.jsonl is an error: the caller then reads the file whole.
func (s *Store) readRunsIndex(f *os.File, size int64) (int64, error) {
	data, err := os.ReadFile(filepath.Join(s.dir, RunsIndexFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	if len(data) < len(runsIndexMagic) || string(data[:len(runsIndexMagic)]) != runsIndexMagic {
		return 0, fmt.Errorf("%s: not an index", RunsIndexFile)
	}
	p := data[len(runsIndexMagic):]
	bad := errors.New(RunsIndexFile + ": cut short")
	next := func() uint64 {
		v, n := binary.Uvarint(p)
		if n <= 0 {
			p = nil
			return 0
		}
		p = p[n:]
		return v
	}
	covered, sum, lines, n := int64(next()), uint32(next()), int(next()), next()
	if p == nil {
		return 0, bad
	}
	if covered > size {
		return 0, fmt.Errorf("%s covers %d bytes, %s has %d", RunsIndexFile, covered, RunsFile, size)
	}
	if got, err := tailSum(f, covered); err != nil || got != sum {
		return 0, fmt.Errorf("%s was written for another %s", RunsIndexFile, RunsFile)
	}
	for range n {
		l := next()
		if p == nil || uint64(len(p)) < l {
			return 0, bad
		}
		key := p[:l]
		p = p[l:]
		head, first, count := int64(next()), int64(next()), uint32(next())
		if p == nil {
			return 0, bad
		}
		// The runs of a job gone stay counted in lines: a compaction drops them.
		if e := s.index[string(key)]; e != nil {
			e.rhead, e.rfirst, e.rcount = head, first, count
		}
	}
	s.runLines = lines
	return covered, nil
}
