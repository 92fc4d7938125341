package httpapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DefaultAuditSize is how many audit entries a [Server] keeps in memory.
const DefaultAuditSize = 1000

// DefaultAuditLimit is the page size of GET /audit without limit.
const DefaultAuditLimit = 100

// AuditEntry records one write through the API that succeeded (2xx).
type AuditEntry struct {
	// ID numbers the entries from 1 in the order they were made; it is
	// the cursor of GET /audit?after=.
	ID int64 `json:"id"`
	// Time is when the write was answered.
	Time time.Time `json:"time"`
	// Who is the name of the token (see [Identity]); "admin" for
	// [Config.Token]; "" when authentication is off.
	Who string `json:"who"`
	// Role is the role of the token ("" when authentication is off).
	Role Role `json:"role,omitempty"`
	// Method and Path are the request's (the path as sent, without the
	// query).
	Method string `json:"method"`
	Path   string `json:"path"`
	// JobID is the job written.
	JobID string `json:"job_id"`
	// Status is the HTTP status answered.
	Status int `json:"status"`
	// Before and After are the job as read just before and just after the
	// write (absent before a create and after a delete). A write of
	// another request to the same job at the same time may fall between
	// the reads.
	Before json.RawMessage `json:"before,omitempty"`
	After  json.RawMessage `json:"after,omitempty"`
}

// AuditSink receives every audit entry, for an embedding service that
// keeps them (the in-memory log is bounded and lost at a restart).
type AuditSink interface {
	// Audit is called after each recorded write, in order, before the
	// next is recorded; it must be fast (the request waits for it) and
	// must not keep e.Before or e.After past the call without copying.
	Audit(ctx context.Context, e AuditEntry)
}

// auditLog keeps the last entries in a ring.
type auditLog struct {
	mu      sync.Mutex
	size    int
	entries []AuditEntry // ring, oldest at start once full
	start   int
	nextID  int64
	sink    AuditSink
}

func newAuditLog(size int, sink AuditSink) *auditLog {
	return &auditLog{size: size, sink: sink, nextID: 1}
}

// on reports whether entries are kept or sent anywhere.
func (l *auditLog) on() bool { return l.size > 0 || l.sink != nil }

func (l *auditLog) add(ctx context.Context, e AuditEntry) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.ID = l.nextID
	l.nextID++
	if l.size > 0 {
		if len(l.entries) < l.size {
			l.entries = append(l.entries, e)
		} else {
			l.entries[l.start] = e
			l.start = (l.start + 1) % l.size
		}
	}
	if l.sink != nil {
		l.sink.Audit(ctx, e)
	}
}

// page returns up to limit entries with an ID above after, of jobID
// ("" any), oldest first, and whether more follow.
func (l *auditLog) page(jobID string, after int64, limit int) ([]AuditEntry, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []AuditEntry{}
	n := len(l.entries)
	for i := 0; i < n; i++ {
		e := l.entries[(l.start+i)%n]
		if e.ID <= after || (jobID != "" && e.JobID != jobID) {
			continue
		}
		if len(out) == limit {
			return out, true
		}
		out = append(out, e)
	}
	return out, false
}

// auditParams are the query parameters of GET /audit.
var auditParams = []string{"after", "job_id", "limit"}

// audit answers GET /audit.
func (s *Server) audit(w http.ResponseWriter, req *http.Request, _ string) {
	q := req.URL.Query()
	var (
		jobID string
		after int64
		limit = DefaultAuditLimit
	)
	if rerr := eachParam(q, func(key, v string) *RequestError {
		switch key {
		case "job_id":
			jobID = v
		case "after":
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil || n < 0 {
				return badField("after", "must be the id of an entry (an integer >= 0), got %q", v)
			}
			after = n
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxListLimit {
				return badField("limit", "must be an integer from 1 to %d, got %q", MaxListLimit, v)
			}
			limit = n
		default:
			return badField(key, "unknown query parameter; GET /audit takes %s", strings.Join(auditParams, ", "))
		}
		return nil
	}); rerr != nil {
		writeError(w, rerr)
		return
	}
	entries, more := s.auditLog.page(jobID, after, limit)
	if more && len(entries) > 0 {
		setNext(w, q, strconv.FormatInt(entries[len(entries)-1].ID, 10))
	}
	writeJSON(w, http.StatusOK, entries)
}

// audited wraps the handler h of a write: it reads the job before and
// after and records an entry when the answer is 2xx.
func (s *Server) audited(w http.ResponseWriter, req *http.Request, id string, who Identity, h handler) {
	var before json.RawMessage
	if id != "" {
		if j, err := s.r.Get(id); err == nil {
			before, _ = j.MarshalJSON()
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
	if jobID != "" && req.Method != http.MethodDelete {
		if j, err := s.r.Get(jobID); err == nil {
			after, _ = j.MarshalJSON()
		}
	}
	s.auditLog.add(req.Context(), AuditEntry{
		Time:   time.Now().UTC(),
		Who:    who.Name,
		Role:   who.Role,
		Method: req.Method,
		Path:   req.URL.Path,
		JobID:  jobID,
		Status: rec.status,
		Before: before,
		After:  after,
	})
}
