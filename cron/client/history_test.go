package client_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
)

// TestClientAllRuns: the history across jobs, through the real service:
// pages that cover every run once, newest first, and the filters; a bad
// option is an APIError naming its parameter.
func TestClientAllRuns(t *testing.T) {
	ctx := context.Background()
	_, c := newOKFail(t)
	var ids []string // newest first
	for _, id := range []string{"ok", "fail", "ok", "ok"} {
		runID, err := c.RunNow(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		waitRuns(t, c, id, runID)
		ids = append([]string{runID}, ids...)
	}
	var got []string
	opts := client.HistoryOptions{Limit: 3}
	for page := 0; page < 10; page++ {
		p, err := c.AllRuns(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Runs {
			got = append(got, r.ID)
		}
		if p.Next == "" {
			break
		}
		opts.After = p.Next
	}
	if diff := cmp.Diff(ids, got); diff != "" {
		t.Errorf("every page of AllRuns (-want +got):\n%s", diff)
	}
	for _, tt := range []struct {
		opts client.HistoryOptions
		want []string
	}{
		{client.HistoryOptions{JobIDs: []string{"fail"}}, ids[2:3]},
		{client.HistoryOptions{JobIDs: []string{"fail", "ok"}, Statuses: []cron.Status{cron.StatusSuccess}}, slices.Concat(ids[:2], ids[3:])},
		{client.HistoryOptions{Since: time.Now().Add(time.Hour)}, nil},
		{client.HistoryOptions{Until: time.Now().Add(time.Hour), Statuses: []cron.Status{cron.StatusFailed}}, ids[2:3]},
		{client.HistoryOptions{Instance: "elsewhere"}, nil},
	} {
		p, err := c.AllRuns(ctx, tt.opts)
		if err != nil {
			t.Fatalf("AllRuns(%+v): %v", tt.opts, err)
		}
		var got []string
		for _, r := range p.Runs {
			got = append(got, r.ID)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" || p.Next != "" {
			t.Errorf("AllRuns(%+v), next %q (-want +got):\n%s", tt.opts, p.Next, diff)
		}
	}
	_, err := c.AllRuns(ctx, client.HistoryOptions{Statuses: []cron.Status{"paused"}})
	wantAPIError(t, "AllRuns with a bad status", err, 400, "status", nil)
	_, err = c.AllRuns(ctx, client.HistoryOptions{Limit: 5000})
	wantAPIError(t, "AllRuns with a bad limit", err, 400, "limit", nil)
	_, err = c.AllRuns(ctx, client.HistoryOptions{After: "junk"})
	wantAPIError(t, "AllRuns with a bad cursor", err, 400, "after", nil)
}
