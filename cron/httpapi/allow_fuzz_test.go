package httpapi

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// FuzzParseAllowList: any input either fails naming the bad pattern or
// yields lower-case patterns that each parse again to themselves, parse
// back to themselves, and allow the hosts they name.
func FuzzParseAllowList(f *testing.F) {
	for _, s := range []string{"", "*", "api.example.com", "*.internal, API.Example.com ,", "http://x", "*.", "a:80", "*.*.x", " , ,", "x y", "a/b", "exa\u0130mple.com", ".", "a..b", "api.example.com.", "*.internal.",
		"10.0.0.0/8", "10.1.2.3/8", "127.0.0.1", "::1", "::ffff:127.0.0.1", "::ffff:10.0.0.0/104", "fe80::1%eth0", "fe80::/10", "1.2.3.4.", "0.0.0.0/0", "0\f."} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseAllowList(s)
		if err != nil {
			if !strings.Contains(err.Error(), "host pattern") {
				t.Fatalf("ParseAllowList(%q) error %q names no pattern", s, err)
			}
			return
		}
		for _, p := range got {
			if p == "" || p != strings.ToLower(p) || p != strings.TrimSpace(p) {
				t.Errorf("ParseAllowList(%q): pattern %q is empty, not lower case or not trimmed", s, p)
			}
			if again, err := ParseAllowList(p); err != nil || len(again) != 1 || again[0] != p {
				t.Errorf("ParseAllowList(%q): pattern %q does not parse again to itself: %q, %v", s, p, again, err)
			}
			host := strings.TrimPrefix(p, "*.")
			if p != "*" && strings.HasPrefix(p, "*.") {
				host = "sub." + host
			}
			if pfx, err := netip.ParsePrefix(p); err == nil {
				host = pfx.Addr().String() // an address of the block it names
			}
			if a, err := netip.ParseAddr(host); err == nil {
				if a.Zone() != "" || a.Is4In6() {
					t.Errorf("ParseAllowList(%q): address pattern %q has a zone or is IPv4-mapped", s, p)
				}
				if HostAllowed(got, host+"%zone") {
					t.Errorf("ParseAllowList(%q) = %q allows %q with a zone", s, got, host)
				}
			}
			if !HostAllowed(got, host) {
				t.Errorf("ParseAllowList(%q) = %q does not allow %q", s, got, host)
			}
		}
		again, err := ParseAllowList(strings.Join(got, ","))
		if err != nil {
			t.Fatalf("ParseAllowList(%q) = %q does not parse again: %v", s, got, err)
		}
		if diff := cmp.Diff(got, again); diff != "" {
			t.Errorf("ParseAllowList(%q) parsed again (-first +again):\n%s", s, diff)
		}
		if len(got) == 0 && !HostAllowed(got, "any.host") {
			t.Errorf("ParseAllowList(%q): an empty list refuses a host", s)
		}
		if len(got) > 0 && HostAllowed(got, "127.0.0.1") && !slices.ContainsFunc(got, func(p string) bool {
			pfx, err := netip.ParsePrefix(p)
			if err != nil {
				pfx, err = netip.ParsePrefix(p + "/32")
			}
			return err == nil && pfx.Contains(netip.MustParseAddr("127.0.0.1"))
		}) {
			t.Errorf("ParseAllowList(%q) = %q allows the IP literal 127.0.0.1 that no address or CIDR pattern names", s, got)
		}
		if !slices.Contains(got, "*") && len(got) > 0 && HostAllowed(got, "never-listed.invalid-zz") && !slices.ContainsFunc(got, func(p string) bool {
			return strings.HasSuffix("never-listed.invalid-zz", strings.TrimPrefix(p, "*")) || p == "never-listed.invalid-zz"
		}) {
			t.Errorf("ParseAllowList(%q) = %q allows an unlisted host", s, got)
		}
	})
}

// TestCreateCallbackAllow: a job is refused at creation when its http.url
// or alert.url host is an IP literal that no address or CIDR pattern of
// CallbackAllow names, or carries an IPv6 zone, whatever host name
// patterns the zone looks like.
func TestCreateCallbackAllow(t *testing.T) {
	r, err := cron.New(cron.NewMemStore(), cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result {
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1}
	}), cron.Config{})
	if err != nil {
		t.Fatal(err)
	}
	api, err := New(r, Config{CallbackAllow: []string{"*.internal", "*", "10.0.0.0/8", "fd00::1"}})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url, alert string
		want       int
	}{
		{"http://api.internal/", "", http.StatusCreated},
		{"http://example.com/", "", http.StatusCreated},
		{"http://10.1.2.3:8080/", "", http.StatusCreated},
		{"http://[::ffff:10.1.2.3]/", "", http.StatusCreated},
		{"http://[fd00::1]/", "http://10.9.9.9/a", http.StatusCreated},
		{"http://[::ffff:127.0.0.1%25.internal]:8000/", "", http.StatusBadRequest},
		{"http://[fd00::1%25eth0]/", "", http.StatusBadRequest},
		{"http://127.0.0.1:8000/", "", http.StatusBadRequest},
		{"http://[::1]:8000/", "", http.StatusBadRequest},
		{"http://11.0.0.1/", "", http.StatusBadRequest},
		{"http://api.internal/", "http://[::ffff:127.0.0.1%25.internal]:8000/", http.StatusBadRequest},
		{"http://api.internal/", "http://169.254.169.254/", http.StatusBadRequest},
	}
	for _, tt := range tests {
		body := `{"http":{"url":"` + tt.url + `"},"schedule":{"kind":"every","every":"1h"}`
		if tt.alert != "" {
			body += `,"alert":{"url":"` + tt.alert + `"}`
		}
		body += "}"
		req := httptest.NewRequest(http.MethodPost, "/jobs", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
		if w.Code != tt.want {
			t.Errorf("POST /jobs with url %s, alert %q: status %d (%s), want %d", tt.url, tt.alert, w.Code, strings.TrimSpace(w.Body.String()), tt.want)
		}
	}
}
