package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"github.com/ksana-dev/ksana/cron"
	"strings"
	"sync/atomic"
)

// Role is what a token may do: [cron.Role]. Each role may do what the
// roles below it may; what each needs is the runner's rule
// ([cron.Action.NeedRole] under the default [cron.RoleRules]).
type Role = cron.Role

// The roles, from least to most.
const (
	// RoleViewer reads: every GET (and HEAD), and POST /schedules/preview,
	// which changes nothing. It sees no secret.
	RoleViewer = cron.RoleViewer
	// RoleOperator also runs, pauses and resumes jobs.
	RoleOperator = cron.RoleOperator
	// RoleAdmin may do everything: create, patch and delete jobs too.
	RoleAdmin = cron.RoleAdmin
)

// ParseRole returns the role named s ("viewer", "operator" or "admin").
func ParseRole(s string) (Role, error) { return cron.ParseRole(s) }

// Identity is who a request comes from: the [cron.Actor] the API makes
// its changes for.
type Identity = cron.Actor

// Authenticator tells who holds a bearer token. An embedding service may
// implement it over its own users; [TokenSet] is the one of a fixed list.
type Authenticator interface {
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

// TokenSet is an [Authenticator] over a list of tokens that can be replaced
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
		if !t.Role.Includes(RoleViewer) {
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

var _ Authenticator = (*TokenSet)(nil)
