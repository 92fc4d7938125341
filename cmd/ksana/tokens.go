package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"strings"
	"syscall"

	"github.com/ksana-dev/ksana/cron/httpapi"
)

// maxTokensFile bounds the size of KSANA_API_TOKENS_FILE.
const maxTokensFile = 1 << 20

// parseTokens reads a tokens file: one token a line, "role secret [name]"
// separated by spaces or tabs; blank lines and lines starting with # are
// skipped. role is viewer, operator or admin; name (one word, default the
// role) names the holder in the audit log. An error names the line, and
// never holds a secret.
func parseTokens(data []byte) ([]httpapi.Token, error) {
	var tokens []httpapi.Token
	lineOf := map[string]int{}
	for n, line := range strings.Split(string(data), "\n") {
		n++
		line = strings.TrimSpace(strings.TrimSuffix(line, "\r"))
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 || len(f) > 3 {
			return nil, fmt.Errorf("line %d: want \"role token [name]\" (3 words at most, the name one word), got %d words", n, len(f))
		}
		role, err := httpapi.ParseRole(f[0])
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n, err)
		}
		t := httpapi.Token{Role: role, Secret: f[1]}
		if len(f) == 3 {
			t.Name = f[2]
		}
		if !printable(t.Secret) || !printable(t.Name) {
			return nil, fmt.Errorf("line %d: the token and the name must be printable ASCII", n)
		}
		if m, ok := lineOf[t.Secret]; ok {
			return nil, fmt.Errorf("line %d: the same token as line %d", n, m)
		}
		lineOf[t.Secret] = n
		tokens = append(tokens, t)
	}
	if len(tokens) == 0 {
		return nil, errors.New("holds no token (want lines \"role token [name]\", role viewer, operator or admin)")
	}
	return tokens, nil
}

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

// readTokens reads and parses the tokens file at path.
func readTokens(path string) ([]httpapi.Token, error) {
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
	return parseTokens(data)
}

// reloadTokens warns when the tokens file can be read by others, and
// reads it again on each SIGHUP until ctx ends,
// and replaces the tokens of set; a file that cannot be read or parsed
// leaves the old tokens in place and is logged. It returns a function that
// stops it and waits for it.
func (s *service) reloadTokens(ctx context.Context) (stop func()) {
	if s.tokens == nil {
		return func() {}
	}
	if fi, err := os.Stat(s.cfg.TokensFile); err == nil && runtime.GOOS != "windows" && fi.Mode().Perm()&0o077 != 0 {
		s.log.Warn("ksana: KSANA_API_TOKENS_FILE can be read by other users than its owner; chmod 600 it",
			"file", s.cfg.TokensFile, "mode", fi.Mode().Perm().String())
	}
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
			}
			tokens, err := readTokens(s.cfg.TokensFile)
			if err == nil {
				err = s.tokens.Store(tokens)
			}
			if err != nil {
				s.log.Error("ksana: SIGHUP: KSANA_API_TOKENS_FILE not reloaded, the old tokens stay", "file", s.cfg.TokensFile, "error", err)
				continue
			}
			s.log.Info("ksana: SIGHUP: tokens reloaded", "file", s.cfg.TokensFile, "tokens", len(tokens))
		}
	}()
	return func() {
		signal.Stop(hup)
		cancel()
		<-done
	}
}
