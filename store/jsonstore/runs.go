package jsonstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// runRing keeps the newest runs of one job.
type runRing struct {
	buf  []cron.Run
	next int // where the next run goes
	n    int
}

func newRunRing(limit int) *runRing { return &runRing{buf: make([]cron.Run, 0, min(limit, 8))} }

func (r *runRing) push(run cron.Run, limit int) {
	if len(r.buf) < limit {
		r.buf = append(r.buf, run)
		r.n = len(r.buf)
		r.next = len(r.buf) % limit
		return
	}
	r.buf[r.next] = run
	r.next = (r.next + 1) % limit
	r.n = limit
}

// newest returns up to limit runs, newest first.
func (r *runRing) newest(limit int) []cron.Run {
	if limit <= 0 || limit > r.n {
		limit = r.n
	}
	out := make([]cron.Run, 0, limit)
	i := r.next
	for range limit {
		i = (i - 1 + len(r.buf)) % len(r.buf)
		out = append(out, r.buf[i])
	}
	return out
}

// AppendRun adds r to the history of r.JobID, dropping the oldest beyond
// [Config.RunHistory]. It returns at once; the run reaches runs.jsonl with
// the next flush. An unknown job is cron.ErrNotFound.
func (s *Store) AppendRun(ctx context.Context, r cron.Run) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	if _, ok := s.index[r.JobID]; !ok {
		return cron.ErrNotFound
	}
	if s.cfg.RunHistory < 0 {
		return nil
	}
	ring := s.runs[r.JobID]
	if ring == nil {
		ring = newRunRing(s.cfg.RunHistory)
		s.runs[r.JobID] = ring
	}
	ring.push(r, s.cfg.RunHistory)
	s.newRuns = append(s.newRuns, r)
	if !s.scheduled {
		s.scheduled = true
		s.dirtyAt = time.Now()
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	return nil
}

// Runs returns up to limit of the newest runs of job id, newest first
// (limit <= 0: all kept). An unknown job is cron.ErrNotFound.
func (s *Store) Runs(ctx context.Context, id string, limit int) ([]cron.Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	if _, ok := s.index[id]; !ok {
		return nil, cron.ErrNotFound
	}
	ring := s.runs[id]
	if ring == nil {
		return []cron.Run{}, nil
	}
	return ring.newest(limit), nil
}

// runsNeedCompactionLocked reports whether runs.jsonl has grown well past
// what is kept, counting adding more lines.
func (s *Store) runsNeedCompactionLocked(adding int) bool {
	if s.cfg.RunHistory < 0 {
		return false
	}
	kept := 0
	if s.runLines+adding > 4096 {
		for _, r := range s.runs {
			kept += r.n
		}
		return s.runLines+adding > 2*kept+4096
	}
	return false
}

// allRunsLocked returns every kept run, oldest first per job.
func (s *Store) allRunsLocked() []cron.Run {
	var out []cron.Run
	for _, e := range s.order {
		if e.deleted {
			continue
		}
		if r := s.runs[e.job.ID]; r != nil {
			rs := r.newest(0)
			slices.Reverse(rs)
			out = append(out, rs...)
		}
	}
	return out
}

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

// appendRuns appends runs to runs.jsonl and syncs it.
func (s *Store) appendRuns(runs []cron.Run) error {
	data, err := appendRunLines(nil, runs)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, RunsFile), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	if _, err = f.Write(data); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// rewriteRuns replaces runs.jsonl with the given runs, atomically.
func (s *Store) rewriteRuns(runs []cron.Run) error {
	data, err := appendRunLines(nil, runs)
	if err != nil {
		return err
	}
	return writeFileAtomic(s.dir, RunsFile, data)
}

// loadRuns reads runs.jsonl. Lines that do not parse (a line cut short by a
// crash) and runs of unknown jobs are dropped; the file is then compacted.
func (s *Store) loadRuns() error {
	path := filepath.Join(s.dir, RunsFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("jsonstore: read %s: %w", path, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	lines, dropped := 0, 0
	for sc.Scan() {
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		lines++
		var r cron.Run
		if err := json.Unmarshal(line, &r); err != nil {
			dropped++
			continue
		}
		if _, ok := s.index[r.JobID]; !ok || s.cfg.RunHistory < 0 {
			dropped++
			continue
		}
		ring := s.runs[r.JobID]
		if ring == nil {
			ring = newRunRing(s.cfg.RunHistory)
			s.runs[r.JobID] = ring
		}
		ring.push(r, s.cfg.RunHistory)
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("jsonstore: read %s: %w", path, err)
	}
	s.runLines = lines
	torn := false
	if st, err := f.Stat(); err == nil && st.Size() > 0 {
		last := make([]byte, 1)
		if _, err := f.ReadAt(last, st.Size()-1); err != nil || last[0] != '\n' {
			torn = true
		}
	}
	if dropped > 0 || torn || s.runsNeedCompactionLocked(0) {
		keep := s.allRunsLocked()
		if err := s.rewriteRuns(keep); err != nil {
			return fmt.Errorf("jsonstore: compact %s: %w", path, err)
		}
		s.runLines = len(keep)
	}
	return nil
}
