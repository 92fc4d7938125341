package httpapi

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"mime"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// Defaults of [Config].
const (
	DefaultMaxBodyBytes = 1 << 20 // 1 MiB
	DefaultRunsLimit    = 50
)

// RequestInfo describes one answered request, for [Config.OnRequest].
type RequestInfo struct {
	Method   string
	Route    string // the pattern matched: "/jobs/{id}", or "" when none
	Status   int
	Duration time.Duration
}

// Config tunes a [Server]. The zero value is ready to use.
type Config struct {
	// Token, when set, is required as "Authorization: Bearer <Token>" on
	// every endpoint but /health; it is compared in constant time. It must
	// not be blank nor start or end with white space. A
	// request without it gets 401. Default "": no authentication
	// (KSANA_API_TOKEN in cmd/ksana).
	Token string
	// CallbackAllow, when not empty, lists the host patterns a job's
	// http.url may point to: "api.example.com" (that host), "*.internal"
	// (any host under internal), "*" (any). Matching ignores case and the
	// port. A job whose host matches none is refused with 400. Default
	// nil: any host (KSANA_CALLBACK_ALLOW in cmd/ksana). run-now of a job
	// stored earlier with a host outside the list is refused too; give the
	// same list to the executor ([cron.HTTPExecutorConfig.AllowHosts]) so
	// that scheduled runs and redirects are held to it as well.
	CallbackAllow []string
	// DefaultMaxRetries is given to a job created without max_retries; an
	// explicit 0 on input always means no retries. Default 3
	// ([cron.DefaultMaxRetries]); a negative value means 0 (MAX_RETRIES in
	// cmd/ksana).
	DefaultMaxRetries int
	// MaxBodyBytes bounds a request body; a larger one gets 413.
	// Default 1 MiB.
	MaxBodyBytes int64
	// HealthNotes, when set, adds its fields to the answer of GET /health
	// ({"status": "ok"} and these), for conditions an operator must see
	// that do not make the service unhealthy, such as a store recovered
	// from a bad file. The answer stays 200. It must be fast and safe for
	// concurrent use. Default nil.
	HealthNotes func() map[string]string
	// Metrics, when set, serves GET /metrics (such as a Prometheus text
	// registry). Default nil: /metrics is 404.
	Metrics http.Handler
	// OnRequest, when set, is called after each request (request metrics).
	// It must be fast and safe for concurrent use. Default nil.
	OnRequest func(RequestInfo)
	// Logger receives a record per request (debug level; errors at error
	// level). Default nil: discard.
	Logger *slog.Logger
}

// Server is the REST management API of a [cron.Runner] as an http.Handler.
// See the package documentation for its endpoints.
type Server struct {
	r        *cron.Runner
	cfg      Config
	log      *slog.Logger
	tokenSum [32]byte
	allow    []string
}

// New returns the API of r. It checks cfg and names a bad field.
func New(r *cron.Runner, cfg Config) (*Server, error) {
	if r == nil {
		return nil, errors.New("httpapi: New: runner is nil")
	}
	if cfg.MaxBodyBytes < 0 {
		return nil, fmt.Errorf("httpapi: New: Config.MaxBodyBytes must be >= 0, got %d", cfg.MaxBodyBytes)
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if cfg.Token != "" && strings.TrimSpace(cfg.Token) != cfg.Token {
		return nil, errors.New("httpapi: New: Config.Token must not be blank nor start or end with white space: no client could send it")
	}
	if cfg.DefaultMaxRetries == 0 {
		cfg.DefaultMaxRetries = cron.DefaultMaxRetries
	} else if cfg.DefaultMaxRetries < 0 {
		cfg.DefaultMaxRetries = 0
	}
	s := &Server{r: r, cfg: cfg, log: cfg.Logger}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if cfg.Token != "" {
		s.tokenSum = sha256.Sum256([]byte(cfg.Token))
	}
	for _, p := range cfg.CallbackAllow {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		if err := cron.CheckHostPattern(p); err != nil {
			return nil, fmt.Errorf("httpapi: New: Config.CallbackAllow: %w", err)
		}
		s.allow = append(s.allow, p)
	}
	return s, nil
}

// ParseAllowList splits a comma-separated list of host patterns (the form
// of KSANA_CALLBACK_ALLOW) and checks each; see [cron.HostAllowList].
func ParseAllowList(s string) ([]string, error) {
	return cron.ParseHostAllowList(s)
}

// HostAllowed reports whether host (no port) matches one of the patterns
// (as [Config.CallbackAllow]); an empty list allows every host. See
// [cron.HostAllowList].
func HostAllowed(patterns []string, host string) bool {
	return cron.HostAllowList(patterns).Allows(host)
}

// route is a matched endpoint.
type route struct {
	pattern string
	id      string
	allow   string // the methods it accepts, for 405
}

// match routes an escaped path (req.URL.EscapedPath): the id segment is
// unescaped alone, so that a job whose id holds a '/' (stored before ids
// were checked) is still reached at /jobs/a%2Fb, and an escaped '/' never
// reaches an action.
func match(path string) (route, bool) {
	switch path {
	case "/health":
		return route{pattern: "/health", allow: "GET, HEAD"}, true
	case "/metrics":
		return route{pattern: "/metrics", allow: "GET, HEAD"}, true
	case "/openapi.json":
		return route{pattern: "/openapi.json", allow: "GET, HEAD"}, true
	case "/jobs":
		return route{pattern: "/jobs", allow: "GET, POST"}, true
	}
	rest, ok := strings.CutPrefix(path, "/jobs/")
	if !ok || rest == "" {
		return route{}, false
	}
	id, action, hasAction := strings.Cut(rest, "/")
	id, err := url.PathUnescape(id)
	if err != nil || id == "" {
		return route{}, false
	}
	if !hasAction {
		return route{pattern: "/jobs/{id}", id: id, allow: "GET, PATCH, DELETE"}, true
	}
	switch action {
	case "run-now", "pause", "resume":
		return route{pattern: "/jobs/{id}/" + action, id: id, allow: "POST"}, true
	case "runs":
		return route{pattern: "/jobs/{id}/runs", id: id, allow: "GET, HEAD"}, true
	}
	return route{}, false
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// ServeHTTP answers one API request.
func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	sw := &statusWriter{ResponseWriter: w}
	rt, ok := match(req.URL.EscapedPath())
	s.serve(sw, req, rt, ok)
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	d := time.Since(start)
	s.log.Debug("httpapi: request", "method", req.Method, "path", req.URL.Path, "status", sw.status, "latency_ms", d.Milliseconds())
	if s.cfg.OnRequest != nil {
		s.cfg.OnRequest(RequestInfo{Method: req.Method, Route: rt.pattern, Status: sw.status, Duration: d})
	}
}

func (s *Server) serve(w http.ResponseWriter, req *http.Request, rt route, ok bool) {
	if ok && rt.pattern != "/health" && rt.pattern != "/openapi.json" && s.cfg.Token != "" && !s.authorized(req) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ksana"`)
		writeError(w, &RequestError{Status: http.StatusUnauthorized, Msg: "missing or wrong bearer token (Authorization: Bearer <token>)"})
		return
	}
	if !ok {
		writeError(w, &RequestError{Status: http.StatusNotFound, Msg: "no such endpoint: " + req.URL.Path})
		return
	}
	if !allowed(rt.allow, req.Method) {
		w.Header().Set("Allow", rt.allow)
		writeError(w, &RequestError{Status: http.StatusMethodNotAllowed, Msg: fmt.Sprintf("method %s not allowed on %s; allowed: %s", req.Method, rt.pattern, rt.allow)})
		return
	}
	ctx := req.Context()
	switch rt.pattern {
	case "/health":
		body := map[string]string{"status": "ok"}
		if s.cfg.HealthNotes != nil {
			for k, v := range s.cfg.HealthNotes() {
				if k != "status" {
					body[k] = v
				}
			}
		}
		writeJSON(w, http.StatusOK, body)
	case "/openapi.json":
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(openAPI)))
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(openAPI)
	case "/metrics":
		if s.cfg.Metrics == nil {
			writeError(w, &RequestError{Status: http.StatusNotFound, Msg: "metrics are not enabled"})
			return
		}
		s.cfg.Metrics.ServeHTTP(w, req)
	case "/jobs":
		if req.Method == http.MethodGet {
			s.list(w, req)
			return
		}
		s.create(ctx, w, req)
	case "/jobs/{id}":
		switch req.Method {
		case http.MethodGet:
			j, err := s.r.Get(rt.id)
			if err != nil {
				s.fail(w, err, rt.id)
				return
			}
			writeJSON(w, http.StatusOK, j)
		case http.MethodPatch:
			s.patch(ctx, w, req, rt.id)
		case http.MethodDelete:
			err := s.r.Remove(ctx, rt.id)
			if err != nil {
				s.fail(w, err, rt.id)
				return
			}
			w.WriteHeader(http.StatusNoContent)
		}
	case "/jobs/{id}/run-now":
		if !s.emptyBody(w, req) {
			return
		}
		if len(s.allow) > 0 {
			// A job stored before the allow-list was set may point
			// elsewhere: its run would only fail.
			j, err := s.r.Get(rt.id)
			if err != nil {
				s.fail(w, err, rt.id)
				return
			}
			if rerr := s.checkCallback(&j); rerr != nil {
				writeError(w, rerr)
				return
			}
		}
		runID, err := s.r.RunNow(ctx, rt.id)
		if err != nil {
			s.fail(w, err, rt.id)
			return
		}
		writeJSON(w, http.StatusAccepted, map[string]string{"run_id": runID, "job_id": rt.id})
	case "/jobs/{id}/pause", "/jobs/{id}/resume":
		if !s.emptyBody(w, req) {
			return
		}
		var j cron.Job
		var err error
		if strings.HasSuffix(rt.pattern, "pause") {
			j, err = s.r.Pause(ctx, rt.id)
		} else {
			j, err = s.r.Resume(ctx, rt.id)
		}
		if err != nil {
			s.fail(w, err, rt.id)
			return
		}
		writeJSON(w, http.StatusOK, j)
	case "/jobs/{id}/runs":
		limit := DefaultRunsLimit
		if v := req.URL.Query().Get("limit"); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				writeError(w, badField("limit", "must be a positive integer, got %q", v))
				return
			}
			limit = n
		}
		runs, err := s.r.Runs(ctx, rt.id, limit)
		if err != nil {
			s.fail(w, err, rt.id)
			return
		}
		if runs == nil {
			runs = []cron.Run{}
		}
		writeJSON(w, http.StatusOK, runs)
	}
}

func allowed(list, method string) bool {
	for _, m := range strings.Split(list, ", ") {
		if m == method {
			return true
		}
	}
	return false
}

func (s *Server) authorized(req *http.Request) bool {
	h := req.Header.Get("Authorization")
	tok, ok := strings.CutPrefix(h, "Bearer ")
	if !ok {
		return false
	}
	sum := sha256.Sum256([]byte(strings.TrimSpace(tok)))
	return subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1
}

// readBody reads a JSON request body, enforcing the size limit and the
// content type.
func (s *Server) readBody(w http.ResponseWriter, req *http.Request) ([]byte, *RequestError) {
	if ct := req.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, &RequestError{Status: http.StatusUnsupportedMediaType,
				Msg: fmt.Sprintf("Content-Type %q is not JSON: send application/json", ct)}
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, req.Body, s.cfg.MaxBodyBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, &RequestError{Status: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf("body larger than %d bytes", s.cfg.MaxBodyBytes)}
		}
		return nil, &RequestError{Status: http.StatusBadRequest, Msg: "reading body: " + err.Error()}
	}
	return body, nil
}

// emptyBody accepts an action request with no body (or an empty JSON object).
func (s *Server) emptyBody(w http.ResponseWriter, req *http.Request) bool {
	body, rerr := s.readBody(w, req)
	if rerr != nil {
		writeError(w, rerr)
		return false
	}
	if b := strings.TrimSpace(string(body)); b != "" && b != "{}" {
		writeError(w, &RequestError{Status: http.StatusBadRequest, Msg: "this action takes no body"})
		return false
	}
	return true
}

func (s *Server) checkCallback(j *cron.Job) *RequestError {
	if len(s.allow) == 0 {
		return nil
	}
	u, err := url.Parse(j.HTTP.URL)
	if err != nil || u.Hostname() == "" {
		return nil // validation names the field
	}
	if !HostAllowed(s.allow, u.Hostname()) {
		return badField("http.url", "host %q is not in the callback allow-list (%s)", u.Hostname(), strings.Join(s.allow, ","))
	}
	return nil
}

func (s *Server) create(ctx context.Context, w http.ResponseWriter, req *http.Request) {
	body, rerr := s.readBody(w, req)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	p, rerr := decodeJobBody(body)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	// Only the JSON shape can tell a field left out from a false or a 0,
	// so the defaults of enabled and max_retries are given here; every
	// other default and every rule are cron.Prepare's, which the runner
	// applies.
	j := cron.Job{ID: p.id, Enabled: true, MaxRetries: s.cfg.DefaultMaxRetries}
	p.apply(&j)
	if rerr := s.checkCallback(&j); rerr != nil {
		writeError(w, rerr)
		return
	}
	created, err := s.r.Add(ctx, j)
	if err != nil {
		s.fail(w, err, j.ID)
		return
	}
	w.Header().Set("Location", "/jobs/"+url.PathEscape(created.ID))
	writeJSON(w, http.StatusCreated, created)
}

func (s *Server) patch(ctx context.Context, w http.ResponseWriter, req *http.Request, id string) {
	body, rerr := s.readBody(w, req)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	patch, rerr := decodeMergePatch(body, id)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	// The runner applies the change under the job's lock: concurrent
	// PATCHes of one job each see the other's result.
	updated, err := s.r.Update(ctx, id, func(j *cron.Job) error {
		merged, rerr := mergeJob(j, patch)
		if rerr != nil {
			return rerr
		}
		p, rerr := decodeJobBody(merged)
		if rerr != nil {
			return rerr
		}
		// The merged document is read as a create body is: a field the
		// patch removed (null) takes its default.
		nj := cron.Job{ID: id, Enabled: true, MaxRetries: s.cfg.DefaultMaxRetries}
		p.apply(&nj)
		if rerr := s.checkCallback(&nj); rerr != nil {
			return rerr
		}
		*j = nj
		return nil
	})
	if err != nil {
		s.fail(w, err, id)
		return
	}
	writeJSON(w, http.StatusOK, updated)
}

// openAPI is the OpenAPI 3 document of the API, served at /openapi.json.
// TestOpenAPI keeps it true to the handler.
//
//go:embed openapi.json
var openAPI []byte

// listParams are the query parameters of GET /jobs.
var listParams = []string{"limit", "after", "enabled", "kind", "last_status", "name"}

// MaxListLimit is the largest page GET /jobs?limit=N serves.
const MaxListLimit = 1000

// list answers GET /jobs: every job, or a page of them (limit, after), of
// those that pass the filters (enabled, kind, last_status, name).
func (s *Server) list(w http.ResponseWriter, req *http.Request) {
	q := req.URL.Query()
	var (
		limit   int
		after   string
		filters []func(*cron.Job) bool
	)
	for _, key := range slices.Sorted(maps.Keys(q)) {
		vals := q[key]
		if len(vals) > 1 {
			writeError(w, badField(key, "is given %d times; give it once", len(vals)))
			return
		}
		v := vals[0]
		switch key {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxListLimit {
				writeError(w, badField("limit", "must be an integer from 1 to %d, got %q", MaxListLimit, v))
				return
			}
			limit = n
		case "after":
			if v == "" {
				writeError(w, badField("after", "must be the id of the last job of the previous page"))
				return
			}
			after = v
		case "enabled":
			on, err := strconv.ParseBool(v)
			if err != nil || (v != "true" && v != "false") {
				writeError(w, badField("enabled", "must be true or false, got %q", v))
				return
			}
			filters = append(filters, func(j *cron.Job) bool { return j.Enabled == on })
		case "kind":
			if v != cron.KindOnce && v != cron.KindEvery && v != cron.KindCron {
				writeError(w, badField("kind", "must be once, every or cron, got %q", v))
				return
			}
			filters = append(filters, func(j *cron.Job) bool { return j.Schedule.Kind == v })
		case "last_status":
			switch st := cron.Status(v); st {
			case "", cron.StatusSuccess, cron.StatusFailed, cron.StatusTimeout, cron.StatusSkipped, cron.StatusPaused, cron.StatusMissed:
				filters = append(filters, func(j *cron.Job) bool { return j.LastStatus == st })
			default:
				writeError(w, badField("last_status", "must be success, failed, timeout, skipped, paused, missed or empty (never run), got %q", v))
				return
			}
		case "name":
			filters = append(filters, func(j *cron.Job) bool { return j.Name == v })
		default:
			writeError(w, badField(key, "unknown query parameter; GET /jobs takes %s", strings.Join(listParams, ", ")))
			return
		}
	}
	keep := func(j *cron.Job) bool {
		for _, f := range filters {
			if !f(j) {
				return false
			}
		}
		return true
	}
	jobs, more, err := s.r.Page(after, limit, keep)
	if errors.Is(err, cron.ErrNotFound) {
		writeError(w, badField("after", "no job has the id %q (it was removed since the previous page): start again without after", after))
		return
	}
	if err != nil {
		s.fail(w, err, "")
		return
	}
	if jobs == nil {
		jobs = []cron.Job{}
	}
	if more && len(jobs) > 0 {
		next := url.Values{}
		for k, v := range q {
			next[k] = v
		}
		next.Set("after", jobs[len(jobs)-1].ID)
		// A reference relative to the request, so that it holds where the
		// API is mounted.
		w.Header().Set("Link", fmt.Sprintf("<?%s>; rel=\"next\"", next.Encode()))
	}
	writeJSON(w, http.StatusOK, jobs)
}

// fail answers with the error of a runner call.
func (s *Server) fail(w http.ResponseWriter, err error, id string) {
	var ve *cron.ValidationError
	var re *RequestError
	switch {
	case errors.As(err, &re):
		writeError(w, re)
	case errors.As(err, &ve):
		writeError(w, badField(ve.Field, "%s", ve.Reason))
	case errors.Is(err, cron.ErrNotFound):
		writeError(w, &RequestError{Status: http.StatusNotFound, Msg: fmt.Sprintf("job %q not found", id)})
	case errors.Is(err, cron.ErrExists):
		writeError(w, &RequestError{Status: http.StatusConflict, Field: "id", Msg: fmt.Sprintf("a job with id %q already exists", id)})
	case errors.Is(err, cron.ErrClosed):
		writeError(w, &RequestError{Status: http.StatusServiceUnavailable, Msg: "the service is shutting down"})
	case errors.Is(err, cron.ErrUnsupported):
		writeError(w, &RequestError{Status: http.StatusNotImplemented, Msg: "the store keeps no run history"})
	case errors.Is(err, cron.ErrUnavailable):
		// A shared store's database is down: the caller may try again.
		w.Header().Set("Retry-After", "2")
		writeError(w, &RequestError{Status: http.StatusServiceUnavailable, Msg: err.Error()})
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		writeError(w, &RequestError{Status: http.StatusServiceUnavailable, Msg: "request cancelled before the change was confirmed on disk"})
	default:
		s.log.Error("httpapi: request failed", "job_id", id, "error", err)
		writeError(w, &RequestError{Status: http.StatusInternalServerError, Msg: err.Error()})
	}
}

type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

func writeError(w http.ResponseWriter, e *RequestError) {
	writeJSON(w, e.Status, errorBody{Error: e.Msg, Field: e.Field})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b []byte
	var err error
	if j, ok := v.(cron.Job); ok {
		b, err = j.MarshalJSON() // spares json.Marshal's second pass over it
	} else {
		b, err = json.Marshal(v)
	}
	if err != nil {
		status = http.StatusInternalServerError
		b = []byte(`{"error":"encoding the response failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)+1))
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
