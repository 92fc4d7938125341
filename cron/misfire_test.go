package cron

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMisfire(t *testing.T) {
	s0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return s0.Add(d) }
	every := everySchedule{Interval: 5 * time.Minute, Start: s0}
	hourly := mustParseCron("0 * * * *", nil)
	tests := []struct {
		name     string
		s        Schedule
		due, now time.Time
		grace    time.Duration
		want     misfireDecision
	}{
		{"once past due is missed", onceSchedule{At: at(time.Hour)}, at(time.Hour), at(time.Hour + time.Minute), 0,
			misfireDecision{Status: StatusMissed}},
		{"once within grace runs late", onceSchedule{At: at(time.Hour)}, at(time.Hour), at(time.Hour + time.Minute), 5 * time.Minute,
			misfireDecision{Run: true}},
		{"once missed by exactly the grace", onceSchedule{At: at(time.Hour)}, at(time.Hour), at(time.Hour + 5*time.Minute), 5 * time.Minute,
			misfireDecision{Status: StatusMissed}},
		{"once on time", onceSchedule{At: at(time.Hour)}, at(time.Hour), at(time.Hour), 0,
			misfireDecision{Run: true}},
		{"once not yet due", onceSchedule{At: at(time.Hour)}, at(time.Hour), at(time.Minute), 0,
			misfireDecision{Next: at(time.Hour)}},
		{"every rolls on without catch-up", every, at(10 * time.Minute), at(23 * time.Minute), 0,
			misfireDecision{Next: at(25 * time.Minute)}},
		{"every after a long suspend", every, at(10 * time.Minute), at(72*time.Hour + time.Second), 0,
			misfireDecision{Next: at(72*time.Hour + 5*time.Minute)}},
		{"every within grace runs once", every, at(10 * time.Minute), at(12 * time.Minute), 5 * time.Minute,
			misfireDecision{Run: true, Next: at(15 * time.Minute)}},
		{"every beyond grace", every, at(10 * time.Minute), at(16 * time.Minute), 5 * time.Minute,
			misfireDecision{Next: at(20 * time.Minute)}},
		{"every seen on a later slot", every, at(10 * time.Minute), at(15 * time.Minute), 0,
			misfireDecision{Next: at(20 * time.Minute)}},
		{"cron rolls on", hourly, at(10 * time.Hour), at(13*time.Hour + 20*time.Minute), 0,
			misfireDecision{Next: at(14 * time.Hour)}},
		{"cron within grace", hourly, at(10 * time.Hour), at(10*time.Hour + 30*time.Second), time.Minute,
			misfireDecision{Run: true, Next: at(11 * time.Hour)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := decideMisfire(tt.s, tt.due, tt.now, tt.grace)
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("decideMisfire(due %v, now %v, grace %v) (-want +got):\n%s", tt.due, tt.now, tt.grace, d)
			}
		})
	}
}

func TestCountSlots(t *testing.T) {
	s0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return s0.Add(d) }
	every := everySchedule{Interval: 5 * time.Minute, Start: s0}
	tests := []struct {
		name         string
		s            Schedule
		after, until time.Time
		max          int
		want         int
	}{
		{"every", every, at(10 * time.Minute), at(23 * time.Minute), 0, 2},
		{"every bounds", every, at(10 * time.Minute), at(20 * time.Minute), 0, 2}, // (10,20]: 15 and 20
		{"every before start", every, at(-time.Hour), at(time.Minute), 0, 1},
		{"every pointer", &every, at(10 * time.Minute), at(23 * time.Minute), 0, 2},
		{"every capped", every, s0, at(24 * time.Hour), 10, 10},
		{"every default cap", every, s0, at(240 * time.Hour), 0, defaultCountLimit},
		{"empty span", every, at(time.Hour), at(time.Hour), 0, 0},
		{"reversed span", every, at(time.Hour), at(0), 0, 0},
		{"once inside", onceSchedule{At: at(time.Hour)}, s0, at(time.Hour), 0, 1},
		{"once outside", onceSchedule{At: at(time.Hour)}, at(time.Hour), at(2 * time.Hour), 0, 0},
		{"once pointer", &onceSchedule{At: at(time.Hour)}, s0, at(2 * time.Hour), 0, 1},
		{"cron", mustParseCron("0 * * * *", nil), at(10 * time.Hour), at(13*time.Hour + 20*time.Minute), 0, 3},
		{"cron capped", mustParseCron("* * * * *", nil), s0, at(24 * time.Hour), 100, 100},
		{"@every", mustParseCron("@every 1h", nil), at(30 * time.Minute), at(3*time.Hour + 30*time.Minute), 0, 3},
		{"@every before its origin", mustParseCron("@every 1h", nil), time.Date(1969, 12, 31, 20, 30, 0, 0, time.UTC), time.Date(1970, 1, 1, 1, 0, 0, 0, time.UTC), 0, 5},
		{"nil schedule", nil, s0, at(time.Hour), 0, 0},
	}
	for _, tt := range tests {
		if got := countSlots(tt.s, tt.after, tt.until, tt.max); got != tt.want {
			t.Errorf("%s: countSlots(%v, %v, %d) = %d, want %d", tt.name, tt.after, tt.until, tt.max, got, tt.want)
		}
	}
}

// TestCountSlotsMatchesNext checks the constant-time count of Every, jitter
// included, against stepping through Next.
func TestCountSlotsMatchesNext(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	s0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for range 500 {
		iv := time.Duration(1+rng.IntN(600)) * time.Second
		e := everySchedule{Interval: iv, Start: s0, Jitter: time.Duration(rng.Int64N(int64(iv))), Seed: rng.Uint64()}
		after := s0.Add(time.Duration(rng.Int64N(int64(100*iv))) - 10*iv)
		until := after.Add(time.Duration(rng.Int64N(int64(50 * iv))))
		want := countByNext(e, after, until, 1<<30)
		if got := countSlots(e, after, until, 1<<30); got != want {
			t.Fatalf("countSlots(%+v, %v, %v) = %d, stepping through Next gives %d", e, after, until, got, want)
		}
	}
}
