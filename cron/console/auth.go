package console

import (
	"context"
	"errors"
	"math"
	"strconv"
	"sync"
	"time"

	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"github.com/ksana-dev/ksana/cron"
	"net/http"
	"strings"

	"github.com/ksana-dev/ksana/cron/httpapi"
)

// The cookies of the console. Each is HttpOnly, SameSite=Strict, Secure
// when the request came over TLS, and scoped to the mount point.
const (
	// sessionCookie holds the id of the user's session: 32 random bytes
	// that name a session kept by the console (see sessions), never the
	// token itself.
	sessionCookie = "ksana_session"
	// csrfCookie holds a random value per browser; a form's CSRF token
	// is its HMAC under Config.Secret.
	csrfCookie = "ksana_csrf"
	// flashCookie carries the outcome of an action to the page shown next.
	flashCookie = "ksana_flash"
)

// DefaultSessionTTL is how long a console session lasts from its
// sign-in when Config.SessionTTL is 0.
const DefaultSessionTTL = 12 * time.Hour

// maxSessions bounds the sessions kept; the oldest go first.
const maxSessions = 10000

// sessions are the signed-in users of a console: an opaque id (the
// cookie) names the token kept here, with an expiry. A session ends at
// sign-out, at its expiry, and as soon as its token no longer
// authenticates (removed from the tokens file): every request checks the
// token again. A restart ends every session.
type sessions struct {
	mu sync.Mutex
	m  map[string]session
}

type session struct {
	token   string
	expires time.Time
}

func (s *sessions) start(token string, ttl time.Duration) string {
	id := newNonce()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]session{}
	}
	if len(s.m) >= maxSessions {
		var oldest string
		var at time.Time
		for k, v := range s.m {
			if v.expires.Before(now) {
				delete(s.m, k)
				continue
			}
			if oldest == "" || v.expires.Before(at) {
				oldest, at = k, v.expires
			}
		}
		if len(s.m) >= maxSessions {
			delete(s.m, oldest)
		}
	}
	s.m[id] = session{token: token, expires: now.Add(ttl)}
	return id
}

// token returns the token of session id, or false when there is no such
// session or it has expired.
func (s *sessions) token(id string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.m[id]
	if !ok {
		return "", false
	}
	if time.Now().After(v.expires) {
		delete(s.m, id)
		return "", false
	}
	return v.token, true
}

func (s *sessions) end(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// user is who a request comes from, and what the console lets them do.
type user struct {
	ID       httpapi.Identity
	SignedIn bool // a session was found and its token is known
	AuthOn   bool
}

// can reports whether u may make writes that need role.
func (c *Console) can(u user, role httpapi.Role) bool {
	return !c.cfg.ReadOnly && u.ID.Role.Includes(role)
}

// ctx is the context of req for the runner's changes made by u: they
// are authorized for u and audited under u's name.
func (u user) ctx(req *http.Request) context.Context {
	return cron.WithActor(req.Context(), u.ID)
}

// who returns the user of req. With authentication off every visitor is
// an admin; with it on, the one whose session holds a token the API
// knows. A session whose token is no longer known ends here.
func (c *Console) who(req *http.Request) user {
	if !c.api.AuthRequired() {
		return user{ID: httpapi.Identity{Name: "anonymous", Role: httpapi.RoleAdmin}, SignedIn: true}
	}
	ck, err := req.Cookie(sessionCookie)
	if err != nil || ck.Value == "" {
		return user{AuthOn: true}
	}
	tok, ok := c.sessions.token(ck.Value)
	if !ok {
		return user{AuthOn: true}
	}
	id, ok := c.api.Identify(tok)
	if !ok {
		c.sessions.end(ck.Value)
		return user{AuthOn: true}
	}
	return user{ID: id, SignedIn: true, AuthOn: true}
}

// mount is the mount point of req ("" or "/ui").
func mount(req *http.Request) string {
	m, _ := req.Context().Value(mountKey{}).(string)
	return m
}

// setCookie sets a console cookie on the mount point's path.
func setCookie(w http.ResponseWriter, req *http.Request, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     mount(req) + "/",
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   req.TLS != nil || strings.EqualFold(req.Header.Get("X-Forwarded-Proto"), "https"),
		SameSite: http.SameSiteStrictMode,
	})
}

// csrfToken returns the CSRF token of the forms shown to req's browser,
// setting the browser's random cookie when it has none (or a malformed
// one).
func (c *Console) csrfToken(w http.ResponseWriter, req *http.Request) string {
	if ck, err := req.Cookie(csrfCookie); err == nil && validNonce(ck.Value) {
		return c.sign(ck.Value)
	}
	v := newNonce()
	setCookie(w, req, csrfCookie, v, 0)
	return c.sign(v)
}

func newNonce() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

func validNonce(v string) bool {
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && len(b) == 32
}

func (c *Console) sign(nonce string) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte("ksana-console-csrf:"))
	m.Write([]byte(nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// checkCSRF reports whether a write request carries the CSRF token of
// its browser's cookie (form field "csrf") and does not come from
// another site.
func (c *Console) checkCSRF(req *http.Request) (string, bool) {
	if err := c.csrf.Check(req); err != nil {
		return "the request comes from another site", false
	}
	ck, err := req.Cookie(csrfCookie)
	if err != nil || !validNonce(ck.Value) {
		return "the form has no session (cookies off?): reload the page and try again", false
	}
	got := req.PostFormValue("csrf")
	if got == "" || !hmac.Equal([]byte(got), []byte(c.sign(ck.Value))) {
		return "the form's CSRF token is missing or wrong: reload the page and try again", false
	}
	return "", true
}

// write wraps the handler of a write: it parses the form (bounded),
// refuses a read-only console, a request without a valid CSRF token and
// a user who is not signed in, and passes the user on.
func (c *Console) write(h func(http.ResponseWriter, *http.Request, user)) http.HandlerFunc {
	return func(w http.ResponseWriter, req *http.Request) {
		req.Body = http.MaxBytesReader(w, req.Body, maxFormBytes)
		if err := req.ParseForm(); err != nil {
			c.fail(w, req, http.StatusBadRequest, "bad form: "+err.Error())
			return
		}
		if c.cfg.ReadOnly {
			c.fail(w, req, http.StatusForbidden, "the console is read-only")
			return
		}
		if msg, ok := c.checkCSRF(req); !ok {
			c.fail(w, req, http.StatusForbidden, msg)
			return
		}
		u := c.who(req)
		if !u.SignedIn {
			c.fail(w, req, http.StatusUnauthorized, "sign in first")
			return
		}
		h(w, req, u)
	}
}

// maxFormBytes bounds a form: the largest job body and some.
const maxFormBytes = 2 << 20

func (c *Console) loginForm(w http.ResponseWriter, req *http.Request) {
	c.render(w, req, http.StatusOK, "login", &loginPage{})
}

type loginPage struct {
	Error string
}

func (c *Console) login(w http.ResponseWriter, req *http.Request) {
	req.Body = http.MaxBytesReader(w, req.Body, 64<<10)
	if err := req.ParseForm(); err != nil {
		c.fail(w, req, http.StatusBadRequest, "bad form: "+err.Error())
		return
	}
	if msg, ok := c.checkCSRF(req); !ok {
		c.fail(w, req, http.StatusForbidden, msg)
		return
	}
	tok := strings.TrimSpace(req.PostFormValue("token"))
	if _, err := c.api.Authenticate(req, tok); err != nil {
		var te *httpapi.ThrottledError
		if errors.As(err, &te) {
			w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(te.Wait.Seconds()))))
			c.render(w, req, http.StatusTooManyRequests, "login", &loginPage{Error: te.Error()})
			return
		}
		c.render(w, req, http.StatusUnauthorized, "login", &loginPage{Error: "unknown token"})
		return
	}
	if ck, err := req.Cookie(sessionCookie); err == nil {
		c.sessions.end(ck.Value)
	}
	setCookie(w, req, sessionCookie, c.sessions.start(tok, c.cfg.SessionTTL), 0)
	// A new browser secret with the new identity.
	setCookie(w, req, csrfCookie, newNonce(), 0)
	http.Redirect(w, req, mount(req)+"/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, req *http.Request) {
	req.Body = http.MaxBytesReader(w, req.Body, 64<<10)
	if msg, ok := c.checkCSRF(req); !ok {
		c.fail(w, req, http.StatusForbidden, msg)
		return
	}
	if ck, err := req.Cookie(sessionCookie); err == nil {
		c.sessions.end(ck.Value)
	}
	setCookie(w, req, sessionCookie, "", -1)
	setCookie(w, req, csrfCookie, "", -1)
	http.Redirect(w, req, mount(req)+"/login", http.StatusSeeOther)
}

// setFlash leaves a message for the next page shown.
func setFlash(w http.ResponseWriter, req *http.Request, msg string) {
	if len(msg) > 300 {
		msg = msg[:300] + "…"
	}
	setCookie(w, req, flashCookie, base64.RawURLEncoding.EncodeToString([]byte(msg)), 60)
}

// takeFlash returns the message left for this page and clears it.
func takeFlash(w http.ResponseWriter, req *http.Request) string {
	ck, err := req.Cookie(flashCookie)
	if err != nil {
		return ""
	}
	setCookie(w, req, flashCookie, "", -1)
	b, err := base64.RawURLEncoding.DecodeString(ck.Value)
	if err != nil {
		return ""
	}
	return string(b)
}
