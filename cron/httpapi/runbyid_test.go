package httpapi

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestRunByID: GET /runs/{id} answers the record of a run-now by the run
// id the run-now answered, with its trigger and who asked; a scheduled
// slot says schedule; an unknown id is a 404 that names the run.
func TestRunByID(t *testing.T) {
	f := newFixture(t, Config{})
	if res := f.do(t, "POST", "/jobs", `{"id":"j","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1s"}}`, nil); res.status != 201 {
		t.Fatalf("create: %d %s", res.status, res.body)
	}
	res := f.do(t, "POST", "/jobs/j/run-now", "", nil)
	var ticket struct {
		RunID string `json:"run_id"`
	}
	if err := json.Unmarshal([]byte(res.body), &ticket); err != nil || res.status != 202 {
		t.Fatalf("run-now: %d %s", res.status, res.body)
	}
	var run cron.Run
	deadline := time.Now().Add(10 * time.Second)
	for {
		res = f.do(t, "GET", "/runs/"+ticket.RunID, "", nil)
		if res.status == 200 || time.Now().After(deadline) {
			break
		}
		if res.status != 404 {
			t.Fatalf("GET /runs/%s: %d %s", ticket.RunID, res.status, res.body)
		}
		time.Sleep(10 * time.Millisecond) // polls the API until the run's record is written
	}
	if err := json.Unmarshal([]byte(res.body), &run); err != nil || res.status != 200 {
		t.Fatalf("GET /runs/%s: %d %s", ticket.RunID, res.status, res.body)
	}
	if run.ID != ticket.RunID || run.JobID != "j" || run.Status != cron.StatusSuccess || run.Trigger != cron.TriggerRunNow || run.TriggeredBy != "anonymous" {
		t.Errorf("run %+v; want run %s of job j, success, trigger run-now by anonymous", run, ticket.RunID)
	}
	// A scheduled slot (every second) says so.
	var slot cron.Run
	for slot.ID == "" && time.Now().Before(deadline) {
		var runs []cron.Run
		_ = json.Unmarshal([]byte(f.do(t, "GET", "/runs?job=j", "", nil).body), &runs)
		for _, r := range runs {
			if r.ID != ticket.RunID && r.Status == cron.StatusSuccess {
				slot = r
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	res = f.do(t, "GET", "/runs/"+slot.ID, "", nil)
	run = cron.Run{}
	if err := json.Unmarshal([]byte(res.body), &run); err != nil || res.status != 200 || run.Trigger != cron.TriggerSchedule || run.TriggeredBy != "" {
		t.Errorf("GET /runs/%s of a slot: %d %s; want trigger schedule", slot.ID, res.status, res.body)
	}
	res = f.do(t, "GET", "/runs/no-such-run", "", nil)
	if res.status != 404 || !strings.Contains(res.body, `run \"no-such-run\" not found`) {
		t.Errorf("GET /runs/no-such-run: %d %s; want 404 naming the run", res.status, res.body)
	}
	if res := f.do(t, "DELETE", "/runs/"+slot.ID, "", nil); res.status != 405 {
		t.Errorf("DELETE /runs/{id}: %d, want 405", res.status)
	}
}
