package console

import (
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/ksana-dev/ksana/internal/websec"
)

// Defaults of [Config].
const (
	DefaultTitle           = "ksana"
	DefaultPageSize        = 50
	DefaultRefreshInterval = 5 * time.Second
	DefaultOverviewMaxAge  = 10 * time.Second
)

// Config tunes a [Console]. The zero value is ready to use.
type Config struct {
	// API is the REST API whose tokens sign users in (with its throttling
	// of wrong tokens) and whose decoding, defaults and callback
	// allow-list the console's forms go through. The changes themselves
	// are the runner's, made in process for the signed-in user: the
	// runner authorizes them by its [cron.Authorizer] and audits them,
	// as for every caller. Give the one the service serves, so that both
	// share one set of tokens. Default nil: an API of the runner with no
	// authentication (every visitor may do everything), for a console
	// reachable only from trusted hosts.
	API *httpapi.Server
	// SessionTTL is how long a sign-in lasts. The browser keeps an opaque
	// session id; the console keeps the session in memory, ends it at
	// sign-out, at its expiry, and as soon as its token no longer signs
	// in, and forgets every session at a restart. Default
	// [DefaultSessionTTL].
	SessionTTL time.Duration
	// Prefix is the path the console is mounted under ("/ui"). It is
	// needed only when the console cannot find it by itself: it does when
	// mounted with http.ServeMux.Handle("/ui/", c) (from the pattern) or
	// behind http.StripPrefix (from the request URI). Default "".
	Prefix string
	// ReadOnly hides every button that writes and answers every write
	// with 403, whatever the user's role. Default false.
	ReadOnly bool
	// Title names the service in the page titles and the header.
	// Default [DefaultTitle].
	Title string
	// Secret keys the CSRF tokens of the forms (HMAC-SHA256 of a random
	// per-browser cookie). Give the same secret of at least 32 bytes to
	// every instance behind one address. Default nil: 32 random bytes per
	// Console, so forms rendered before a restart are refused once (the
	// user reloads the page).
	Secret []byte
	// Notes, when set, lists facts about the serving instance shown on
	// the overview (instance name, partitions held, jobs held, store),
	// such as the HealthNotes of the API. It must be fast and safe for
	// concurrent use. Default nil.
	Notes func() map[string]any
	// PageSize is the number of jobs on a page of the jobs list. Default
	// [DefaultPageSize]; at most [httpapi.MaxListLimit].
	PageSize int
	// RefreshInterval is how often an open job page reloads its history.
	// Default [DefaultRefreshInterval]; negative: never.
	RefreshInterval time.Duration
	// OverviewMaxAge is how long the counts of the overview and the
	// totals of the jobs list (which read every job) are shown before
	// they are computed again, in the background: a page never waits for
	// them but the first, and they are computed at most every ten times
	// the last computation took. Default [DefaultOverviewMaxAge].
	OverviewMaxAge time.Duration
	// Logger receives the errors of rendering. Default nil: discard.
	Logger *slog.Logger
}

// Console is the web console of a [cron.Runner]: an http.Handler serving
// HTML pages. See the package documentation.
type Console struct {
	r    *cron.Runner
	api  *httpapi.Server
	cfg  Config
	log  *slog.Logger
	tmpl map[string]*template.Template
	mux  *http.ServeMux
	csrf *websec.CSRF

	// sessions are the signed-in users: an opaque id (the cookie) names
	// the token kept here, with an expiry. A session ends at sign-out, at
	// its expiry, and as soon as its token no longer authenticates
	// (removed from the tokens file): every request checks the token
	// again. A restart ends every session.
	sessions websec.Sessions

	// What the overview and the jobs list's totals read from a scan of
	// the service, shared by every request (see cached).
	ov  cached[*overviewStats]
	ch  cached[[]*runsChart]
	cnt cached[jobCount]
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// New returns the console of r. It panics when r is nil, when
// Config.Secret is set but shorter than 32 bytes, when Config.PageSize is
// out of range, or when Config.Prefix is not a path ("/ui"), so that a
// console can be mounted in one line.
func New(r *cron.Runner, cfg Config) *Console {
	c, err := newConsole(r, cfg)
	if err != nil {
		panic(err)
	}
	return c
}

func newConsole(r *cron.Runner, cfg Config) (*Console, error) {
	if r == nil {
		return nil, errors.New("console: New: runner is nil")
	}
	if cfg.Secret != nil && len(cfg.Secret) < 32 {
		return nil, fmt.Errorf("console: New: Config.Secret must hold at least 32 bytes, got %d", len(cfg.Secret))
	}
	if cfg.PageSize < 0 || cfg.PageSize > httpapi.MaxListLimit {
		return nil, fmt.Errorf("console: New: Config.PageSize must be from 0 to %d, got %d", httpapi.MaxListLimit, cfg.PageSize)
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	if p := cfg.Prefix; p != "" {
		p = strings.TrimSuffix(p, "/")
		if p != "" && (!strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || path.Clean(p) != p) {
			return nil, fmt.Errorf("console: New: Config.Prefix must be a clean absolute path such as \"/ui\", got %q", cfg.Prefix)
		}
		cfg.Prefix = p
	}
	if cfg.Title == "" {
		cfg.Title = DefaultTitle
	}
	if cfg.RefreshInterval == 0 {
		cfg.RefreshInterval = DefaultRefreshInterval
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.OverviewMaxAge <= 0 {
		cfg.OverviewMaxAge = DefaultOverviewMaxAge
	}
	c := &Console{r: r, api: cfg.API, cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.api == nil {
		api, err := httpapi.New(r, httpapi.Config{Logger: cfg.Logger})
		if err != nil {
			return nil, fmt.Errorf("console: New: %w", err)
		}
		c.api = api
	}
	secret := cfg.Secret
	if secret == nil {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	c.csrf = websec.NewCSRF(secret, csrfCookie, "ksana-console-csrf")
	var err error
	if c.tmpl, err = websec.ParsePages(templateFS, funcs); err != nil {
		return nil, err
	}
	c.mux = c.newMux()
	return c, nil
}

// newMux routes the console's pages; paths are relative to the mount
// point.
func (c *Console) newMux() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.overview)
	mux.HandleFunc("GET /jobs", c.jobs)
	mux.HandleFunc("GET /jobs/{id}", c.job)
	mux.HandleFunc("GET /jobs/{id}/history", c.history)
	mux.HandleFunc("GET /new", c.newForm)
	mux.HandleFunc("POST /new", c.write(c.create))
	mux.HandleFunc("GET /jobs/{id}/edit", c.editForm)
	mux.HandleFunc("POST /jobs/{id}/edit", c.write(c.edit))
	mux.HandleFunc("POST /jobs/{id}/{action}", c.write(c.action))
	mux.HandleFunc("POST /bulk", c.write(c.bulk))
	mux.HandleFunc("GET /runs", c.runs)
	mux.HandleFunc("GET /runs/{id}", c.run)
	mux.HandleFunc("POST /pause-all", c.write(c.pauseAll))
	mux.HandleFunc("POST /resume-all", c.write(c.resumeAll))
	mux.HandleFunc("GET /login", c.loginForm)
	mux.HandleFunc("POST /login", c.login)
	mux.HandleFunc("POST /logout", c.logout)
	sub, _ := fs.Sub(assetFS, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(sub)))
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		c.fail(w, req, http.StatusNotFound, "no such page: "+req.URL.Path)
	})
	return mux
}

// mountKey carries the mount point of a request to the handlers.
type mountKey struct{}

// ServeHTTP answers one request for a page, an action or an asset.
func (c *Console) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	mount, local := c.split(req)
	h := w.Header()
	websec.SetHeaders(h)
	if !c.api.AllowsHost(req) {
		// A page of another site that a browser resolved to this
		// address (DNS rebinding).
		c.fail(w, withMount(req, mount), http.StatusMisdirectedRequest, "this service does not answer to the host "+req.Host)
		return
	}
	if local == "" {
		http.Redirect(w, req, mount+"/", http.StatusFound)
		return
	}
	unesc, err := url.PathUnescape(local)
	if err != nil || !cleanLocal(local) {
		c.fail(w, withMount(req, mount), http.StatusNotFound, "no such page: "+req.URL.Path)
		return
	}
	r2 := withMount(req, mount)
	u := *req.URL
	u.Path, u.RawPath = unesc, local
	r2.URL = &u
	c.mux.ServeHTTP(w, r2)
}

// withMount returns req carrying mount for the handlers.
func withMount(req *http.Request, mount string) *http.Request {
	return req.WithContext(context.WithValue(req.Context(), mountKey{}, mount))
}

// split finds where the console is mounted: Config.Prefix, the pattern of
// the http.ServeMux that routed the request to it (path unchanged), or
// the part of the request URI that http.StripPrefix took away. It returns
// the mount point ("" or "/ui") and the escaped path below it.
func (c *Console) split(req *http.Request) (mount, local string) {
	p := req.URL.EscapedPath()
	if c.cfg.Prefix != "" {
		if rest, ok := cutMount(p, c.cfg.Prefix); ok {
			return c.cfg.Prefix, rest
		}
		return c.cfg.Prefix, p
	}
	if pat := patternPath(req.Pattern); len(pat) > 1 && strings.HasSuffix(pat, "/") && !strings.Contains(pat, "{") {
		if rest, ok := cutMount(p, strings.TrimSuffix(pat, "/")); ok {
			return safeMount(strings.TrimSuffix(pat, "/")), rest
		}
	}
	if u, err := url.ParseRequestURI(req.RequestURI); err == nil {
		if full := u.EscapedPath(); len(full) > len(p) && strings.HasSuffix(full, p) {
			return safeMount(strings.TrimSuffix(full, p)), p
		}
	}
	return "", p
}

// cutMount returns p without mount when p is mount or below it.
func cutMount(p, mount string) (string, bool) {
	rest, ok := strings.CutPrefix(p, mount)
	if !ok || (rest != "" && rest[0] != '/') {
		return "", false
	}
	return rest, true
}

// safeMount keeps a mount point that links and redirects can start with:
// an absolute path, never a scheme-relative "//host".
func safeMount(m string) string {
	if !strings.HasPrefix(m, "/") || strings.HasPrefix(m, "//") || strings.ContainsAny(m, "\\\"'<> ") {
		return ""
	}
	return m
}

// patternPath is the path of a ServeMux pattern ("GET host/ui/" gives
// "/ui/").
func patternPath(pat string) string {
	if i := strings.IndexByte(pat, ' '); i >= 0 {
		pat = strings.TrimSpace(pat[i+1:])
	}
	if i := strings.IndexByte(pat, '/'); i > 0 {
		pat = pat[i:]
	}
	return pat
}

// cleanLocal reports whether the escaped path p has no empty, "." or ".."
// segment (a trailing slash aside): http.ServeMux would redirect such a
// path, to a place that forgets the mount point.
func cleanLocal(p string) bool {
	segs := strings.Split(strings.TrimSuffix(strings.TrimPrefix(p, "/"), "/"), "/")
	for _, s := range segs {
		if s == "" && p != "/" || s == "." || s == ".." {
			return false
		}
	}
	return strings.HasPrefix(p, "/")
}
