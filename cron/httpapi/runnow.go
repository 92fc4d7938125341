package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
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

// IdempotencyWindow is how long a run-now's Idempotency-Key holds
// ([cron.IdempotencyWindow]); MaxIdempotencyKeys bounds how many are kept
// in memory when [Config.Idempotency] is nil (the oldest go first), and
// MaxIdempotencyKeyLen how long one may be.
const (
	IdempotencyWindow    = cron.IdempotencyWindow
	MaxIdempotencyKeys   = cron.DefaultIdempotencyKeys
	MaxIdempotencyKeyLen = 255
)

// A repeat of a run-now whose first request is still being answered
// (its key reserved, no run recorded yet) waits up to idempotencyWait for
// the answer, then answers 409. A reservation that has stayed without a
// run for idempotencyAbandon was left by a request that never finished
// (its instance stopped, or its store failed to record the run): the
// key is taken over.
const (
	idempotencyWait    = 10 * time.Second
	idempotencyAbandon = 5 * time.Minute
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
		s.runNowOnce(w, req, id, key, sha256.Sum256(bytes.TrimSpace(body)), opts)
		return
	}
	runID, err := s.queueRun(req, id, opts)
	if err != nil {
		s.fail(w, err, id)
		return
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": runID, "job_id": id})
}

// runNowOnce answers a run-now sent with an Idempotency-Key: it reserves
// the key in s.idem; the request that does queues the run and records
// it, a repeat (same job, key and body sum) answers the recorded run,
// waiting for it while the first request is being answered.
func (s *Server) runNowOnce(w http.ResponseWriter, req *http.Request, id, key string, sum [32]byte, opts cron.RunOptions) {
	ctx := req.Context()
	var waitUntil time.Time
	pause := 5 * time.Millisecond
	for {
		now := s.now()
		e, first, err := s.idem.ReserveIdempotencyKey(ctx, id, key, cron.IdempotencyEntry{Sum: sum, At: now})
		if err != nil && ctx.Err() != nil {
			writeError(w, &RequestError{Status: http.StatusServiceUnavailable, Msg: "request cancelled before the Idempotency-Key was checked"})
			return
		}
		if err != nil {
			s.idemFail(w, id, err)
			return
		}
		if first {
			s.runNowFirst(w, req, id, key, e.At, opts)
			return
		}
		if e.Sum != sum {
			writeError(w, &RequestError{Status: http.StatusUnprocessableEntity, Code: CodeIdempotencyKeyReused, Field: "Idempotency-Key",
				Msg: "this key was used for another run-now of this job with another body; use a new key"})
			return
		}
		if e.RunID != "" {
			w.Header().Set("Idempotent-Replayed", "true")
			writeJSON(w, http.StatusAccepted, map[string]string{"run_id": e.RunID, "job_id": id})
			return
		}
		// The first request with this key is being answered, here or on
		// another instance sharing the store.
		if now.Sub(e.At) >= s.idemAbandon {
			if err := s.idem.ForgetIdempotencyKey(ctx, id, key, e.At); err != nil {
				s.idemFail(w, id, err)
				return
			}
			s.log.Warn("httpapi: an Idempotency-Key reserved long ago has no run: the request that reserved it never finished; taken over",
				"job_id", id, "reserved_at", e.At)
			continue
		}
		if waitUntil.IsZero() {
			waitUntil = now.Add(s.idemWait)
		}
		if !now.Before(waitUntil) {
			writeError(w, &RequestError{Status: http.StatusConflict, Field: "Idempotency-Key",
				Msg: fmt.Sprintf("the first request with this key (at %s) has not been answered yet; send it again later", e.At.Format(time.RFC3339))})
			return
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			writeError(w, &RequestError{Status: http.StatusServiceUnavailable, Msg: "request cancelled while it waited for the first request with this Idempotency-Key"})
			return
		case <-t.C:
		}
		pause = min(2*pause, 100*time.Millisecond)
	}
}

// runNowFirst queues the run of the request that reserved key (at at),
// records the run in s.idem and answers; a request that queued nothing
// (or panicked) gives the key up, so that it may be sent again. The
// record is written before the answer, and is not cut short by the
// client going away.
func (s *Server) runNowFirst(w http.ResponseWriter, req *http.Request, id, key string, at time.Time, opts cron.RunOptions) {
	var runID string
	defer func() {
		if runID != "" {
			return
		}
		ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), 10*time.Second)
		defer cancel()
		if err := s.idem.ForgetIdempotencyKey(ctx, id, key, at); err != nil {
			s.log.Error("httpapi: giving up an Idempotency-Key failed: a repeat answers 409 until the reservation is taken over",
				"job_id", id, "error", err)
		}
	}()
	runID, err := s.queueRun(req, id, opts)
	if err != nil {
		s.fail(w, err, id)
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(req.Context()), 10*time.Second)
	defer cancel()
	if err := s.idem.CompleteIdempotencyKey(ctx, id, key, at, runID); err != nil {
		// The run is queued: say so. A repeat answers 409 until the
		// reservation is taken over.
		s.log.Error("httpapi: recording the run of an Idempotency-Key failed", "job_id", id, "run_id", runID, "error", err)
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": runID, "job_id": id})
}

// idemFail answers an error of the idempotency store: 503, like the other
// outages of a store, and nothing was run.
func (s *Server) idemFail(w http.ResponseWriter, id string, err error) {
	s.log.Error("httpapi: idempotency store", "job_id", id, "error", err)
	w.Header().Set("Retry-After", "2")
	writeError(w, &RequestError{Status: http.StatusServiceUnavailable, Msg: "the Idempotency-Key could not be checked: " + err.Error()})
}

// queueRun queues the run and returns its id.
func (s *Server) queueRun(req *http.Request, id string, opts cron.RunOptions) (string, error) {
	if len(s.allow) > 0 {
		// A job stored before the allow-list was set may point
		// elsewhere: its run would only fail.
		j, err := s.r.Get(id)
		if err != nil {
			return "", err
		}
		if rerr := s.checkCallback(&j); rerr != nil {
			return "", rerr
		}
	}
	return s.r.RunNowWith(req.Context(), id, opts)
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
