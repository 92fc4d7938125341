package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ksana-dev/ksana/cron/httpapi"
)

// maxTokensFile bounds the size of KSANA_API_TOKENS_FILE.
const maxTokensFile = 1 << 20

// parseTokens reads a tokens file: one token a line, "role secret [name]"
// separated by spaces or tabs; blank lines and lines starting with # are
// skipped. role is viewer, operator or admin; secret holds at least
// [httpapi.MinTokenLen] bytes; name (one word, default the role) names the
// holder in the audit log. It returns the tokens of the good lines, and
// an error per bad line, each a *lineError naming the line and never
// showing a word of it (a word may be a secret); a file with no good
// line and no bad one gives [errNoToken].
func parseTokens(data []byte) ([]httpapi.Token, []error) {
	var (
		tokens []httpapi.Token
		bad    []error
	)
	lineOf := map[string]int{}
	for n, line := range strings.Split(string(data), "\n") {
		n++
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		t, why := parseTokenLine(line)
		if why == "" {
			if m, ok := lineOf[t.Secret]; ok {
				why = fmt.Sprintf("the same token as line %d", m)
			}
		}
		if why != "" {
			bad = append(bad, &lineError{line: n, why: why})
			continue
		}
		lineOf[t.Secret] = n
		tokens = append(tokens, t)
	}
	if len(tokens) == 0 && len(bad) == 0 {
		bad = append(bad, errNoToken)
	}
	return tokens, bad
}

// parseTokenLine reads one line of a tokens file, or says why it is bad
// without showing any of its words.
func parseTokenLine(line string) (httpapi.Token, string) {
	f := strings.Fields(line)
	if len(f) < 2 || len(f) > 3 {
		return httpapi.Token{}, fmt.Sprintf("want \"role token [name]\" (3 words at most, the name one word), got %d words", len(f))
	}
	role, err := httpapi.ParseRole(f[0])
	if err != nil {
		return httpapi.Token{}, "unknown role: want viewer, operator or admin (in lower case) as the first word"
	}
	t := httpapi.Token{Role: role, Secret: f[1]}
	if len(f) == 3 {
		t.Name = f[2]
	}
	if !printable(t.Secret) || !printable(t.Name) {
		return httpapi.Token{}, "the token and the name must be printable ASCII"
	}
	if len(t.Secret) < httpapi.MinTokenLen {
		return httpapi.Token{}, fmt.Sprintf("the token is shorter than %d bytes", httpapi.MinTokenLen)
	}
	return t, ""
}

// lineError is a bad line of a tokens file.
type lineError struct {
	line int
	why  string
}

func (e *lineError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.why) }

// errNoToken is a tokens file without a line of a token.
var errNoToken = errors.New("holds no token (want lines \"role token [name]\", role viewer, operator or admin)")

// printable reports whether s holds only printable ASCII: what a client
// can send in an Authorization header, and what a log shows plainly.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// readTokens reads and parses the tokens file at path, as it must be at
// start: a file that cannot be read, or that has a bad line, is an error
// (naming every bad line).
func readTokens(path string) ([]httpapi.Token, error) {
	data, err := readTokensFile(path)
	if err != nil {
		return nil, err
	}
	tokens, bad := parseTokens(data)
	if len(bad) > 0 {
		return nil, errors.New(joinErrors(bad))
	}
	return tokens, nil
}

// readTokensFile reads the file at path, of at most maxTokensFile bytes.
func readTokensFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxTokensFile+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxTokensFile {
		return nil, fmt.Errorf("larger than %d bytes", maxTokensFile)
	}
	return data, nil
}

// joinErrors joins errs in one line: "line 2: ...; line 5: ...".
func joinErrors(errs []error) string {
	msgs := make([]string, len(errs))
	for i, err := range errs {
		msgs[i] = err.Error()
	}
	return strings.Join(msgs, "; ")
}

// tokenReload is the outcome of the last reload of KSANA_API_TOKENS_FILE,
// shown by GET /health. It holds no secret: the problems name lines, never
// their words.
type tokenReload struct {
	mu       sync.Mutex
	at       time.Time // zero before the first reload
	status   string    // "ok", "bad lines" (refused, the others apply) or "failed" (no token of the file is valid)
	problems []string
}

// set records the outcome of a reload at time at.
func (r *tokenReload) set(at time.Time, status string, problems []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.at, r.status, r.problems = at, status, problems
}

// notes are the /health fields of the last reload: none before the first.
func (r *tokenReload) notes() map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.at.IsZero() {
		return nil
	}
	n := map[string]any{"tokens_reload": r.status, "tokens_reload_at": r.at.UTC().Format(time.RFC3339)}
	if len(r.problems) > 0 {
		n["tokens_reload_errors"] = slices.Clone(r.problems)
	}
	return n
}

// reloadTokens reads KSANA_API_TOKENS_FILE again and replaces the tokens
// of the API by those of its good lines: a token no longer in the file is
// refused from now on. A bad line is refused and logged (by its number,
// never its words) while the other lines apply; a file that cannot be read
// or holds no good line leaves no token of the file valid (authentication
// stays on: every request with one gets 401 until a reload reads the file).
// The outcome is recorded for GET /health.
func (s *service) reloadTokens(now time.Time) {
	file := s.cfg.TokensFile
	data, err := readTokensFile(file)
	if err != nil {
		s.tokens.Store(nil)
		why := err.Error()
		var pe *fs.PathError
		if errors.As(err, &pe) {
			why = pe.Err.Error() // not the path: /health answers anyone
		}
		s.reload.set(now, "failed", []string{"the file cannot be read: " + why})
		s.log.Error("ksana: SIGHUP: KSANA_API_TOKENS_FILE cannot be read: NO token of it is valid now; requests carrying one get 401 until a reload reads the file",
			"file", file, "error", err)
		return
	}
	tokens, bad := parseTokens(data)
	var problems []string
	for _, e := range bad {
		problems = append(problems, e.Error())
	}
	if len(tokens) > 0 {
		if err := s.tokens.Store(tokens); err != nil {
			// parseTokens checks what Store does: this is a bug, and the
			// file's tokens are not trusted.
			tokens, problems = nil, append(problems, err.Error())
		}
	}
	if len(tokens) == 0 {
		s.tokens.Store(nil)
		s.reload.set(now, "failed", problems)
		s.log.Error("ksana: SIGHUP: KSANA_API_TOKENS_FILE holds no valid token: NO token of it is valid now; requests carrying one get 401 until a reload reads a good line",
			"file", file, "error", strings.Join(problems, "; "))
		return
	}
	if len(bad) > 0 {
		s.reload.set(now, "bad lines", problems)
		s.log.Error("ksana: SIGHUP: KSANA_API_TOKENS_FILE has bad lines: they are refused, the tokens of the other lines apply",
			"file", file, "tokens", len(tokens), "error", strings.Join(problems, "; "))
		return
	}
	s.reload.set(now, "ok", nil)
	s.log.Info("ksana: SIGHUP: tokens reloaded", "file", file, "tokens", len(tokens))
}

// watchSighup reloads the tokens file on each SIGHUP until ctx ends, or,
// without KSANA_API_TOKENS_FILE, logs the signal and ignores it: SIGHUP
// never ends the service. It first warns when the tokens file can be
// read by others, and handles at once a SIGHUP that came while the
// service started. It returns a function that stops it and waits for it.
func (s *service) watchSighup(ctx context.Context) (stop func()) {
	if s.tokens != nil {
		if fi, err := os.Stat(s.cfg.TokensFile); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
			s.log.Warn("ksana: KSANA_API_TOKENS_FILE can be read by other users than its owner; chmod 600 it",
				"file", s.cfg.TokensFile, "mode", fi.Mode().Perm().String())
		}
	}
	hup := s.hup
	var own chan os.Signal // when main gave none (a test)
	if hup == nil {
		own = make(chan os.Signal, 1)
		signal.Notify(own, syscall.SIGHUP)
		hup = own
	}
	onHup := func() {
		if s.tokens == nil {
			s.log.Info("ksana: SIGHUP ignored: there is nothing to reload without KSANA_API_TOKENS_FILE")
			return
		}
		s.reloadTokens(time.Now())
	}
	// A SIGHUP sent while the service started: the file may have changed
	// since it was read, so reload before the API serves.
	select {
	case <-hup:
		onHup()
	default:
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				onHup()
			}
		}
	}()
	return func() {
		cancel()
		<-done
		if own != nil {
			signal.Stop(own)
		}
	}
}
