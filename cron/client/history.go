package client

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// HistoryOptions select the runs of [Client.AllRuns]. The zero value asks
// for the newest runs of every job, a page of the API's default size (50).
type HistoryOptions struct {
	// JobIDs keeps the runs of these jobs. Default none: every job's.
	JobIDs []string
	// Statuses keeps the runs of these statuses. Default none: any.
	Statuses []cron.Status
	// Since keeps the runs scheduled at or after it. Default zero: no bound.
	Since time.Time
	// Until keeps the runs scheduled before it. Default zero: no bound.
	Until time.Time
	// Instance keeps the runs claimed by this instance of a shared
	// database. Default "": any.
	Instance string
	// Limit is the page size (1 to 1000). Default 0: the API's, 50.
	Limit int
	// After is the cursor of the next page ([RunsPage.Next]). Default "":
	// the newest runs.
	After string
}

// RunsPage is one answer of [Client.AllRuns].
type RunsPage struct {
	// Runs are the runs of the page, newest first (by scheduled_at, then
	// run id).
	Runs []cron.Run
	// Next is the After of the next page, "" when this page is the last.
	Next string
}

// AllRuns returns a page of the run history of every job (GET /runs):
// called runs, and the slots not called (skipped, missed) with their
// reason. A bad option is an *APIError naming the query parameter.
func (c *Client) AllRuns(ctx context.Context, opts HistoryOptions) (RunsPage, error) {
	q := url.Values{}
	for _, id := range opts.JobIDs {
		q.Add("job", id)
	}
	for _, st := range opts.Statuses {
		q.Add("status", string(st))
	}
	if !opts.Since.IsZero() {
		q.Set("since", opts.Since.Format(time.RFC3339Nano))
	}
	if !opts.Until.IsZero() {
		q.Set("until", opts.Until.Format(time.RFC3339Nano))
	}
	if opts.Instance != "" {
		q.Set("instance", opts.Instance)
	}
	if opts.Limit != 0 {
		q.Set("limit", strconv.Itoa(opts.Limit))
	}
	if opts.After != "" {
		q.Set("after", opts.After)
	}
	var p RunsPage
	h, err := c.do(ctx, http.MethodGet, "/runs", q, nil, &p.Runs, false)
	if err != nil {
		return RunsPage{}, err
	}
	if next := nextAfter(h.Get("Link")); next != "" && len(p.Runs) > 0 {
		p.Next = next
	}
	return p, nil
}
