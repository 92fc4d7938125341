package cron

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Executor runs one run of a job. The runner calls Execute from its worker
// goroutines with a context that is cancelled when the runner's drain
// timeout expires at shutdown; Execute must honour it. Retries, if any, are
// the executor's business: Result.Attempts says how many were made.
type Executor interface {
	Execute(ctx context.Context, j *Job, info RunInfo) Result
}

// ExecutorFunc adapts a function to [Executor].
type ExecutorFunc func(ctx context.Context, j *Job, info RunInfo) Result

// Execute calls f(ctx, j, info).
func (f ExecutorFunc) Execute(ctx context.Context, j *Job, info RunInfo) Result {
	return f(ctx, j, info)
}

// RunInfo identifies one run. RunID is 128 random bits in hex, unique per
// run and the same across its retries; ScheduledAt is the slot (jitter
// included; the time of the call for a run-now run); TriggeredAt is when a
// worker started the run. Both times are UTC.
type RunInfo struct {
	RunID       string
	JobID       string
	ScheduledAt time.Time
	TriggeredAt time.Time
}

// Result is the outcome of a run: its final Status ([StatusSuccess],
// [StatusFailed] or [StatusTimeout]), the number of attempts made, the HTTP
// status of the last response (0 when there was none) and, unless it
// succeeded, a short reason.
type Result struct {
	Status     Status
	Attempts   int
	HTTPStatus int
	Error      string
	// AttemptLog has one entry per attempt when more than one was made,
	// and is nil otherwise (see [Run.AttemptLog]).
	AttemptLog []Attempt
}

// logAttempt adds the outcome of attempt n, started at start, to
// res.AttemptLog, which it starts at the second attempt with the first
// one (kept in first). res then holds attempt n's outcome.
func (res *Result) logAttempt(n int, a attempt, start time.Time, first *Attempt) {
	at := Attempt{StartedAt: start.UTC(), Duration: Duration(time.Since(start)), Status: a.status, HTTPStatus: a.httpStatus, Error: a.err}
	switch n {
	case 1:
		*first = at
	case 2:
		res.AttemptLog = append(res.AttemptLog, *first, at)
	default:
		res.AttemptLog = append(res.AttemptLog, at)
	}
	res.Status, res.Attempts, res.HTTPStatus, res.Error = a.status, n, a.httpStatus, a.err
}

// sleep waits for d, or returns ctx.Err() as soon as ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// errorSnippet is how much of a response body goes into Result.Error.
const errorSnippet = 200

// HTTPExecutorConfig tunes an [HTTPExecutor]. The zero value is ready to
// use; negative numbers mean the default.
type HTTPExecutorConfig struct {
	// Client sends the callbacks. Default: defaultHTTPClient, one client
	// shared by the whole process. Leave its Timeout at 0: the executor
	// bounds each attempt with the job's timeout through the context.
	Client *http.Client
	// MaxBodyBytes is how much of a response the executor reads: the first
	// 200 bytes go into the error of a failed attempt, the rest is drained
	// so that the connection is reused. A longer body is cut and its
	// connection closed. Default 64 KiB.
	MaxBodyBytes int64
	// MaxRetryAfter caps the wait a Retry-After header (on 429 and 503) may
	// ask for. Default 5m.
	MaxRetryAfter time.Duration
	// UserAgent is sent when the job sets no User-Agent header.
	// Default "ksana-cron".
	UserAgent string
	// AllowHosts, when not empty, says where the executor may call (see
	// [HostAllowList] for the patterns): a job whose URL's host it does
	// not pass fails at once (no retry), a redirect to such a host is not
	// followed (the run fails), and so does a connection to an address it
	// refuses after DNS, such as a loopback, link-local or unspecified
	// address that no address or CIDR pattern names. The address is
	// checked when Client's Transport is an *http.Transport (the
	// default's is), before connecting, or just after when it has a
	// DialContext of its own; another RoundTripper gets the host checks
	// only. With a list, the executor dials directly, without the proxies
	// of the environment, so that it sees the address it connects to.
	// Default nil: any host and any address, nothing checked.
	AllowHosts HostAllowList
	// AllowLoopback lets a host that AllowHosts passes reach a loopback
	// address (127.0.0.0/8, ::1), as a callback served on the same
	// machine is. Link-local and unspecified addresses stay refused
	// unless a pattern names them. Without AllowHosts it changes nothing.
	// Default false: loopback only where an address or CIDR pattern of
	// AllowHosts names it (127.0.0.1, ::1, 127.0.0.0/8).
	AllowLoopback bool
	// Logger receives a record per failed attempt. Default nil: discard.
	Logger *slog.Logger
}

// HTTPExecutor is the [Executor] of HTTP callback jobs; see the package
// documentation, section "The HTTP callback". It is safe for concurrent use.
type HTTPExecutor struct {
	client        *http.Client
	allow         HostAllowList
	maxBody       int64
	maxRetryAfter time.Duration
	userAgent     string
	log           *slog.Logger
}

var _ Executor = (*HTTPExecutor)(nil)

var defaultClient = sync.OnceValue(func() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: 1 * time.Second,
	}}
})

// defaultHTTPClient returns the process-wide client of the HTTP executor:
// a transport with MaxIdleConns 100, IdleConnTimeout 90s,
// TLSHandshakeTimeout 10s and ExpectContinueTimeout 1s (plus 16 idle
// connections per host, so that a pool of workers calling one service
// reuses its connections), proxies from the environment, and no client
// timeout (each attempt is bounded by its context).
func defaultHTTPClient() *http.Client { return defaultClient() }

// NewHTTPExecutor returns an HTTP executor configured by cfg.
func NewHTTPExecutor(cfg HTTPExecutorConfig) *HTTPExecutor {
	x := &HTTPExecutor{
		client: cfg.Client, maxBody: cfg.MaxBodyBytes, maxRetryAfter: cfg.MaxRetryAfter,
		userAgent: cfg.UserAgent, log: cfg.Logger,
	}
	if x.client == nil {
		x.client = defaultHTTPClient()
	}
	if len(cfg.AllowHosts) > 0 {
		x.allow = cfg.AllowHosts
		x.client = guardedClient(x.client, x.allow, cfg.AllowLoopback, true)
	}
	if x.maxBody <= 0 {
		x.maxBody = 64 << 10
	}
	if x.maxRetryAfter <= 0 {
		x.maxRetryAfter = 5 * time.Minute
	}
	if x.userAgent == "" {
		x.userAgent = "ksana-cron"
	}
	if x.log == nil {
		x.log = slog.New(slog.DiscardHandler)
	}
	return x
}

// attempt is the outcome of one request.
type attempt struct {
	status     Status
	httpStatus int
	err        string
	retry      bool
	retryAfter time.Duration
}

// Execute makes the job's callback, retrying as the job says. Each attempt
// gets the job's timeout (default 10s); between attempts it waits the
// job's retry_backoff (default 5s), or longer when a 429 or 503 answer asks
// so with Retry-After (capped by MaxRetryAfter). It stops early when ctx
// ends.
func (x *HTTPExecutor) Execute(ctx context.Context, j *Job, info RunInfo) Result {
	timeout := j.Timeout.D()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	backoff := j.RetryBackoff.D()
	if backoff <= 0 {
		backoff = DefaultRetryBackoff
	}
	body := expandBody(j.HTTP.Body, info)
	var res Result
	var first Attempt
	for n := 1; ; n++ {
		start := time.Now()
		a := x.try(ctx, j, info, body, timeout)
		res.logAttempt(n, a, start, &first)
		if a.status == StatusSuccess || !a.retry || n > j.MaxRetries || ctx.Err() != nil {
			return res
		}
		wait := backoff
		if a.retryAfter > wait {
			wait = min(a.retryAfter, x.maxRetryAfter)
		}
		x.log.Warn("cron: attempt failed, retrying", "job_id", j.ID, "run_id", info.RunID, "attempt", n,
			"status", string(a.status), "error", redactError(a.err, RoleViewer), "wait", wait)
		if err := sleep(ctx, wait); err != nil {
			return res
		}
	}
}

// expandBody replaces the placeholders {{job_id}}, {{run_id}},
// {{scheduled_at}} and {{triggered_at}} in body with the run's values (times
// RFC3339Nano UTC). Values are inserted as they are, without quoting.
func expandBody(body string, info RunInfo) string {
	if !strings.Contains(body, "{{") {
		return body
	}
	return strings.NewReplacer(
		"{{job_id}}", info.JobID,
		"{{run_id}}", info.RunID,
		"{{scheduled_at}}", formatTime(info.ScheduledAt),
		"{{triggered_at}}", formatTime(info.TriggeredAt),
	).Replace(body)
}

// looksJSON reports whether body starts, after white space, like a JSON
// object or array.
func looksJSON(body string) bool {
	s := strings.TrimLeft(body, " \t\r\n")
	return s != "" && (s[0] == '{' || s[0] == '[')
}

func (x *HTTPExecutor) try(ctx context.Context, j *Job, info RunInfo, body string, timeout time.Duration) attempt {
	if len(x.allow) > 0 {
		u, err := url.Parse(j.HTTP.URL)
		if err != nil || !x.allow.Allows(u.Hostname()) {
			var h string
			if err == nil {
				h = u.Hostname()
			}
			return attempt{status: StatusFailed, err: (&hostRefusedError{host: h}).Error()}
		}
	}
	actx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(actx, j.HTTP.Method, j.HTTP.URL, rd)
	if err != nil {
		return attempt{status: StatusFailed, err: "bad request: " + err.Error()}
	}
	for k, v := range j.HTTP.Headers {
		if strings.EqualFold(k, "Host") {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	if body != "" && req.Header.Get("Content-Type") == "" && looksJSON(body) {
		req.Header.Set("Content-Type", "application/json")
	}
	if req.Header.Get("User-Agent") == "" {
		req.Header.Set("User-Agent", x.userAgent)
	}
	req.Header.Set(HeaderJobID, info.JobID)
	req.Header.Set(HeaderRunID, info.RunID)
	req.Header.Set(HeaderScheduledAt, formatTime(info.ScheduledAt))
	req.Header.Set(HeaderTriggeredAt, formatTime(info.TriggeredAt))

	resp, err := x.client.Do(req)
	if err != nil {
		if re := (*hostRefusedError)(nil); errors.As(err, &re) {
			return attempt{status: StatusFailed, err: re.Error()}
		}
		if re := (*addrRefusedError)(nil); errors.As(err, &re) {
			return attempt{status: StatusFailed, err: re.Error()}
		}
		switch {
		case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
			return attempt{status: StatusTimeout, err: "run deadline exceeded"}
		case ctx.Err() != nil:
			return attempt{status: StatusFailed, err: "run cancelled"}
		case actx.Err() != nil || isTimeout(err):
			return attempt{status: StatusTimeout, err: fmt.Sprintf("timeout after %s", timeout), retry: true}
		}
		return attempt{status: StatusFailed, err: shortError(err), retry: true}
	}
	snippet := x.readBody(resp.Body)
	a := attempt{httpStatus: resp.StatusCode}
	code := resp.StatusCode
	switch {
	case code >= 200 && code < 300:
		a.status = StatusSuccess
		return a
	case code == http.StatusRequestTimeout || code == http.StatusTooManyRequests || code >= 500:
		a.retry = true
	}
	a.status = StatusFailed
	a.err = "http " + strconv.Itoa(code)
	if snippet != "" {
		a.err += replyMark + snippet
	}
	if code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable {
		a.retryAfter = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return a
}

// readBody reads up to MaxBodyBytes of b, returns the start of it as a
// short printable string, and closes b.
func (x *HTTPExecutor) readBody(b io.ReadCloser) string {
	defer b.Close()
	var head [errorSnippet]byte
	n, _ := io.ReadFull(b, head[:min(int64(errorSnippet), x.maxBody)])
	if rest := x.maxBody - int64(n); rest > 0 && n == errorSnippet {
		_, _ = io.Copy(io.Discard, io.LimitReader(b, rest))
	}
	s := head[:n]
	// Cut a rune split at the end, and flatten lines.
	for len(s) > 0 && !utf8.Valid(s) {
		s = s[:len(s)-1]
	}
	s = bytes.TrimSpace(s)
	return strings.Join(strings.Fields(string(s)), " ")
}

// parseRetryAfter reads a Retry-After value: seconds or an HTTP date.
// Anything else, or a time in the past, is 0.
func parseRetryAfter(v string, now time.Time) time.Duration {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0
	}
	if secs, err := strconv.ParseInt(v, 10, 64); err == nil {
		if secs <= 0 {
			return 0
		}
		if secs > int64(24*time.Hour/time.Second) {
			secs = int64(24 * time.Hour / time.Second)
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		if d := t.Sub(now); d > 0 {
			return d
		}
	}
	return 0
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// shortError drops the "Get "url": " prefix of a client error.
func shortError(err error) string {
	var ue interface{ Unwrap() error }
	if errors.As(err, &ue) {
		if inner := ue.Unwrap(); inner != nil {
			err = inner
		}
	}
	s := err.Error()
	if len(s) > errorSnippet {
		s = s[:errorSnippet]
	}
	return s
}
