package httpapi

import (
	"crypto/sha256"
	"fmt"
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
		req := httptest.NewRequest("GET", "/jobs", nil)
		req.Header.Set("Authorization", "Bearer tok-0")
		b.ReportAllocs()
		for b.Loop() {
			if _, ok := f.identify(req); !ok {
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
			f := &Server{cfg: Config{Authorizer: set}}
			req := httptest.NewRequest("GET", "/jobs", nil)
			req.Header.Set("Authorization", fmt.Sprintf("Bearer tok-%012d", n-1))
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := f.identify(req); !ok {
					b.Fatal("refused")
				}
			}
		})
	}
}

// BenchmarkAuditedPause: POST /jobs/{id}/pause through the handler with
// the audit log on (the default) and off (AuditSize < 0, no sink: the
// baseline).
func BenchmarkAuditedPause(b *testing.B) {
	for _, tc := range []struct {
		name string
		size int
	}{{"audit-off", -1}, {"audit-on", 0}} {
		b.Run(tc.name, func(b *testing.B) {
			f := newFixture(b, Config{AuditSize: tc.size})
			w := httptest.NewRecorder()
			f.api.ServeHTTP(w, httptest.NewRequest("POST", "/jobs", strings.NewReader(validJob)))
			if w.Code != 201 {
				b.Fatalf("create: %d %s", w.Code, w.Body)
			}
			b.ReportAllocs()
			for b.Loop() {
				w := httptest.NewRecorder()
				f.api.ServeHTTP(w, httptest.NewRequest("POST", "/jobs/fixed/pause", nil))
				if w.Code != 200 {
					b.Fatalf("pause: %d %s", w.Code, w.Body)
				}
			}
		})
	}
}
