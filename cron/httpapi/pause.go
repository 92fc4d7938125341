package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"time"
)

// pauseBody is the optional body of POST /jobs/{id}/pause (until) and of
// POST /pause (until, reason).
type pauseBody struct {
	Until  *string `json:"until"`
	Reason *string `json:"reason"`
}

// pauseArgs reads until (and, with reason, the reason) from the query and
// the JSON body of a pause: either may give each, and both must then agree.
func (s *Server) pauseArgs(w http.ResponseWriter, req *http.Request, withReason bool) (until time.Time, reason string, rerr *RequestError) {
	known := "until"
	if withReason {
		known = "until, reason"
	}
	var untilText, reasonText *string
	if rerr := eachParam(req.URL.Query(), func(key, v string) *RequestError {
		switch {
		case key == "until":
			untilText = &v
		case key == "reason" && withReason:
			reasonText = &v
		default:
			return badField(key, "unknown query parameter; %s %s takes %s", req.Method, req.URL.Path, known)
		}
		return nil
	}); rerr != nil {
		return time.Time{}, "", rerr
	}
	body, rerr := s.readBody(w, req)
	if rerr != nil {
		return time.Time{}, "", rerr
	}
	if b := bytes.TrimSpace(body); len(b) > 0 {
		d := json.NewDecoder(bytes.NewReader(b))
		d.DisallowUnknownFields()
		var pb pauseBody
		if err := d.Decode(&pb); err != nil {
			var te *json.UnmarshalTypeError
			switch {
			case errors.As(err, &te) && te.Field != "":
				return time.Time{}, "", badField(te.Field, "must be a string")
			case strings.HasPrefix(err.Error(), "json: unknown field "):
				f := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
				return time.Time{}, "", badField(f, "unknown field; the body takes %s", known)
			}
			return time.Time{}, "", &RequestError{Status: 400, Msg: "body must be a JSON object: " + err.Error()}
		}
		if _, err := d.Token(); err != io.EOF {
			return time.Time{}, "", &RequestError{Status: 400, Msg: "malformed JSON: data after the object"}
		}
		if pb.Reason != nil && !withReason {
			return time.Time{}, "", badField("reason", "unknown field; the body takes %s", known)
		}
		for _, f := range []struct {
			name      string
			q, b, dst **string
		}{{"until", &untilText, &pb.Until, &untilText}, {"reason", &reasonText, &pb.Reason, &reasonText}} {
			switch {
			case *f.b == nil:
			case *f.q != nil && **f.q != **f.b:
				return time.Time{}, "", badField(f.name, "is given in the query (%q) and in the body (%q); give it once", **f.q, **f.b)
			default:
				*f.dst = *f.b
			}
		}
	}
	if untilText != nil && *untilText != "" {
		t, err := time.Parse(time.RFC3339Nano, *untilText)
		if err != nil {
			return time.Time{}, "", badField("until", "must be an RFC3339 time such as 2026-12-01T00:00:00Z, got %q", *untilText)
		}
		until = t
	}
	if reasonText != nil {
		reason = *reasonText
	}
	return until, reason, nil
}

// pause answers POST /jobs/{id}/pause: a plain pause, or with until a
// pause that ends by itself.
func (s *Server) pause(w http.ResponseWriter, req *http.Request, id string) {
	until, _, rerr := s.pauseArgs(w, req, false)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	j, err := s.r.Pause(req.Context(), id, until)
	if err != nil {
		s.fail(w, err, id)
		return
	}
	writeJSON(w, http.StatusOK, shown(req, j))
}

// pauseAll answers POST /pause: the service-wide pause.
func (s *Server) pauseAll(w http.ResponseWriter, req *http.Request, _ string) {
	until, reason, rerr := s.pauseArgs(w, req, true)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	p, err := s.r.PauseAll(req.Context(), until, reason)
	if err != nil {
		s.fail(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// resumeAll answers POST /resume: the end of the service-wide pause.
func (s *Server) resumeAll(w http.ResponseWriter, req *http.Request, _ string) {
	if !s.emptyBody(w, req) {
		return
	}
	p, err := s.r.ResumeAll(req.Context())
	if err != nil {
		s.fail(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, p)
}

// addPause adds the service pause in force to the answer of GET /health:
// "paused": true and its fields while the service is paused, nothing
// otherwise.
func (s *Server) addPause(body map[string]any) {
	p := s.r.Paused()
	if !p.Paused {
		return
	}
	body["paused"] = true
	if !p.Until.IsZero() {
		body["paused_until"] = p.Until.UTC().Format(time.RFC3339Nano)
	}
	if p.Reason != "" {
		body["pause_reason"] = p.Reason
	}
	body["paused_at"] = p.Since.UTC().Format(time.RFC3339Nano)
}
