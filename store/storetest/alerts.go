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

func cronCaseAlertOutbox(t *testing.T, s cron.Store) {
	o, ok := s.(cron.AlertOutbox)
	if !ok {
		t.Skip("the store is no cron.AlertOutbox")
	}
	ctx := context.Background()
	mk := func(i int) cron.AlertDelivery {
		a := cron.Alert{Transition: cron.AlertFailing, Error: "boom", ConsecutiveFailures: 1, Time: cronTime,
			Run: cron.Run{ID: fmt.Sprintf("r%d", i), JobID: "j", ScheduledAt: cronTime, TriggeredAt: cronTime, FinishedAt: cronTime,
				Status: cron.StatusFailed, Attempts: 1, Error: "boom", Alert: cron.AlertFailing}}
		a.Job.ID, a.Job.Name, a.Job.Type = "j", "job j", "http"
		at := cronTime.Add(time.Duration(i) * time.Second)
		return cron.AlertDelivery{ID: fmt.Sprintf("d%02d", i), Alert: a, URL: "https://hooks.example/a", Secret: "s3cret",
			CreatedAt: at, NextAt: at}
	}
	var all []cron.AlertDelivery
	for i := range 10 {
		all = append(all, mk(i))
	}
	if err := o.EnqueueAlerts(ctx, all); err != nil {
		t.Fatalf("EnqueueAlerts: %v", err)
	}
	again := mk(0)
	again.URL = "https://other.example/"
	if err := o.EnqueueAlerts(ctx, []cron.AlertDelivery{again}); err != nil {
		t.Fatalf("EnqueueAlerts (an ID there): %v", err)
	}
	got, n, err := o.ListAlerts(ctx, false, 3)
	if err != nil || n != 10 {
		t.Fatalf("ListAlerts(pending, 3) = %d of %d, %v; want 3 of 10", len(got), n, err)
	}
	if diff := cmp.Diff(all[:3], got); diff != "" {
		t.Errorf("ListAlerts(pending): the oldest three, round trip (-want +got):\n%s", diff)
	}
	if _, n, _ := o.ListAlerts(ctx, true, 10); n != 0 {
		t.Errorf("ListAlerts(dead) = %d, want 0", n)
	}

	// Due at cronTime+4s: d00..d04, oldest due first, each taken once.
	now := cronTime.Add(4 * time.Second)
	var mu sync.Mutex
	taken := map[string]int{}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			ds, err := o.TakeAlerts(ctx, now, now.Add(time.Minute), 2)
			if err != nil {
				t.Errorf("TakeAlerts: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			for _, d := range ds {
				taken[d.ID]++
				if d.Secret != "s3cret" {
					t.Errorf("taken %s without its secret", d.ID)
				}
			}
		})
	}
	wg.Wait()
	if want := map[string]int{"d00": 1, "d01": 1, "d02": 1, "d03": 1, "d04": 1}; !cmp.Equal(want, taken) {
		t.Errorf("concurrent TakeAlerts took %v, want each of d00..d04 once", taken)
	}
	if ds, _ := o.TakeAlerts(ctx, now.Add(59*time.Second), now.Add(2*time.Minute), 100); len(ds) != 5 {
		t.Errorf("TakeAlerts under the lease = %d alerts, want the 5 not taken (d05..d09)", len(ds))
	}
	later := now.Add(2*time.Minute + time.Second)
	ds, err := o.TakeAlerts(ctx, later, later.Add(time.Minute), 100)
	if err != nil || len(ds) != 10 {
		t.Fatalf("TakeAlerts after the leases = %d, %v; want all 10", len(ds), err)
	}
	if ds[0].ID != "d00" {
		t.Errorf("TakeAlerts: first %s, want d00 (oldest due)", ds[0].ID)
	}

	// Settle: d00 delivered, d01 retried later, d02 dead.
	d1 := all[1]
	d1.Attempts, d1.LastError, d1.NextAt = 3, "webhook answered 503", later.Add(time.Hour)
	d2 := all[2]
	d2.Attempts, d2.LastError, d2.NextAt, d2.Dead = 7, "webhook answered 404", time.Time{}, true
	for _, st := range []struct {
		d         cron.AlertDelivery
		delivered bool
	}{{all[0], true}, {d1, false}, {d2, false}, {cron.AlertDelivery{ID: "gone"}, true}} {
		if err := o.SettleAlert(ctx, st.d, st.delivered); err != nil {
			t.Fatalf("SettleAlert(%s): %v", st.d.ID, err)
		}
	}
	pending, n, err := o.ListAlerts(ctx, false, 100)
	if err != nil || n != 8 || len(pending) != 8 || pending[0].ID != "d01" {
		t.Fatalf("pending after settling = %d (%d), %v; want 8 from d01", len(pending), n, err)
	}
	if p := pending[0]; p.Attempts != 3 || p.LastError != "webhook answered 503" || !p.NextAt.Equal(d1.NextAt) {
		t.Errorf("d01 after a failed attempt = %+v; want 3 attempts, its error, next at %v", p, d1.NextAt)
	}
	dead, n, err := o.ListAlerts(ctx, true, 100)
	if err != nil || n != 1 || len(dead) != 1 || dead[0].ID != "d02" || !dead[0].Dead || dead[0].Attempts != 7 || dead[0].LastError != "webhook answered 404" {
		t.Fatalf("dead = %+v (%d), %v; want d02, dead after 7 attempts", dead, n, err)
	}
	// Settled, d01 is free again but not due; the others (released at
	// settle or not) wait for their lease.
	ds, _ = o.TakeAlerts(ctx, later.Add(2*time.Minute), later.Add(3*time.Minute), 100)
	for _, d := range ds {
		if d.ID == "d01" || d.ID == "d02" || d.ID == "d00" {
			t.Errorf("TakeAlerts took %s: delivered, not due or dead", d.ID)
		}
	}
	if len(ds) != 7 {
		t.Errorf("TakeAlerts after their leases = %d, want 7 (d03..d09)", len(ds))
	}
	if ds, _ := o.TakeAlerts(ctx, later.Add(time.Hour), later.Add(time.Hour+time.Minute), 100); len(ds) != 8 || ds[7].ID != "d01" {
		t.Errorf("TakeAlerts at d01's next attempt = %d alerts, want 8, the last d01 (due last)", len(ds))
	}
}
