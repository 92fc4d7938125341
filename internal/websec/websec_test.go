package websec_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/internal/websec"
)

func TestSessions(t *testing.T) {
	var s websec.Sessions
	id := s.Start("admin", time.Hour)
	if v, ok := s.Get(id); !ok || v != "admin" {
		t.Errorf("Get = %q, %v; want admin", v, ok)
	}
	if _, ok := s.Get("other"); ok {
		t.Error("Get of an unknown id found a session")
	}
	s.End(id)
	if _, ok := s.Get(id); ok {
		t.Error("Get after End found the session")
	}
	old := s.Start("read", -time.Second)
	if _, ok := s.Get(old); ok {
		t.Error("Get of an expired session found it")
	}
}

func TestCSRF(t *testing.T) {
	c := websec.NewCSRF([]byte("0123456789abcdef0123456789abcdef"), "csrf", "test")
	w := httptest.NewRecorder()
	tok := c.Token(w, httptest.NewRequest("GET", "/", nil), "/ui/")
	cookie := w.Result().Cookies()[0]
	if cookie.Name != "csrf" || !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode || cookie.Path != "/ui/" {
		t.Fatalf("cookie = %+v", cookie)
	}
	post := func(token string, site string) bool {
		r := httptest.NewRequest("POST", "/ui/x", strings.NewReader(url.Values{"csrf": {token}}.Encode()))
		r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		r.AddCookie(cookie)
		_, ok := c.Check(r)
		return ok
	}
	tests := []struct {
		token, site string
		want        bool
	}{
		{tok, "same-origin", true},
		{tok, "", true},
		{"", "same-origin", false},
		{tok + "x", "same-origin", false},
		{tok, "cross-site", false},
	}
	for _, tt := range tests {
		if got := post(tt.token, tt.site); got != tt.want {
			t.Errorf("Check(token ok = %v, site %q) = %v, want %v", tt.token == tok, tt.site, got, tt.want)
		}
	}
}

func TestTokens(t *testing.T) {
	h := websec.HashToken("a-token-of-16-bytes")
	if !websec.TokenMatches("a-token-of-16-bytes", h) || websec.TokenMatches("another", h) || websec.TokenMatches("", nil) {
		t.Error("TokenMatches is wrong")
	}
	if websec.HashToken("") != nil {
		t.Error("HashToken of no token is not nil")
	}
}

// A form's CSRF token: set with the page, checked with the POST.
func ExampleCSRF() {
	c := websec.NewCSRF([]byte("0123456789abcdef0123456789abcdef"), "csrf", "example")
	w := httptest.NewRecorder()
	tok := c.Token(w, httptest.NewRequest("GET", "/", nil), "/")

	r := httptest.NewRequest("POST", "/act", strings.NewReader("csrf="+url.QueryEscape(tok)))
	r.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	r.AddCookie(w.Result().Cookies()[0])
	_, ok := c.Check(r)
	fmt.Println(websec.FormContent(r), ok)
	// Output: true true
}
