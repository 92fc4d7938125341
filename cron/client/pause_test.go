package client_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

func TestClientPauses(t *testing.T) {
	set, err := httpapi.NewTokenSet([]httpapi.Token{{Secret: "o-secret-00000001", Role: httpapi.RoleOperator, Name: "otto"}})
	if err != nil {
		t.Fatal(err)
	}
	s := newServiceConfig(t, httpapi.Config{Token: "root-secret-00001", Authenticator: set})
	ctx := context.Background()
	admin, op := s.client(t, "root-secret-00001"), s.client(t, "o-secret-00000001")
	if _, err := admin.Create(ctx, s.job("a", cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Hour)})); err != nil {
		t.Fatal(err)
	}
	until := time.Now().Add(time.Hour).Truncate(time.Second).UTC()
	j, err := op.PauseUntil(ctx, "a", until)
	if err != nil || !j.Paused || !j.PausedUntil.Equal(until) {
		t.Fatalf("PauseUntil: %+v, %v; want paused until %v", j, err, until)
	}
	_, err = op.PauseUntil(ctx, "a", time.Now().Add(-time.Minute))
	wantAPIError(t, "PauseUntil in the past", err, 400, "until", nil)
	if j, err := op.PauseUntil(ctx, "a", time.Time{}); err != nil || !j.Paused || !j.PausedUntil.IsZero() {
		t.Errorf("PauseUntil(zero): %+v, %v; want a plain pause", j, err)
	}

	// The service pause needs the admin role.
	_, err = op.PauseAll(ctx, time.Time{}, "")
	var ae *client.APIError
	if !errors.Is(err, client.ErrForbidden) || !errors.As(err, &ae) || ae.Role != "admin" {
		t.Errorf("operator PauseAll: %v, want ErrForbidden naming admin", err)
	}
	p, err := admin.PauseAll(ctx, until, "maintenance")
	if err != nil || !p.Paused || !p.Until.Equal(until) || p.Reason != "maintenance" || p.Since.IsZero() {
		t.Fatalf("PauseAll: %+v, %v", p, err)
	}
	h, err := op.Health(ctx)
	if err != nil || h["paused"] != true || h["pause_reason"] != "maintenance" {
		t.Errorf("Health while paused: %v, %v", h, err)
	}
	_, err = admin.RunNow(ctx, "a")
	wantAPIError(t, "RunNow while paused", err, 409, "", nil)
	_, err = admin.PauseAll(ctx, time.Now().Add(-time.Minute), "")
	wantAPIError(t, "PauseAll in the past", err, 400, "until", nil)
	if p, err := admin.ResumeAll(ctx); err != nil || p.Paused {
		t.Errorf("ResumeAll: %+v, %v", p, err)
	}

	// The audit log: the service pause with its state, by who and since.
	page, err := op.Audit(ctx, client.AuditOptions{Who: "admin", Since: time.Now().Add(-time.Minute)})
	if err != nil {
		t.Fatal(err)
	}
	var pauses int
	for _, e := range page.Entries {
		if e.Who != "admin" {
			t.Errorf("audit who=admin has an entry of %q", e.Who)
		}
		if e.Action == cron.ActionPauseAll {
			pauses++
			if e.PauseBefore == nil || e.PauseBefore.Paused || e.PauseAfter == nil || e.PauseAfter.Reason != "maintenance" || e.Before != nil {
				t.Errorf("audit entry of pause-all: %+v", e)
			}
		}
	}
	if pauses != 1 {
		t.Errorf("audit who=admin: %d service pauses, want 1", pauses)
	}
	if page, err := op.Audit(ctx, client.AuditOptions{Since: time.Now().Add(time.Hour)}); err != nil || len(page.Entries) != 0 {
		t.Errorf("audit since a future time: %+v, %v; want none", page, err)
	}
}
