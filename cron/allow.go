package cron

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"syscall"
	"time"
	"unicode"
)

// HostAllowList is a list of patterns that say where callbacks (and
// alerts) may go. A pattern is one of:
//
//   - "api.example.com": that host name;
//   - "*.internal": any host name under internal, not internal itself;
//   - "*": any host name;
//   - "10.1.2.3" or "fd00::1": that IP address;
//   - "10.0.0.0/8" or "fd00::/8": any IP address in that CIDR block.
//
// Host name patterns match host names only: matching ignores case, a
// trailing dot and the port. A URL whose host is an IP literal passes only
// where an address or CIDR pattern names that address ("*" does not); an
// IPv4-mapped IPv6 address (::ffff:10.1.2.3) is judged as the IPv4 address
// it maps, and a host with an IPv6 zone ("fe80::1%eth0") never passes.
//
// A list is also checked on the address actually dialed, after DNS: a host
// name that matches a pattern may reach any address except a loopback
// (127.0.0.0/8, ::1), link-local (169.254.0.0/16, fe80::/10) or
// unspecified (0.0.0.0, ::) one, which is refused unless an address or
// CIDR pattern names it ([HTTPExecutorConfig.AllowLoopback] lets callbacks
// reach loopback too).
//
// An empty list allows every host and every address: no check at all.
//
// The [HTTPExecutor] checks it on every request it makes, the first and
// each redirect ([HTTPExecutorConfig.AllowHosts]), and on each connection
// it dials; the runner does the same for alerts ([Config.AlertAllowHosts]);
// the REST API checks the host of a job's URLs when the job is written
// (cron/httpapi).
type HostAllowList []string

// ParseHostAllowList splits a comma-separated list of patterns (the form
// of KSANA_CALLBACK_ALLOW), lower-cases them and checks each. Address and
// CIDR patterns come back in their canonical form (an IPv4-mapped address
// as IPv4, a CIDR block with its host bits cleared).
func ParseHostAllowList(s string) (HostAllowList, error) {
	var out HostAllowList
	for _, p := range strings.Split(s, ",") {
		p = strings.ToLower(strings.TrimSpace(p))
		if p == "" {
			continue
		}
		if err := checkHostPattern(p); err != nil {
			return nil, err
		}
		if pfx, ok := patternPrefix(p); ok {
			if pfx.IsSingleIP() && !strings.Contains(p, "/") {
				p = pfx.Addr().String()
			} else {
				p = pfx.String()
			}
		}
		out = append(out, strings.TrimSuffix(p, "."))
	}
	return out, nil
}

// checkHostPattern checks one pattern of a [HostAllowList]: "*", a host
// name, alone or after "*.", with no empty label, space or control
// character (one trailing dot is allowed, and ignored when matching), an
// IP address, or a CIDR block such as 10.0.0.0/8. An address with an
// IPv6 zone is refused.
func checkHostPattern(p string) error {
	if p == "*" {
		return nil
	}
	if strings.ContainsAny(p, "/:%") {
		if _, ok := patternPrefix(p); ok {
			return nil
		}
		return fmt.Errorf("host pattern %q: want a host name such as api.example.com or *.internal, an IP address or a CIDR block such as 10.0.0.0/8 (no scheme, port, path or IPv6 zone)", p)
	}
	rest := p
	if strings.HasPrefix(p, "*.") {
		rest = p[2:]
	}
	name := strings.TrimSuffix(rest, ".")
	if name == "" || strings.ContainsAny(rest, "*/:@ ?#%[]") || strings.ContainsFunc(rest, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) }) ||
		strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
		return fmt.Errorf("host pattern %q: want a host name such as api.example.com or *.internal, an IP address or a CIDR block such as 10.0.0.0/8 (no scheme, port, path or IPv6 zone)", p)
	}
	return nil
}

// patternPrefix returns the addresses an address or CIDR pattern names,
// IPv4-mapped addresses as IPv4; ok is false for other patterns.
func patternPrefix(p string) (netip.Prefix, bool) {
	if strings.Contains(p, "/") {
		pfx, err := netip.ParsePrefix(p)
		if err != nil || pfx.Addr().Zone() != "" {
			return netip.Prefix{}, false
		}
		if a := pfx.Addr(); a.Is4In6() {
			bits := pfx.Bits() - 96
			if bits < 0 {
				return netip.Prefix{}, false
			}
			pfx = netip.PrefixFrom(a.Unmap(), bits)
		}
		return pfx.Masked(), true
	}
	a, err := netip.ParseAddr(p)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, false
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), true
}

// Allows reports whether host (without its port, as [url.URL.Hostname]
// returns it) passes the list: a host name must match a host name
// pattern, an IP literal must be named by an address or CIDR pattern, and
// a host with an IPv6 zone never passes. An empty list allows every host.
func (l HostAllowList) Allows(host string) bool {
	if len(l) == 0 {
		return true
	}
	if strings.Contains(host, "%") {
		return false // an IPv6 zone, or no host name at all
	}
	if a, err := netip.ParseAddr(strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")); err == nil {
		return l.names(a)
	}
	host = strings.ToLower(strings.TrimSuffix(host, "."))
	for _, p := range l {
		p = strings.ToLower(p)
		if _, ok := patternPrefix(p); ok {
			continue
		}
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

// names reports whether an address or CIDR pattern of l names a (an
// IPv4-mapped address is taken as IPv4; an address with a zone is named
// by none).
func (l HostAllowList) names(a netip.Addr) bool {
	if a.Zone() != "" {
		return false
	}
	a = a.Unmap()
	for _, p := range l {
		if pfx, ok := patternPrefix(strings.ToLower(p)); ok && pfx.Contains(a) {
			return true
		}
	}
	return false
}

// AllowsAddr reports whether a connection may be made to a, once the
// host name it was reached through passed [HostAllowList.Allows]: yes
// when an address or CIDR pattern names it; otherwise yes unless it is a
// loopback address (and loopback is false), a link-local or an
// unspecified address. An IPv4-mapped address is judged as IPv4; an IPv6
// zone is ignored. An empty list allows every address.
func (l HostAllowList) AllowsAddr(a netip.Addr, loopback bool) bool {
	if len(l) == 0 {
		return true
	}
	a = a.WithZone("").Unmap()
	switch {
	case l.names(a):
		return true
	case a.IsLoopback():
		return loopback
	case !a.IsValid(), a.IsUnspecified(), a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return false
	}
	return true
}

// addrRefusedError is a connection the allow-list refused: addr is the
// address that would have been dialed. A run that meets it fails at once,
// without a retry.
type addrRefusedError struct {
	addr string
}

func (e *addrRefusedError) Error() string {
	kind := "an address"
	if ap, err := netip.ParseAddrPort(e.addr); err == nil {
		switch a := ap.Addr().Unmap(); {
		case a.IsLoopback():
			kind = "a loopback address"
		case a.IsLinkLocalUnicast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
			kind = "a link-local address"
		case a.IsUnspecified():
			kind = "an unspecified address"
		}
	}
	return fmt.Sprintf("address %s refused: %s the callback allow-list does not name", e.addr, kind)
}

// dialControl returns the Control hook of a net.Dialer that refuses the
// addresses allow refuses.
func dialControl(allow HostAllowList, loopback bool) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, _ syscall.RawConn) error {
		return checkDialed(allow, loopback, address)
	}
}

// checkDialed checks address ("ip:port") against allow.
func checkDialed(allow HostAllowList, loopback bool, address string) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		host, _, serr := net.SplitHostPort(address)
		if serr != nil {
			host = address
		}
		a, perr := netip.ParseAddr(host)
		if perr != nil {
			return &addrRefusedError{addr: address}
		}
		ap = netip.AddrPortFrom(a, 0)
	}
	if !allow.AllowsAddr(ap.Addr(), loopback) {
		return &addrRefusedError{addr: address}
	}
	return nil
}

// guardedClient returns a copy of c that holds every request to allow: a
// redirect is followed only to a host allow passes, and each connection
// is checked on the address dialed. c itself (or the shared default) is
// left as it is. When c's transport is an *http.Transport, the copy has a
// transport of its own, without a proxy (the address dialed must be the
// callback's): with no dial function of its own, the dialer's Control hook
// checks the address before connecting; with one (a test's in-memory
// network, say), the remote address of each new connection is checked
// and a refused connection is closed before a byte is sent. Another
// RoundTripper is used as it is, with the host checks only.
func guardedClient(c *http.Client, allow HostAllowList, loopback bool, keepAlive bool) *http.Client {
	cc := *c
	next := cc.CheckRedirect
	cc.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if h := req.URL.Hostname(); !allow.Allows(h) {
			return &hostRefusedError{host: h, redirect: true}
		}
		if next != nil {
			return next(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}
	base, ok := cc.Transport.(*http.Transport)
	if cc.Transport == nil {
		base, ok = http.DefaultTransport.(*http.Transport)
	}
	if !ok {
		return &cc
	}
	tr := base.Clone()
	tr.Proxy = nil
	tr.DisableKeepAlives = tr.DisableKeepAlives || !keepAlive
	if base.DialContext == nil || c == defaultHTTPClient() || base == http.DefaultTransport {
		d := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: dialControl(allow, loopback)}
		tr.DialContext = d.DialContext
	} else {
		tr.DialContext = checkConn(base.DialContext, allow, loopback)
	}
	if base.DialTLSContext != nil {
		tr.DialTLSContext = checkConn(base.DialTLSContext, allow, loopback)
	}
	cc.Transport = tr
	return &cc
}

// checkConn wraps dial so that a connection whose remote address allow
// refuses is closed and refused.
func checkConn(dial func(ctx context.Context, network, addr string) (net.Conn, error), allow HostAllowList, loopback bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		var ip netip.Addr
		switch ra := conn.RemoteAddr().(type) {
		case *net.TCPAddr:
			ip, _ = netip.AddrFromSlice(ra.IP)
		case *net.UDPAddr:
			ip, _ = netip.AddrFromSlice(ra.IP)
		default:
			return conn, nil // no IP address: not a network this list speaks of
		}
		if !allow.AllowsAddr(ip, loopback) {
			conn.Close()
			return nil, &net.OpError{Op: "dial", Net: network, Err: &addrRefusedError{addr: conn.RemoteAddr().String()}}
		}
		return conn, nil
	}
}

// hostRefusedError is a request to a host outside the allow-list.
type hostRefusedError struct {
	host     string
	redirect bool
}

func (e *hostRefusedError) Error() string {
	if e.redirect {
		return fmt.Sprintf("redirect to host %q refused: not in the callback allow-list", e.host)
	}
	return fmt.Sprintf("host %q refused: not in the callback allow-list", e.host)
}
