package client

import (
	"context"
	"errors"
	"fmt"
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

// Run returns the record of one run by its run id (GET /runs/{id}): the
// id [Client.RunNow] returns, or the ID of a record. A run unknown, or
// queued or in flight (its record is written when it ends), is an error
// matching [cron.ErrNotFound].
func (c *Client) Run(ctx context.Context, runID string) (cron.Run, error) {
	var out cron.Run
	_, err := c.do(ctx, http.MethodGet, "/runs/"+url.PathEscape(runID), nil, nil, &out, false)
	return out, err
}

// The pace of [Client.Wait]: its first poll comes after waitFirst, each
// next one after twice the last wait, at most waitMost.
const (
	waitFirst = 50 * time.Millisecond
	waitMost  = 2 * time.Second
)

// Wait waits for the run runID to end and returns its record: it asks
// for it ([Client.Run]) until the service has one, which it writes once
// the run is over (with its final status: success, failed, timeout, or
// skipped or missed when it was not called), first at once, then after
// 50 ms, twice as long each time, at most every 2 s. A run id the
// service does not know is waited for too (it may be queued): bound the
// wait by ctx, whose end is returned as its error. Any answer but the
// record and 404 (another error of the API, of the network) is returned
// at once.
//
//	id, _ := c.RunNow(ctx, "nightly")
//	ctx, cancel := context.WithTimeout(ctx, time.Minute)
//	defer cancel()
//	run, err := c.Wait(ctx, id)
func (c *Client) Wait(ctx context.Context, runID string) (cron.Run, error) {
	pause := waitFirst
	for {
		run, err := c.Run(ctx, runID)
		if err == nil || !errors.Is(err, cron.ErrNotFound) {
			return run, err
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return cron.Run{}, fmt.Errorf("client: waiting for run %s: %w", runID, ctx.Err())
		case <-t.C:
		}
		pause = min(2*pause, waitMost)
	}
}
