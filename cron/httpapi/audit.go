package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// DefaultAuditSize is how many audit entries a [Server] keeps in memory.
const DefaultAuditSize = 1000

// DefaultAuditLimit is the page size of GET /audit without limit.
const DefaultAuditLimit = 100

// AuditEntry records one write through the API that succeeded (2xx):
// who made it (the token's name, see [Identity]; "admin" for
// [Config.Token]; "" when authentication is off) and its role, the
// method and the path (as sent, without the query), the job written (""
// for POST /pause and /resume), the status answered, when, and the job
// just before and just after the write (absent before a create and after
// a delete; the service pause for POST /pause and /resume). A write of
// another request to the same job at the same time may fall between the
// reads. Its ID numbers the entries of the log in order: the cursor of
// GET /audit?after=.
type AuditEntry = cron.AuditEntry

// AuditSink receives every audit entry, for an embedding service that
// keeps them (the in-memory log is bounded and lost at a restart).
type AuditSink interface {
	// Audit is called after each recorded write, in order, before the
	// next is recorded; it must be fast (the request waits for it) and
	// must not keep e.Before or e.After past the call without copying.
	Audit(ctx context.Context, e AuditEntry)
}

// auditLog is where the audit entries go: a [cron.AuditLog] that keeps
// them (Config.AuditLog, or AuditSize of them in memory) and the sink.
type auditLog struct {
	mu    sync.Mutex // orders the calls of the sink
	store cron.AuditLog
	sink  AuditSink
	log   *slog.Logger
}

func newAuditLog(cfg Config, log *slog.Logger) *auditLog {
	l := &auditLog{store: cfg.AuditLog, sink: cfg.AuditSink, log: log}
	if l.store == nil && cfg.AuditSize > 0 {
		l.store = &cron.AuditBuffer{Keep: cfg.AuditSize}
	}
	return l
}

// on reports whether entries are kept or sent anywhere.
func (l *auditLog) on() bool { return l.store != nil || l.sink != nil }

func (l *auditLog) add(ctx context.Context, e AuditEntry) {
	if l.sink != nil {
		l.mu.Lock()
		defer l.mu.Unlock()
	}
	if l.store != nil {
		ce, err := l.store.AppendAudit(ctx, e)
		if err != nil {
			// The write itself succeeded and was answered: the entry is
			// what is lost, and the log says so.
			l.log.Error("httpapi: audit entry not stored", "method", e.Method, "path", e.Path, "who", e.Who, "error", err)
		}
		e.ID = ce.ID
	}
	if l.sink != nil {
		l.sink.Audit(ctx, e)
	}
}

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
	if s.auditLog.store == nil {
		writeJSON(w, http.StatusOK, []AuditEntry{})
		return
	}
	got, more, err := s.auditLog.store.Audit(req.Context(), aq)
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

// audited wraps the handler h of a write: it reads the job before and
// after and records an entry when the answer is 2xx.
func (s *Server) audited(w http.ResponseWriter, req *http.Request, id string, who Identity, h handler) {
	var before json.RawMessage
	svc := isServicePause(req.Pattern)
	if svc {
		before = s.pauseJSON()
	} else if id != "" {
		if j, err := s.r.Get(id); err == nil {
			before, _ = j.Redacted().MarshalJSON()
		}
	}
	rec := &statusWriter{ResponseWriter: w}
	h(rec, req, id)
	if rec.status < 200 || rec.status > 299 {
		return
	}
	jobID := id
	if jobID == "" {
		// A create: the Location header names the job.
		if loc, ok := strings.CutPrefix(rec.Header().Get("Location"), "/jobs/"); ok {
			jobID, _ = url.PathUnescape(loc)
		}
	}
	var after json.RawMessage
	if svc {
		after = s.pauseJSON()
	} else if jobID != "" && req.Method != http.MethodDelete {
		if j, err := s.r.Get(jobID); err == nil {
			after, _ = j.Redacted().MarshalJSON()
		}
	}
	s.auditLog.add(req.Context(), AuditEntry{
		Time:   time.Now().UTC(),
		Who:    who.Name,
		Role:   string(who.Role),
		Method: req.Method,
		Path:   req.URL.Path,
		JobID:  jobID,
		Status: rec.status,
		Before: before,
		After:  after,
	})
}
