package console

import (
	"bytes"
	"context"
	"crypto/rand"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net/http"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/internal/websec"
	"github.com/ksana-dev/ksana/scheduler"
)

// Defaults of [Config].
const (
	DefaultTitle      = "ksana dispatcher"
	DefaultPageSize   = 50
	DefaultSessionTTL = 12 * time.Hour
	// MinTokenBytes is the shortest ReadToken or AdminToken accepted.
	MinTokenBytes = 16
)

// Config tunes a [Console]. The zero value serves an open, read-only
// console.
type Config struct {
	// ReadToken signs in a user who may see every page. Default "": no
	// read-only user. At least [MinTokenBytes] when set.
	ReadToken string
	// AdminToken signs in a user who may also requeue and delete dead
	// letters. Default "": nobody may. At least [MinTokenBytes] when set,
	// and not ReadToken.
	AdminToken string
	// Secret keys the CSRF tokens of the forms. Give every instance behind
	// one address the same secret of at least 32 bytes. Default nil: 32
	// random bytes per Console (a form rendered before a restart is
	// refused once; the user reloads the page).
	Secret []byte
	// SessionTTL is how long a sign-in lasts. Default [DefaultSessionTTL].
	SessionTTL time.Duration
	// Prefix is the path the console is mounted under ("/ui"). Default
	// "": found from the pattern of the http.ServeMux that routed the
	// request ("/ui/"), else the root.
	Prefix string
	// Title names the service in the pages. Default [DefaultTitle].
	Title string
	// PageSize is the number of jobs on a page of the jobs in flight and
	// of dead letters shown. Default [DefaultPageSize]; at most 500.
	PageSize int
	// Logger receives the errors of rendering and the actions taken.
	// Default nil: discard.
	Logger *slog.Logger
}

// Role is what a signed-in user may do.
type Role string

// The roles of the console's users.
const (
	RoleNone  Role = ""      // not signed in
	RoleRead  Role = "read"  // sees every page
	RoleAdmin Role = "admin" // also requeues and deletes dead letters
)

// Console is the operators' web console of one dispatch instance: an
// http.Handler serving HTML pages over a [scheduler.Dispatcher]. See the
// package documentation.
type Console struct {
	d        *scheduler.Dispatcher
	cfg      Config
	log      *slog.Logger
	readTok  websec.TokenHash
	adminTok websec.TokenHash
	csrf     *websec.CSRF
	sessions websec.Sessions
	guard    *websec.Guard // wrong tokens per client address
	tmpl     map[string]*template.Template
	mux      *http.ServeMux
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed assets
var assetFS embed.FS

// The console's cookies, each HttpOnly, SameSite=Strict, Secure over TLS
// and scoped to the mount point.
const (
	sessionCookie = "ksana_dispatch_session" // the id of a sign-in kept by the console
	csrfCookie    = "ksana_dispatch_csrf"    // a random value whose HMAC is the forms' CSRF token
	flashCookie   = "ksana_dispatch_flash"   // the outcome of an action, for the page shown next
)

// New returns the console of d. The error names the bad Config field.
func New(d *scheduler.Dispatcher, cfg Config) (*Console, error) {
	if d == nil {
		return nil, errors.New("console: New: nil Dispatcher")
	}
	for _, t := range []struct{ name, v string }{{"ReadToken", cfg.ReadToken}, {"AdminToken", cfg.AdminToken}} {
		if t.v != "" && len(t.v) < MinTokenBytes {
			return nil, fmt.Errorf("console: Config.%s: must be at least %d bytes", t.name, MinTokenBytes)
		}
	}
	if cfg.ReadToken != "" && cfg.ReadToken == cfg.AdminToken {
		return nil, errors.New("console: Config.AdminToken: must differ from ReadToken")
	}
	if cfg.Secret != nil && len(cfg.Secret) < 32 {
		return nil, fmt.Errorf("console: Config.Secret: must hold at least 32 bytes, got %d", len(cfg.Secret))
	}
	if cfg.PageSize < 0 || cfg.PageSize > 500 {
		return nil, fmt.Errorf("console: Config.PageSize: must be from 0 to 500, got %d", cfg.PageSize)
	}
	if p := strings.TrimSuffix(cfg.Prefix, "/"); p != "" {
		if !strings.HasPrefix(p, "/") || strings.HasPrefix(p, "//") || path.Clean(p) != p || strings.ContainsAny(p, "\"'<> \\") {
			return nil, fmt.Errorf("console: Config.Prefix: must be a clean absolute path such as \"/ui\", got %q", cfg.Prefix)
		}
		cfg.Prefix = p
	}
	if cfg.PageSize == 0 {
		cfg.PageSize = DefaultPageSize
	}
	if cfg.SessionTTL <= 0 {
		cfg.SessionTTL = DefaultSessionTTL
	}
	if cfg.Title == "" {
		cfg.Title = DefaultTitle
	}
	secret := cfg.Secret
	if secret == nil {
		secret = make([]byte, 32)
		_, _ = rand.Read(secret)
	}
	c := &Console{
		d: d, cfg: cfg, log: cfg.Logger,
		readTok: websec.HashToken(cfg.ReadToken), adminTok: websec.HashToken(cfg.AdminToken),
		csrf: websec.NewCSRF(secret, csrfCookie, "ksana-dispatch-console-csrf"),
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	c.guard = websec.NewGuard("console", c.log)
	var err error
	if c.tmpl, err = websec.ParsePages(templateFS, funcs); err != nil {
		return nil, err
	}
	c.mux = c.routes()
	return c, nil
}

func (c *Console) routes() *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.reader(c.overview))
	mux.HandleFunc("GET /pool", c.reader(c.pool))
	mux.HandleFunc("GET /jobs", c.reader(c.jobs))
	mux.HandleFunc("GET /inboxes", c.reader(c.inboxes))
	mux.HandleFunc("GET /dlq", c.reader(c.dlq))
	mux.HandleFunc("POST /dlq/requeue", c.admin(c.requeue))
	mux.HandleFunc("POST /dlq/delete", c.admin(c.deleteDL))
	mux.HandleFunc("GET /login", c.loginForm)
	mux.HandleFunc("POST /login", c.form(c.login))
	mux.HandleFunc("POST /logout", c.form(c.logout))
	sub, _ := fs.Sub(assetFS, "assets")
	mux.Handle("GET /assets/", http.StripPrefix("/assets/", http.FileServerFS(sub)))
	mux.HandleFunc("/", func(w http.ResponseWriter, req *http.Request) {
		c.fail(w, req, http.StatusNotFound, "no such page: "+req.URL.Path)
	})
	return mux
}

type mountKey struct{}

// mount is the mount point of req ("" or "/ui").
func mount(req *http.Request) string {
	m, _ := req.Context().Value(mountKey{}).(string)
	return m
}

// ServeHTTP answers one request for a page, an action or an asset. Every
// answer carries a strict Content-Security-Policy, X-Frame-Options DENY,
// nosniff and no-store.
func (c *Console) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	websec.SetHeaders(w.Header())
	m := c.cfg.Prefix
	if m == "" {
		m = patternMount(req.Pattern)
	}
	local, ok := strings.CutPrefix(req.URL.Path, m)
	if !ok || local != "" && local[0] != '/' {
		local = req.URL.Path
	}
	req = req.WithContext(context.WithValue(req.Context(), mountKey{}, m))
	if local == "" {
		http.Redirect(w, req, m+"/", http.StatusFound)
		return
	}
	u := *req.URL
	u.Path, u.RawPath = local, ""
	req.URL = &u
	c.mux.ServeHTTP(w, req)
}

// patternMount is the mount point of a ServeMux pattern such as "/ui/"
// or "GET /ui/": "/ui"; "" for any other pattern.
func patternMount(pat string) string {
	if i := strings.IndexByte(pat, ' '); i >= 0 {
		pat = strings.TrimSpace(pat[i+1:])
	}
	if i := strings.IndexByte(pat, '/'); i > 0 {
		pat = pat[i:] // a host before the path
	}
	if len(pat) < 2 || !strings.HasPrefix(pat, "/") || !strings.HasSuffix(pat, "/") || strings.ContainsAny(pat, "{}\"'<> \\") || strings.HasPrefix(pat, "//") {
		return ""
	}
	return strings.TrimSuffix(pat, "/")
}

// authOn reports whether users sign in: a token is configured.
func (c *Console) authOn() bool { return c.readTok != nil || c.adminTok != nil }

// role returns the role of req's user. Without tokens every visitor
// reads and nobody is an admin.
func (c *Console) role(req *http.Request) Role {
	if !c.authOn() {
		return RoleRead
	}
	ck, err := req.Cookie(sessionCookie)
	if err != nil {
		return RoleNone
	}
	r, ok := c.sessions.Get(ck.Value)
	if !ok {
		return RoleNone
	}
	return Role(r)
}

// roleOf returns the role a token signs in as.
func (c *Console) roleOf(tok string) Role {
	switch {
	case websec.TokenMatches(tok, c.adminTok):
		return RoleAdmin
	case websec.TokenMatches(tok, c.readTok):
		return RoleRead
	}
	return RoleNone
}

// reader wraps a page: a visitor not signed in goes to the sign-in form.
func (c *Console) reader(h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if c.role(req) == RoleNone {
			http.Redirect(w, req, mount(req)+"/login", http.StatusSeeOther)
			return
		}
		h(w, req)
	}
}

// maxFormBytes bounds a form.
const maxFormBytes = 64 << 10

// form wraps a POST: a URL-encoded form (415 otherwise) of bounded size,
// with the browser's CSRF token, from this origin (403 otherwise).
func (c *Console) form(h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		if !websec.FormContent(req) {
			c.fail(w, req, http.StatusUnsupportedMediaType, "a form is sent as application/x-www-form-urlencoded")
			return
		}
		req.Body = http.MaxBytesReader(w, req.Body, maxFormBytes)
		if err := req.ParseForm(); err != nil {
			c.fail(w, req, http.StatusBadRequest, "bad form: "+err.Error())
			return
		}
		if msg, ok := c.csrf.Check(req); !ok {
			c.fail(w, req, http.StatusForbidden, msg)
			return
		}
		h(w, req)
	}
}

// admin wraps a write that needs the admin role: 401 for a visitor not
// signed in, 403 for a read-only user.
func (c *Console) admin(h func(http.ResponseWriter, *http.Request)) http.HandlerFunc {
	return c.form(func(w http.ResponseWriter, req *http.Request) {
		switch c.role(req) {
		case RoleAdmin:
			h(w, req)
		case RoleNone:
			c.fail(w, req, http.StatusUnauthorized, "sign in first")
		default:
			c.fail(w, req, http.StatusForbidden, "this needs the admin token: you are signed in read-only")
		}
	})
}

func (c *Console) cookiePath(req *http.Request) string { return mount(req) + "/" }

func (c *Console) loginForm(w http.ResponseWriter, req *http.Request) {
	if !c.authOn() {
		http.Redirect(w, req, mount(req)+"/", http.StatusSeeOther)
		return
	}
	c.render(w, req, http.StatusOK, "login", &loginPage{})
}

type loginPage struct {
	pageCtx
	Error string
}

func (c *Console) login(w http.ResponseWriter, req *http.Request) {
	if !c.authOn() {
		http.Redirect(w, req, mount(req)+"/", http.StatusSeeOther)
		return
	}
	addr := websec.ClientAddr(req)
	if wait := c.guard.Wait(addr); wait > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		c.render(w, req, http.StatusTooManyRequests, "login",
			&loginPage{Error: "too many wrong tokens from this address: try again in " + wait.Round(time.Second).String()})
		return
	}
	role := c.roleOf(strings.TrimSpace(req.PostFormValue("token")))
	if role == RoleNone {
		c.guard.Fail(addr, req.URL.Path)
		c.render(w, req, http.StatusUnauthorized, "login", &loginPage{Error: "unknown token"})
		return
	}
	if ck, err := req.Cookie(sessionCookie); err == nil {
		c.sessions.End(ck.Value)
	}
	websec.SetCookie(w, req, c.cookiePath(req), sessionCookie, c.sessions.Start(string(role), c.cfg.SessionTTL), 0)
	// A new browser secret with the new identity.
	websec.SetCookie(w, req, c.cookiePath(req), csrfCookie, websec.NewNonce(), 0)
	http.Redirect(w, req, mount(req)+"/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, req *http.Request) {
	if ck, err := req.Cookie(sessionCookie); err == nil {
		c.sessions.End(ck.Value)
	}
	websec.SetCookie(w, req, c.cookiePath(req), sessionCookie, "", -1)
	websec.SetCookie(w, req, c.cookiePath(req), csrfCookie, "", -1)
	http.Redirect(w, req, mount(req)+"/login", http.StatusSeeOther)
}

// setFlash leaves a message for the next page shown.
func (c *Console) setFlash(w http.ResponseWriter, req *http.Request, msg string) {
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	websec.SetCookie(w, req, c.cookiePath(req), flashCookie, encodeFlash(msg), 60)
}

// takeFlash returns the message left for this page and clears it.
func (c *Console) takeFlash(w http.ResponseWriter, req *http.Request) string {
	ck, err := req.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	websec.SetCookie(w, req, c.cookiePath(req), flashCookie, "", -1)
	return decodeFlash(ck.Value)
}

// view is what the layout renders around a page.
type view struct {
	Title    string
	App      string
	Instance string
	Base     string
	CSRF     string
	Role     Role
	AuthOn   bool
	Flash    string
	Nav      string
	Page     any
}

// CanAdmin reports whether the user may requeue and delete.
func (v view) CanAdmin() bool { return v.Role == RoleAdmin }

func (c *Console) render(w http.ResponseWriter, req *http.Request, status int, name string, p any) {
	v := view{
		Title: titles[name], App: c.cfg.Title, Instance: c.d.InstanceID(), Base: mount(req),
		CSRF: c.csrf.Token(w, req, c.cookiePath(req)), Role: c.role(req), AuthOn: c.authOn(), Nav: name, Page: p,
	}
	if req.Method == http.MethodGet {
		v.Flash = c.takeFlash(w, req)
	}
	if pc, ok := p.(interface{ setCtx(pageCtx) }); ok {
		pc.setCtx(pageCtx{CSRF: v.CSRF, CanAct: v.CanAdmin(), Base: v.Base})
	}
	var buf bytes.Buffer
	if err := c.tmpl[name].ExecuteTemplate(&buf, "layout", v); err != nil {
		c.log.Error("console: render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

var titles = map[string]string{
	"overview": "Overview", "pool": "Pool", "jobs": "Jobs in flight", "inboxes": "Inboxes",
	"dlq": "Dead letters", "login": "Sign in", "error": "Error",
}

type errorPage struct {
	pageCtx
	Status  int
	Message string
}

func (c *Console) fail(w http.ResponseWriter, req *http.Request, status int, msg string) {
	c.render(w, req, status, "error", &errorPage{Status: status, Message: msg})
}

// pageCtx is what a page with forms or links needs of the layout's view.
type pageCtx struct {
	CSRF   string // the CSRF token of its forms
	CanAct bool   // the user may requeue and delete
	Base   string // the mount point
}

func (p *pageCtx) setCtx(v pageCtx) { *p = v }
