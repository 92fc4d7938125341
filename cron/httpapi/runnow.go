package httpapi

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"net/http"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// The codes of the error body (its "code") that a client may branch on.
const (
	// CodeRunInFlight: POST /jobs/{id}/run-now of a job with a run in
	// flight, without "force": true (409).
	CodeRunInFlight = "run_in_flight"
	// CodeIdempotencyKeyReused: an Idempotency-Key sent again for the
	// same job with another body (422).
	CodeIdempotencyKeyReused = "idempotency_key_reused"
	// CodeServicePaused: a run-now while the service-wide pause holds
	// (409); POST /resume ends the pause.
	CodeServicePaused = "service_paused"
)

// IdempotencyWindow is how long a run-now's Idempotency-Key is
// remembered; MaxIdempotencyKeys bounds how many are (the oldest go
// first), and MaxIdempotencyKeyLen how long one may be.
const (
	IdempotencyWindow    = 24 * time.Hour
	MaxIdempotencyKeys   = 100_000
	MaxIdempotencyKeyLen = 255
)

// runNowBody is the optional body of POST /jobs/{id}/run-now.
type runNowBody struct {
	Body    *string           `json:"body"`
	Headers map[string]string `json:"headers"`
	Args    json.RawMessage   `json:"args"`
	Force   bool              `json:"force"`
}

// runNow queues a run of the job, changed by the body's overrides for that
// run, under the overlap rule unless forced. An Idempotency-Key makes a
// repeat of the request (same job, key and body) answer as the first did,
// without a second run.
func (s *Server) runNow(w http.ResponseWriter, req *http.Request, id string) {
	body, rerr := s.readBody(w, req)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	opts, rerr := decodeRunNow(body)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	key := req.Header.Get("Idempotency-Key")
	if len(key) > MaxIdempotencyKeyLen || !printable(key) {
		writeError(w, &RequestError{Status: http.StatusBadRequest, Field: "Idempotency-Key",
			Msg: "must be 1 to 255 printable ASCII characters"})
		return
	}
	if key != "" {
		sum := sha256.Sum256(bytes.TrimSpace(body))
		var e *idemEntry
		for {
			var first bool
			if e, first = s.idem.begin(id, key, sum); first {
				break
			}
			if e.sum != sum {
				writeError(w, &RequestError{Status: http.StatusUnprocessableEntity, Code: CodeIdempotencyKeyReused, Field: "Idempotency-Key",
					Msg: "this key was used for another run-now of this job with another body; use a new key"})
				return
			}
			<-e.done
			if e.runID != "" {
				w.Header().Set("Idempotent-Replayed", "true")
				writeJSON(w, http.StatusAccepted, map[string]string{"run_id": e.runID, "job_id": id})
				return
			}
			// The first request failed and was forgotten: try again.
		}
		var runID string
		defer func() { s.idem.end(id, key, e, runID) }()
		runID = s.queueRun(w, req, id, opts)
		return
	}
	s.queueRun(w, req, id, opts)
}

// queueRun queues the run and answers; it returns the run's id, "" when
// it answered an error.
func (s *Server) queueRun(w http.ResponseWriter, req *http.Request, id string, opts cron.RunOptions) string {
	if len(s.allow) > 0 {
		// A job stored before the allow-list was set may point
		// elsewhere: its run would only fail.
		j, err := s.r.Get(id)
		if err != nil {
			s.fail(w, err, id)
			return ""
		}
		if rerr := s.checkCallback(&j); rerr != nil {
			writeError(w, rerr)
			return ""
		}
	}
	runID, err := s.r.RunNowWith(req.Context(), id, opts)
	if err != nil {
		s.fail(w, err, id)
		return ""
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": runID, "job_id": id})
	return runID
}

// decodeRunNow reads the body of a run-now: none, or an object of body,
// headers, args and force.
func decodeRunNow(body []byte) (cron.RunOptions, *RequestError) {
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return cron.RunOptions{}, nil
	}
	var b runNowBody
	if body[0] != '{' || !json.Valid(body) {
		return cron.RunOptions{}, &RequestError{Status: http.StatusBadRequest, Msg: "body must be a JSON object"}
	}
	if err := strictObject("", body, &b); err != nil {
		err.Field = trimDot(err.Field)
		return cron.RunOptions{}, err
	}
	if string(b.Args) == "null" {
		b.Args = nil
	}
	return cron.RunOptions{Body: b.Body, Headers: b.Headers, Args: b.Args, Force: b.Force}, nil
}

func trimDot(f string) string {
	if len(f) > 0 && f[0] == '.' {
		return f[1:]
	}
	return f
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// idempotency remembers the run-now requests made with an Idempotency-Key,
// per job, for IdempotencyWindow, in this process.
type idempotency struct {
	now   func() time.Time
	mu    sync.Mutex
	m     map[idemKey]*idemEntry
	order []idemKey // in the order they came, for expiry and the bound
}

type idemKey struct{ job, key string }

type idemEntry struct {
	at    time.Time
	sum   [32]byte      // of the request body
	done  chan struct{} // closed once the first request is answered
	runID string        // set before done is closed; "" if it failed
}

func newIdempotency(now func() time.Time) *idempotency {
	return &idempotency{now: now, m: make(map[idemKey]*idemEntry)}
}

// begin returns the entry of (job, key) and whether the caller made it
// (then it must call end), after dropping the expired ones.
func (c *idempotency) begin(job, key string, sum [32]byte) (*idemEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for len(c.order) > 0 {
		k := c.order[0]
		e := c.m[k]
		if e != nil && now.Sub(e.at) < IdempotencyWindow && len(c.m) < MaxIdempotencyKeys {
			break
		}
		if e != nil && isDone(e) {
			delete(c.m, k)
		} else if e != nil {
			break // in flight: kept until answered
		}
		c.order = c.order[1:]
	}
	k := idemKey{job, key}
	if e, ok := c.m[k]; ok {
		return e, false
	}
	e := &idemEntry{at: now, sum: sum, done: make(chan struct{})}
	c.m[k] = e
	c.order = append(c.order, k)
	return e, true
}

// end records the answer of the request that made e: a failed one
// (runID "") is forgotten, so that the key may be sent again.
func (c *idempotency) end(job, key string, e *idemEntry, runID string) {
	c.mu.Lock()
	e.runID = runID
	if runID == "" && c.m[idemKey{job, key}] == e {
		delete(c.m, idemKey{job, key})
	}
	c.mu.Unlock()
	close(e.done)
}

func isDone(e *idemEntry) bool {
	select {
	case <-e.done:
		return true
	default:
		return false
	}
}
