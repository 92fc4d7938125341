package cron

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestScheduleSpecNext(t *testing.T) {
	after := ts("2026-03-28T12:00:00Z") // a Saturday; Europe/Paris moves to summer time on the 29th
	tests := []struct {
		name  string
		spec  ScheduleSpec
		n     int
		want  []string
		field string // the field of the *ValidationError; "" for success
	}{
		{"every from after", Every(time.Hour), 3, []string{"2026-03-28T13:00:00Z", "2026-03-28T14:00:00Z", "2026-03-28T15:00:00Z"}, ""},
		{"every on its grid", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour), StartAt: ts("2026-01-01T00:30:00Z")}, 2,
			[]string{"2026-03-28T12:30:00Z", "2026-03-28T13:30:00Z"}, ""},
		{"every before start", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour), StartAt: ts("2026-04-01T00:00:00Z")}, 2,
			[]string{"2026-04-01T00:00:00Z", "2026-04-01T01:00:00Z"}, ""},
		{"once ahead", At(ts("2026-03-29T00:00:00Z")), 5, []string{"2026-03-29T00:00:00Z"}, ""},
		{"once passed", At(ts("2026-03-27T00:00:00Z")), 5, []string{}, ""},
		{"cron in a zone across DST", ScheduleSpec{Kind: KindCron, Cron: "0 9 * * *", TZ: "Europe/Paris"}, 3,
			[]string{"2026-03-29T07:00:00Z", "2026-03-30T07:00:00Z", "2026-03-31T07:00:00Z"}, ""},
		{"cron UTC", Cron("*/15 12 * * *"), 2, []string{"2026-03-28T12:15:00Z", "2026-03-28T12:30:00Z"}, ""},
		{"CRON_TZ prefix", Cron("CRON_TZ=America/New_York 0 0 * * *"), 1, []string{"2026-03-29T04:00:00Z"}, ""},
		{"n zero", Every(time.Hour), 0, nil, "n"},
		{"n too big", Every(time.Hour), MaxPreview + 1, nil, "n"},
		{"no kind", ScheduleSpec{}, 1, nil, "schedule.kind"},
		{"bad cron", Cron("0 25 * * *"), 1, nil, "schedule.cron"},
		{"bad tz", ScheduleSpec{Kind: KindCron, Cron: "0 9 * * *", TZ: "Mars/Olympus"}, 1, nil, "schedule.tz"},
		{"tz on every", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour), TZ: "UTC"}, 1, nil, "schedule.tz"},
		{"jitter too big", ScheduleSpec{Kind: KindEvery, Every: Duration(time.Hour), Jitter: Duration(time.Hour)}, 1, nil, "schedule.jitter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.spec.Next(after, tt.n)
			if tt.field != "" {
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Field != tt.field {
					t.Fatalf("Next error = %v, want a *ValidationError on %s", err, tt.field)
				}
				return
			}
			if err != nil {
				t.Fatalf("Next: %v", err)
			}
			gotS := make([]string, len(got))
			for i, g := range got {
				if g.Location() != time.UTC {
					t.Errorf("time %d is in %v, want UTC", i, g.Location())
				}
				gotS[i] = g.Format(time.RFC3339)
			}
			if diff := cmp.Diff(tt.want, gotS); diff != "" {
				t.Errorf("Next (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScheduleSpecNextMax(t *testing.T) {
	got, err := Every(time.Second).Next(ts("2026-01-01T00:00:00Z"), MaxPreview)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != MaxPreview || !got[MaxPreview-1].Equal(ts("2026-01-01T00:16:40Z")) {
		t.Errorf("got %d times ending %v, want %d ending 00:16:40", len(got), got[len(got)-1], MaxPreview)
	}
}

// TestRunnerNext checks that a job's preview is the times it fires: the
// job's jitter, its zone, and a paused job's schedule.
func TestRunnerNext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		r := newTestRunner(t, NewMemStore(), nil, Config{})
		every := Every(time.Minute)
		every.Jitter = Duration(30 * time.Second)
		j, err := r.Add(ctx, httpJob("jit", every))
		if err != nil {
			t.Fatal(err)
		}
		got, job, err := r.Next(ctx, "jit", 3)
		if err != nil {
			t.Fatal(err)
		}
		if !got[0].Equal(j.NextRunAt) {
			t.Errorf("first preview time %v, want the job's next_run_at %v", got[0], j.NextRunAt)
		}
		want := times(everySchedule{Interval: time.Minute, Start: j.Schedule.StartAt, Jitter: 30 * time.Second, Seed: seedFor("jit")}, time.Now(), 3)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Next (-want +got):\n%s", diff)
		}
		if job.ID != "jit" {
			t.Errorf("job = %q, want jit", job.ID)
		}

		if _, err := r.Add(ctx, httpJob("paris", ScheduleSpec{Kind: KindCron, Cron: "0 9 * * *", TZ: "Europe/Paris"})); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Pause(ctx, "paris", time.Time{}); err != nil {
			t.Fatal(err)
		}
		got, job, err = r.Next(ctx, "paris", 2)
		if err != nil {
			t.Fatal(err)
		}
		// The synctest clock starts at 2000-01-01 00:00 UTC: winter, UTC+1.
		if diff := cmp.Diff([]time.Time{ts("2000-01-01T08:00:00Z"), ts("2000-01-02T08:00:00Z")}, got); diff != "" {
			t.Errorf("Next of a paused cron job (-want +got):\n%s", diff)
		}
		if !job.Paused {
			t.Error("job.Paused = false, want true")
		}

		if _, _, err := r.Next(ctx, "nope", 1); !errors.Is(err, ErrNotFound) {
			t.Errorf("Next of an unknown job: %v, want ErrNotFound", err)
		}
		var ve *ValidationError
		if _, _, err := r.Next(ctx, "paris", 0); !errors.As(err, &ve) || ve.Field != "n" {
			t.Errorf("Next with n 0: %v, want a *ValidationError on n", err)
		}
	})
}

func TestRunnerPreview(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestRunner(t, nil, nil, Config{MinInterval: time.Minute})
		tests := []struct {
			name  string
			spec  ScheduleSpec
			id    string
			want  []time.Time
			field string
		}{
			{"every", Every(time.Hour), "", []time.Time{ts("2000-01-01T01:00:00Z"), ts("2000-01-01T02:00:00Z")}, ""},
			{"below the runner's minimum", Every(30 * time.Second), "", nil, "schedule.every"},
			{"cron @every below the minimum", Cron("@every 10s"), "", nil, "schedule.cron"},
			{"bad id", Every(time.Hour), "a/b", nil, "id"},
		}
		for _, tt := range tests {
			got, err := r.Preview(tt.spec, tt.id, 2)
			if tt.field != "" {
				var ve *ValidationError
				if !errors.As(err, &ve) || ve.Field != tt.field {
					t.Errorf("%s: Preview error = %v, want a *ValidationError on %s", tt.name, err, tt.field)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: Preview: %v", tt.name, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: Preview (-want +got):\n%s", tt.name, diff)
			}
		}
		// With an id, the jitter is the one that job would get.
		sp := Every(time.Hour)
		sp.Jitter = Duration(time.Minute)
		got, err := r.Preview(sp, "job-7", 1)
		if err != nil {
			t.Fatal(err)
		}
		want := times(everySchedule{Interval: time.Hour, Start: time.Now(), Jitter: time.Minute, Seed: seedFor("job-7")}, time.Now(), 1)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("Preview with id (-want +got):\n%s", diff)
		}
	})
}
