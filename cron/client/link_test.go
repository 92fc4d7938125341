package client

import (
	"fmt"
	"net/url"
	"testing"
)

func TestNextAfter(t *testing.T) {
	tests := []struct {
		link, want string
	}{
		{"", ""},
		{`<?after=job-2&limit=2>; rel="next"`, "job-2"},
		{`<?kind=cron&after=a%3A1&limit=5>; rel="next"`, "a:1"},
		{`<https://x.example/jobs?after=z>; rel="prev", <?after=y>; rel="next"`, "y"},
		{`<?after=y>; rel="prev"`, ""},
		{`garbage`, ""},
	}
	for _, tt := range tests {
		if got := nextAfter(tt.link); got != tt.want {
			t.Errorf("nextAfter(%q) = %q, want %q", tt.link, got, tt.want)
		}
	}
}

// FuzzNextAfter: the Link header the API writes for any id gives the id
// back, and no header makes nextAfter panic.
func FuzzNextAfter(f *testing.F) {
	for _, s := range []string{"job-1", "a:b.c_d", "x y", "<>;,\"", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		_ = nextAfter(id)
		if id == "" {
			return
		}
		q := url.Values{"limit": {"2"}, "after": {id}}
		link := fmt.Sprintf("<?%s>; rel=\"next\"", q.Encode())
		if got := nextAfter(link); got != id {
			t.Errorf("nextAfter(%q) = %q, want %q", link, got, id)
		}
	})
}
