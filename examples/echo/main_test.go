package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestHandler: any method gets 200, and what it sent is printed.
func TestHandler(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	srv := httptest.NewServer(newHandler(&out))
	defer srv.Close()
	tests := []struct {
		method, body string
		want         []string
	}{
		{"GET", "", []string{"GET /hook?x=1", "X-Ksana-Run-Id: r1"}},
		{"POST", `{"job":"j1"}`, []string{"POST /hook?x=1", "X-Ksana-Run-Id: r1", `body: {"job":"j1"}`, "Content-Type: application/json"}},
		{"DELETE", "", []string{"DELETE /hook?x=1"}},
	}
	for _, tt := range tests {
		out.Reset()
		req, _ := http.NewRequest(tt.method, srv.URL+"/hook?x=1", strings.NewReader(tt.body))
		req.Header.Set("X-Ksana-Run-Id", "r1")
		if tt.body != "" {
			req.Header.Set("Content-Type", "application/json")
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("%s: status %d, want 200", tt.method, resp.StatusCode)
		}
		for _, w := range tt.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%s: output lacks %q:\n%s", tt.method, w, out.String())
			}
		}
	}
}
