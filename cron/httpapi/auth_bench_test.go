package httpapi

import (
	"crypto/sha256"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkAuthenticate: a request's token looked up in a TokenSet of n
// tokens, beside the single Config.Token compare (the baseline).
func BenchmarkAuthenticate(b *testing.B) {
	b.Run("single-token", func(b *testing.B) {
		f := &Server{cfg: Config{Token: "tok-000000000000"}}
		f.tokenSum = sha256.Sum256([]byte("tok-000000000000"))
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := f.Identify("tok-000000000000"); !ok {
				b.Fatal("refused")
			}
		}
	})
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("tokenset-%d", n), func(b *testing.B) {
			var toks []Token
			for i := range n {
				toks = append(toks, Token{Secret: fmt.Sprintf("tok-%012d", i), Role: RoleViewer})
			}
			set, err := NewTokenSet(toks)
			if err != nil {
				b.Fatal(err)
			}
			f := &Server{cfg: Config{Authenticator: set}}
			tok := fmt.Sprintf("tok-%012d", n-1)
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := f.Identify(tok); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkAuditedPause: POST /jobs/{id}/pause through the handler, each
// audited by the runner, beside GET /jobs/{id} (a read, not audited: the
// baseline).
func BenchmarkAuditedPause(b *testing.B) {
	for _, tc := range []struct{ name, method, path string }{
		{"read", "GET", "/jobs/fixed"}, {"audited-pause", "POST", "/jobs/fixed/pause"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(b, Config{})
			w := httptest.NewRecorder()
			f.api.ServeHTTP(w, jsonReq("POST", "/jobs", validJob))
			if w.Code != 201 {
				b.Fatalf("create: %d %s", w.Code, w.Body)
			}
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				f.api.ServeHTTP(w, jsonReq(tc.method, tc.path, ""))
				if w.Code != 200 {
					b.Fatalf("%s: %d %s", tc.name, w.Code, w.Body)
				}
			}
		})
	}
}

// jsonReq is a request with a JSON body (every write needs the type).
func jsonReq(method, path, body string) *http.Request {
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	return req
}
