package cron

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestOnceNext(t *testing.T) {
	at := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		after time.Time
		want  time.Time
	}{
		{"before", at.Add(-time.Hour), at},
		{"just before", at.Add(-time.Nanosecond), at},
		{"at", at, time.Time{}},
		{"after", at.Add(time.Second), time.Time{}},
		{"zero time", time.Time{}, at},
	}
	for _, tt := range tests {
		if got := (onceSchedule{At: at}).Next(tt.after); !got.Equal(tt.want) {
			t.Errorf("%s: Once.Next(%v) = %v, want %v", tt.name, tt.after, got, tt.want)
		}
	}
}

func TestEveryNext(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := everySchedule{Interval: 5 * time.Minute, Start: start}
	tests := []struct {
		name  string
		e     everySchedule
		after time.Time
		want  time.Time
	}{
		{"before start", e, start.Add(-time.Hour), start},
		{"zero time before start", e, time.Time{}, start},
		{"at start", e, start, start.Add(5 * time.Minute)},
		{"between slots", e, start.Add(7 * time.Minute), start.Add(10 * time.Minute)},
		{"on a slot", e, start.Add(10 * time.Minute), start.Add(15 * time.Minute)},
		{"just before a slot", e, start.Add(15*time.Minute - time.Nanosecond), start.Add(15 * time.Minute)},
		{"odd interval", everySchedule{Interval: 7 * time.Second, Start: start}, start.Add(time.Minute), start.Add(63 * time.Second)},
		{"start not on a round time", everySchedule{Interval: time.Hour, Start: start.Add(17 * time.Second)}, start.Add(90 * time.Minute), start.Add(2*time.Hour + 17*time.Second)},
		{"far future keeps the grid", everySchedule{Interval: time.Hour, Start: start}, time.Date(2400, 3, 4, 5, 6, 7, 0, time.UTC), time.Date(2400, 3, 4, 6, 0, 0, 0, time.UTC)},
		{"zero interval", everySchedule{Start: start}, start, time.Time{}},
		{"negative interval", everySchedule{Interval: -time.Second, Start: start}, start, time.Time{}},
	}
	for _, tt := range tests {
		if got := tt.e.Next(tt.after); !got.Equal(tt.want) {
			t.Errorf("%s: Every%+v.Next(%v) = %v, want %v", tt.name, tt.e, tt.after, got, tt.want)
		}
	}
}

// TestEveryScheduleNoDrift runs a schedule whose runs take longer than a third of
// the interval, taking each next slot from when the run finished: the slots
// stay on the grid start + k*interval.
func TestEveryScheduleNoDrift(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	e := everySchedule{Interval: time.Minute, Start: start}
	var got, want []time.Time
	t0 := e.Next(start.Add(-time.Second))
	for k := range 100 {
		got = append(got, t0)
		want = append(want, start.Add(time.Duration(k)*time.Minute))
		finished := t0.Add(23*time.Second + time.Duration(k)*time.Millisecond)
		t0 = e.Next(finished)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("slots drifted (-want +got):\n%s", d)
	}
}

func TestEveryScheduleJitter(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	const interval, jitter = time.Minute, 20 * time.Second
	runs := func(seed uint64, n int) []time.Time {
		e := everySchedule{Interval: interval, Start: start, Jitter: jitter, Seed: seed}
		var out []time.Time
		for t0 := start.Add(-time.Nanosecond); len(out) < n; {
			t0 = e.Next(t0)
			out = append(out, t0)
		}
		return out
	}
	for seed := uint64(0); seed < 20; seed++ {
		e := everySchedule{Interval: interval, Start: start, Jitter: jitter, Seed: seed}
		rs := runs(seed, 200)
		offsets := map[time.Duration]bool{}
		for k, r := range rs {
			slot := start.Add(time.Duration(k) * interval)
			off := r.Sub(slot)
			if off < 0 || off >= jitter {
				t.Fatalf("seed %d slot %d: run %v is %v after its slot, want in [0,%v)", seed, k, r, off, jitter)
			}
			if got := e.Slot(r); !got.Equal(slot) {
				t.Fatalf("seed %d: Slot(%v) = %v, want %v (the grid moved)", seed, r, got, slot)
			}
			if k > 0 && !r.After(rs[k-1]) {
				t.Fatalf("seed %d: run %v does not follow %v", seed, r, rs[k-1])
			}
			// Asking from anywhere between the previous run and this one
			// gives this run: Next is a pure function of its argument.
			if k > 0 {
				mid := rs[k-1].Add(r.Sub(rs[k-1]) / 2)
				if got := e.Next(mid); !got.Equal(r) {
					t.Fatalf("seed %d: Next(%v) = %v, want %v", seed, mid, got, r)
				}
			}
			offsets[off] = true
		}
		if len(offsets) < 100 {
			t.Errorf("seed %d: only %d distinct offsets in 200 runs: jitter is not spread", seed, len(offsets))
		}
		if d := cmp.Diff(rs, runs(seed, 200)); d != "" {
			t.Errorf("seed %d: a second pass differs (-first +second):\n%s", seed, d)
		}
		if seed > 0 && cmp.Equal(rs, runs(seed-1, 200)) {
			t.Errorf("seeds %d and %d give the same runs", seed-1, seed)
		}
	}
}

func TestEveryScheduleJitterClamped(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := everySchedule{Interval: time.Second, Start: start, Jitter: 5 * time.Second, Seed: 42}
	prev := start.Add(-time.Nanosecond)
	for k := range 1000 {
		r := e.Next(prev)
		if !r.After(prev) || r.Sub(start.Add(time.Duration(k)*time.Second)) >= time.Second {
			t.Fatalf("run %d = %v after %v: want strictly increasing, within its interval", k, r, prev)
		}
		prev = r
	}
}

func TestEverySlot(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	e := everySchedule{Interval: time.Hour, Start: start}
	tests := []struct {
		t, want time.Time
	}{
		{start, start},
		{start.Add(59 * time.Minute), start},
		{start.Add(61 * time.Minute), start.Add(time.Hour)},
		{start.Add(-time.Minute), start.Add(-time.Minute)}, // before Start: unchanged
	}
	for _, tt := range tests {
		if got := e.Slot(tt.t); !got.Equal(tt.want) {
			t.Errorf("Slot(%v) = %v, want %v", tt.t, got, tt.want)
		}
	}
	if got := (everySchedule{}).Slot(start); !got.Equal(start) {
		t.Errorf("zero Every: Slot(%v) = %v, want it unchanged", start, got)
	}
}

func TestSeedFor(t *testing.T) {
	if a, b := seedFor("job-1"), seedFor("job-1"); a != b {
		t.Errorf("seedFor(%q) = %d, then %d: not deterministic", "job-1", a, b)
	}
	seen := map[uint64]string{}
	for _, id := range []string{"", "a", "b", "job-1", "job-2", "job-10", "1-boj"} {
		s := seedFor(id)
		if other, ok := seen[s]; ok {
			t.Errorf("seedFor(%q) == seedFor(%q)", id, other)
		}
		seen[s] = id
	}
}

func BenchmarkEveryNext(b *testing.B) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, bc := range []struct {
		name string
		e    everySchedule
	}{
		{"plain", everySchedule{Interval: 5 * time.Second, Start: start}},
		{"jitter", everySchedule{Interval: 5 * time.Second, Start: start, Jitter: time.Second, Seed: seedFor("job")}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			t := start
			for b.Loop() {
				t = bc.e.Next(t)
			}
		})
	}
}
