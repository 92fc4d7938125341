package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
)

func cronCasePause(t *testing.T, s cron.Store) {
	ps, ok := s.(cron.PauseStore)
	if !ok {
		t.Skip("the store is no cron.PauseStore")
	}
	ctx := context.Background()
	if got, err := ps.LoadPause(ctx); err != nil || got != (cron.PauseState{}) {
		t.Fatalf("LoadPause of a new store = %+v, %v; want the zero state", got, err)
	}
	for _, want := range []cron.PauseState{
		{Paused: true, Until: cronTime, Reason: "upgrade: ünïcode \"quoted\"", Since: cronTime.Add(-time.Hour)},
		{Paused: true, Since: cronTime},
		{},
	} {
		if err := ps.SavePause(ctx, want); err != nil {
			t.Fatalf("SavePause(%+v): %v", want, err)
		}
		got, err := ps.LoadPause(ctx)
		if err != nil {
			t.Fatalf("LoadPause: %v", err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("LoadPause after SavePause (-want +got):\n%s", diff)
		}
	}
}

func cronCaseAudit(t *testing.T, s cron.Store) {
	al, ok := s.(cron.AuditLog)
	if !ok {
		t.Skip("the store is no cron.AuditLog")
	}
	ctx := context.Background()
	if got, more, err := al.Audit(ctx, cron.AuditQuery{}); err != nil || len(got) != 0 || more {
		t.Fatalf("Audit of a new store = %v, %v, %v; want none", got, more, err)
	}
	var want []cron.AuditEntry
	for i := range 6 {
		e := cron.AuditEntry{
			Time: cronTime.Add(time.Duration(i) * time.Minute), Who: []string{"ann", "bob"}[i%2], Role: "admin",
			Action: cron.ActionUpdate, JobID: fmt.Sprintf("j%d", i%3),
			Before: []byte(`{"name":"a"}`), After: []byte(`{"name":"b"}`),
		}
		switch i {
		case 4:
			e.Action, e.Before, e.After, e.RunID, e.Replay = cron.ActionRunNow, nil, nil, "r1", true
			e.Overrides = []byte(`{"headers":{"X-A":"(hidden)"},"force":true}`)
		case 5:
			e.Before, e.After, e.JobID, e.Action = nil, []byte(`{"paused":true}`), "", cron.ActionPauseAll
		}
		got, err := al.AppendAudit(ctx, e)
		if err != nil {
			t.Fatalf("AppendAudit: %v", err)
		}
		if len(want) > 0 && got.ID <= want[len(want)-1].ID {
			t.Errorf("entry %d has id %d, not above the previous %d", i, got.ID, want[len(want)-1].ID)
		}
		e.ID = got.ID
		if diff := cmp.Diff(e, got); diff != "" {
			t.Errorf("AppendAudit returned (-want +got):\n%s", diff)
		}
		want = append(want, e)
	}
	page := func(q cron.AuditQuery) ([]cron.AuditEntry, bool) {
		t.Helper()
		got, more, err := al.Audit(ctx, q)
		if err != nil {
			t.Fatalf("Audit(%+v): %v", q, err)
		}
		return got, more
	}
	got, more := page(cron.AuditQuery{})
	if diff := cmp.Diff(want, got); diff != "" || more {
		t.Errorf("Audit of everything (-want +got), more %v:\n%s", more, diff)
	}
	// Keyset paging: pages of two, each after the last id of the one before.
	var all []cron.AuditEntry
	q := cron.AuditQuery{Limit: 2}
	for range 10 {
		got, more := page(q)
		all = append(all, got...)
		if !more {
			break
		}
		q.After = got[len(got)-1].ID
	}
	if diff := cmp.Diff(want, all); diff != "" {
		t.Errorf("paged by 2 (-want +got):\n%s", diff)
	}
	pick := func(keep func(e cron.AuditEntry) bool) []cron.AuditEntry {
		var out []cron.AuditEntry
		for _, e := range want {
			if keep(e) {
				out = append(out, e)
			}
		}
		return out
	}
	for _, tt := range []struct {
		name string
		q    cron.AuditQuery
		want []cron.AuditEntry
	}{
		{"job", cron.AuditQuery{JobID: "j1"}, pick(func(e cron.AuditEntry) bool { return e.JobID == "j1" })},
		{"who", cron.AuditQuery{Who: "bob"}, pick(func(e cron.AuditEntry) bool { return e.Who == "bob" })},
		{"since", cron.AuditQuery{Since: cronTime.Add(3 * time.Minute)}, want[3:]},
		{"job and who", cron.AuditQuery{JobID: "j0", Who: "ann"}, pick(func(e cron.AuditEntry) bool { return e.JobID == "j0" && e.Who == "ann" })},
		{"none", cron.AuditQuery{JobID: "nope"}, nil},
	} {
		got, _ := page(tt.q)
		if diff := cmp.Diff(tt.want, got, cmp.Comparer(func(a, b []cron.AuditEntry) bool { return len(a) == 0 && len(b) == 0 || cmp.Equal(a, b) })); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}

	// Concurrent appends all land, with distinct ids.
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			if _, err := al.AppendAudit(ctx, cron.AuditEntry{Time: cronTime, Who: fmt.Sprint("w", i), Action: cron.ActionCreate, JobID: "c"}); err != nil {
				t.Errorf("concurrent AppendAudit: %v", err)
			}
		})
	}
	wg.Wait()
	got, _ = page(cron.AuditQuery{After: want[len(want)-1].ID, Limit: 100})
	seen := map[int64]bool{}
	for _, e := range got {
		seen[e.ID] = true
	}
	if len(got) != 8 || len(seen) != 8 {
		t.Errorf("after 8 concurrent appends: %d entries, %d ids; want 8", len(got), len(seen))
	}
}
