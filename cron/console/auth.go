package console

import (
	"context"
	"encoding/base64"
	"errors"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/ksana-dev/ksana/internal/websec"
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
	tok, ok := c.sessions.Get(ck.Value)
	if !ok {
		return user{AuthOn: true}
	}
	id, ok := c.api.Identify(tok)
	if !ok {
		c.sessions.End(ck.Value)
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
	websec.SetCookie(w, req, mount(req)+"/", name, value, maxAge)
}

// csrfToken returns the CSRF token of the forms shown to req's browser,
// setting the browser's random cookie when it has none.
func (c *Console) csrfToken(w http.ResponseWriter, req *http.Request) string {
	return c.csrf.Token(w, req, mount(req)+"/")
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
		if msg, ok := c.csrf.Check(req); !ok {
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
	if msg, ok := c.csrf.Check(req); !ok {
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
		c.sessions.End(ck.Value)
	}
	setCookie(w, req, sessionCookie, c.sessions.Start(tok, c.cfg.SessionTTL), 0)
	// A new browser secret with the new identity.
	setCookie(w, req, csrfCookie, websec.NewNonce(), 0)
	http.Redirect(w, req, mount(req)+"/", http.StatusSeeOther)
}

func (c *Console) logout(w http.ResponseWriter, req *http.Request) {
	req.Body = http.MaxBytesReader(w, req.Body, 64<<10)
	if msg, ok := c.csrf.Check(req); !ok {
		c.fail(w, req, http.StatusForbidden, msg)
		return
	}
	if ck, err := req.Cookie(sessionCookie); err == nil {
		c.sessions.End(ck.Value)
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
