package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// TestClusterHoldsAThird runs three built ksana processes on one database
// with 3,000 jobs: each holds about a third of them (jobs_held in
// /health, summing to every job), and every API call about a job that the
// instance called does not hold (GET, the list with paging and filters,
// PATCH, pause, resume, run-now, runs, delete) answers as the instance
// that holds it does.
func TestClusterHoldsAThird(t *testing.T) {
	onDatabases(t, "ksana_hold_test", func(t *testing.T, dbURL string) {
		testClusterHoldsAThird(t, buildKsana(t), dbURL)
	})
}

// page follows the Link headers of GET url and returns the ids listed.
func page(t *testing.T, base, query string) []string {
	t.Helper()
	var ids []string
	next := "?" + query
	for next != "" {
		resp, err := http.Get(base + "/jobs" + next)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("GET /jobs%s: %d %s", next, resp.StatusCode, b)
		}
		var jobs []cron.Job
		if err := json.Unmarshal(b, &jobs); err != nil {
			t.Fatal(err)
		}
		for _, j := range jobs {
			ids = append(ids, j.ID)
		}
		next = ""
		if l := resp.Header.Get("Link"); l != "" {
			next = strings.TrimSuffix(strings.TrimPrefix(l, "<"), `>; rel="next"`)
		}
	}
	return ids
}

func testClusterHoldsAThird(t *testing.T, bin, dbURL string) {
	runAs(t, heavyTest)
	cb := newSlotCounter(t)
	env := []string{"DATABASE_URL=" + dbURL, "KSANA_LEASE_TTL=2s"}
	ms := []*member{startMember(t, bin, "a", env...), startMember(t, bin, "b", env...), startMember(t, bin, "c", env...)}

	const n = 3000
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Go(func() {
			for i := w; i < n; i += 8 {
				body := fmt.Sprintf(`{"id":"job-%04d","name":"n%d","enabled":%t,"schedule":{"kind":"every","every":"1h"},"http":{"method":"POST","url":%q}}`,
					i, i%7, i%5 != 0, cb.URL)
				if code := call(t, "POST", ms[i%3].url+"/jobs", body, nil); code != 201 {
					t.Errorf("create job-%04d: %d", i, code)
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	held := func(m *member) int {
		v, _ := strconv.Atoi(fmt.Sprint(m.health(t)["jobs_held"]))
		return v
	}
	waitFor(t, "about a third of the jobs held by each instance", func() bool {
		sum := 0
		for _, m := range ms {
			h := held(m)
			if h < n/3*85/100 || h > n/3*115/100 {
				return false
			}
			sum += h
		}
		return sum == n
	})
	for _, m := range ms {
		t.Logf("%s holds %d jobs", m.name, held(m))
	}

	// The list: every job once, in one creation order, in the same pages
	// with the same filters on every instance.
	all := page(t, ms[0].url, "limit=250")
	if len(all) != n {
		t.Fatalf("the list of %s has %d jobs, want %d", ms[0].name, len(all), n)
	}
	seen := map[string]bool{}
	for _, id := range all {
		if seen[id] {
			t.Fatalf("job %s listed twice", id)
		}
		seen[id] = true
	}
	filtered := page(t, ms[0].url, "name=n3&enabled=true&limit=7")
	for _, m := range ms[1:] {
		if d := cmp.Diff(all, page(t, m.url, "limit=250")); d != "" {
			t.Errorf("list of %s differs from %s's (-%s +%s):\n%s", m.name, ms[0].name, ms[0].name, m.name, d)
		}
		if d := cmp.Diff(filtered, page(t, m.url, "name=n3&enabled=true&limit=7")); d != "" {
			t.Errorf("filtered list of %s differs (-%s +%s):\n%s", m.name, ms[0].name, m.name, d)
		}
	}
	if len(filtered) == 0 {
		t.Error("the filter name=n3&enabled=true matched nothing")
	}

	// Which instance holds each job: the owner of its partition's lease.
	db, err := sqlstore.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q := "SELECT owner FROM ksana_lease WHERE part = ?"
	if db.Dialect() == "postgres" {
		q = "SELECT owner FROM ksana_lease WHERE part = $1"
	}
	owner := func(id string) string {
		var o string
		if err := db.SQL().QueryRow(q, sqlstore.Partition(id, sqlstore.DefaultPartitions)).Scan(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	// Every instance agrees on a job, as read through each.
	same := func(id string, wantCode int) cron.Job {
		t.Helper()
		var first cron.Job
		waitFor(t, "one answer for "+id+" on every instance", func() bool {
			var js []cron.Job
			for _, m := range ms {
				var j cron.Job
				if code := call(t, "GET", m.url+"/jobs/"+id, "", &j); code != wantCode {
					return false
				}
				js = append(js, j)
			}
			first = js[0]
			return cmp.Equal(js[0], js[1]) && cmp.Equal(js[0], js[2])
		})
		return first
	}

	// Each instance changes jobs it does not hold.
	for k, m := range ms {
		var id string
		for _, c := range all[k*50:] {
			var i int
			fmt.Sscanf(c, "job-%d", &i)
			if o := owner(c); i%5 != 0 && o != "" && o != m.name { // enabled, held by another
				id = c
				break
			}
		}
		t.Logf("%s changes %s, held by %s", m.name, id, owner(id))
		before := same(id, 200)
		var j cron.Job
		if code := call(t, "PATCH", m.url+"/jobs/"+id, `{"name":"renamed","schedule":{"kind":"every","every":"2h"}}`, &j); code != 200 ||
			j.Name != "renamed" || j.Schedule.Every != cron.Duration(2*time.Hour) || j.NextRunAt.IsZero() {
			t.Errorf("PATCH through %s: %d %+v", m.name, code, j)
		}
		if got := same(id, 200); got.Name != "renamed" || got.HTTP.URL != before.HTTP.URL {
			t.Errorf("after PATCH: %+v", got)
		}
		if code := call(t, "PATCH", m.url+"/jobs/"+id, `{"schedule":{"kind":"every","every":"0s"}}`, nil); code != 400 {
			t.Errorf("invalid PATCH through %s: %d, want 400", m.name, code)
		}
		if code := call(t, "POST", m.url+"/jobs/"+id+"/pause", "", &j); code != 200 || !j.Paused || j.LastStatus != cron.StatusPaused {
			t.Errorf("pause through %s: %d %+v", m.name, code, j)
		}
		if got := same(id, 200); !got.Paused || got.LastStatus != cron.StatusPaused || !got.NextRunAt.IsZero() {
			t.Errorf("after pause: %+v", got)
		}
		if code := call(t, "POST", m.url+"/jobs/"+id+"/resume", "", &j); code != 200 || j.Paused || j.NextRunAt.IsZero() {
			t.Errorf("resume through %s: %d %+v", m.name, code, j)
		}
		if got := same(id, 200); got.Paused || got.NextRunAt.IsZero() {
			t.Errorf("after resume: %+v", got)
		}
		var rn map[string]string
		if code := call(t, "POST", m.url+"/jobs/"+id+"/run-now", "", &rn); code != 202 || rn["run_id"] == "" {
			t.Errorf("run-now through %s: %d %v", m.name, code, rn)
		}
		waitFor(t, "the run-now in the history on every instance", func() bool {
			for _, m := range ms {
				var runs []cron.Run
				if call(t, "GET", m.url+"/jobs/"+id+"/runs", "", &runs) != 200 || len(runs) != 1 || runs[0].ID != rn["run_id"] {
					return false
				}
			}
			return true
		})
		if got := same(id, 200); got.LastStatus != cron.StatusSuccess || got.LastRunAt.IsZero() {
			t.Errorf("after run-now: last_status %q, last_run_at %v", got.LastStatus, got.LastRunAt)
		}
		if code := call(t, "DELETE", m.url+"/jobs/"+id, "", nil); code != 204 {
			t.Errorf("DELETE through %s: %d", m.name, code)
		}
		same(id, 404)
		for _, o := range ms {
			for _, c := range []struct{ method, path string }{
				{"DELETE", ""}, {"PATCH", ""}, {"POST", "/pause"}, {"POST", "/resume"}, {"POST", "/run-now"}, {"GET", "/runs"},
			} {
				body := ""
				if c.method == "PATCH" {
					body = `{"name":"x"}`
				}
				if code := call(t, c.method, o.url+"/jobs/"+id+c.path, body, nil); code != 404 {
					t.Errorf("%s /jobs/%s%s on %s after delete: %d, want 404", c.method, id, c.path, o.name, code)
				}
			}
		}
	}
	waitFor(t, "the deleted jobs dropped", func() bool {
		sum := 0
		for _, m := range ms {
			sum += held(m)
		}
		return sum == n-len(ms)
	})
}
