package cron

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"
)

// TestCronZoneConflict: a CRON_TZ= or TZ= prefix that names another zone
// than tz is refused on schedule.tz, by Validate, Add and Update; the same
// zone twice, or either alone, passes. A job stored with such a conflict
// still loads and runs in the zone of its prefix.
func TestCronZoneConflict(t *testing.T) {
	tests := []struct {
		cron, tz string
		bad      bool
	}{
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", "Europe/Berlin", true},
		{"TZ=Asia/Tokyo 0 9 * * *", "UTC", true},
		{"cron_tz=Asia/Tokyo 0 9 * * *", "Europe/Berlin", true},
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", "Asia/Tokyo", false},
		{"CRON_TZ=Asia/Tokyo 0 9 * * *", "", false},
		{"0 9 * * *", "Asia/Tokyo", false},
	}
	for _, tt := range tests {
		s := ScheduleSpec{Kind: KindCron, Cron: tt.cron, TZ: tt.tz}
		err := s.Validate()
		var ve *ValidationError
		if got := errors.As(err, &ve) && ve.Field == "schedule.tz"; got != tt.bad {
			t.Errorf("Validate(%q, tz %q) = %v; want an error on schedule.tz: %v", tt.cron, tt.tz, err, tt.bad)
		}
		if tt.bad && !strings.Contains(err.Error(), "Asia/Tokyo") {
			t.Errorf("Validate(%q, tz %q) = %v; want the zone of the prefix named", tt.cron, tt.tz, err)
		}
	}

	ctx := context.Background()
	st := NewMemStore()
	stored := httpJob("old", ScheduleSpec{Kind: KindCron, Cron: "CRON_TZ=Asia/Tokyo 0 9 * * *", TZ: "Europe/Berlin"})
	if err := st.Save(ctx, stored); err != nil {
		t.Fatal(err)
	}
	r := newTestRunner(t, st, &fakeExec{}, Config{})
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	j, err := r.Get(ctx, "old")
	if err != nil {
		t.Fatalf("the stored job with a conflict did not load: %v", err)
	}
	if h := j.NextRunAt.In(mustZone(t, "Asia/Tokyo")).Hour(); h != 9 {
		t.Errorf("stored job's next run %v is not at 9:00 in Tokyo", j.NextRunAt)
	}
	_, err = r.Add(ctx, httpJob("new", ScheduleSpec{Kind: KindCron, Cron: "CRON_TZ=Asia/Tokyo 0 9 * * *", TZ: "Europe/Berlin"}))
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "schedule.tz" {
		t.Errorf("Add with a conflict: %v, want a ValidationError on schedule.tz", err)
	}
	mustAdd(t, r, httpJob("c", ScheduleSpec{Kind: KindCron, Cron: "0 9 * * *", TZ: "Europe/Berlin"}))
	_, err = r.Update(ctx, "c", func(j *Job) error { j.Schedule.Cron = "TZ=Asia/Tokyo 0 9 * * *"; return nil })
	if !errors.As(err, &ve) || ve.Field != "schedule.tz" {
		t.Errorf("Update to a conflict: %v, want a ValidationError on schedule.tz", err)
	}
}

func mustZone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// TestUnhandledTypeEditable: a stored job whose type has no handler may be
// renamed, paused and resumed (the handler is needed to run it, not to
// store it); changing a job to such a type is still refused.
func TestUnhandledTypeEditable(t *testing.T) {
	ctx := context.Background()
	st := NewMemStore()
	stored := goJob("orphan", "gone", Every(time.Hour))
	stored.Args = json.RawMessage(`{"a":1}`)
	stored.Schedule.StartAt = time.Now().UTC()
	if err := st.Save(ctx, stored); err != nil {
		t.Fatal(err)
	}
	r := newTestRunner(t, st, nil, Config{})
	r.Handle("here", Func(func(context.Context) error { return nil }))
	if err := r.Load(ctx); err != nil {
		t.Fatal(err)
	}
	j, err := r.Update(ctx, "orphan", func(j *Job) error { j.Name = "renamed"; return nil })
	if err != nil || j.Name != "renamed" {
		t.Fatalf("rename of an unhandled job: %+v, %v; want renamed", j, err)
	}
	if _, err := r.Pause(ctx, "orphan", time.Time{}); err != nil {
		t.Errorf("Pause: %v", err)
	}
	if _, err := r.Resume(ctx, "orphan"); err != nil {
		t.Errorf("Resume: %v", err)
	}
	mustAdd(t, r, goJob("h", "here", Every(time.Hour)))
	_, err = r.Update(ctx, "h", func(j *Job) error { j.Type = "gone"; return nil })
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Field != "type" {
		t.Errorf("change to an unhandled type: %v, want a ValidationError on type", err)
	}
}

// TestResumeLastStatus: after a resume, last_status says what happened
// before the pause (the last run's status), not paused; "" for a job that
// never ran. A resume by Update (enabled again) does the same.
func TestResumeLastStatus(t *testing.T) {
	for _, name := range []string{"memstore", "no store"} {
		t.Run(name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx := context.Background()
				ex := &fakeExec{fn: func(context.Context, *Job, RunInfo) Result {
					return Result{Status: StatusFailed, Error: "boom"}
				}}
				var st Store
				if name == "memstore" {
					st = NewMemStore()
				}
				r := newTestRunner(t, st, ex, Config{})
				mustAdd(t, r, httpJob("ran", Every(time.Hour)))
				mustAdd(t, r, httpJob("never", Every(time.Hour)))
				stop := start(t, r)
				defer stop()
				if _, err := r.RunNow(ctx, "ran", RunOptions{Force: true}); err != nil {
					t.Fatal(err)
				}
				synctest.Wait()
				time.Sleep(time.Second)
				synctest.Wait()
				for _, id := range []string{"ran", "never"} {
					if p, err := r.Pause(ctx, id, time.Time{}); err != nil || p.LastStatus != StatusPaused {
						t.Fatalf("Pause(%s): %q, %v; want paused", id, p.LastStatus, err)
					}
				}
				time.Sleep(3 * time.Hour) // slots pass while paused
				j, err := r.Resume(ctx, "ran")
				if err != nil || j.LastStatus != StatusFailed || j.LastError != "boom" {
					t.Errorf("resumed job that failed: %q %q, %v; want failed boom", j.LastStatus, j.LastError, err)
				}
				j, err = r.Update(ctx, "never", func(j *Job) error { j.Paused = false; return nil })
				if err != nil || j.LastStatus != "" {
					t.Errorf("job that never ran, enabled by Update: %q, %v; want empty", j.LastStatus, err)
				}
				// A second pause and resume skips the record of the first pause.
				time.Sleep(time.Minute)
				synctest.Wait()
				if _, err := r.Pause(ctx, "ran", time.Time{}); err != nil {
					t.Fatal(err)
				}
				time.Sleep(3 * time.Hour)
				synctest.Wait()
				if j, _ := r.Resume(ctx, "ran"); j.LastStatus != StatusFailed {
					t.Errorf("second resume: %q, want failed", j.LastStatus)
				}
			})
		})
	}
}
