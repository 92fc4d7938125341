package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// historyParams are the query parameters of GET /runs.
var historyParams = []string{"job", "status", "since", "until", "instance", "limit", "after"}

// parseHistoryQuery reads the query of GET /runs: job and status may be
// given more than once, or as comma-separated lists; since and until are
// RFC 3339 times; limit is 1 to [cron.MaxRunQueryLimit] (default
// [cron.DefaultRunQueryLimit]); after is the cursor of a page. An unknown
// or bad parameter is a 400 naming it.
func parseHistoryQuery(q map[string][]string) (cron.RunQuery, *RequestError) {
	var rq cron.RunQuery
	rerr := eachParam(q, func(key, v string) *RequestError {
		switch key {
		case "job":
			for id := range strings.SplitSeq(v, ",") {
				if id == "" {
					return badField("job", "must be a job id (or a comma-separated list of them), got %q", v)
				}
				rq.JobIDs = append(rq.JobIDs, id)
			}
		case "status":
			for st := range strings.SplitSeq(v, ",") {
				if !cron.Status(st).OfRun() {
					return badField("status", "must be success, failed, timeout, skipped or missed, got %q", st)
				}
				rq.Statuses = append(rq.Statuses, cron.Status(st))
			}
		case "since", "until":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return badField(key, "must be an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", v)
			}
			if key == "since" {
				rq.Since = t
			} else {
				rq.Until = t
			}
		case "instance":
			if v == "" {
				return badField("instance", "must be an instance name, got an empty one")
			}
			rq.Instance = v
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > cron.MaxRunQueryLimit {
				return badField("limit", "must be an integer from 1 to %d, got %q", cron.MaxRunQueryLimit, v)
			}
			rq.Limit = n
		case "after":
			var c cron.RunCursor
			if err := c.UnmarshalText([]byte(v)); err != nil || c.IsZero() {
				return badField("after", "must be the cursor of the Link of the previous page, got %q", v)
			}
			rq.After = c
		default:
			return badField(key, "unknown query parameter; GET /runs takes %s", strings.Join(historyParams, ", "))
		}
		return nil
	}, "job", "status")
	return rq, rerr
}

// history answers GET /runs: the run records of every job, newest first
// (by scheduled_at, then run id), filtered and paged; a Link header names
// the next page when one follows.
func (s *Server) history(w http.ResponseWriter, req *http.Request, _ string) {
	q := req.URL.Query()
	rq, rerr := parseHistoryQuery(q)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	runs, next, err := s.r.QueryRuns(req.Context(), rq)
	var ve *cron.ValidationError
	if errors.As(err, &ve) {
		writeError(w, badField(ve.Field, "%s", ve.Reason))
		return
	}
	if err != nil {
		s.fail(w, err, "")
		return
	}
	if !next.IsZero() {
		setNext(w, q, next.String())
	}
	writeJSON(w, http.StatusOK, shownRuns(req, runs))
}

// run answers GET /runs/{id}: the record of one run by its run id (the
// run_id of a record, or the one a run-now answered), whichever job it
// belongs to; 404 when no kept record has that id (a run queued or in
// flight has none until it ends).
func (s *Server) run(w http.ResponseWriter, req *http.Request, runID string) {
	run, err := s.r.RunByID(req.Context(), runID)
	if errors.Is(err, cron.ErrNotFound) {
		writeError(w, &RequestError{Status: http.StatusNotFound, Msg: fmt.Sprintf("run %q not found (a run queued or in flight has no record until it ends)", runID)})
		return
	}
	if err != nil {
		s.fail(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, run.RedactedFor(roleOf(req)))
}
