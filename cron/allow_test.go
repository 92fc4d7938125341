package cron

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestParseHostAllowList(t *testing.T) {
	tests := []struct {
		in      string
		want    HostAllowList
		wantErr bool
	}{
		{"", nil, false},
		{"*.internal, API.Example.com.", HostAllowList{"*.internal", "api.example.com"}, false},
		{"10.0.0.0/8,10.1.2.3/8", HostAllowList{"10.0.0.0/8", "10.0.0.0/8"}, false},
		{"127.0.0.1, ::1, FD00::/8", HostAllowList{"127.0.0.1", "::1", "fd00::/8"}, false},
		{"::ffff:10.0.0.1", HostAllowList{"10.0.0.1"}, false},
		{"::ffff:10.0.0.0/104", HostAllowList{"10.0.0.0/8"}, false},
		{"0.0.0.0/0", HostAllowList{"0.0.0.0/0"}, false},
		{"fe80::1%eth0", nil, true},
		{"fe80::/10%eth0", nil, true},
		{"*.internal%x", nil, true},
		{"10.0.0.0/33", nil, true},
		{"::ffff:0.0.0.0/8", nil, true},
		{"[::1]", nil, true},
		{"10.0.0.1:80", nil, true},
		{"http://x", nil, true},
		{"a\f.", nil, true},
	}
	for _, tt := range tests {
		got, err := ParseHostAllowList(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("ParseHostAllowList(%q) error %v, want error %t", tt.in, err, tt.wantErr)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ParseHostAllowList(%q) (-want +got):\n%s", tt.in, diff)
		}
	}
}

func TestHostAllowListAllows(t *testing.T) {
	tests := []struct {
		allow HostAllowList
		host  string
		want  bool
	}{
		{nil, "127.0.0.1", true},
		{HostAllowList{"*.internal"}, "api.internal", true},
		{HostAllowList{"*.internal"}, "API.Internal.", true},
		{HostAllowList{"*.internal"}, "internal", false},
		// The zone of an IP literal is no host name: it matches nothing.
		{HostAllowList{"*.internal"}, "::ffff:127.0.0.1%.internal", false},
		{HostAllowList{"*.internal"}, "[::ffff:127.0.0.1%.internal]", false},
		{HostAllowList{"*"}, "fe80::1%25eth0", false},
		{HostAllowList{"fe80::/10"}, "fe80::1%eth0", false},
		{HostAllowList{"x%y"}, "x%y", false},
		// "*" names host names, not addresses.
		{HostAllowList{"*"}, "example.com", true},
		{HostAllowList{"*"}, "127.0.0.1", false},
		{HostAllowList{"*"}, "::1", false},
		{HostAllowList{"127.0.0.1"}, "127.0.0.1", true},
		{HostAllowList{"127.0.0.1"}, "::ffff:127.0.0.1", true},
		{HostAllowList{"127.0.0.1"}, "[::ffff:127.0.0.1]", true},
		{HostAllowList{"127.0.0.1"}, "127.0.0.2", false},
		{HostAllowList{"10.0.0.0/8"}, "10.200.0.1", true},
		{HostAllowList{"10.0.0.0/8"}, "::ffff:10.200.0.1", true},
		{HostAllowList{"10.0.0.0/8"}, "11.0.0.1", false},
		{HostAllowList{"::ffff:10.0.0.0/104"}, "10.9.9.9", true},
		{HostAllowList{"fd00::/8"}, "FD12::1", true},
		{HostAllowList{"fd00::/8"}, "fe80::1", false},
		// An address pattern is no host name pattern.
		{HostAllowList{"10.0.0.0/8"}, "10.0.0.0/8", false},
		{HostAllowList{"*.internal", "10.0.0.0/8"}, "db.internal", true},
	}
	for _, tt := range tests {
		if got := tt.allow.Allows(tt.host); got != tt.want {
			t.Errorf("%q.Allows(%q) = %t, want %t", tt.allow, tt.host, got, tt.want)
		}
	}
}

func TestHostAllowListAllowsAddr(t *testing.T) {
	tests := []struct {
		allow    HostAllowList
		addr     string
		loopback bool
		want     bool
	}{
		{nil, "127.0.0.1", false, true},
		{HostAllowList{"*"}, "93.184.216.34", false, true},
		{HostAllowList{"*"}, "10.1.2.3", false, true},
		{HostAllowList{"*"}, "127.0.0.1", false, false},
		{HostAllowList{"*"}, "127.9.9.9", false, false},
		{HostAllowList{"*"}, "::1", false, false},
		{HostAllowList{"*"}, "::ffff:127.0.0.1", false, false},
		{HostAllowList{"*"}, "127.0.0.1", true, true},
		{HostAllowList{"*"}, "::1", true, true},
		{HostAllowList{"*"}, "169.254.169.254", true, false},
		{HostAllowList{"*"}, "::ffff:169.254.169.254", true, false},
		{HostAllowList{"*"}, "fe80::1", true, false},
		{HostAllowList{"*"}, "fe80::1%eth0", true, false},
		{HostAllowList{"*"}, "0.0.0.0", true, false},
		{HostAllowList{"*"}, "::", true, false},
		{HostAllowList{"localhost", "127.0.0.1"}, "127.0.0.1", false, true},
		{HostAllowList{"localhost", "127.0.0.1"}, "::1", false, false},
		{HostAllowList{"127.0.0.0/8"}, "::ffff:127.0.0.1", false, true},
		{HostAllowList{"169.254.169.254"}, "169.254.169.254", false, true},
		{HostAllowList{"fe80::/10"}, "fe80::1%eth0", false, true},
		{HostAllowList{"0.0.0.0"}, "0.0.0.0", false, true},
	}
	for _, tt := range tests {
		a := netip.MustParseAddr(tt.addr)
		if got := tt.allow.AllowsAddr(a, tt.loopback); got != tt.want {
			t.Errorf("%q.AllowsAddr(%s, loopback %t) = %t, want %t", tt.allow, tt.addr, tt.loopback, got, tt.want)
		}
	}
}

// listenOn serves h on addr ("127.0.0.2:0", say) until the test ends.
func listenOn(t *testing.T, addr string, h http.Handler) *httptest.Server {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	s := httptest.NewUnstartedServer(h)
	s.Listener.Close()
	s.Listener = l
	s.Start()
	t.Cleanup(s.Close)
	return s
}

// TestHTTPExecutorDialsOnlyWhereAllowed: with an allow-list, no callback
// reaches a loopback server that no pattern names, however its URL, a
// redirect or DNS lead there; an address or CIDR pattern, or
// AllowLoopback, lets it through.
func TestHTTPExecutorDialsOnlyWhereAllowed(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	target := listenOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	port := target.Listener.Addr().(*net.TCPAddr).Port
	at := func(format string) string { return strings.ReplaceAll(format, "PORT", strconv.Itoa(port)) }
	// The redirector is on 127.0.0.2, which the lists below name; it
	// sends the client to the URL of its query.
	redirector := listenOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
	}))
	via := func(to string) string { return redirector.URL + "/?to=" + strings.ReplaceAll(to, "%", "%25") }
	ownDialer := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{}).DialContext}}

	tests := []struct {
		name     string
		allow    HostAllowList
		loopback bool
		client   *http.Client
		url      string
		want     Result
		wantErr  []string // what Result.Error must hold
		wantHits int64
	}{
		{name: "zone", allow: HostAllowList{"*.internal"}, url: at("http://[::ffff:127.0.0.1%25.internal]:PORT/"),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{`host "::ffff:127.0.0.1%.internal" refused`}},
		{name: "zone, own dialer", allow: HostAllowList{"*.internal"}, client: ownDialer, url: at("http://[::ffff:127.0.0.1%25.internal]:PORT/"),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{`host "::ffff:127.0.0.1%.internal" refused`}},
		{name: "mapped literal", allow: HostAllowList{"*.internal"}, url: at("http://[::ffff:127.0.0.1]:PORT/"),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{`host "::ffff:127.0.0.1" refused`}},
		{name: "star is no address", allow: HostAllowList{"*"}, url: at("http://127.0.0.1:PORT/"),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{`host "127.0.0.1" refused`}},
		{name: "localhost resolves to loopback", allow: HostAllowList{"localhost"}, url: at("http://localhost:PORT/"),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{"refused: a loopback address the callback allow-list does not name", ":" + strconv.Itoa(port)}},
		{name: "localhost, own dialer", allow: HostAllowList{"localhost"}, client: ownDialer, url: at("http://localhost:PORT/"),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{"refused: a loopback address the callback allow-list does not name", ":" + strconv.Itoa(port)}},
		{name: "redirect to a zone", allow: HostAllowList{"127.0.0.2", "*.internal"}, url: via(at("http://[::ffff:127.0.0.1%25.internal]:PORT/")),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{`redirect to host "::ffff:127.0.0.1%.internal" refused`}},
		{name: "redirect to localhost", allow: HostAllowList{"127.0.0.2", "localhost"}, url: via(at("http://localhost:PORT/")),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{"refused: a loopback address the callback allow-list does not name"}},
		{name: "redirect to a wildcard name", allow: HostAllowList{"127.0.0.2", "*"}, url: via(at("http://localhost:PORT/")),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{"refused: a loopback address the callback allow-list does not name"}},
		{name: "address named", allow: HostAllowList{"127.0.0.1"}, url: at("http://127.0.0.1:PORT/"),
			want: Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}, wantHits: 1},
		{name: "mapped address named", allow: HostAllowList{"127.0.0.1"}, url: at("http://[::ffff:127.0.0.1]:PORT/"),
			want: Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}, wantHits: 1},
		{name: "CIDR names it", allow: HostAllowList{"127.0.0.0/8"}, url: at("http://127.0.0.1:PORT/"),
			want: Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}, wantHits: 1},
		{name: "another CIDR", allow: HostAllowList{"10.0.0.0/8"}, url: at("http://127.0.0.1:PORT/"),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{`host "127.0.0.1" refused`}},
		{name: "name and its address named", allow: HostAllowList{"localhost", "127.0.0.1"}, url: at("http://localhost:PORT/"),
			want: Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}, wantHits: 1},
		{name: "redirect to a named address", allow: HostAllowList{"127.0.0.2", "127.0.0.1"}, url: via(at("http://127.0.0.1:PORT/")),
			want: Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}, wantHits: 1},
		{name: "loopback allowed", allow: HostAllowList{"localhost"}, loopback: true, url: at("http://localhost:PORT/"),
			want: Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}, wantHits: 1},
		{name: "loopback allowed, own dialer", allow: HostAllowList{"localhost"}, loopback: true, client: ownDialer, url: at("http://localhost:PORT/"),
			want: Result{Status: StatusSuccess, Attempts: 1, HTTPStatus: 200}, wantHits: 1},
		{name: "loopback allowed, zone still refused", allow: HostAllowList{"*.internal"}, loopback: true, url: at("http://[::ffff:127.0.0.1%25.internal]:PORT/"),
			want: Result{Status: StatusFailed, Attempts: 1}, wantErr: []string{`host "::ffff:127.0.0.1%.internal" refused`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := hits.Load()
			x := NewHTTPExecutor(HTTPExecutorConfig{AllowHosts: tt.allow, AllowLoopback: tt.loopback, Client: tt.client})
			j := execJob(tt.url)
			j.HTTP.Method = http.MethodGet
			j.MaxRetries = 2
			j.RetryBackoff = Duration(time.Millisecond)
			got := x.Execute(context.Background(), j, RunInfo{RunID: "r1", JobID: j.ID})
			for _, w := range tt.wantErr {
				if !strings.Contains(got.Error, w) {
					t.Errorf("run error %q, want it to hold %q", got.Error, w)
				}
			}
			got.Error = ""
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("result (-want +got):\n%s", diff)
			}
			// Subtests run one at a time: the hits are this one's.
			if n := hits.Load() - before; n != tt.wantHits {
				t.Errorf("the loopback target got %d requests, want %d", n, tt.wantHits)
			}
		})
	}
}

// TestAlertDialsOnlyWhereAllowed: an alert is held to AlertAllowHosts as a
// callback is: not sent to a loopback server through a zone, a name that
// resolves to it or a redirect, and sent where an address pattern names it.
func TestAlertDialsOnlyWhereAllowed(t *testing.T) {
	t.Parallel()
	var hits atomic.Int64
	target := listenOn(t, "127.0.0.1:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	port := strconv.Itoa(target.Listener.Addr().(*net.TCPAddr).Port)
	redirector := listenOn(t, "127.0.0.2:0", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "http://localhost:"+port+"/", http.StatusTemporaryRedirect)
	}))
	tests := []struct {
		name     string
		allow    HostAllowList
		url      string
		wantErr  string
		wantHits int64
	}{
		{"zone", HostAllowList{"*.internal"}, "http://[::ffff:127.0.0.1%25.internal]:" + port + "/", `host "::ffff:127.0.0.1%.internal" refused`, 0},
		{"localhost", HostAllowList{"localhost"}, "http://localhost:" + port + "/", "a loopback address the callback allow-list does not name", 0},
		{"redirect", HostAllowList{"127.0.0.2", "localhost"}, redirector.URL + "/", "a loopback address the callback allow-list does not name", 0},
		{"address named", HostAllowList{"127.0.0.1"}, "http://127.0.0.1:" + port + "/", "", 1},
		{"name and CIDR", HostAllowList{"localhost", "127.0.0.0/8"}, "http://localhost:" + port + "/", "", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := hits.Load()
			r, err := New(NewMemStore(), nil, Config{AlertAllowHosts: tt.allow})
			if err != nil {
				t.Fatal(err)
			}
			retry, err := r.postAlert(context.Background(), AlertDelivery{URL: tt.url}, []byte(`{}`))
			var got string
			if err != nil {
				got = err.Error()
			}
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("alert error %q, want none", got)
			case tt.wantErr != "" && !strings.Contains(got, tt.wantErr):
				t.Errorf("alert error %q, want it to hold %q", got, tt.wantErr)
			}
			if retry {
				t.Errorf("a refused alert is to be retried, want no retry")
			}
			if n := hits.Load() - before; n != tt.wantHits {
				t.Errorf("the loopback target got %d requests, want %d", n, tt.wantHits)
			}
		})
	}
}
