package httpapi

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// DefaultAuditLimit is the page size of GET /audit without limit.
const DefaultAuditLimit = 100

// AuditEntry is one record of the runner's audit log ([cron.AuditEntry]):
// every change made through the runner, by the API, the console, Go code
// or the runner itself, once each.
type AuditEntry = cron.AuditEntry

// auditParams are the query parameters of GET /audit.
var auditParams = []string{"after", "job_id", "limit", "since", "who"}

// audit answers GET /audit.
func (s *Server) audit(w http.ResponseWriter, req *http.Request, _ string) {
	q := req.URL.Query()
	aq := cron.AuditQuery{Limit: DefaultAuditLimit}
	if rerr := eachParam(q, func(key, v string) *RequestError {
		switch key {
		case "job_id":
			aq.JobID = v
		case "who":
			aq.Who = v
		case "since":
			t, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				return badField("since", "must be an RFC3339 time such as 2026-12-01T00:00:00Z, got %q", v)
			}
			aq.Since = t
		case "after":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return badField("after", "must be the id of an entry (an integer >= 0), got %q", v)
			}
			aq.After = n
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxListLimit {
				return badField("limit", "must be an integer from 1 to %d, got %q", MaxListLimit, v)
			}
			aq.Limit = n
		default:
			return badField(key, "unknown query parameter; GET /audit takes %s", strings.Join(auditParams, ", "))
		}
		return nil
	}); rerr != nil {
		writeError(w, rerr)
		return
	}
	got, more, err := s.r.Audit(req.Context(), aq)
	if err != nil {
		w.Header().Set("Retry-After", "2")
		writeError(w, &RequestError{Status: http.StatusServiceUnavailable, Msg: "reading the audit log: " + err.Error()})
		return
	}
	entries := got
	if more && len(entries) > 0 {
		setNext(w, q, strconv.FormatInt(entries[len(entries)-1].ID, 10))
	}
	writeJSON(w, http.StatusOK, entries)
}
