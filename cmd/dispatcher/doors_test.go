package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// closedWithin reports whether the server closes c (a read returns EOF or
// a reset) within d, reading and dropping whatever it sends meanwhile.
func closedWithin(c net.Conn, d time.Duration) bool {
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return false
	}
	return true // EOF (io.Copy returns nil) or a reset
}

// TestDoorIdleConnections: a connection that sends no request is dropped
// after read_header_timeout_ms, and a keep-alive connection left idle
// after its request after idle_timeout_ms. Before, an idle keep-alive
// connection stayed open for ever.
func TestDoorIdleConnections(t *testing.T) {
	inst := startInstance(t, testPlane("idle", nil), ServerConfig{ReadHeaderTimeoutMS: 300, IdleTimeoutMS: 300})
	silent, err := net.Dial("tcp", inst.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	start := time.Now()
	if !closedWithin(silent, 5*time.Second) {
		t.Errorf("a connection that sent nothing is still open after 5s, want it closed after read_header_timeout_ms (300ms)")
	} else if el := time.Since(start); el < 200*time.Millisecond {
		t.Errorf("a silent connection was closed after %v, before read_header_timeout_ms (300ms)", el)
	}

	idle, err := net.Dial("tcp", inst.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	if _, err := io.WriteString(idle, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("GET /health: %d (close %v), want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	if !closedWithin(idle, 5*time.Second) {
		t.Errorf("an idle keep-alive connection is still open after 5s, want it closed after idle_timeout_ms (300ms)")
	}
}

// TestDoorPendingCap: connections not yet authenticated are capped at
// max_pending_conns: of 20 connections that send nothing, 8 stay open (up
// to their read header timeout) and the others are closed at once. Nodes
// whose WebSocket passed its token check do not count: 12 of them register
// with the cap of 8, and a new one still registers once the pending
// connections are gone.
func TestDoorPendingCap(t *testing.T) {
	inst := startInstance(t, testPlane("pending", nil), ServerConfig{MaxPendingConns: 8})
	var nodes []*wsClient
	for i := range 12 {
		n := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
		n.register("n"+string(rune('a'+i)), "p")
		nodes = append(nodes, n)
	}
	var conns []net.Conn
	for range 20 {
		c, err := net.Dial("tcp", inst.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		conns = append(conns, c)
	}
	open := 0
	for _, c := range conns {
		if !closedWithin(c, 500*time.Millisecond) {
			open++
		}
	}
	if open != 8 {
		t.Errorf("%d of 20 silent connections open, want max_pending_conns (8)", open)
	}
	for _, c := range conns {
		c.Close()
	}
	for _, n := range nodes {
		n.alive() // the registered nodes were not touched
	}
	eventually(t, "a new node registers once the pending connections closed", 10*time.Second, func() bool {
		w, err := dialWS(t, wsURL(inst.addr, "/ws/node"), "")
		if err != nil {
			return false
		}
		w.register("late", "p")
		return true
	})
}

// TestDoorWebSocketsOutliveHTTPDeadlines: the HTTP server's read-header,
// write and idle timeouts do not end a WebSocket: a node and a session
// idle for several times each of them still exchange a job.
func TestDoorWebSocketsOutliveHTTPDeadlines(t *testing.T) {
	inst := startInstance(t, testPlane("wsdeadlines", nil), ServerConfig{WriteTimeoutMS: 200, ReadHeaderTimeoutMS: 200, IdleTimeoutMS: 200})
	n := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	n.register("n1", "p")
	s := mustDial(t, wsURL(inst.addr, "/ws/session", "session_id", "s1"), "")
	time.Sleep(time.Second) // five times every HTTP deadline
	s.send(wire{Type: "job_request", RequestID: "r1", Pool: "p", Payload: []byte("x")})
	a := n.expect("job_assign")
	n.send(wire{Type: "job_result", JobID: a.JobID, Attempt: a.Attempt, Payload: []byte("ok")})
	if got := s.expect("job_result"); string(got.Payload) != "ok" {
		t.Errorf("answer %+v, want ok", got)
	}
}

// TestDoorMetricsToken runs the built binary with
// KSANA_DISPATCHER_METRICS_TOKEN set: /metrics answers 401 without the
// token or with a wrong one, 200 with it; /health stays open. Before,
// /metrics answered anyone.
func TestDoorMetricsToken(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary; skipped under -short")
	}
	bin, _ := binaries(t)
	const token = "metrics-secret-0123456789"
	t.Setenv(envMetricsToken, token)
	p := startProc(t, t.TempDir(), "metrics", true, bin, "-listen", "127.0.0.1:0")
	get := func(path, tok string) (int, string) {
		req, _ := http.NewRequest("GET", "http://"+p.addr+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, tc := range []struct{ name, tok string }{{"no token", ""}, {"wrong token", "metrics-secret-0123456788"}, {"a prefix", token[:16]}} {
		if code, body := get("/metrics", tc.tok); code != http.StatusUnauthorized || strings.Contains(body, "go_goroutines") {
			t.Errorf("/metrics with %s: %d %.80q, want 401 without metrics", tc.name, code, body)
		}
	}
	if code, body := get("/metrics", token); code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
		t.Errorf("/metrics with the token: %d %.80q, want 200 with metrics", code, body)
	}
	if code, _ := get("/health", ""); code != http.StatusOK {
		t.Errorf("/health without a token: %d, want 200", code)
	}
}

// TestMetricsTokenFromEnv: the environment's token wins over the file's,
// and one shorter than 16 bytes is refused naming the variable.
func TestMetricsTokenFromEnv(t *testing.T) {
	dir := t.TempDir()
	path := dir + "/c.toml"
	if err := os.WriteFile(path, []byte("[dispatcher]\nmetrics_token = \"from-the-file-0123456789\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	env := func(v string) func(string) string {
		return func(k string) string {
			if k == envMetricsToken {
				return v
			}
			return ""
		}
	}
	cfg, err := loadConfig(path, "", env(""))
	if err != nil || cfg.Server.MetricsToken != "from-the-file-0123456789" {
		t.Errorf("without the variable: %q, %v; want the file's token", cfg.Server.MetricsToken, err)
	}
	cfg, err = loadConfig(path, "", env("from-the-env-0123456789"))
	if err != nil || cfg.Server.MetricsToken != "from-the-env-0123456789" {
		t.Errorf("with the variable: %q, %v; want the variable's token", cfg.Server.MetricsToken, err)
	}
	if _, err := loadConfig(path, "", env("short")); err == nil || !strings.Contains(err.Error(), envMetricsToken) || strings.Contains(err.Error(), "short") {
		t.Errorf("a short token in the variable: %v, want an error naming %s without the value", err, envMetricsToken)
	}
	if _, err := parseConfig([]byte("[dispatcher]\nmetrics_token = \"short\"\n")); err == nil || !strings.Contains(err.Error(), "dispatcher.metrics_token") {
		t.Errorf("a short token in the file: %v, want an error naming dispatcher.metrics_token", err)
	}
}
