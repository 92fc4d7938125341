//go:build unix

package main

import (
	"fmt"
	"testing"
	"time"
)

// TestRunNowOverlapShared runs two instances in this process on one
// database (PostgreSQL, SQLite): a run-now on one instance while a run of
// the job is in flight on the other is 409 run_in_flight, both ways, and
// runs when forced; once the runs have ended, a run-now runs again.
func TestRunNowOverlapShared(t *testing.T) {
	onDatabases(t, "ksana_overlap_test", testRunNowOverlapShared)
}

func testRunNowOverlapShared(t *testing.T, dbURL string) {
	// Not beside the heavy tests: on a machine they load, the run-now on b
	// came before b could see a's run in flight (a 202 for the 409).
	runAs(t, timingTest)
	env := func(name string) map[string]string {
		return map[string]string{"DATABASE_URL": dbURL, "KSANA_INSTANCE": name, "KSANA_LEASE_TTL": "2s"}
	}
	a := startService(t, t.TempDir(), env("a"))
	b := startService(t, t.TempDir(), env("b"))
	// Each call takes 6 s: long enough for the requests below to come
	// while it runs, on a loaded machine too.
	hook := newCallback(t, 200, 6*time.Second)
	a.create(t, fmt.Sprintf(`{"id":"slow","http":{"url":%q},"schedule":{"kind":"every","every":"1h"}}`, hook.URL))
	finished := func(ts *testService, n int) {
		t.Helper()
		waitFor(t, fmt.Sprintf("%d finished runs", n), func() bool {
			done := 0
			for _, r := range ts.runs(t, "slow") {
				if r.Status != "" {
					done++
				}
			}
			return done >= n
		})
	}
	want := func(got runNowAnswer, status int, code, what string) {
		t.Helper()
		if got.status != status || got.code != code {
			t.Errorf("%s: %d %q, want %d %q", what, got.status, got.code, status, code)
		}
	}

	// In flight on a: refused on b.
	want(runNowKey(t, a.url, "slow", "", ""), 202, "", "run-now on a")
	waitFor(t, "the call of the run on a", func() bool { return hook.count() >= 1 })
	want(runNowKey(t, b.url, "slow", "", ""), 409, "run_in_flight", "run-now on b while a runs the job")
	finished(a, 1)

	// In flight on b: refused on a, unless forced.
	want(runNowKey(t, b.url, "slow", "", ""), 202, "", "run-now on b once the run on a ended")
	waitFor(t, "the call of the run on b", func() bool { return hook.count() >= 2 })
	want(runNowKey(t, a.url, "slow", "", ""), 409, "run_in_flight", "run-now on a while b runs the job")
	want(runNowKey(t, a.url, "slow", "", `{"force": true}`), 202, "", "forced run-now on a while b runs the job")
	finished(b, 3)

	// Every run ended: a run-now runs again.
	want(runNowKey(t, a.url, "slow", "", ""), 202, "", "run-now on a once every run ended")
	waitFor(t, "the fourth call", func() bool { return hook.count() >= 4 })
	if n := hook.count(); n != 4 {
		t.Errorf("%d calls, want 4 (two run-nows refused)", n)
	}
}
