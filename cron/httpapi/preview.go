package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// DefaultPreview is how many run times GET /jobs/{id}/next and POST
// /schedules/preview list when not told ([cron.MaxPreview] at most).
const DefaultPreview = 10

// NextAnswer is the answer of GET /jobs/{id}/next.
type NextAnswer struct {
	JobID string `json:"job_id"`
	// Paused says the job is paused: it fires none of Next until resumed.
	Paused bool `json:"paused"`
	// Kind and TZ are the job's schedule kind and time zone (cron only).
	Kind string `json:"kind"`
	TZ   string `json:"tz,omitempty"`
	// Next are the run times, in UTC; empty when the schedule has ended
	// (a once job that has run).
	Next []time.Time `json:"next"`
}

// PreviewAnswer is the answer of POST /schedules/preview.
type PreviewAnswer struct {
	// Next are the run times, in UTC; empty for a once schedule whose
	// time has passed.
	Next []time.Time `json:"next"`
}

// parseN reads the query of GET /jobs/{id}/next: n, from 1 to
// [cron.MaxPreview] (default [DefaultPreview]); any other, repeated or bad
// parameter is a 400 naming it.
func parseN(q url.Values) (int, *RequestError) {
	n := DefaultPreview
	rerr := eachParam(q, func(key, v string) *RequestError {
		if key != "n" {
			return badField(key, "unknown query parameter; GET /jobs/{id}/next takes n")
		}
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 || k > cron.MaxPreview {
			return badField("n", "must be an integer from 1 to %d, got %q", cron.MaxPreview, v)
		}
		n = k
		return nil
	})
	if rerr != nil {
		return 0, rerr
	}
	return n, nil
}

func (s *Server) next(w http.ResponseWriter, req *http.Request, id string) {
	n, rerr := parseN(req.URL.Query())
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	times, j, err := s.r.Next(req.Context(), id, n)
	if err != nil {
		s.fail(w, err, id)
		return
	}
	writeJSON(w, http.StatusOK, NextAnswer{JobID: j.ID, Paused: j.Paused, Kind: j.Schedule.Kind, TZ: j.Schedule.TZ, Next: times})
}

// previewFields are the fields of a POST /schedules/preview body.
var previewFields = []string{"id", "n", "schedule"}

// previewBody is a decoded POST /schedules/preview body.
type previewBody struct {
	id       string
	n        int
	schedule cron.ScheduleSpec
	has      bool // schedule given
}

// decodePreview reads {"schedule": {...}, "n": 10, "id": "..."}: schedule
// is required, as in a job; n and id are optional. Unknown fields and
// values of the wrong type are errors naming the field.
func decodePreview(body []byte) (previewBody, *RequestError) {
	p := previewBody{n: DefaultPreview}
	body = bytes.TrimSpace(body)
	if len(body) == 0 {
		return p, &RequestError{Status: 400, Msg: "empty body: a JSON object with a schedule is required"}
	}
	var raw map[string]json.RawMessage
	d := json.NewDecoder(bytes.NewReader(body))
	if err := d.Decode(&raw); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) {
			return p, &RequestError{Status: 400, Msg: "body must be a JSON object"}
		}
		return p, &RequestError{Status: 400, Msg: "malformed JSON: " + err.Error()}
	}
	if raw == nil {
		return p, &RequestError{Status: 400, Msg: "body must be a JSON object"}
	}
	if _, err := d.Token(); err != io.EOF {
		return p, &RequestError{Status: 400, Msg: "malformed JSON: data after the object"}
	}
	for _, field := range slices.Sorted(maps.Keys(raw)) {
		v := raw[field]
		var rerr *RequestError
		switch field {
		case "schedule":
			rerr = decodeSchedule(v, &p.schedule)
			p.has = true
		case "id":
			rerr = decodeString(field, v, &p.id)
		case "n":
			if err := json.Unmarshal(v, &p.n); err != nil || string(v) == "null" || p.n < 1 || p.n > cron.MaxPreview {
				rerr = badField("n", "must be an integer from 1 to %d, got %s", cron.MaxPreview, short(v))
			}
		default:
			rerr = badField(field, "unknown field; the body takes %s", strings.Join(previewFields, ", "))
		}
		if rerr != nil {
			return p, rerr
		}
	}
	if !p.has {
		return p, badField("schedule", "is required")
	}
	return p, nil
}

func (s *Server) preview(w http.ResponseWriter, req *http.Request, _ string) {
	body, rerr := s.readBody(w, req)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	p, rerr := decodePreview(body)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	// A create refuses a once schedule whose time has passed: so does
	// its preview.
	j := cron.Job{Schedule: p.schedule}
	if rerr := checkRunAt(&j, time.Now()); rerr != nil {
		writeError(w, rerr)
		return
	}
	times, err := s.r.Preview(p.schedule, p.id, p.n)
	if err != nil {
		s.fail(w, err, "")
		return
	}
	writeJSON(w, http.StatusOK, PreviewAnswer{Next: times})
}
