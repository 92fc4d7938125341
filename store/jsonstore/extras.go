package jsonstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// PauseFile and AuditFile are kept beside jobs.json: the service-wide
// pause ([cron.PauseStore]) and the audit log ([cron.AuditLog]).
const (
	PauseFile = "pause.json"
	AuditFile = "audit.jsonl"
)

var (
	_ cron.PauseStore       = (*Store)(nil)
	_ cron.AuditLog         = (*Store)(nil)
	_ cron.IdempotencyStore = (*Store)(nil)
)

// extras are the service pause and the audit log of a Store.
type extras struct {
	mu     sync.Mutex
	pause  cron.PauseState
	audit  cron.AuditBuffer
	af     *os.File      // audit.jsonl, open for appending; nil once closed
	alines int           // lines in audit.jsonl
	idem   cron.MemStore // only its idempotency keys

	// Appends to audit.jsonl are synced together, auditSync after the
	// first one not synced (syncing is set meanwhile, under mu), and at
	// Close.
	syncing bool
}

// auditSync bounds how long an audit record appended may wait for its
// sync: the records of that time share one.
const auditSync = 50 * time.Millisecond

// loadExtras reads pause.json and audit.jsonl. A pause.json that does not
// parse is renamed pause.json.bad (the service is then not paused); a
// line of audit.jsonl that does not parse (the torn end of a crash) is
// skipped.
func (s *Store) loadExtras() error {
	x := &s.extras
	x.audit.Keep = s.cfg.AuditKeep
	path := filepath.Join(s.dir, PauseFile)
	data, err := os.ReadFile(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return fmt.Errorf("jsonstore: read %s: %w", path, err)
	default:
		var p cron.PauseState
		if perr := json.Unmarshal(data, &p); perr != nil {
			s.log.Warn("jsonstore: "+PauseFile+" does not parse; renamed "+PauseFile+".bad, the service is not paused", "error", perr)
			_ = os.Rename(path, path+".bad")
		} else {
			x.pause = p
		}
	}
	apath := filepath.Join(s.dir, AuditFile)
	af, err := os.OpenFile(apath, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("jsonstore: open %s: %w", apath, err)
	}
	data, err = io.ReadAll(af)
	if err != nil {
		af.Close()
		return fmt.Errorf("jsonstore: read %s: %w", apath, err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		// The torn end of an append cut short by a crash: gone, so that
		// the next append starts a line of its own.
		if err := af.Truncate(int64(i + 1)); err != nil {
			af.Close()
			return fmt.Errorf("jsonstore: truncate the torn end of %s: %w", apath, err)
		}
		s.log.Warn("jsonstore: dropped the torn end of the audit log", "file", apath, "bytes", len(data)-i-1)
		data = data[:i+1]
	}
	bad := 0
	for line := range bytes.Lines(data) {
		x.alines++
		var e cron.AuditEntry
		if err := json.Unmarshal(line, &e); err != nil || x.audit.Restore(e) != nil {
			bad++
		}
	}
	if bad > 0 {
		s.log.Warn("jsonstore: skipped audit entries that do not parse or are out of order", "file", apath, "entries", bad)
	}
	x.af = af
	return s.loadAlerts()
}

// LoadPause returns the service pause kept in pause.json.
func (s *Store) LoadPause(ctx context.Context) (cron.PauseState, error) {
	s.extras.mu.Lock()
	defer s.extras.mu.Unlock()
	if s.extras.af == nil {
		return cron.PauseState{}, ErrClosed
	}
	return s.extras.pause, nil
}

// SavePause writes p to pause.json durably (a new file synced, then
// renamed over the old one).
func (s *Store) SavePause(ctx context.Context, p cron.PauseState) error {
	s.extras.mu.Lock()
	defer s.extras.mu.Unlock()
	if s.extras.af == nil {
		return ErrClosed
	}
	data, err := json.Marshal(p)
	if err != nil {
		return err
	}
	if err := s.replaceFile(PauseFile, append(data, '\n')); err != nil {
		return err
	}
	s.extras.pause = p
	return nil
}

// replaceFile writes data to name in the store's directory durably.
func (s *Store) replaceFile(name string, data []byte) error {
	path := filepath.Join(s.dir, name)
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("jsonstore: write %s: %w", path, err)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(s.dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("jsonstore: write %s: %w", path, err)
	}
	return nil
}

// AppendAudit appends e, with the next ID, to audit.jsonl and syncs it
// before it returns. The store keeps the newest [Config.AuditKeep]
// entries: once the file holds twice that many, it is rewritten with them.
func (s *Store) AppendAudit(ctx context.Context, e cron.AuditEntry) (cron.AuditEntry, error) {
	x := &s.extras
	x.mu.Lock()
	if x.af == nil {
		x.mu.Unlock()
		return cron.AuditEntry{}, ErrClosed
	}
	e, _ = x.audit.AppendAudit(ctx, e)
	line, err := json.Marshal(e)
	if err != nil {
		x.mu.Unlock()
		return cron.AuditEntry{}, err
	}
	if _, err := x.af.Write(append(line, '\n')); err != nil {
		x.mu.Unlock()
		return cron.AuditEntry{}, fmt.Errorf("jsonstore: append to %s: %w", AuditFile, err)
	}
	x.alines++
	if keep := max(s.cfg.AuditKeep, 1); x.alines >= 2*keep {
		if err := s.compactAudit(); err != nil {
			s.log.Warn("jsonstore: compacting the audit log failed; it goes on growing", "error", err)
		}
	}
	if !x.syncing {
		x.syncing = true
		time.AfterFunc(auditSync, s.syncAudit)
	}
	x.mu.Unlock()
	return e, nil
}

// syncAudit makes the audit records appended so far durable.
func (s *Store) syncAudit() {
	x := &s.extras
	x.mu.Lock()
	x.syncing = false
	f := x.af
	x.mu.Unlock()
	if f == nil {
		return
	}
	// Outside mu, so that appends go on meanwhile. A file compacted or
	// closed meanwhile was synced whole by that.
	if err := f.Sync(); err != nil && !errors.Is(err, os.ErrClosed) {
		s.log.Error("jsonstore: sync of the audit log failed", "file", AuditFile, "error", err)
	}
}

// compactAudit rewrites audit.jsonl with the entries kept. extras.mu is
// held.
func (s *Store) compactAudit() error {
	x := &s.extras
	var b []byte
	kept := x.audit.Entries()
	for i := range kept {
		line, err := json.Marshal(&kept[i])
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	if err := s.replaceFile(AuditFile, b); err != nil {
		return err
	}
	af, err := os.OpenFile(filepath.Join(s.dir, AuditFile), os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	x.af.Close()
	x.af, x.alines = af, len(kept)
	return nil
}

// Audit returns a page of the audit log (see [cron.AuditLog]).
func (s *Store) Audit(ctx context.Context, q cron.AuditQuery) ([]cron.AuditEntry, bool, error) {
	s.extras.mu.Lock()
	closed := s.extras.af == nil
	s.extras.mu.Unlock()
	if closed {
		return nil, false, ErrClosed
	}
	return s.extras.audit.Audit(ctx, q)
}

// closeExtras closes audit.jsonl and alerts.jsonl.
func (s *Store) closeExtras() {
	s.closeAlerts()
	s.extras.mu.Lock()
	defer s.extras.mu.Unlock()
	if s.extras.af != nil {
		if err := s.extras.af.Sync(); err != nil {
			s.log.Error("jsonstore: sync of the audit log failed", "file", AuditFile, "error", err)
		}
		s.extras.af.Close()
		s.extras.af = nil
	}
}

// ReserveIdempotencyKey reserves a run-now's idempotency key (see
// [cron.IdempotencyStore]). The keys are kept in memory only: one
// process holds the file, and a restart forgets them.
func (s *Store) ReserveIdempotencyKey(ctx context.Context, job, key string, e cron.IdempotencyEntry) (cron.IdempotencyEntry, bool, error) {
	return s.extras.idem.ReserveIdempotencyKey(ctx, job, key, e)
}

// CompleteIdempotencyKey records the run of a reservation (see
// [cron.IdempotencyStore]).
func (s *Store) CompleteIdempotencyKey(ctx context.Context, job, key string, at time.Time, runID string) error {
	return s.extras.idem.CompleteIdempotencyKey(ctx, job, key, at, runID)
}

// ForgetIdempotencyKey deletes a reservation that has no run (see
// [cron.IdempotencyStore]).
func (s *Store) ForgetIdempotencyKey(ctx context.Context, job, key string, at time.Time) error {
	return s.extras.idem.ForgetIdempotencyKey(ctx, job, key, at)
}
