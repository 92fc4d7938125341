package websec

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"fmt"
	"html/template"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"sync"
	"time"
)

// CSP is the Content-Security-Policy of every console answer.
const CSP = "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'"

// SetHeaders sets the security headers of a console answer.
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-store")
}

// MaxSessions bounds the sessions a [Sessions] keeps.
const MaxSessions = 10000

// Sessions are signed-in browsers: an opaque id (a cookie) names a value
// kept here until its expiry. The zero value is ready to use and safe for
// concurrent use.
type Sessions struct {
	mu sync.Mutex
	m  map[string]session
}

type session struct {
	value   string
	expires time.Time
}

// Start keeps value for ttl under a new random id, which it returns.
func (s *Sessions) Start(value string, ttl time.Duration) string {
	id := NewNonce()
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]session{}
	}
	if len(s.m) >= MaxSessions {
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
		if len(s.m) >= MaxSessions {
			delete(s.m, oldest)
		}
	}
	s.m[id] = session{value: value, expires: now.Add(ttl)}
	return id
}

// Get returns the value of session id, or false when there is none or it
// expired.
func (s *Sessions) Get(id string) (string, bool) {
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
	return v.value, true
}

// End ends session id.
func (s *Sessions) End(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, id)
}

// NewNonce returns 32 random bytes in unpadded base64url.
func NewNonce() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// ValidNonce reports whether v is a value of [NewNonce].
func ValidNonce(v string) bool {
	b, err := base64.RawURLEncoding.DecodeString(v)
	return err == nil && len(b) == 32
}

// SetCookie sets a console cookie on path: HttpOnly, SameSite=Strict,
// Secure when the request came over TLS (or a proxy says so).
func SetCookie(w http.ResponseWriter, req *http.Request, path, name, value string, maxAge int) {
	http.SetCookie(w, &http.Cookie{
		Name:     name,
		Value:    value,
		Path:     path,
		MaxAge:   maxAge,
		HttpOnly: true,
		Secure:   req.TLS != nil || strings.EqualFold(req.Header.Get("X-Forwarded-Proto"), "https"),
		SameSite: http.SameSiteStrictMode,
	})
}

// CSRF makes and checks the CSRF tokens of a console's forms: a token is
// the HMAC under Secret of a random cookie of the browser, so it needs no
// state on the server.
type CSRF struct {
	secret []byte
	label  string
	cookie string
	cop    *http.CrossOriginProtection
}

// NewCSRF returns the CSRF tokens keyed by secret, kept in the browser's
// cookie named cookie; label separates the tokens of different consoles
// under one secret.
func NewCSRF(secret []byte, cookie, label string) *CSRF {
	return &CSRF{secret: secret, label: label, cookie: cookie, cop: http.NewCrossOriginProtection()}
}

// Cookie is the name of the browser's random cookie.
func (c *CSRF) Cookie() string { return c.cookie }

// Token returns the CSRF token of the forms shown to req's browser,
// setting its random cookie on path when it has none (or a malformed
// one).
func (c *CSRF) Token(w http.ResponseWriter, req *http.Request, path string) string {
	if ck, err := req.Cookie(c.cookie); err == nil && ValidNonce(ck.Value) {
		return c.sign(ck.Value)
	}
	v := NewNonce()
	SetCookie(w, req, path, c.cookie, v, 0)
	return c.sign(v)
}

func (c *CSRF) sign(nonce string) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte(c.label))
	m.Write([]byte{0})
	m.Write([]byte(nonce))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Check reports whether a write request (its form parsed) carries the
// CSRF token of its browser's cookie in the form field "csrf" and does
// not come from another origin; when not, a message for the user.
func (c *CSRF) Check(req *http.Request) (string, bool) {
	if err := c.cop.Check(req); err != nil {
		return "the request comes from another site", false
	}
	ck, err := req.Cookie(c.cookie)
	if err != nil || !ValidNonce(ck.Value) {
		return "the form has no session (cookies off?): reload the page and try again", false
	}
	got := req.PostFormValue("csrf")
	if got == "" || !hmac.Equal([]byte(got), []byte(c.sign(ck.Value))) {
		return "the form's CSRF token is missing or wrong: reload the page and try again", false
	}
	return "", true
}

// FormContent reports whether req's body is a URL-encoded form, the one
// Content-Type a console's forms send.
func FormContent(req *http.Request) bool {
	mt, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
	return err == nil && mt == "application/x-www-form-urlencoded"
}

// TokenHash is the SHA-256 of a token, compared by [TokenMatches].
type TokenHash []byte

// HashToken returns the hash of tok, nil for "".
func HashToken(tok string) TokenHash {
	if tok == "" {
		return nil
	}
	h := sha256.Sum256([]byte(tok))
	return h[:]
}

// TokenMatches compares tok with want in constant time; a nil want
// matches nothing.
func TokenMatches(tok string, want TokenHash) bool {
	if want == nil {
		return false
	}
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], want) == 1
}

// ParsePages parses each page templates/NAME.html of fsys with the shared
// templates/layout.html and funcs, by NAME (the layout is no page).
func ParsePages(fsys fs.FS, funcs template.FuncMap) (map[string]*template.Template, error) {
	pages, err := fs.Glob(fsys, "templates/*.html")
	if err != nil {
		return nil, err
	}
	out := map[string]*template.Template{}
	for _, p := range pages {
		name := strings.TrimSuffix(path.Base(p), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(fsys, "templates/layout.html", p)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", name, err)
		}
		out[name] = t
	}
	return out, nil
}
