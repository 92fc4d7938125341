package httpapi

import (
	"bytes"
	"context"
	"crypto/sha256"
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
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/internal/websec"
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
	// not be blank nor start or end with white space, and holds at least
	// [MinTokenLen] bytes. A
	// request without it gets 401. Default "": no authentication
	// (KSANA_API_TOKEN in cmd/ksana).
	Token string
	// Authenticator, when set, tells who holds the other tokens and their
	// [Role]: viewer (reads), operator (also run-now, pause, resume) or
	// admin (everything). A token it does not know (and that is not
	// Token) gets 401; a change the runner's [cron.Authorizer] refuses to
	// the token's identity, 403 with the role needed. Use a [TokenSet]
	// for a list of tokens. Default nil: Token alone
	// (KSANA_API_TOKENS_FILE in cmd/ksana).
	Authenticator Authenticator
	// AllowedHosts, when set and no token is required, lists the Host
	// headers the API answers ("localhost:7100", or "localhost" for any
	// port); a request to another gets 421. It keeps a page of another
	// site that a browser resolves to this address (DNS rebinding) from
	// reading or writing. Default nil: any Host. cmd/ksana sets it to
	// the loopback names when it listens on loopback without a token.
	AllowedHosts []string
	// CallbackAllow, when not empty, lists the patterns a job's http.url
	// and alert.url may point to ([cron.HostAllowList]): host names
	// ("api.example.com", "*.internal", "*" for any name), IP addresses
	// ("10.1.2.3") and CIDR blocks ("10.0.0.0/8"). Name patterns match
	// names only: an IP literal passes only where an address or CIDR
	// pattern names it, and an IPv6 zone never does. Matching ignores
	// case and the port. A job whose host matches none is refused with
	// 400. Default
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
	// MaxBodyBytes bounds a request body; a larger one gets 413 (the
	// handler reads on, up to 16 MiB, so that a client still sending gets
	// the answer rather than a connection reset). Default 1 MiB.
	MaxBodyBytes int64
	// HealthNotes, when set, adds its fields to the answer of GET /health
	// ({"status": "ok"} and these), for conditions an operator must see
	// that do not make the service unhealthy, such as a store recovered
	// from a bad file, or counts (give numbers as numbers: they are
	// encoded as JSON). The answer stays 200. It must be fast and safe for
	// concurrent use. Default nil.
	HealthNotes func() map[string]any
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
	mux      *http.ServeMux
	guard    *websec.Guard
	xorigin  *http.CrossOriginProtection
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
	if cfg.Token != "" && len(cfg.Token) < MinTokenLen {
		return nil, fmt.Errorf("httpapi: New: Config.Token must be at least %d bytes (MinTokenLen), got %d", MinTokenLen, len(cfg.Token))
	}
	if cfg.DefaultMaxRetries == 0 {
		cfg.DefaultMaxRetries = cron.DefaultMaxRetries
	} else if cfg.DefaultMaxRetries < 0 {
		cfg.DefaultMaxRetries = 0
	}
	s := &Server{r: r, cfg: cfg, log: cfg.Logger, xorigin: http.NewCrossOriginProtection()}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	s.guard = websec.NewGuard("httpapi", s.log)
	if cfg.Token != "" {
		s.tokenSum = sha256.Sum256([]byte(cfg.Token))
	}
	s.mux = s.newMux()
	for _, p := range cfg.CallbackAllow {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		l, err := cron.ParseHostAllowList(p)
		if err == nil && len(l) != 1 {
			err = fmt.Errorf("host pattern %q: want one pattern, not a list", p)
		}
		if err != nil {
			return nil, fmt.Errorf("httpapi: New: Config.CallbackAllow: %w", err)
		}
		s.allow = append(s.allow, l[0])
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

// routes are the endpoints: a path pattern of http.ServeMux, the methods
// it takes (for 405 and its Allow header) and a handler per method. A GET
// handler answers HEAD only where allow lists HEAD. Only /health is served
// without the token.
func (s *Server) routes() []route {
	return []route{
		{"/health", "GET, HEAD", true, map[string]handler{"GET": s.health}},
		{"/metrics", "GET, HEAD", false, map[string]handler{"GET": s.metrics}},
		{"/openapi.json", "GET, HEAD", false, map[string]handler{"GET": serveOpenAPI}},
		{"/jobs", "GET, POST", false, map[string]handler{"GET": s.list, "POST": s.create}},
		{"/jobs/{id}", "GET, PATCH, DELETE", false, map[string]handler{"GET": s.get, "PATCH": s.patch, "DELETE": s.remove}},
		{"/jobs/{id}/run-now", "POST", false, map[string]handler{"POST": s.runNow}},
		{"/jobs/{id}/pause", "POST", false, map[string]handler{"POST": s.pause}},
		{"/jobs/{id}/resume", "POST", false, map[string]handler{"POST": s.resume}},
		{"/jobs/{id}/runs", "GET, HEAD", false, map[string]handler{"GET": s.runs}},
		{"/jobs/{id}/next", "GET, HEAD", false, map[string]handler{"GET": s.next}},
		{"/runs", "GET, HEAD", false, map[string]handler{"GET": s.history}},
		{"/runs/{id}", "GET, HEAD", false, map[string]handler{"GET": s.run}},
		{"/schedules/preview", "POST", false, map[string]handler{"POST": s.preview}},
		{"/audit", "GET, HEAD", false, map[string]handler{"GET": s.audit}},
		{"/alerts", "GET, HEAD", false, map[string]handler{"GET": s.alerts}},
		{"/pause", "POST", false, map[string]handler{"POST": s.pauseAll}},
		{"/resume", "POST", false, map[string]handler{"POST": s.resumeAll}},
	}
}

type route struct {
	path     string
	allow    string // the methods it accepts, for 405
	open     bool   // served without the token
	handlers map[string]handler
}

// handler answers one endpoint; id is the {id} of the path ("" for none),
// unescaped: a job whose id holds a '/' (stored before ids were checked)
// is reached at /jobs/a%2Fb, and an escaped '/' never reaches an action.
type handler func(w http.ResponseWriter, req *http.Request, id string)

// newMux routes each endpoint's methods to its handlers, its other methods
// to a 405 naming the allowed ones, and every other path to a 404.
func (s *Server) newMux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range s.routes() {
		for method, h := range rt.handlers {
			mux.Handle(method+" "+rt.path, s.endpoint(rt, h))
		}
		mux.Handle(rt.path, s.endpoint(rt, nil))
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		writeError(w, &RequestError{Status: http.StatusNotFound, Msg: "no such endpoint: " + req.URL.Path})
	})
	return mux
}

// endpoint wraps the handler h of route rt (nil: a method rt does not
// take) with the checks every endpoint makes: the token and its role, then
// the method; and it records writes in the audit log.
func (s *Server) endpoint(rt route, h handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if sw, ok := w.(*statusWriter); ok {
			sw.route = rt.path
		}
		if !s.checkHost(w, req) {
			return
		}
		who, ok := s.checkAccess(w, req, rt)
		if !ok {
			return
		}
		if h == nil || !allowed(rt.allow, req.Method) {
			w.Header().Set("Allow", rt.allow)
			writeError(w, &RequestError{Status: http.StatusMethodNotAllowed, Msg: fmt.Sprintf("method %s not allowed on %s; allowed: %s", req.Method, rt.path, rt.allow)})
			return
		}
		if !s.checkDriveBy(w, req) {
			return
		}
		// The runner authorizes and audits every change for this actor;
		// asking first refuses a request before its body is read.
		ctx := cron.WithActor(req.Context(), who)
		req = req.WithContext(ctx)
		id := req.PathValue("id")
		if act := actionOf(req.Method, rt.path); act != "" {
			if err := s.r.Authorize(ctx, act, id); err != nil {
				s.fail(w, err, id)
				return
			}
		}
		h(w, req, id)
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
	route  string // the path pattern matched, "" for none
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
	if p := req.URL.EscapedPath(); cleanPath(p) != p {
		// http.ServeMux would redirect to the cleaned path: no endpoint
		// has a path with empty, "." or ".." segments.
		writeError(sw, &RequestError{Status: http.StatusNotFound, Msg: "no such endpoint: " + req.URL.Path})
	} else {
		s.mux.ServeHTTP(sw, req)
	}
	if sw.status == 0 {
		sw.status = http.StatusOK
	}
	d := time.Since(start)
	s.log.Debug("httpapi: request", "method", req.Method, "path", req.URL.Path, "status", sw.status, "latency_ms", d.Milliseconds())
	if s.cfg.OnRequest != nil {
		s.cfg.OnRequest(RequestInfo{Method: req.Method, Route: sw.route, Status: sw.status, Duration: d})
	}
}

// cleanPath is p as http.ServeMux cleans it (a trailing slash kept).
func cleanPath(p string) string {
	if p == "" {
		return "/"
	}
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}

func (s *Server) health(w http.ResponseWriter, _ *http.Request, _ string) {
	body := map[string]any{"status": "ok"}
	s.addPause(body)
	if s.cfg.HealthNotes != nil {
		for k, v := range s.cfg.HealthNotes() {
			if k != "status" {
				body[k] = v
			}
		}
	}
	writeJSON(w, http.StatusOK, body)
}

func serveOpenAPI(w http.ResponseWriter, _ *http.Request, _ string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(openAPI)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(openAPI)
}

func (s *Server) metrics(w http.ResponseWriter, req *http.Request, _ string) {
	if s.cfg.Metrics == nil {
		writeError(w, &RequestError{Status: http.StatusNotFound, Msg: "metrics are not enabled"})
		return
	}
	s.cfg.Metrics.ServeHTTP(w, req)
}

func (s *Server) get(w http.ResponseWriter, req *http.Request, id string) {
	j, err := s.r.Get(req.Context(), id)
	if err != nil {
		s.fail(w, err, id)
		return
	}
	writeJSON(w, http.StatusOK, shown(req, j))
}

// roleOf is the role of the caller of req.
func roleOf(req *http.Request) Role { return cron.ActorFrom(req.Context()).Role }

// shown returns j as req may read it, by the secrets rule of
// [cron.Job.RedactedFor] for the caller's role.
func shown(req *http.Request, j cron.Job) cron.Job { return j.RedactedFor(roleOf(req)) }

// shownRuns returns runs as req may read them ([cron.Run.RedactedFor]).
func shownRuns(req *http.Request, runs []cron.Run) []cron.Run {
	role := roleOf(req)
	for i := range runs {
		runs[i] = runs[i].RedactedFor(role)
	}
	return runs
}

func (s *Server) remove(w http.ResponseWriter, req *http.Request, id string) {
	if err := s.r.Remove(req.Context(), id); err != nil {
		s.fail(w, err, id)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) resume(w http.ResponseWriter, req *http.Request, id string) {
	s.setEnabled(w, req, id, s.r.Resume)
}

func (s *Server) setEnabled(w http.ResponseWriter, req *http.Request, id string, set func(context.Context, string) (cron.Job, error)) {
	if !s.emptyBody(w, req) {
		return
	}
	j, err := set(req.Context(), id)
	if err != nil {
		s.fail(w, err, id)
		return
	}
	writeJSON(w, http.StatusOK, shown(req, j))
}

func (s *Server) runs(w http.ResponseWriter, req *http.Request, id string) {
	q, rerr := parseRunsQuery(req.URL.Query())
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	runs, err := s.r.Runs(req.Context(), id, q.fetch())
	if err != nil {
		s.fail(w, err, id)
		return
	}
	writeJSON(w, http.StatusOK, shownRuns(req, q.filter(runs)))
}

func allowed(list, method string) bool {
	for _, m := range strings.Split(list, ", ") {
		if m == method {
			return true
		}
	}
	return false
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
			// Read on, up to a bound, before answering: a server that
			// closes with the body unread resets the connection, and a
			// client still sending it loses the 413 with it.
			_, _ = io.CopyN(io.Discard, req.Body, drainBytes)
			return nil, &RequestError{Status: http.StatusRequestEntityTooLarge, Msg: fmt.Sprintf("body larger than %d bytes", s.cfg.MaxBodyBytes)}
		}
		return nil, &RequestError{Status: http.StatusBadRequest, Msg: "reading body: " + err.Error()}
	}
	return body, nil
}

// drainBytes is how much of a body above MaxBodyBytes is read and
// discarded so that its sender gets the 413; a larger one may end in a
// connection reset.
const drainBytes = 16 << 20

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

// PastRunAtTolerance is how far in the past a once job's run_at may lie on
// POST /jobs, or on a PATCH that sends a schedule, beyond the job's
// misfire_grace: such a job would be recorded as missed and never run, so
// the API refuses it with 400 naming schedule.run_at.
const PastRunAtTolerance = time.Second

// checkRunAt refuses a once schedule whose run_at has passed.
func checkRunAt(j *cron.Job, now time.Time) *RequestError {
	sc := j.Schedule
	if sc.Kind != cron.KindOnce || sc.RunAt.IsZero() {
		return nil
	}
	late := now.Sub(sc.RunAt)
	if late <= PastRunAtTolerance || late < j.MisfireGrace.D() {
		return nil
	}
	ago := late.Round(time.Second).String()
	if late >= 48*time.Hour {
		ago = fmt.Sprintf("%d days", late/(24*time.Hour))
	}
	return badField("schedule.run_at", "is %s in the past (now is %s): a once job would be recorded as missed and never run; give a future time, or a misfire_grace longer than that",
		ago, now.UTC().Format(time.RFC3339))
}

func (s *Server) checkCallback(j *cron.Job) *RequestError {
	if len(s.allow) == 0 {
		return nil
	}
	// An unparsable URL is left to validation, which names the field.
	if u, err := url.Parse(j.HTTP.URL); err == nil && u.Hostname() != "" && !HostAllowed(s.allow, u.Hostname()) {
		return badField("http.url", "host %q is not in the callback allow-list (%s)", u.Hostname(), strings.Join(s.allow, ","))
	}
	return s.checkAlert(j)
}

// checkAlert refuses a job whose alert webhook is outside the callback
// allow-list: the service calls it as it calls a callback.
func (s *Server) checkAlert(j *cron.Job) *RequestError {
	if len(s.allow) == 0 || j.Alert == nil || j.Alert.URL == "" {
		return nil
	}
	u, err := url.Parse(j.Alert.URL)
	if err != nil || u.Hostname() == "" {
		return nil // validation names the field
	}
	if !HostAllowed(s.allow, u.Hostname()) {
		return badField("alert.url", "host %q is not in the callback allow-list (%s)", u.Hostname(), strings.Join(s.allow, ","))
	}
	return nil
}

func (s *Server) create(w http.ResponseWriter, req *http.Request, _ string) {
	body, rerr := s.readBody(w, req)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	created, err := s.CreateJob(req.Context(), body)
	if err != nil {
		var named struct {
			ID string `json:"id"`
		}
		_ = json.Unmarshal(body, &named) // only to name the job in the error
		s.fail(w, err, named.ID)
		return
	}
	w.Header().Set("Location", "/jobs/"+url.PathEscape(created.ID))
	writeJSON(w, http.StatusCreated, shown(req, created))
}

// CreateJob creates the job that body (the JSON of POST /jobs) describes,
// for the actor of ctx ([cron.WithActor]), as POST /jobs does: the same
// decoding, defaults, allow-list and checks, then [cron.Runner.Add],
// which authorizes and audits it. The console creates its jobs through
// it. An error is a *[RequestError] or the runner's; [Problem] turns
// either into the API's answer.
func (s *Server) CreateJob(ctx context.Context, body []byte) (cron.Job, error) {
	p, rerr := decodeJobBody(body)
	if rerr != nil {
		return cron.Job{}, rerr
	}
	// Only the JSON shape can tell a field left out from a 0, so the
	// default of max_retries is given here (a job left without enabled
	// runs: Paused's zero value); every other default and every rule are
	// cron.Job.Prepare's, which the runner applies.
	j := cron.Job{ID: p.id, MaxRetries: s.cfg.DefaultMaxRetries}
	p.apply(&j)
	if rerr := s.checkCallback(&j); rerr != nil {
		return cron.Job{}, rerr
	}
	if rerr := checkRunAt(&j, time.Now()); rerr != nil {
		return cron.Job{}, rerr
	}
	return s.r.Add(ctx, j)
}

func (s *Server) patch(w http.ResponseWriter, req *http.Request, id string) {
	body, rerr := s.readBody(w, req)
	if rerr != nil {
		writeError(w, rerr)
		return
	}
	updated, err := s.PatchJob(req.Context(), id, body)
	if err != nil {
		s.fail(w, err, id)
		return
	}
	writeJSON(w, http.StatusOK, shown(req, updated))
}

// PatchJob applies body (a JSON merge patch, as PATCH /jobs/{id} takes)
// to job id for the actor of ctx, as PATCH /jobs/{id} does, through
// [cron.Runner.Update]. Errors as [Server.CreateJob]'s.
func (s *Server) PatchJob(ctx context.Context, id string, body []byte) (cron.Job, error) {
	patch, rerr := decodeMergePatch(body, id)
	if rerr != nil {
		return cron.Job{}, rerr
	}
	// The runner applies the change under the job's lock: concurrent
	// PATCHes of one job each see the other's result.
	return s.r.Update(ctx, id, func(j *cron.Job) error {
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
		nj := cron.Job{ID: id, MaxRetries: s.cfg.DefaultMaxRetries}
		p.apply(&nj)
		if rerr := s.checkCallback(&nj); rerr != nil {
			return rerr
		}
		if _, ok := patch["schedule"]; ok {
			if rerr := checkRunAt(&nj, time.Now()); rerr != nil {
				return rerr
			}
		}
		// paused_until and paused_at are no fields of a PATCH: a job
		// that stays paused keeps them.
		nj.PausedUntil, nj.PausedAt = j.PausedUntil, j.PausedAt
		*j = nj
		return nil
	})
}

// RunNow queues a run of job id for the actor of ctx with the options
// body (the JSON of POST /jobs/{id}/run-now: body, headers, args, force;
// empty for none) and an idempotency key ("" for none), as that endpoint
// does. Errors as [Server.CreateJob]'s.
func (s *Server) RunNow(ctx context.Context, id string, body []byte, key string) (cron.RunTicket, error) {
	opts, rerr := decodeRunNow(body)
	if rerr != nil {
		return cron.RunTicket{}, rerr
	}
	opts.IdempotencyKey = key
	if len(s.allow) > 0 {
		// A job stored before the allow-list was set may point
		// elsewhere: its run would only fail.
		j, err := s.r.Get(ctx, id)
		if err != nil {
			return cron.RunTicket{}, err
		}
		if rerr := s.checkCallback(&j); rerr != nil {
			return cron.RunTicket{}, rerr
		}
	}
	return s.r.RunNow(ctx, id, opts)
}

// ParseRunQuery reads the query of GET /runs (job, status, since, until,
// instance, limit, after) into a [cron.RunQuery]; a bad parameter is a
// *[RequestError] naming it.
func ParseRunQuery(q url.Values) (cron.RunQuery, error) {
	rq, rerr := parseHistoryQuery(q)
	if rerr != nil {
		return rq, rerr
	}
	return rq, nil
}

// openAPI is the OpenAPI 3 document of the API, served at /openapi.json.
// TestOpenAPI keeps it true to the handler.
//
//go:embed openapi.json
var openAPI []byte

// runsParams are the query parameters of GET /jobs/{id}/runs.
var runsParams = []string{"limit", "status"}

// runsQuery is a parsed GET /jobs/{id}/runs query.
type runsQuery struct {
	limit  int
	status cron.Status // "": any
}

// parseRunsQuery reads limit (default [DefaultRunsLimit]) and status; an
// unknown, repeated or bad parameter is a 400 naming it.
func parseRunsQuery(q url.Values) (runsQuery, *RequestError) {
	rq := runsQuery{limit: DefaultRunsLimit}
	rerr := eachParam(q, func(key, v string) *RequestError {
		switch key {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return badField("limit", "must be a positive integer, got %q", v)
			}
			rq.limit = n
		case "status":
			switch st := cron.Status(v); st {
			case cron.StatusSuccess, cron.StatusFailed, cron.StatusTimeout, cron.StatusSkipped, cron.StatusMissed:
				rq.status = st
			default:
				return badField("status", "must be success, failed, timeout, skipped or missed, got %q", v)
			}
		default:
			return badField(key, "unknown query parameter; GET /jobs/{id}/runs takes %s", strings.Join(runsParams, ", "))
		}
		return nil
	})
	return rq, rerr
}

// fetch is the limit to ask the store for: with a status filter, every
// run kept (a store keeps a bounded history per job), filtered here.
func (rq runsQuery) fetch() int {
	if rq.status != "" {
		return 0
	}
	return rq.limit
}

// filter keeps the runs of the asked status, up to the limit, never nil.
func (rq runsQuery) filter(runs []cron.Run) []cron.Run {
	out := make([]cron.Run, 0, min(len(runs), rq.limit))
	for _, r := range runs {
		if len(out) == rq.limit {
			break
		}
		if rq.status == "" || r.Status == rq.status {
			out = append(out, r)
		}
	}
	return out
}

// eachParam calls visit with each query parameter of q and its value, in
// the order of their names, until one returns an error; a parameter given
// more than once is a 400 naming it, but for those named in repeatable,
// which visit sees once per value.
func eachParam(q url.Values, visit func(key, v string) *RequestError, repeatable ...string) *RequestError {
	for _, key := range slices.Sorted(maps.Keys(q)) {
		vals := q[key]
		if len(vals) > 1 && !slices.Contains(repeatable, key) {
			return badField(key, "is given %d times; give it once", len(vals))
		}
		for _, v := range vals {
			if rerr := visit(key, v); rerr != nil {
				return rerr
			}
		}
	}
	return nil
}

// setNext sets the Link header of a page that more follow: the request's
// query q with after replaced, as a reference relative to the request, so
// that it holds wherever the API is mounted.
func setNext(w http.ResponseWriter, q url.Values, after string) {
	next := url.Values{}
	for k, v := range q {
		next[k] = v
	}
	next.Set("after", after)
	w.Header().Set("Link", "<?"+next.Encode()+">; rel=\"next\"")
}

// listParams are the query parameters of GET /jobs.
var listParams = []string{"limit", "after", "enabled", "kind", "last_status", "name", "type"}

// MaxListLimit is the largest page GET /jobs?limit=N serves.
const MaxListLimit = 1000

// list answers GET /jobs: every job, or a page of them (limit, after), of
// those that pass the filters (enabled, kind, last_status, name).
func (s *Server) list(w http.ResponseWriter, req *http.Request, _ string) {
	q := req.URL.Query()
	var (
		limit   int
		after   string
		filters []func(*cron.Job) bool
	)
	if rerr := eachParam(q, func(key, v string) *RequestError {
		switch key {
		case "limit":
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 || n > MaxListLimit {
				return badField("limit", "must be an integer from 1 to %d, got %q", MaxListLimit, v)
			}
			limit = n
		case "after":
			if v == "" {
				return badField("after", "must be the id of the last job of the previous page")
			}
			after = v
		case "enabled":
			on, err := strconv.ParseBool(v)
			if err != nil || (v != "true" && v != "false") {
				return badField("enabled", "must be true or false, got %q", v)
			}
			filters = append(filters, func(j *cron.Job) bool { return j.Paused != on })
		case "kind":
			if v != cron.KindOnce && v != cron.KindEvery && v != cron.KindCron {
				return badField("kind", "must be once, every or cron, got %q", v)
			}
			filters = append(filters, func(j *cron.Job) bool { return j.Schedule.Kind == v })
		case "last_status":
			switch st := cron.Status(v); st {
			case "", cron.StatusSuccess, cron.StatusFailed, cron.StatusTimeout, cron.StatusSkipped, cron.StatusPaused, cron.StatusMissed:
				filters = append(filters, func(j *cron.Job) bool { return j.LastStatus == st })
			default:
				return badField("last_status", "must be success, failed, timeout, skipped, paused, missed or empty (never run), got %q", v)
			}
		case "name":
			filters = append(filters, func(j *cron.Job) bool { return j.Name == v })
		case "type":
			filters = append(filters, func(j *cron.Job) bool { return j.Type == v })
		default:
			return badField(key, "unknown query parameter; GET /jobs takes %s", strings.Join(listParams, ", "))
		}
		return nil
	}); rerr != nil {
		writeError(w, rerr)
		return
	}
	keep := func(j *cron.Job) bool {
		for _, f := range filters {
			if !f(j) {
				return false
			}
		}
		return true
	}
	jobs, more, err := s.r.List(req.Context(), cron.JobQuery{After: after, Limit: limit, Keep: keep})
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
		setNext(w, q, jobs[len(jobs)-1].ID)
	}
	for i := range jobs {
		jobs[i] = shown(req, jobs[i])
	}
	writeJSON(w, http.StatusOK, jobs)
}

// fail answers with the error of a runner call.
func (s *Server) fail(w http.ResponseWriter, err error, id string) {
	switch {
	case errors.Is(err, cron.ErrForbidden):
		forbidden(w, err)
		return
	case errors.Is(err, cron.ErrUnavailable):
		// A shared store's database is down: the caller may try again.
		w.Header().Set("Retry-After", "2")
	}
	re := Problem(err, id)
	if re.Status == http.StatusInternalServerError {
		s.log.Error("httpapi: request failed", "job_id", id, "error", err)
	}
	writeError(w, re)
}

// Problem is the answer of the API to err, the error of a runner call on
// job id ("" for none): its status, message, field and code. The console
// shows its errors through it, so that both say the same.
func Problem(err error, id string) *RequestError {
	var ve *cron.ValidationError
	var re *RequestError
	var fe *cron.ForbiddenError
	switch {
	case errors.As(err, &re):
		return re
	case errors.As(err, &fe):
		if fe.Need == "" {
			return &RequestError{Status: http.StatusForbidden, Msg: fmt.Sprintf("%s is not allowed for you", fe.Action)}
		}
		return &RequestError{Status: http.StatusForbidden, Msg: fmt.Sprintf("%s needs the %s role; you have %s", fe.Action, fe.Need, fe.Actor.Role)}
	case errors.Is(err, cron.ErrForbidden):
		return &RequestError{Status: http.StatusForbidden, Msg: err.Error()}
	case errors.Is(err, cron.ErrIdempotencyKeyReused):
		return &RequestError{Status: http.StatusUnprocessableEntity, Code: CodeIdempotencyKeyReused, Field: "Idempotency-Key",
			Msg: "this key was used for another run-now of this job with another body; use a new key"}
	case errors.Is(err, cron.ErrIdempotencyPending):
		return &RequestError{Status: http.StatusConflict, Field: "Idempotency-Key", Msg: strings.TrimPrefix(err.Error(), "cron: ")}
	case errors.As(err, &ve) && ve.Field == "idempotency_key":
		return badField("Idempotency-Key", "%s", ve.Reason)
	case errors.As(err, &ve):
		return badField(ve.Field, "%s", ve.Reason)
	case errors.Is(err, cron.ErrNotFound):
		return &RequestError{Status: http.StatusNotFound, Msg: fmt.Sprintf("job %q not found", id)}
	case errors.Is(err, cron.ErrExists):
		return &RequestError{Status: http.StatusConflict, Field: "id", Msg: fmt.Sprintf("a job with id %q already exists", id)}
	case errors.Is(err, cron.ErrInFlight):
		return &RequestError{Status: http.StatusConflict, Code: CodeRunInFlight,
			Msg: fmt.Sprintf("job %q has a run in flight; send \"force\": true to run it again all the same", id)}
	case errors.Is(err, cron.ErrServicePaused):
		return &RequestError{Status: http.StatusConflict, Code: CodeServicePaused, Msg: "the service is paused (POST /resume ends the pause)"}
	case errors.Is(err, cron.ErrClosed):
		return &RequestError{Status: http.StatusServiceUnavailable, Msg: "the service is shutting down"}
	case errors.Is(err, cron.ErrUnsupported):
		return &RequestError{Status: http.StatusNotImplemented, Msg: "the store keeps no run history"}
	case errors.Is(err, cron.ErrUnavailable):
		return &RequestError{Status: http.StatusServiceUnavailable, Msg: err.Error()}
	case errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded):
		return &RequestError{Status: http.StatusServiceUnavailable, Msg: "request cancelled before the change was confirmed on disk"}
	}
	return &RequestError{Status: http.StatusInternalServerError, Msg: err.Error()}
}

type errorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
	Code  string `json:"code,omitempty"`
}

func writeError(w http.ResponseWriter, e *RequestError) {
	writeJSON(w, e.Status, errorBody{Error: e.Msg, Field: e.Field, Code: e.Code})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	var b []byte
	var err error
	if j, ok := v.(cron.Job); ok {
		b, err = j.MarshalJSON() // spares json.Marshal's second pass over it
	} else {
		// Messages quote <token> and paths with &: no HTML escapes in
		// a JSON API.
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		err = enc.Encode(v)
		b = bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
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
