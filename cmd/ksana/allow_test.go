package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
)

// TestCallbackAllowDialed: the built binary, with KSANA_CALLBACK_ALLOW set,
// never calls a callback on this machine that the list does not name:
// not through an IPv6 zone that looks like an allowed name, not through a
// name that resolves to loopback; with KSANA_CALLBACK_ALLOW unset, a
// loopback callback is called, as in the README's tour.
func TestCallbackAllowDialed(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildKsana(t)
	cb := newCallback(t, 200, 0)
	port := strconv.Itoa(cb.Listener.Addr().(*net.TCPAddr).Port)
	job := func(id, url string) string {
		return fmt.Sprintf(`{"id":%q,"http":{"url":%q},"schedule":{"kind":"every","every":"1h"},"max_retries":2,"retry_backoff":"10ms"}`, id, url)
	}

	m := startMember(t, bin, "allow", "KSANA_DATA="+t.TempDir(), "KSANA_CALLBACK_ALLOW=*.internal,localhost")
	ts := &testService{url: m.url}
	for _, u := range []string{
		"http://[::ffff:127.0.0.1%25.internal]:" + port + "/",
		"http://127.0.0.1:" + port + "/",
		"http://[::1]:" + port + "/",
	} {
		if code := call(t, "POST", ts.url+"/jobs", job("refused", u), nil); code != 400 {
			t.Errorf("POST /jobs with url %s: %d, want 400", u, code)
		}
	}
	ts.create(t, job("local", "http://localhost:"+port+"/"))
	if code := call(t, "POST", ts.url+"/jobs/local/run-now", "", nil); code >= 300 {
		t.Fatalf("run-now: %d", code)
	}
	runs := ts.waitRuns(t, "local", 1)
	if runs[0].Status != "failed" || runs[0].Attempts != 1 || !strings.Contains(runs[0].Error, "refused: a loopback address the callback allow-list does not name") {
		t.Errorf("run = %s after %d attempts, %q; want failed after 1: a loopback address refused", runs[0].Status, runs[0].Attempts, runs[0].Error)
	}
	if n := cb.count(); n != 0 {
		t.Errorf("the loopback callback was called %d times, want 0", n)
	}

	// No list: the binary calls loopback callbacks.
	m = startMember(t, bin, "open", "KSANA_DATA="+t.TempDir())
	ts = &testService{url: m.url}
	ts.create(t, job("local", "http://localhost:"+port+"/"))
	if code := call(t, "POST", ts.url+"/jobs/local/run-now", "", nil); code >= 300 {
		t.Fatalf("run-now: %d", code)
	}
	if runs := ts.waitRuns(t, "local", 1); runs[0].Status != "success" {
		t.Errorf("run without a list = %s %q, want success", runs[0].Status, runs[0].Error)
	}
}
