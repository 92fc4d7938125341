package console

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestEditUnhandledType: the Edit form of a stored job whose type has no
// handler saves a change (the handler is needed to run the job, not to
// store it).
func TestEditUnhandledType(t *testing.T) {
	st := cron.NewMemStore()
	j := cron.Job{ID: "orphan", Name: "old", Type: "gone", Args: json.RawMessage(`{"a":1}`), Schedule: cron.Every(time.Hour)}
	j.Schedule.StartAt = time.Now().UTC()
	if err := st.Save(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, fixtureOpts{store: st})
	b := f.browser(t)
	if code, body, _ := b.get("/jobs/orphan/edit"); code != http.StatusOK || !strings.Contains(body, `value="old"`) {
		t.Fatalf("edit form: %d", code)
	}
	vals := url.Values{"name": {"renamed"}, "type": {"gone"}, "enabled": {"on"}, "schedule.kind": {"every"}, "schedule.every": {"1h"},
		"args": {`{"a":1}`}}
	if code, body, _ := b.post("/jobs/orphan/edit", vals); code != http.StatusSeeOther {
		t.Fatalf("edit: %d\n%s", code, body)
	}
	if got, err := f.runner.Get(context.Background(), "orphan"); err != nil || got.Name != "renamed" || got.Type != "gone" {
		t.Errorf("after the edit: %+v, %v; want renamed, of type gone", got, err)
	}
}
