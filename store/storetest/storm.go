package storetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
)

// TestStorm checks a [scheduler.StormGuard]. newGuard returns an empty
// guard with windows w.
func TestStorm(t *testing.T, newGuard func(t *testing.T, w scheduler.StormWindows) scheduler.StormGuard) {
	ctx := context.Background()
	t.Run("ConcurrentReportsActOnce", func(t *testing.T) {
		g := newGuard(t, scheduler.StormWindows{Debounce: time.Minute, Cooldown: time.Minute, ActionsPerSecond: 100})
		const n = 1000
		var mu sync.Mutex
		got := map[scheduler.StormAction]int{}
		var maxReports int64
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for range n {
			wg.Go(func() {
				d, err := g.Report(ctx, "node-1", "asr-large")
				if err != nil {
					errs <- err
					return
				}
				mu.Lock()
				got[d.Action]++
				maxReports = max(maxReports, d.Reports)
				mu.Unlock()
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		want := map[scheduler.StormAction]int{scheduler.StormMarked: 1, scheduler.StormDebounced: n - 1}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("actions of %d concurrent reports (-want +got):\n%s", n, d)
		}
		if maxReports != n {
			t.Errorf("highest report count = %d, want %d", maxReports, n)
		}
		for _, tc := range []struct {
			node, model string
			want        bool
		}{
			{"node-1", "asr-large", true},
			{"node-1", "mt", false},
			{"node-2", "asr-large", false},
		} {
			if u, err := g.Unavailable(ctx, tc.node, tc.model); err != nil || u != tc.want {
				t.Errorf("Unavailable(%s, %s) = %v, %v; want %v", tc.node, tc.model, u, err, tc.want)
			}
		}
	})
	t.Run("NewWindowActsAgain", func(t *testing.T) {
		g := newGuard(t, scheduler.StormWindows{Debounce: shortTTL, Cooldown: shortTTL, ActionsPerSecond: 100})
		d, err := g.Report(ctx, "n", "m")
		if err != nil || d.Action != scheduler.StormMarked {
			t.Fatalf("first Report = %+v, %v; want marked", d, err)
		}
		waitFor(t, "cool-down ends", func() (bool, error) {
			u, err := g.Unavailable(ctx, "n", "m")
			return !u, err
		})
		waitFor(t, "a report after the window acts again", func() (bool, error) {
			d, err := g.Report(ctx, "n", "m")
			return d.Action == scheduler.StormMarked, err
		})
	})
	t.Run("RateLimitPerModel", func(t *testing.T) {
		const limit, n = 3, 10
		g := newGuard(t, scheduler.StormWindows{Debounce: time.Minute, Cooldown: time.Minute, ActionsPerSecond: limit})
		// The rate window opens with a model's first action and lasts a
		// second. n reports answered within a second of the first one's
		// sending all fall in one window: exactly limit are marked. A
		// slower batch may cross into later windows, so it is held only to
		// the bound those windows allow, and the batch is tried again on a
		// fresh model (a fresh budget) until one is quick enough; how fast
		// the machine is decides how many batches that takes, never
		// whether the limit is checked.
		model := ""
		deadline := time.Now().Add(waitLimit)
		for try := 1; ; try++ {
			model = fmt.Sprintf("m%d", try)
			got := map[scheduler.StormAction]int{}
			start := time.Now()
			for i := range n {
				d, err := g.Report(ctx, fmt.Sprintf("node-%d", i), model)
				if err != nil {
					t.Fatal(err)
				}
				got[d.Action]++
			}
			elapsed := time.Since(start)
			if got[scheduler.StormMarked]+got[scheduler.StormRateLimited] != n {
				t.Fatalf("actions for %d nodes, each reporting once: %v; want only marked and rate_limited", n, got)
			}
			windows := 1 + int(elapsed/time.Second)
			if m := got[scheduler.StormMarked]; m < limit || m > limit*windows {
				t.Fatalf("%d reports in %v marked %d, want %d to %d (%d actions/s over at most %d windows)", n, elapsed, m, limit, limit*windows, limit, windows)
			}
			if elapsed < 950*time.Millisecond {
				want := map[scheduler.StormAction]int{scheduler.StormMarked: limit, scheduler.StormRateLimited: n - limit}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("actions for %d nodes with %d actions/s, all within one second (-want +got):\n%s", n, limit, d)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no batch of %d reports was answered within a second in %d tries", n, try)
			}
		}
		// Another model has its own budget.
		if d, err := g.Report(ctx, "node-0", "other"); err != nil || d.Action != scheduler.StormMarked {
			t.Errorf("Report for another model = %+v, %v; want marked", d, err)
		}
		// A rate-limited node opened no window: it acts once the budget renews.
		waitFor(t, "rate-limited node acts in a later second", func() (bool, error) {
			d, err := g.Report(ctx, "node-9", model)
			return d.Action == scheduler.StormMarked, err
		})
	})
}
