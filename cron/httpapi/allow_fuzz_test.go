package httpapi

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// FuzzParseAllowList: any input either fails naming the bad pattern or
// yields lower-case patterns that each pass cron.CheckHostPattern, parse
// back to themselves, and allow the hosts they name.
func FuzzParseAllowList(f *testing.F) {
	for _, s := range []string{"", "*", "api.example.com", "*.internal, API.Example.com ,", "http://x", "*.", "a:80", "*.*.x", " , ,", "x y", "a/b", "exa\u0130mple.com", ".", "a..b", "api.example.com.", "*.internal."} {
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
			if err := cron.CheckHostPattern(p); err != nil {
				t.Errorf("ParseAllowList(%q): pattern %q fails its own check: %v", s, p, err)
			}
			host := strings.TrimPrefix(p, "*.")
			if p != "*" && strings.HasPrefix(p, "*.") {
				host = "sub." + host
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
		if !slices.Contains(got, "*") && len(got) > 0 && HostAllowed(got, "never-listed.invalid-zz") && !slices.ContainsFunc(got, func(p string) bool {
			return strings.HasSuffix("never-listed.invalid-zz", strings.TrimPrefix(p, "*")) || p == "never-listed.invalid-zz"
		}) {
			t.Errorf("ParseAllowList(%q) = %q allows an unlisted host", s, got)
		}
	})
}
