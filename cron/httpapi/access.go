package httpapi

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"math"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/internal/websec"
)

// Throttling of wrong tokens: each client address has a bucket of
// [GuessBurst] failures, refilled at [GuessRate] a second. A client whose
// bucket is empty is answered 429 with Retry-After, before its token is
// looked at; other addresses, and so the right token used from
// elsewhere, are not slowed down.
const (
	GuessBurst = websec.GuessBurst
	GuessRate  = websec.GuessRate
)

// ErrThrottled is the error of [Server.Authenticate] for a client that
// sent too many wrong tokens: it must wait ([ThrottledError.Wait]).
var ErrThrottled = errors.New("httpapi: too many wrong tokens from this address")

// ThrottledError says how long a client must wait.
type ThrottledError struct{ Wait time.Duration }

func (e *ThrottledError) Error() string {
	return fmt.Sprintf("too many wrong tokens from this address: try again in %s", e.Wait.Round(time.Second))
}

// Is makes a ThrottledError match [ErrThrottled].
func (e *ThrottledError) Is(target error) bool { return target == ErrThrottled }

// ErrUnknownToken is the error of [Server.Authenticate] for a token no
// one holds.
var ErrUnknownToken = errors.New("httpapi: unknown token")

// Authenticate returns who holds token, sent by the client of req: the
// holder of Config.Token (named "admin", role admin) or of a token the
// Config.Authenticator knows. A wrong token is [ErrUnknownToken] and
// counts against the client's address; a client that sent too many is a
// *[ThrottledError] until it has waited. The console signs its users in
// through it, so that both share one rule and one count.
func (s *Server) Authenticate(req *http.Request, token string) (Identity, error) {
	addr := websec.ClientAddr(req)
	if d := s.guard.Wait(addr); d > 0 {
		return Identity{}, &ThrottledError{Wait: d}
	}
	if id, ok := s.Identify(token); ok {
		return id, nil
	}
	s.guard.Fail(addr, req.URL.Path)
	return Identity{}, ErrUnknownToken
}

// authOn reports whether requests need a token.
func (s *Server) authOn() bool {
	return s.cfg.Token != "" || s.cfg.Authenticator != nil
}

// AuthRequired reports whether the API asks for a bearer token (Config.Token
// or Config.Authenticator is set); when it does not, every request is
// served with the admin role.
func (s *Server) AuthRequired() bool { return s.authOn() }

// Identify returns who holds token, as the API sees a request carrying
// "Authorization: Bearer <token>": the holder of Config.Token (named
// "admin", role admin) or of a token Config.Authenticator knows; false
// for any other token (whether or not authentication is on). It counts
// no failure: see [Server.Authenticate].
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
	if s.cfg.Authenticator != nil {
		if id, ok := s.cfg.Authenticator.Authenticate(tok); ok && id.Role.Includes(RoleViewer) {
			return id, true
		}
	}
	return Identity{}, false
}

// anonymous is the identity of every request when authentication is off.
var anonymous = Identity{Name: "anonymous", Role: RoleAdmin}

// forbiddenBody is the answer of a 403.
type forbiddenBody struct {
	Error string `json:"error"`
	Role  Role   `json:"role,omitempty"` // the role the request needs
}

// checkAccess answers 401, 403 or 429 and returns false when req may not
// reach route rt; it returns the caller's identity otherwise
// ([anonymous] when authentication is off).
func (s *Server) checkAccess(w http.ResponseWriter, req *http.Request, rt route) (Identity, bool) {
	if rt.open {
		return anonymous, true
	}
	if !s.authOn() {
		return anonymous, true
	}
	tok, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	tok = strings.TrimSpace(tok)
	if !ok || tok == "" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="ksana"`)
		writeError(w, &RequestError{Status: http.StatusUnauthorized, Msg: "missing or wrong bearer token (Authorization: Bearer <token>)"})
		return Identity{}, false
	}
	id, err := s.Authenticate(req, tok)
	var te *ThrottledError
	switch {
	case errors.As(err, &te):
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(te.Wait.Seconds()))))
		writeError(w, &RequestError{Status: http.StatusTooManyRequests, Msg: te.Error()})
		return Identity{}, false
	case err != nil:
		w.Header().Set("WWW-Authenticate", `Bearer realm="ksana"`)
		writeError(w, &RequestError{Status: http.StatusUnauthorized, Msg: "missing or wrong bearer token (Authorization: Bearer <token>)"})
		return Identity{}, false
	}
	return id, true
}

// actionOf is the change a request makes, "" for a read (and the
// preview, which changes nothing).
func actionOf(method, pattern string) cron.Action {
	switch {
	case method == http.MethodGet || method == http.MethodHead:
		return ""
	case pattern == "/jobs" && method == http.MethodPost:
		return cron.ActionCreate
	case pattern == "/jobs/{id}" && method == http.MethodPatch:
		return cron.ActionUpdate
	case pattern == "/jobs/{id}" && method == http.MethodDelete:
		return cron.ActionDelete
	case pattern == "/jobs/{id}/run-now":
		return cron.ActionRunNow
	case pattern == "/jobs/{id}/pause":
		return cron.ActionPause
	case pattern == "/jobs/{id}/resume":
		return cron.ActionResume
	case pattern == "/pause":
		return cron.ActionPauseAll
	case pattern == "/resume":
		return cron.ActionResumeAll
	}
	return ""
}

// NeedRole is the role a request needs, given its method and the path
// pattern of its endpoint ("/jobs/{id}/pause"), under the default rules
// ([cron.RoleRules]): viewer for reads and the preview, operator for
// run-now, pause and resume, admin for every other write.
func NeedRole(method, pattern string) Role {
	if act := actionOf(method, pattern); act != "" {
		return act.NeedRole()
	}
	return RoleViewer
}

// forbidden answers the 403 of a change the runner's Authorizer refused.
func forbidden(w http.ResponseWriter, err error) {
	var fe *cron.ForbiddenError
	body := forbiddenBody{Error: err.Error()}
	if errors.As(err, &fe) {
		body.Role = fe.Need
		body.Error = fmt.Sprintf("%s needs the %s role; this token has %s", fe.Action, fe.Need, fe.Actor.Role)
		if fe.Need == "" {
			body.Error = fmt.Sprintf("%s is not allowed for this token", fe.Action)
		}
	}
	writeJSON(w, http.StatusForbidden, body)
}

// checkDriveBy refuses a write that a web page of another site could
// send: one that says it comes from another site (Sec-Fetch-Site,
// Origin), one whose body is not declared JSON (a form or a no-cors
// fetch needs no preflight for other types), and, when no token is
// required, one to a Host outside Config.AllowedHosts (DNS rebinding:
// reads too). It answers and returns false when it refuses.
func (s *Server) checkDriveBy(w http.ResponseWriter, req *http.Request) bool {
	if req.Method == http.MethodGet || req.Method == http.MethodHead || req.Method == http.MethodOptions {
		return true
	}
	if err := s.xorigin.Check(req); err != nil {
		writeError(w, &RequestError{Status: http.StatusForbidden, Msg: "cross-origin request refused: " + err.Error()})
		return false
	}
	ct := req.Header.Get("Content-Type")
	mt, _, err := mime.ParseMediaType(ct)
	if ct == "" {
		writeError(w, &RequestError{Status: http.StatusUnsupportedMediaType,
			Msg: "Content-Type is missing: every write must be sent as application/json, with or without a body"})
		return false
	}
	if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
		writeError(w, &RequestError{Status: http.StatusUnsupportedMediaType,
			Msg: fmt.Sprintf("Content-Type %q is not JSON: send application/json", ct)})
		return false
	}
	return true
}

// checkHost refuses, when no token is required, a request to a Host
// outside Config.AllowedHosts (DNS rebinding: reads too). It answers 421
// and returns false when it refuses.
func (s *Server) checkHost(w http.ResponseWriter, req *http.Request) bool {
	if s.AllowsHost(req) {
		return true
	}
	writeError(w, &RequestError{Status: http.StatusMisdirectedRequest,
		Msg: fmt.Sprintf("Host %q is not one this service answers to; set KSANA_ALLOWED_HOSTS (Config.AllowedHosts) to add it", req.Host)})
	return false
}

// AllowsHost reports whether the API answers req's Host: always when a
// token is required or Config.AllowedHosts is empty, else when the Host
// is one of those. The console asks it too.
func (s *Server) AllowsHost(req *http.Request) bool {
	return len(s.cfg.AllowedHosts) == 0 || s.authOn() || hostAllowed(s.cfg.AllowedHosts, req.Host)
}

// hostAllowed reports whether the Host header host names one of hosts
// ("localhost:7100"; a host without a port allows any port).
func hostAllowed(hosts []string, host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	for _, a := range hosts {
		if strings.EqualFold(a, host) || strings.EqualFold(a, h) || strings.EqualFold(strings.Trim(a, "[]"), h) {
			return true
		}
	}
	return false
}
