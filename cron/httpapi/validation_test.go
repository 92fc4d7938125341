package httpapi

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestValidationThroughAPI: a CRON_TZ prefix that conflicts with tz is a
// 400 on schedule.tz, on POST and PATCH; a stored job whose type has no
// handler may be renamed (PATCH), and PATCH to such a type is a 400 on
// type.
func TestValidationThroughAPI(t *testing.T) {
	st := cron.NewMemStore()
	orphan := cron.Job{ID: "orphan", Type: "gone", Schedule: cron.Every(time.Hour)}
	orphan.Schedule.StartAt = time.Now().UTC()
	if err := st.Save(context.Background(), orphan); err != nil {
		t.Fatal(err)
	}
	f := loadedFixture(t, st, nil)

	for _, tt := range []struct{ method, path, body, field string }{
		{"POST", "/jobs", `{"id":"tokyo","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"cron","cron":"CRON_TZ=Asia/Tokyo 0 9 * * *","tz":"Europe/Berlin"}}`, "schedule.tz"},
		{"PATCH", "/jobs/orphan", `{"type":"other"}`, "type"},
	} {
		res := f.do(t, tt.method, tt.path, tt.body, nil)
		if res.status != 400 || !strings.Contains(res.body, `"field":"`+tt.field+`"`) {
			t.Errorf("%s %s %s: %d %s; want 400 on field %s", tt.method, tt.path, tt.body, res.status, res.body, tt.field)
		}
	}
	if res := f.do(t, "POST", "/jobs", `{"id":"tokyo","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"cron","cron":"CRON_TZ=Asia/Tokyo 0 9 * * *","tz":"Asia/Tokyo"}}`, nil); res.status != 201 {
		t.Errorf("POST with the same zone twice: %d %s, want 201", res.status, res.body)
	}
	res := f.do(t, "PATCH", "/jobs/orphan", `{"name":"renamed"}`, nil)
	if res.status != 200 || decodeJob(t, res.body).Name != "renamed" {
		t.Errorf("PATCH name of a job of an unhandled type: %d %s, want 200 renamed", res.status, res.body)
	}
	if res := f.do(t, "POST", "/jobs/orphan/pause", "", nil); res.status != 200 {
		t.Errorf("pause of a job of an unhandled type: %d %s", res.status, res.body)
	}
}
