package cron

import (
	"fmt"
	"strings"
)

// HostAllowList is a list of host patterns that a callback's host must
// match: "api.example.com" (that host), "*.internal" (any host under
// internal, not internal itself), "*" (any host). Matching ignores case, a
// trailing dot and the port. An empty list allows every host.
//
// The [HTTPExecutor] checks it on every request it makes, the first and
// each redirect ([HTTPExecutorConfig.AllowHosts]); the REST API checks it
// when a job is written (cron/httpapi).
type HostAllowList []string

// ParseHostAllowList splits a comma-separated list of host patterns (the
// form of KSANA_CALLBACK_ALLOW), lower-cases them and checks each.
func ParseHostAllowList(s string) (HostAllowList, error) {
	var out HostAllowList
	for _, p := range strings.Split(s, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		if err := CheckHostPattern(p); err != nil {
			return nil, err
		}
		out = append(out, strings.TrimSuffix(p, "."))
	}
	return out, nil
}

// CheckHostPattern checks one pattern of a [HostAllowList]: "*", or a host
// name, alone or after "*.", with no empty label (one trailing dot is
// allowed, and ignored when matching).
func CheckHostPattern(p string) error {
	rest := p
	if p == "*" {
		return nil
	}
	if strings.HasPrefix(p, "*.") {
		rest = p[2:]
	}
	name := strings.TrimSuffix(rest, ".")
	if name == "" || strings.ContainsAny(rest, "*/:@ ?#") ||
		strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("host pattern %q: want a host name such as api.example.com or *.internal (no scheme, port or path)", p)
	}
	return nil
}

// Allows reports whether host (without its port) matches one of the
// patterns; an empty list allows every host. Patterns are expected in
// lower case, as [ParseHostAllowList] returns them.
func (l HostAllowList) Allows(host string) bool {
	if len(l) == 0 {
		return true
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, p := range l {
		if q := strings.TrimSuffix(p, "."); q != "*" { // as the host; "*." stays no match
			p = q
		}
		switch {
		case p == "*":
			return true
		case strings.HasPrefix(p, "*."):
			if strings.HasSuffix(host, p[1:]) && len(host) > len(p)-1 {
				return true
			}
		case p == host:
			return true
		}
	}
	return false
}
