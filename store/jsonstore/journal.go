package jsonstore

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// JournalFile is the append-only journal of the changes not yet in
// jobs.json, used when [Config.Journal] is set. A rewrite of jobs.json
// first renames it to jobs.journal.<seq> (the sequence of its last record)
// and starts a new one; the renamed file is removed once the rewrite is on
// disk.
const JournalFile = "jobs.journal"

// journalRecord is the JSON form of a journal line.
type journalRecord struct {
	Seq uint64          `json:"seq"`
	Op  string          `json:"op"` // "save", "delete" or "record"
	ID  string          `json:"id,omitempty"`
	Job json.RawMessage `json:"job,omitempty"`
	// The bookkeeping of a "record".
	LastRunAt  string `json:"last_run_at,omitempty"`
	NextRunAt  string `json:"next_run_at,omitempty"`
	LastStatus string `json:"last_status,omitempty"`
	LastError  string `json:"last_error,omitempty"`
	Failures   int    `json:"failures,omitempty"`
	LastAlert  string `json:"last_alert,omitempty"`
}

// Each record starts and ends with a newline, so that a record cut short
// by a crash or a failed write stays on a line of its own and is skipped
// on replay.

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

// appendJournalRecord returns the journal line of run bookkeeping.
func appendJournalRecord(b []byte, seq uint64, id string, bk *cron.Bookkeeping) []byte {
	b = append(b, "\n{\"seq\":"...)
	b = strconv.AppendUint(b, seq, 10)
	b = append(b, `,"op":"record","id":`...)
	b = appendString(b, id)
	b = append(b, `,"last_run_at":`...)
	b = appendTime(b, bk.LastRunAt)
	b = append(b, `,"next_run_at":`...)
	b = appendTime(b, bk.NextRunAt)
	b = append(b, `,"last_status":`...)
	b = appendString(b, string(bk.LastStatus))
	b = append(b, `,"last_error":`...)
	b = appendString(b, bk.LastError)
	if bk.Failures != 0 {
		b = append(b, `,"failures":`...)
		b = strconv.AppendInt(b, int64(bk.Failures), 10)
	}
	if bk.LastAlert != "" {
		b = append(b, `,"last_alert":`...)
		b = appendString(b, bk.LastAlert)
	}
	return append(b, "}\n"...)
}

// journalWait returns once the record seq is written and synced, writing
// the records waiting itself when no write is under way. Appends commit in
// groups: while one caller writes and syncs, the records of the changes
// made meanwhile wait in jpend, and the next writer writes and syncs them
// all together, so that concurrent saves (and the bookkeeping queued
// between them) share a sync.
func (s *Store) journalWait(seq uint64) error {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	for s.jsynced < seq {
		if seq <= s.jfailed {
			return s.jerr
		}
		if s.jf == nil {
			return ErrClosed
		}
		if s.jbusy {
			s.jcond.Wait()
			continue
		}
		s.writeJournal()
	}
	return nil
}

// journalCommit writes and syncs every record queued so far.
func (s *Store) journalCommit() error {
	s.mu.Lock()
	seq := s.jseq
	s.mu.Unlock()
	return s.journalWait(seq)
}

// writeJournal writes and syncs the records waiting, releasing jmu (held on
// entry and on return) during the I/O.
func (s *Store) writeJournal() {
	s.jbusy = true
	f := s.jf
	s.jmu.Unlock()
	s.mu.Lock()
	buf, upto := s.jpend, s.jseq
	s.jpend = nil
	s.mu.Unlock()
	var err error
	if len(buf) > 0 {
		if _, err = f.Write(buf); err == nil {
			err = f.Sync()
		}
	}
	s.jmu.Lock()
	s.jbusy = false
	defer s.jcond.Broadcast()
	if err != nil {
		s.jfailed, s.jerr = upto, fmt.Errorf("jsonstore: append to %s: %w", JournalFile, err)
		s.jsynced = upto // those records are not retried; the next rewrite holds their changes
		return
	}
	if len(buf) > 0 {
		s.jsize += int64(len(buf))
		s.jsyncs++
	}
	s.jsynced = max(s.jsynced, upto)
}

// waitJournalIdle waits, under jmu, until no journal write is under way.
func (s *Store) waitJournalIdle() {
	for s.jbusy {
		s.jcond.Wait()
	}
}

// journalTooBig reports whether the journal files have grown past the
// compaction threshold: CompactRatio times the size of jobs.json, and at
// least CompactMin bytes.
func (s *Store) journalTooBig() bool {
	s.mu.Lock()
	limit := max(int64(float64(s.jobsSize)*s.cfg.CompactRatio), s.cfg.CompactMin)
	s.mu.Unlock()
	s.jmu.Lock()
	defer s.jmu.Unlock()
	return s.jsize >= limit
}

// rotateJournal writes the records waiting into the current journal, syncs
// it, renames it jobs.journal.<seq> and starts an empty one. It returns
// the sequence of the last record in the renamed file: every change up to
// it is in the journal files, and a rewrite that starts after it holds
// them all. It also returns the change count at that point: a change
// counted after it is in the new journal, so the rewrite may mark only
// that count durable, or a Close would leave the new journal unreplayed
// into jobs.json. Without the journal it only returns the current sequence
// and count.
func (s *Store) rotateJournal() (upto, gen uint64, err error) {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	s.waitJournalIdle()
	if s.jf == nil {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.jseq, s.gen, nil
	}
	s.jbusy = true
	f := s.jf
	s.jmu.Unlock()
	s.mu.Lock()
	buf, upto, gen := s.jpend, s.jseq, s.gen
	s.jpend = nil
	s.mu.Unlock()
	if len(buf) > 0 {
		_, err = f.Write(buf)
	}
	if err == nil {
		err = f.Sync()
	}
	path := filepath.Join(s.dir, JournalFile)
	old := path + "." + strconv.FormatUint(upto, 10)
	var nf *os.File
	if err == nil {
		err = os.Rename(path, old)
	}
	if err == nil {
		nf, err = os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND|os.O_TRUNC, 0o600)
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	s.jmu.Lock()
	s.jbusy = false
	defer s.jcond.Broadcast()
	if err != nil {
		if nf != nil {
			nf.Close()
		}
		s.jfailed, s.jerr = upto, fmt.Errorf("jsonstore: rotate %s: %w", JournalFile, err)
		s.jsynced = upto
		return 0, 0, s.jerr
	}
	f.Close()
	s.jf = nf
	s.jsize += int64(len(buf))
	s.jsynced = max(s.jsynced, upto)
	s.jold = append(s.jold, old)
	return upto, gen, nil
}

// dropRotated removes the rotated journal files that jobs.json now holds
// (those up to seq upto); without the journal, every journal file.
func (s *Store) dropRotated(upto uint64) error {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	var errs []error
	keep := s.jold[:0]
	removed := false
	for _, p := range s.jold {
		if n, ok := rotatedSeq(p); ok && n > upto && s.cfg.Journal {
			keep = append(keep, p)
			continue
		}
		st, err := os.Stat(p)
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
			keep = append(keep, p)
			continue
		}
		if err == nil {
			s.jsize -= st.Size()
		}
		removed = true
	}
	s.jold = keep
	if removed {
		errs = append(errs, syncDir(s.dir))
	}
	if s.jf != nil && len(s.jold) == 0 {
		if st, err := s.jf.Stat(); err == nil {
			s.jsize = st.Size()
		}
	}
	return errors.Join(errs...)
}

// rotatedSeq returns the sequence in the name of a rotated journal file;
// ok is false for the current journal.
func rotatedSeq(path string) (uint64, bool) {
	base := filepath.Base(path)
	if !strings.HasPrefix(base, JournalFile+".") {
		return 0, false
	}
	n, err := strconv.ParseUint(base[len(JournalFile)+1:], 10, 64)
	return n, err == nil
}

// journalFiles returns the journal files of dir in the order of their
// records: the rotated ones by sequence, then the current one.
func journalFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	type rot struct {
		seq  uint64
		path string
	}
	var rots []rot
	current := ""
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.Name() == JournalFile {
			current = p
			continue
		}
		if n, ok := rotatedSeq(p); ok {
			rots = append(rots, rot{n, p})
		}
	}
	slices.SortFunc(rots, func(a, b rot) int {
		switch {
		case a.seq < b.seq:
			return -1
		case a.seq > b.seq:
			return 1
		}
		return 0
	})
	var out []string
	for _, r := range rots {
		out = append(out, r.path)
	}
	if current != "" {
		out = append(out, current)
	}
	return out, nil
}

// replayJournal applies the records of the journal files (rotated ones
// first) to the jobs loaded from jobs.json, in sequence order. Records cut
// short are skipped. The files are remembered in jold (they are removed
// by the next rewrite of jobs.json), and their sizes counted in jsize.
func (s *Store) replayJournal() error {
	files, err := journalFiles(s.dir)
	if err != nil {
		return fmt.Errorf("jsonstore: list %s: %w", s.dir, err)
	}
	applied, skipped := 0, 0
	for _, path := range files {
		a, sk, size, err := s.replayFile(path)
		if err != nil {
			return err
		}
		applied += a
		skipped += sk
		s.jsize += size
		s.jold = append(s.jold, path)
	}
	if skipped > 0 {
		s.log.Warn("jsonstore: journal records cut short by a crash were skipped", "dir", s.dir, "records", skipped)
	}
	if applied > 0 || skipped > 0 {
		s.gen++ // jobs.json does not hold them yet (or the journal holds only debris): rewrite at Close
	}
	if applied > 0 {
		s.log.Info("jsonstore: journal replayed", "dir", s.dir, "records", applied, "files", len(files))
	}
	return nil
}

// replayFile applies the records of one journal file, in sequence order.
func (s *Store) replayFile(path string) (applied, skipped int, size int64, err error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, 0, 0, nil
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("jsonstore: read %s: %w", path, err)
	}
	defer f.Close()
	var recs []journalRecord
	r := bufio.NewReaderSize(f, 1<<20)
	sorted := true
	for {
		line, rerr := readLine(r)
		size += int64(len(line))
		if rerr != nil && rerr != io.EOF {
			return 0, 0, 0, fmt.Errorf("jsonstore: read %s: %w", path, rerr)
		}
		if line = bytes.TrimSpace(line); len(line) > 0 {
			var rec journalRecord
			if err := json.Unmarshal(line, &rec); err != nil || (rec.Op != "save" && rec.Op != "delete" && rec.Op != "record") {
				skipped++
			} else {
				if n := len(recs); n > 0 && recs[n-1].Seq > rec.Seq {
					sorted = false
				}
				if rec.Op == "save" {
					rec.Job = append(json.RawMessage(nil), rec.Job...)
				}
				recs = append(recs, rec)
			}
		}
		if rerr == io.EOF {
			break
		}
	}
	if !sorted {
		slices.SortStableFunc(recs, func(a, b journalRecord) int {
			switch {
			case a.Seq < b.Seq:
				return -1
			case a.Seq > b.Seq:
				return 1
			}
			return 0
		})
	}
	for i := range recs {
		if s.applyRecord(i, &recs[i]) {
			applied++
		}
	}
	return applied, skipped, size, nil
}

// applyRecord applies one journal record to the jobs in memory.
func (s *Store) applyRecord(i int, r *journalRecord) bool {
	s.jseq = max(s.jseq, r.Seq)
	switch r.Op {
	case "delete":
		if e := s.index.get(r.ID); e != nil {
			e.deleted = true
			s.index.del(r.ID)
			s.tombs++
		}
	case "save":
		j, ee := decodeEntry(i, r.Job)
		if ee != nil {
			s.log.Error("jsonstore: invalid journal record skipped", "job_id", ee.ID, "field", ee.Field, "error", ee.Err)
			return false
		}
		if e := s.index.get(j.ID); e != nil {
			e.set(&j, &s.shapes)
		} else {
			s.newEntryLocked(j)
		}
	case "record":
		e := s.index.get(r.ID)
		if e == nil {
			return false
		}
		var b cron.Bookkeeping
		for _, t := range []struct {
			s   string
			dst *time.Time
		}{{r.LastRunAt, &b.LastRunAt}, {r.NextRunAt, &b.NextRunAt}} {
			if t.s == "" {
				continue
			}
			v, err := time.Parse(time.RFC3339Nano, t.s)
			if err != nil {
				s.log.Error("jsonstore: invalid journal record skipped", "job_id", r.ID, "error", err)
				return false
			}
			*t.dst = v.UTC()
		}
		b.LastStatus, b.LastError = cron.Status(r.LastStatus), r.LastError
		b.Failures, b.LastAlert = r.Failures, r.LastAlert
		e.apply(&b)
	}
	return true
}
