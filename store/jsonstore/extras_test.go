package jsonstore_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/jsonstore"
)

// The service pause and the audit log survive a reopen; the audit log
// keeps the newest AuditKeep entries, and its ids go on after a reopen.
func TestExtrasSurviveReopen(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	open := func() *jsonstore.Store {
		s, err := jsonstore.New(dir, jsonstore.Config{AuditKeep: 3})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open()
	pause := cron.PauseState{Paused: true, Until: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), Reason: "maintenance", Since: time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)}
	if err := s.SavePause(ctx, pause); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if _, err := s.AppendAudit(ctx, cron.AuditEntry{Time: time.Unix(int64(i), 0), Who: "ann", Action: cron.ActionPauseAll}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open()
	defer s.Close()
	got, err := s.LoadPause(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(pause, got); diff != "" {
		t.Errorf("pause after reopen (-want +got):\n%s", diff)
	}
	entries, _, err := s.Audit(ctx, cron.AuditQuery{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []int64
	for _, e := range entries {
		ids = append(ids, e.ID)
	}
	if diff := cmp.Diff([]int64{8, 9, 10}, ids); diff != "" {
		t.Errorf("audit ids after reopen (-want +got):\n%s", diff)
	}
	if e, err := s.AppendAudit(ctx, cron.AuditEntry{Who: "bob"}); err != nil || e.ID != 11 {
		t.Errorf("next id after reopen: %d, %v; want 11", e.ID, err)
	}
	data, _ := os.ReadFile(filepath.Join(dir, jsonstore.AuditFile))
	if n := len(splitLines(data)); n >= 6 {
		t.Errorf("audit.jsonl has %d lines, want fewer than 2*AuditKeep", n)
	}
}

// A torn last line of audit.jsonl (a crash mid-append) is skipped; a
// pause.json that does not parse is set aside and the service is not
// paused.
func TestExtrasBadFiles(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, jsonstore.AuditFile), []byte(`{"id":1,"time":"2030-01-01T00:00:00Z","who":"ann","method":"POST","path":"/pause","job_id":"","status":200}`+"\n"+`{"id":2,"ti`), 0o600)
	os.WriteFile(filepath.Join(dir, jsonstore.PauseFile), []byte(`{"paused":tr`), 0o600)
	s, err := jsonstore.New(dir, jsonstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p, err := s.LoadPause(ctx); err != nil || p.Paused {
		t.Errorf("LoadPause over a bad file = %+v, %v; want not paused", p, err)
	}
	if _, err := os.Stat(filepath.Join(dir, jsonstore.PauseFile+".bad")); err != nil {
		t.Errorf("bad pause.json not set aside: %v", err)
	}
	entries, _, _ := s.Audit(ctx, cron.AuditQuery{})
	if len(entries) != 1 || entries[0].Who != "ann" {
		t.Errorf("audit over a torn file: %+v, want the one whole entry", entries)
	}
	if _, err := s.AppendAudit(ctx, cron.AuditEntry{Who: "bob"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err = jsonstore.New(dir, jsonstore.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	entries, _, _ = s.Audit(ctx, cron.AuditQuery{})
	if len(entries) != 2 || entries[1].Who != "bob" || entries[1].ID != 2 {
		t.Errorf("audit after an append past a torn end and a reopen: %+v, want ann then bob (id 2)", entries)
	}
}

func splitLines(b []byte) [][]byte {
	var out [][]byte
	for len(b) > 0 {
		i := 0
		for i < len(b) && b[i] != '\n' {
			i++
		}
		out = append(out, b[:i])
		if i < len(b) {
			i++
		}
		b = b[i:]
	}
	return out
}
