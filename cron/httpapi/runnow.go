package httpapi

import (
	"bytes"
	"encoding/json"
	"net/http"

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
// ([cron.IdempotencyWindow]), and MaxIdempotencyKeyLen how long one may
// be.
const (
	IdempotencyWindow    = cron.IdempotencyWindow
	MaxIdempotencyKeyLen = cron.MaxIdempotencyKeyLen
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
// without a second run: the runner keeps the keys.
func (s *Server) runNow(w http.ResponseWriter, req *http.Request, id string) {
	body, rerr := s.readBody(w, req)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	t, err := s.RunNow(req.Context(), id, body, req.Header.Get("Idempotency-Key"))
	if err != nil {
		s.fail(w, err, id)
		return
	}
	if t.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeJSON(w, http.StatusAccepted, map[string]string{"run_id": t.RunID, "job_id": id})
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
