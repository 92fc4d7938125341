package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
)

// Role is what a token may do. Each role may do what the roles below it may.
type Role string

// The roles, from least to most.
const (
	// RoleViewer reads: every GET (and HEAD), and POST /schedules/preview,
	// which changes nothing.
	RoleViewer Role = "viewer"
	// RoleOperator also runs, pauses and resumes jobs.
	RoleOperator Role = "operator"
	// RoleAdmin may do everything: create, patch and delete jobs too.
	RoleAdmin Role = "admin"
)

// rank orders the roles; 0 is no valid role.
func (r Role) rank() int {
	switch r {
	case RoleViewer:
		return 1
	case RoleOperator:
		return 2
	case RoleAdmin:
		return 3
	}
	return 0
}

// Includes reports whether a holder of role r may do what a holder of
// role o may: viewer < operator < admin. An unknown role includes none,
// and none includes an unknown role.
func (r Role) Includes(o Role) bool {
	return r.rank() > 0 && o.rank() > 0 && r.rank() >= o.rank()
}

// ParseRole returns the role named s ("viewer", "operator" or "admin").
func ParseRole(s string) (Role, error) {
	if r := Role(s); r.rank() > 0 {
		return r, nil
	}
	return "", fmt.Errorf("unknown role %q: want viewer, operator or admin", s)
}

// Identity is who a request comes from.
type Identity struct {
	// Name names the caller in the audit log; it is never the token.
	Name string
	// Role is what the caller may do.
	Role Role
}

// Authorizer tells who holds a bearer token. An embedding service may
// implement it over its own users; [TokenSet] is the one of a fixed list.
type Authorizer interface {
	// Authenticate returns the identity of token, or false when no one
	// holds it. It must be safe for concurrent use and should take the
	// same time whatever the token.
	Authenticate(token string) (Identity, bool)
}

// Token is one bearer token and the identity that holds it.
type Token struct {
	// Secret is what the client sends as "Authorization: Bearer <Secret>".
	Secret string
	// Role is what its holder may do.
	Role Role
	// Name names its holder in the audit log (default: the role).
	Name string
}

// MinTokenLen is the least length in bytes of a bearer token: of
// Config.Token and of each token of a [TokenSet].
const MinTokenLen = 16

// TokenSet is an [Authorizer] over a list of tokens that can be replaced
// at any time (for a reload) while requests are served. Its zero value
// holds no token.
type TokenSet struct {
	cur atomic.Pointer[[]hashedToken]
}

type hashedToken struct {
	sum [32]byte
	id  Identity
}

// NewTokenSet returns a set holding tokens; see [TokenSet.Store].
func NewTokenSet(tokens []Token) (*TokenSet, error) {
	s := &TokenSet{}
	if err := s.Store(tokens); err != nil {
		return nil, err
	}
	return s, nil
}

// Store replaces the tokens of s by tokens, or, when one is bad (blank
// secret, one with white space or shorter than [MinTokenLen] bytes, an
// unknown role, a secret given twice),
// keeps the old ones and returns an error naming it by its index and name
// (never by its secret).
func (s *TokenSet) Store(tokens []Token) error {
	hs := make([]hashedToken, 0, len(tokens))
	seen := map[[32]byte]int{}
	for i, t := range tokens {
		name := t.Name
		if name == "" {
			name = string(t.Role)
		}
		if t.Secret == "" || strings.ContainsAny(t.Secret, " \t\r\n") {
			return fmt.Errorf("httpapi: token %d (%s): the secret must not be empty nor hold white space", i+1, name)
		}
		if len(t.Secret) < MinTokenLen {
			return fmt.Errorf("httpapi: token %d (%s): the secret must be at least %d bytes (MinTokenLen)", i+1, name, MinTokenLen)
		}
		if t.Role.rank() == 0 {
			return fmt.Errorf("httpapi: token %d (%s): unknown role %q: want viewer, operator or admin", i+1, name, t.Role)
		}
		sum := sha256.Sum256([]byte(t.Secret))
		if j, ok := seen[sum]; ok {
			return fmt.Errorf("httpapi: token %d (%s): the same secret as token %d", i+1, name, j+1)
		}
		seen[sum] = i
		hs = append(hs, hashedToken{sum: sum, id: Identity{Name: name, Role: t.Role}})
	}
	s.cur.Store(&hs)
	return nil
}

// Len returns how many tokens s holds.
func (s *TokenSet) Len() int {
	if p := s.cur.Load(); p != nil {
		return len(*p)
	}
	return 0
}

// Authenticate compares the hash of token with every token's in constant
// time, looking at them all whatever matches.
func (s *TokenSet) Authenticate(token string) (Identity, bool) {
	p := s.cur.Load()
	if p == nil {
		return Identity{}, false
	}
	sum := sha256.Sum256([]byte(token))
	var found Identity
	ok := 0
	for i := range *p {
		h := &(*p)[i]
		eq := subtle.ConstantTimeCompare(sum[:], h.sum[:])
		if eq == 1 {
			found = h.id
		}
		ok |= eq
	}
	return found, ok == 1
}

var _ Authorizer = (*TokenSet)(nil)

// NeedRole is the role a request needs, given its method and the path
// pattern of its endpoint ("/jobs/{id}/pause"): viewer for reads and the
// preview, operator for run-now, pause and resume, admin for every other
// write (create, patch, delete).
func NeedRole(method, pattern string) Role {
	switch {
	case method == http.MethodGet || method == http.MethodHead:
		return RoleViewer
	case pattern == "/schedules/preview":
		return RoleViewer
	case pattern == "/jobs/{id}/run-now", pattern == "/jobs/{id}/pause", pattern == "/jobs/{id}/resume":
		return RoleOperator
	}
	return RoleAdmin
}

// authOn reports whether requests need a token.
func (s *Server) authOn() bool {
	return s.cfg.Token != "" || s.cfg.Authorizer != nil
}

// AuthRequired reports whether the API asks for a bearer token (Config.Token
// or Config.Authorizer is set); when it does not, every request is served
// with every role.
func (s *Server) AuthRequired() bool { return s.authOn() }

// identify returns who sent req: the holder of Config.Token ("admin",
// role admin) or of a token Config.Authorizer knows.
func (s *Server) identify(req *http.Request) (Identity, bool) {
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return Identity{}, false
	}
	return s.Identify(strings.TrimSpace(tok))
}

// Identify returns who holds token, as the API sees a request carrying
// "Authorization: Bearer <token>": the holder of Config.Token (named
// "admin", role admin) or of a token Config.Authorizer knows; false for
// any other token (whether or not authentication is on).
func (s *Server) Identify(tok string) (Identity, bool) {
	if tok == "" {
		return Identity{}, false
	}
	if s.cfg.Token != "" {
		sum := sha256.Sum256([]byte(tok))
		if subtle.ConstantTimeCompare(sum[:], s.tokenSum[:]) == 1 {
			return Identity{Name: "admin", Role: RoleAdmin}, true
		}
	}
	if s.cfg.Authorizer != nil {
		if id, ok := s.cfg.Authorizer.Authenticate(tok); ok && id.Role.rank() > 0 {
			return id, true
		}
	}
	return Identity{}, false
}

// forbiddenBody is the answer of a 403.
type forbiddenBody struct {
	Error string `json:"error"`
	Role  Role   `json:"role"` // the role the request needs
}

// checkAccess answers 401 or 403 and returns false when req may not reach
// route rt; it returns the caller's identity otherwise (the zero Identity
// when authentication is off).
func (s *Server) checkAccess(w http.ResponseWriter, req *http.Request, rt route) (Identity, bool) {
	if rt.open || !s.authOn() {
		return Identity{}, true
	}
	id, ok := s.identify(req)
	if !ok {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ksana"`)
		writeError(w, &RequestError{Status: http.StatusUnauthorized, Msg: "missing or wrong bearer token (Authorization: Bearer <token>)"})
		return id, false
	}
	if !allowed(rt.allow, req.Method) {
		return id, true // the 405 follows
	}
	need := NeedRole(req.Method, rt.path)
	if id.Role.rank() < need.rank() {
		writeJSON(w, http.StatusForbidden, forbiddenBody{
			Error: fmt.Sprintf("%s %s needs the %s role; this token has %s", req.Method, rt.path, need, id.Role),
			Role:  need,
		})
		return id, false
	}
	return id, true
}
