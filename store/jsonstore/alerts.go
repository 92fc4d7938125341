package jsonstore

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// AlertsFile is kept beside jobs.json: the alert outbox
// ([cron.AlertOutbox]), one line per change (an alert added, an attempt
// settled, an alert delivered), synced before the call returns, and
// rewritten with the alerts kept once it holds many more lines than
// alerts.
const AlertsFile = "alerts.jsonl"

var _ cron.AlertOutbox = (*Store)(nil)

// alerts is the outbox of a Store: the alerts in memory (a MemStore's
// outbox, with the leases) and alerts.jsonl, which has every change.
type alerts struct {
	mu    sync.Mutex
	mem   cron.MemStore // only its outbox
	f     *os.File      // alerts.jsonl, open for appending; nil once closed
	lines int
}

// alertWire is an alert as alerts.jsonl keeps it, its secret included.
type alertWire struct {
	cron.AlertDelivery
	Secret string `json:"secret,omitempty"`
}

// alertLine is one line of alerts.jsonl: an alert added (its whole
// state), an attempt settled, or an alert delivered (gone).
type alertLine struct {
	Add    *alertWire          `json:"add,omitempty"`
	Settle *cron.AlertDelivery `json:"settle,omitempty"`
	Done   string              `json:"done,omitempty"`
}

// loadAlerts replays alerts.jsonl. A line that does not parse (the torn
// end of a crash) is dropped.
func (s *Store) loadAlerts() error {
	x := &s.alerts
	path := filepath.Join(s.dir, AlertsFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("jsonstore: open %s: %w", path, err)
	}
	data, err := io.ReadAll(f)
	if err != nil {
		f.Close()
		return fmt.Errorf("jsonstore: read %s: %w", path, err)
	}
	if i := bytes.LastIndexByte(data, '\n'); i+1 < len(data) {
		if err := f.Truncate(int64(i + 1)); err != nil {
			f.Close()
			return fmt.Errorf("jsonstore: truncate the torn end of %s: %w", path, err)
		}
		s.log.Warn("jsonstore: dropped the torn end of the alert outbox", "file", path, "bytes", len(data)-i-1)
		data = data[:i+1]
	}
	ctx := context.Background()
	bad := 0
	for line := range bytes.Lines(data) {
		x.lines++
		var l alertLine
		if err := json.Unmarshal(line, &l); err != nil {
			bad++
			continue
		}
		switch {
		case l.Add != nil:
			d := l.Add.AlertDelivery
			d.Secret = l.Add.Secret
			_ = x.mem.EnqueueAlerts(ctx, []cron.AlertDelivery{d})
		case l.Settle != nil:
			_ = x.mem.SettleAlert(ctx, *l.Settle, false)
		case l.Done != "":
			_ = x.mem.SettleAlert(ctx, cron.AlertDelivery{ID: l.Done}, true)
		}
	}
	if bad > 0 {
		s.log.Warn("jsonstore: skipped alert outbox lines that do not parse", "file", path, "lines", bad)
	}
	x.f = f
	return nil
}

// appendAlerts appends lines to alerts.jsonl and syncs it. mu is held.
func (s *Store) appendAlerts(lines []alertLine) error {
	x := &s.alerts
	if x.f == nil {
		return ErrClosed
	}
	var b []byte
	for i := range lines {
		line, err := json.Marshal(&lines[i])
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	if _, err := x.f.Write(b); err != nil {
		return fmt.Errorf("jsonstore: append to %s: %w", AlertsFile, err)
	}
	if err := x.f.Sync(); err != nil {
		return fmt.Errorf("jsonstore: sync %s: %w", AlertsFile, err)
	}
	x.lines += len(lines)
	return nil
}

// maybeCompactAlerts compacts alerts.jsonl when it holds many more lines
// than alerts. mu is held.
func (s *Store) maybeCompactAlerts() {
	x := &s.alerts
	ctx := context.Background()
	_, pending, _ := x.mem.ListAlerts(ctx, false, 0)
	_, dead, _ := x.mem.ListAlerts(ctx, true, 0)
	if x.lines >= 2*(pending+dead)+1024 {
		if err := s.compactAlerts(); err != nil {
			s.log.Warn("jsonstore: compacting the alert outbox failed; it goes on growing", "error", err)
		}
	}
}

// compactAlerts rewrites alerts.jsonl with the alerts kept. mu is held.
func (s *Store) compactAlerts() error {
	x := &s.alerts
	ctx := context.Background()
	pending, _, _ := x.mem.ListAlerts(ctx, false, -1)
	dead, _, _ := x.mem.ListAlerts(ctx, true, -1)
	var b []byte
	for _, d := range append(pending, dead...) {
		line, err := json.Marshal(alertLine{Add: &alertWire{AlertDelivery: d, Secret: d.Secret}})
		if err != nil {
			return err
		}
		b = append(append(b, line...), '\n')
	}
	if err := s.replaceFile(AlertsFile, b); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(s.dir, AlertsFile), os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	x.f.Close()
	x.f, x.lines = f, len(pending)+len(dead)
	return nil
}

// closeAlerts closes alerts.jsonl.
func (s *Store) closeAlerts() {
	x := &s.alerts
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f != nil {
		x.f.Close()
		x.f = nil
	}
}

// EnqueueAlerts adds alerts to the outbox (see [cron.AlertOutbox]),
// durably: they are in alerts.jsonl, synced, when it returns.
func (s *Store) EnqueueAlerts(ctx context.Context, ds []cron.AlertDelivery) error {
	x := &s.alerts
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return ErrClosed
	}
	lines := make([]alertLine, len(ds))
	for i, d := range ds {
		lines[i].Add = &alertWire{AlertDelivery: d, Secret: d.Secret}
	}
	if err := s.appendAlerts(lines); err != nil {
		return err
	}
	err := x.mem.EnqueueAlerts(ctx, ds)
	s.maybeCompactAlerts()
	return err
}

// TakeAlerts takes the alerts due at now until until (see
// [cron.AlertOutbox]); the leases are kept in memory: one process holds
// the store.
func (s *Store) TakeAlerts(ctx context.Context, now, until time.Time, max int) ([]cron.AlertDelivery, error) {
	x := &s.alerts
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil, ErrClosed
	}
	return x.mem.TakeAlerts(ctx, now, until, max)
}

// SettleAlert records the end of an attempt at an alert (see
// [cron.AlertOutbox]) in alerts.jsonl.
func (s *Store) SettleAlert(ctx context.Context, d cron.AlertDelivery, delivered bool) error {
	x := &s.alerts
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return ErrClosed
	}
	l := alertLine{Done: d.ID}
	if !delivered {
		st := cron.AlertDelivery{ID: d.ID, Attempts: d.Attempts, LastError: d.LastError, NextAt: d.NextAt, Dead: d.Dead}
		l = alertLine{Settle: &st}
	}
	if err := s.appendAlerts([]alertLine{l}); err != nil {
		return err
	}
	err := x.mem.SettleAlert(ctx, d, delivered)
	s.maybeCompactAlerts()
	return err
}

// ListAlerts lists the pending or the dead alerts, oldest first (see
// [cron.AlertOutbox]).
func (s *Store) ListAlerts(ctx context.Context, dead bool, limit int) ([]cron.AlertDelivery, int, error) {
	x := &s.alerts
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.f == nil {
		return nil, 0, ErrClosed
	}
	return x.mem.ListAlerts(ctx, dead, limit)
}
