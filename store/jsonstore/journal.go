package jsonstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/ksana-dev/ksana/cron"
)

// JournalFile is the append-only journal of durable changes not yet in
// jobs.json, used when [Config.Journal] is set.
const JournalFile = "jobs.journal"

// jline is one journal record kept in memory until jobs.json holds it.
type jline struct {
	seq  uint64
	data []byte
}

// journalRecord is the JSON form of a journal line.
type journalRecord struct {
	Seq uint64          `json:"seq"`
	Op  string          `json:"op"` // "save" or "delete"
	ID  string          `json:"id,omitempty"`
	Job json.RawMessage `json:"job,omitempty"`
}

// appendJournalSave returns the journal line of a save.
func appendJournalSave(b []byte, seq uint64, j *cron.Job) []byte {
	b = append(b, "\n{\"seq\":"...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"op":"save","job":`...)
	b = appendJob(b, j)
	return append(b, "}\n"...)
}

func appendJournalDelete(b []byte, seq uint64, id string) []byte {
	b = append(b, "\n{\"seq\":"...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"op":"delete","id":`...)
	b = appendString(b, id)
	return append(b, "}\n"...)
}

// journalBatch is the records that one write and one sync of the journal
// make durable together.
type journalBatch struct {
	recs []jline
	done bool
	err  error
}

// journalAppend writes one record and syncs the journal. Each record starts
// with a newline, so a record cut short by a crash or a failed write stays
// on a line of its own and is skipped on replay.
//
// Appends commit in groups: while one caller writes and syncs, the records
// of the callers that arrive meanwhile gather in the next batch, and one of
// them writes and syncs that batch for all, so that concurrent saves share
// a sync. A record that jobs.json already holds (a rewrite took it in while
// it waited) is not written at all.
func (s *Store) journalAppend(seq uint64, data []byte) error {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	if s.jf == nil {
		return ErrClosed
	}
	if s.jopen == nil {
		s.jopen = &journalBatch{}
	}
	b := s.jopen
	b.recs = append(b.recs, jline{seq: seq, data: data})
	for !b.done {
		if s.jbusy {
			s.jcond.Wait()
			continue
		}
		s.writeJournalBatch() // b is the open batch: earlier ones are done
	}
	return b.err
}

// writeJournalBatch writes and syncs the open batch, releasing jmu (held on
// entry and on return) during the I/O.
func (s *Store) writeJournalBatch() {
	b := s.jopen
	s.jopen = nil
	defer s.jcond.Broadcast()
	if s.jf == nil {
		b.done, b.err = true, ErrClosed
		return
	}
	var buf []byte
	keep := b.recs[:0]
	for _, r := range b.recs {
		if r.seq > s.jheld {
			buf = append(buf, r.data...)
			keep = append(keep, r)
		}
	}
	if len(keep) == 0 {
		b.done = true
		return
	}
	f := s.jf
	s.jbusy = true
	s.jmu.Unlock()
	_, err := f.Write(buf)
	if err == nil {
		err = f.Sync()
	}
	s.jmu.Lock()
	s.jbusy = false
	if err != nil {
		b.done, b.err = true, fmt.Errorf("jsonstore: append to %s: %w", JournalFile, err)
		return
	}
	s.jlines = append(s.jlines, keep...)
	s.jsize += int64(len(buf))
	s.jsyncs++
	b.done = true
}

// waitJournalIdle waits, under jmu, until no journal write is under way.
func (s *Store) waitJournalIdle() {
	for s.jbusy {
		s.jcond.Wait()
	}
}

// compactJournal drops the records that jobs.json now holds (seq <= upto):
// the journal is truncated, or rewritten with the records made during the
// rewrite.
func (s *Store) compactJournal(upto uint64) error {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	s.waitJournalIdle()
	s.jheld = max(s.jheld, upto)
	path := filepath.Join(s.dir, JournalFile)
	if !s.cfg.Journal {
		if s.jreplayed {
			s.jreplayed = false
			if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return err
			}
			return syncDir(s.dir)
		}
		return nil
	}
	if s.jf == nil {
		return nil
	}
	keep := s.jlines[:0]
	var size int64
	for _, l := range s.jlines {
		if l.seq > upto {
			keep = append(keep, l)
			size += int64(len(l.data))
		}
	}
	clear(s.jlines[len(keep):])
	s.jlines = keep
	if size == s.jsize && !s.jreplayed {
		return nil
	}
	if len(keep) == 0 {
		if err := s.jf.Truncate(0); err != nil {
			return err
		}
		s.jsize, s.jreplayed = 0, false
		return s.jf.Sync()
	}
	var buf []byte
	for _, l := range keep {
		buf = append(buf, l.data...)
	}
	if err := writeFileAtomic(s.dir, JournalFile, buf); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	s.jf.Close()
	s.jf, s.jsize, s.jreplayed = f, size, false
	return nil
}

// replayJournal applies the records of jobs.journal (left by a crash) to
// the jobs loaded from jobs.json, in sequence order. It reports whether
// there were any. Records cut short are skipped.
func (s *Store) replayJournal() (bool, error) {
	path := filepath.Join(s.dir, JournalFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("jsonstore: read %s: %w", path, err)
	}
	defer f.Close()
	var recs []journalRecord
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 64<<20)
	skipped := 0
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var r journalRecord
		if err := json.Unmarshal(line, &r); err != nil || (r.Op != "save" && r.Op != "delete") {
			skipped++
			continue
		}
		recs = append(recs, r)
	}
	if err := sc.Err(); err != nil {
		return false, fmt.Errorf("jsonstore: read %s: %w", path, err)
	}
	slices.SortStableFunc(recs, func(a, b journalRecord) int {
		switch {
		case a.Seq < b.Seq:
			return -1
		case a.Seq > b.Seq:
			return 1
		}
		return 0
	})
	for i, r := range recs {
		s.jseq = max(s.jseq, r.Seq)
		switch r.Op {
		case "delete":
			if e, ok := s.index[r.ID]; ok {
				e.deleted = true
				delete(s.index, r.ID)
				s.tombs++
			}
		case "save":
			j, ee := decodeEntry(i, r.Job)
			if ee != nil {
				s.log.Error("jsonstore: invalid journal record skipped", "job_id", ee.ID, "field", ee.Field, "error", ee.Err)
				continue
			}
			if e, ok := s.index[j.ID]; ok {
				e.job, e.stale = j, true
			} else {
				e := &entry{job: j, stale: true}
				s.order = append(s.order, e)
				s.index[j.ID] = e
			}
		}
	}
	if skipped > 0 {
		s.log.Warn("jsonstore: journal records cut short by a crash were skipped", "file", path, "records", skipped)
	}
	if len(recs) > 0 || skipped > 0 {
		s.log.Info("jsonstore: journal replayed", "file", path, "records", len(recs))
		s.jreplayed = true
		return true, nil
	}
	s.jreplayed = true // an empty file: remove or reuse it
	return false, nil
}
