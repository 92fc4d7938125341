//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/store/sqlstore"
)

// TestIdempotencyShared runs two instances in this process on one
// database (PostgreSQL, SQLite) and sends run-now requests with an
// Idempotency-Key to both: the same key on the second instance answers
// the first run (Idempotent-Replayed: true) and runs nothing; another
// body is 422; 20 concurrent sends of one key to both instances make one
// run, whose id every answer carries; an instance started afterwards
// still knows the keys; and a database that cannot answer for the keys is
// a 503 (a hostile key still a 400, a run-now without a key still runs).
func TestIdempotencyShared(t *testing.T) {
	onDatabases(t, "ksana_idem_test", testIdempotencyShared)
}

// runNowAnswer is the answer of a run-now.
type runNowAnswer struct {
	status   int
	runID    string
	code     string
	replayed bool
	retry    string
}

func runNowKey(t *testing.T, base, id, key, body string) runNowAnswer {
	t.Helper()
	req, err := http.NewRequest("POST", base+"/jobs/"+id+"/run-now", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("run-now %s: %v", id, err)
		return runNowAnswer{}
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var v struct {
		RunID string `json:"run_id"`
		Code  string `json:"code"`
	}
	if err := json.Unmarshal(b, &v); err != nil {
		t.Errorf("run-now %s: %d %s: %v", id, resp.StatusCode, b, err)
	}
	return runNowAnswer{status: resp.StatusCode, runID: v.RunID, code: v.Code,
		replayed: resp.Header.Get("Idempotent-Replayed") == "true", retry: resp.Header.Get("Retry-After")}
}

func testIdempotencyShared(t *testing.T, dbURL string) {
	env := func(name string) map[string]string {
		return map[string]string{"DATABASE_URL": dbURL, "KSANA_INSTANCE": name, "KSANA_LEASE_TTL": "2s"}
	}
	a := startService(t, t.TempDir(), env("a"))
	b := startService(t, t.TempDir(), env("b"))
	hooks := map[string]*callback{}
	for _, id := range []string{"one", "burst"} {
		hooks[id] = newCallback(t, 200, 0)
		a.create(t, fmt.Sprintf(`{"id":%q,"http":{"url":%q},"schedule":{"kind":"every","every":"1h"}}`, id, hooks[id].URL))
	}
	// onlyOne checks that job id ran once, as run runID: one row in the
	// shared history, one call, and no other call after a second.
	onlyOne := func(id, runID string) {
		t.Helper()
		a.waitRuns(t, id, 1)
		waitFor(t, "the call of "+id, func() bool { return hooks[id].count() >= 1 })
		time.Sleep(time.Second)
		rs := b.runs(t, id)
		if len(rs) != 1 || rs[0].ID != runID || hooks[id].count() != 1 {
			t.Errorf("job %s: %d runs %v, %d calls; want one run, %s, and one call", id, len(rs), rs, hooks[id].count(), runID)
		}
	}

	// The same key on each instance: one run.
	const force = `{"force": true}`
	first := runNowKey(t, a.url, "one", "deploy-1", force)
	if first.status != 202 || first.runID == "" || first.replayed {
		t.Fatalf("first run-now on a: %+v, want 202 with a run id, not replayed", first)
	}
	again := runNowKey(t, b.url, "one", "deploy-1", force)
	if again.status != 202 || again.runID != first.runID || !again.replayed {
		t.Errorf("the same key on b: %+v, want 202 with run %s, replayed", again, first.runID)
	}
	if other := runNowKey(t, b.url, "one", "deploy-1", `{"force": true, "body": "other"}`); other.status != 422 || other.code != "idempotency_key_reused" {
		t.Errorf("the same key with another body on b: %+v, want 422 idempotency_key_reused", other)
	}
	onlyOne("one", first.runID)

	// One key sent by 20 clients at once, to both instances.
	var wg sync.WaitGroup
	answers := make([]runNowAnswer, 20)
	for i := range answers {
		base := []string{a.url, b.url}[i%2]
		wg.Go(func() { answers[i] = runNowKey(t, base, "burst", "burst-1", force) })
	}
	wg.Wait()
	fresh := 0
	for i, ans := range answers {
		if ans.status != 202 || ans.runID != answers[0].runID {
			t.Errorf("concurrent send %d: %+v, want 202 with run %s", i, ans, answers[0].runID)
		}
		if !ans.replayed {
			fresh++
		}
	}
	if fresh != 1 {
		t.Errorf("%d of the concurrent sends answered without Idempotent-Replayed, want 1", fresh)
	}
	onlyOne("burst", answers[0].runID)

	// An instance started afterwards knows the keys.
	c := startService(t, t.TempDir(), env("c"))
	if ans := runNowKey(t, c.url, "one", "deploy-1", force); ans.status != 202 || ans.runID != first.runID || !ans.replayed {
		t.Errorf("the key on an instance started later: %+v, want 202 with run %s, replayed", ans, first.runID)
	}

	// The keys' table gone stands for a database that cannot answer.
	db, err := sqlstore.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.SQL().Exec("ALTER TABLE ksana_idempotency RENAME TO ksana_idempotency_away"); err != nil {
		t.Fatal(err)
	}
	if ans := runNowKey(t, a.url, "one", "deploy-2", force); ans.status != 503 || ans.retry == "" {
		t.Errorf("run-now with a key while the keys cannot be read: %+v, want 503 with Retry-After", ans)
	}
	if ans := runNowKey(t, a.url, "one", strings.Repeat("k", 256), force); ans.status != 400 {
		t.Errorf("run-now with a key too long while the keys cannot be read: %+v, want 400", ans)
	}
	if ans := runNowKey(t, a.url, "one", "", force); ans.status != 202 {
		t.Errorf("run-now without a key while the keys cannot be read: %+v, want 202", ans)
	}
	if _, err := db.SQL().Exec("ALTER TABLE ksana_idempotency_away RENAME TO ksana_idempotency"); err != nil {
		t.Fatal(err)
	}
	if ans := runNowKey(t, b.url, "one", "deploy-2", force); ans.status != 202 || ans.replayed {
		t.Errorf("run-now with the key refused during the outage: %+v, want 202, a run of its own", ans)
	}
}
