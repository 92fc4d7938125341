package sqlstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/cron"
)

func mustLeases(t *testing.T, db *DB, name string) *Leases {
	t.Helper()
	return mustLeasesTTL(t, db, name, 600*time.Millisecond)
}

// mustLeasesTTL is mustLeases at another TTL.
func mustLeasesTTL(t *testing.T, db *DB, name string, ttl time.Duration) *Leases {
	t.Helper()
	l, err := db.leases(LeasesConfig{Instance: name, TTL: ttl, Partitions: 64}, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.initOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	return l
}

// renewAll runs rounds of every keeper until their holdings stop changing.
func renewAll(t *testing.T, ls ...*Leases) {
	t.Helper()
	held := func() (out [][]int) {
		for _, l := range ls {
			out = append(out, l.Owned())
		}
		return out
	}
	for range 64 {
		before := held()
		for _, l := range ls {
			if err := l.Renew(context.Background()); err != nil {
				t.Fatal(err)
			}
		}
		if cmp.Equal(before, held()) {
			return
		}
	}
	t.Fatalf("holdings still change after 64 rounds: %v", held())
}

// TestLeasesMoveGradually: a keeper that holds every partition when
// another joins releases them a sixteenth a round (4 of 64), renewing the
// rest until their turn, and rounds often (pending) until it holds its
// share alone; every partition is held by one of the two at every point,
// but the few released in that round.
func TestLeasesMoveGradually(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			ctx := context.Background()
			a := mustLeases(t, mustOpen(t, u), "a")
			renewAll(t, a)
			if n := len(a.Owned()); n != 64 {
				t.Fatalf("alone, a holds %d partitions, want 64", n)
			}
			bb := mustLeases(t, mustOpen(t, u), "b")
			must := func(err error) {
				t.Helper()
				if err != nil {
					t.Fatal(err)
				}
			}
			must(bb.Renew(ctx)) // sees a; its share is a's still
			wantB := Share("b", []string{"a", "b"}, 64)
			rounds := 0
			for len(bb.Owned()) < len(wantB) {
				if rounds++; rounds > 20 {
					t.Fatalf("after 20 rounds b holds %d of its %d", len(bb.Owned()), len(wantB))
				}
				before := len(a.Owned())
				must(a.Renew(ctx))
				released := before - len(a.Owned())
				if released > 4 || released < 0 {
					t.Fatalf("round %d: a released %d partitions, want at most 4", rounds, released)
				}
				if len(a.Owned())+len(bb.Owned()) < 64-4 {
					t.Fatalf("round %d: a holds %d and b %d: more than the 4 of the round without an owner", rounds, len(a.Owned()), len(bb.Owned()))
				}
				a.mu.Lock()
				pending := a.pending
				a.mu.Unlock()
				if beyond := len(a.Owned()) - len(Share("a", []string{"a", "b"}, 64)); (beyond > 0) != pending {
					t.Errorf("round %d: a holds %d beyond its share, pending %v; want pending while it does", rounds, beyond, pending)
				}
				must(bb.Renew(ctx))
				if len(a.Owned())+len(bb.Owned()) != 64 {
					t.Fatalf("round %d: a holds %d and b %d after b's round, want all 64", rounds, len(a.Owned()), len(bb.Owned()))
				}
			}
			if min := (len(wantB) + 3) / 4; rounds < min {
				t.Errorf("b took its %d partitions in %d rounds, want at least %d (4 a round)", len(wantB), rounds, min)
			}
			if !cmp.Equal(bb.Owned(), wantB) || !cmp.Equal(a.Owned(), Share("a", []string{"a", "b"}, 64)) {
				t.Errorf("at the end: a holds %v, b %v; want their shares", a.Owned(), bb.Owned())
			}
		})
	}
}

// TestLeasesShareTakeoverJoin: three keepers on one database hold disjoint
// shares covering every partition; one that stops renewing (as a killed
// process) loses its partitions to the others once its leases expire; a
// keeper that joins takes its share from the others within two rounds;
// one that leaves hands over at the next round.
func TestLeasesShareTakeoverJoin(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			a, bb, c := mustLeases(t, mustOpen(t, u), "a"), mustLeases(t, mustOpen(t, u), "b"), mustLeases(t, mustOpen(t, u), "c")
			renewAll(t, a, bb, c)
			cover := func(ls ...*Leases) (all []int, each map[string]int) {
				each = map[string]int{}
				for _, l := range ls {
					o := l.Owned()
					each[l.Instance()] = len(o)
					all = append(all, o...)
				}
				slices.Sort(all)
				return all, each
			}
			want := make([]int, 64)
			for i := range want {
				want[i] = i
			}
			all, each := cover(a, bb, c)
			if diff := cmp.Diff(want, all); diff != "" {
				t.Fatalf("three keepers: partitions held (-want each once +got): %s", diff)
			}
			for n, k := range each {
				if k < 10 {
					t.Errorf("%s holds %d of 64 partitions, want about a third", n, k)
				}
			}
			// a stops renewing: after the TTL the others take its share.
			time.Sleep(700 * time.Millisecond)
			if len(a.Owned()) != 0 {
				t.Errorf("a holds %v after its TTL without renewal, want none (time fencing)", a.Owned())
			}
			renewAll(t, bb, c)
			if all, _ := cover(bb, c); !cmp.Equal(want, all) {
				t.Errorf("after a's leases expired, b and c hold %v, want all 64 once", all)
			}
			// d joins.
			d := mustLeases(t, mustOpen(t, u), "d")
			renewAll(t, bb, c, d)
			all, each = cover(bb, c, d)
			if !cmp.Equal(want, all) || each["d"] < 10 {
				t.Errorf("after d joined: held %v, each %v; want all once, d about a third", all, each)
			}
			// d leaves: b and c take its share at their next round.
			if err := d.Leave(context.Background()); err != nil {
				t.Fatal(err)
			}
			renewAll(t, bb, c)
			if all, _ := cover(bb, c); !cmp.Equal(want, all) {
				t.Errorf("after d left, b and c hold %v, want all 64 once", all)
			}
		})
	}
}

// TestLeasesConfig: bad configurations name the field.
func TestLeasesConfig(t *testing.T) {
	t.Parallel()
	db := openTestSQLite(t)
	for _, tt := range []struct {
		cfg  LeasesConfig
		want string
	}{
		{LeasesConfig{}, "sqlstore: leases: LeasesConfig.Instance is required"},
		{LeasesConfig{Instance: "a", TTL: time.Millisecond}, "sqlstore: leases: LeasesConfig.TTL must be at least 2s, got 1ms"},
		{LeasesConfig{Instance: "a", TTL: MinLeaseTTL - time.Millisecond}, "sqlstore: leases: LeasesConfig.TTL must be at least 2s, got 1.999s"},
		{LeasesConfig{Instance: "a", Partitions: -1}, "sqlstore: leases: LeasesConfig.Partitions must be from 1 to 65536, got -1"},
	} {
		if _, err := db.Leases(tt.cfg); err == nil || err.Error() != tt.want {
			t.Errorf("Leases(%+v) error = %v, want %q", tt.cfg, err, tt.want)
		}
	}
	l, _ := db.Leases(LeasesConfig{Instance: "a", Partitions: 8})
	if err := l.initOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	l2, _ := db.Leases(LeasesConfig{Instance: "b", Partitions: 16})
	if err := l2.Run(context.Background()); err == nil {
		t.Errorf("Run with 16 partitions on a table of 8: no error")
	}
}

// holder is a Holder that records the jobs it holds.
type holder struct {
	mu   sync.Mutex
	jobs map[string]cron.Job
}

func (h *holder) Hold(j cron.Job, version int64) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.jobs[j.ID] = j
	return nil
}

func (h *holder) Drop(id string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.jobs[id]
	delete(h.jobs, id)
	return ok
}

func (h *holder) IDs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for id := range h.jobs {
		out = append(out, id)
	}
	return out
}

func (h *holder) name(id string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	j, ok := h.jobs[id]
	return j.Name, ok
}

// TestWatcher: a watcher on one connection sees the saves and deletes
// made through another (another process). Its return after a cut
// connection is cmd/ksana's TestClusterConflictAndOutage.
func TestWatcher(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			u := b.url(t)
			writer := mustJobs(t, mustOpen(t, u), JobsConfig{})
			reader := mustJobs(t, mustOpen(t, u), JobsConfig{})
			w, err := reader.Watcher(ctx, WatchConfig{Poll: 20 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			h := &holder{jobs: map[string]cron.Job{}}
			done := make(chan error, 1)
			go func() { done <- w.Run(ctx, h) }()
			wait := func(what string, cond func() bool) {
				t.Helper()
				deadline := time.Now().Add(10 * time.Second)
				for !cond() {
					if time.Now().After(deadline) {
						t.Fatalf("timed out waiting for %s", what)
					}
					time.Sleep(5 * time.Millisecond)
				}
			}
			for i := range 5 {
				j := testJob(fmt.Sprintf("w%d", i))
				if err := writer.Save(ctx, j); err != nil {
					t.Fatal(err)
				}
			}
			wait("five jobs held", func() bool { return len(h.IDs()) == 5 })
			j := testJob("w1")
			j.Name = "renamed"
			if err := writer.Save(ctx, j); err != nil {
				t.Fatal(err)
			}
			if err := writer.Delete(ctx, "w2"); err != nil {
				t.Fatal(err)
			}
			wait("the rename and the delete", func() bool {
				n, _ := h.name("w1")
				_, held := h.name("w2")
				return n == "renamed" && !held
			})
			// Bookkeeping is not announced.
			if err := writer.Record(ctx, "w3", cron.Bookkeeping{LastStatus: cron.StatusSuccess}); err != nil {
				t.Fatal(err)
			}
			j = testJob("w4")
			j.Name = "after"
			if err := writer.Save(ctx, j); err != nil {
				t.Fatal(err)
			}
			wait("a later change", func() bool { n, _ := h.name("w4"); return n == "after" })
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Run: %v", err)
			}
		})
	}
}

// TestLeasesRunKeepsShare: two keepers' Run loops, once settled, hold
// every partition between them at every moment for several TTLs (no
// renewal comes late), and a keeper that stops hands its share over. The
// keepers run at the smallest TTL a keeper takes (MinLeaseTTL): at a
// shorter one a renewal on a busy machine came late.
func TestLeasesRunKeepsShare(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const ttl = MinLeaseTTL
			a, c := mustLeasesTTL(t, mustOpen(t, u), "a", ttl), mustLeasesTTL(t, mustOpen(t, u), "c", ttl)
			actx, stopA := context.WithCancel(ctx)
			var wg sync.WaitGroup
			wg.Go(func() { a.Run(actx) })
			wg.Go(func() { c.Run(ctx) })
			defer func() { cancel(); wg.Wait() }()
			covered := func() (int, int, int) {
				na, nc := len(a.Owned()), len(c.Owned())
				seen := map[int]bool{}
				for _, p := range append(a.Owned(), c.Owned()...) {
					seen[p] = true
				}
				return na, nc, len(seen)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				na, nc, all := covered()
				if na > 0 && nc > 0 && all == 64 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("never settled: a %d, c %d, covered %d", na, nc, all)
				}
				time.Sleep(20 * time.Millisecond)
			}
			for end := time.Now().Add(3 * ttl); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
				if na, nc, all := covered(); na == 0 || nc == 0 || all != 64 {
					t.Fatalf("after settling: a holds %d, c %d, %d of 64 covered", na, nc, all)
				}
			}
			stopA()
			deadline = time.Now().Add(5 * time.Second)
			for len(c.Owned()) != 64 {
				if time.Now().After(deadline) {
					t.Fatalf("after a stopped, c holds %d of 64", len(c.Owned()))
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

// TestLeaseStatsShowStall: a keeper's stats count its rounds and the
// partitions it took, and a heartbeat held up (the member table locked by
// another transaction, as a commit stuck behind a slow disk) shows as a
// long round and a long gap between renewals, the first signs that the
// keeper is about to lose its leases although it is alive. It runs at
// the smallest TTL a keeper takes (MinLeaseTTL): the rounds before the
// stall must not lapse, and a shorter TTL lapsed on a busy machine.
func TestLeaseStatsShowStall(t *testing.T) {
	t.Parallel()
	u := postgresTestURL(t)
	db := mustOpen(t, u)
	const ttl = MinLeaseTTL
	l, err := db.leases(LeasesConfig{Instance: "s", TTL: ttl, Partitions: 64}, MinLeaseTTL)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- l.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	waitFor(t, "three rounds", 10*time.Second, func() (bool, string) {
		s := l.Stats()
		return s.Rounds >= 3, fmt.Sprintf("%+v", s)
	})
	before := l.Stats()
	if before.Gained != 64 || before.Lost != 0 || before.Failures != 0 {
		t.Errorf("alone: stats %+v, want 64 partitions gained, none lost, no failure", before)
	}
	if before.MaxGap >= ttl {
		t.Errorf("unhindered rounds: longest gap between renewals %v, want under the %v TTL (about a third of it)", before.MaxGap, ttl)
	}

	const stall = ttl + ttl/2
	tx, err := mustOpen(t, u).SQL().BeginTx(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("LOCK TABLE ksana_member IN EXCLUSIVE MODE"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(stall)
	if err := tx.Rollback(); err != nil {
		t.Fatal(err)
	}
	// The round held up ends after the rollback; wait for the one after
	// it, which closes the gap.
	released := time.Now()
	waitFor(t, "a round started after the stall", 10*time.Second, func() (bool, string) {
		s := l.Stats()
		return s.LastRenewed.After(released), fmt.Sprintf("%+v", s)
	})
	after := l.Stats()
	if after.MaxRound < stall/2 {
		t.Errorf("after a heartbeat held %v: longest round %v, want it to show the wait", stall, after.MaxRound)
	}
	// Each partition ran out and was taken again (on a busy machine a
	// round after the stall may run out too: then again).
	if after.Lost < 64 || after.Gained-after.Lost != 64 {
		t.Errorf("after a stall past the TTL: %d partitions gained and %d lost, want 64 or more lost and each taken again (64 held)", after.Gained, after.Lost)
	}
	if after.MaxGap < stall {
		t.Errorf("after a heartbeat held %v: longest gap between renewals %v, want at least that", stall, after.MaxGap)
	}
	t.Logf("before %+v; after %+v", before, after)
}

// TestRegisterWaitsForLapse: a second keeper of a name whose heartbeat is
// not renewed (its process was killed) waits for the heartbeat to lapse
// and takes the name; one whose name is renewed meanwhile (a live
// process) is refused with ErrInstanceInUse, without waiting out a TTL.
func TestRegisterWaitsForLapse(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			u := b.url(t)
			ctx := context.Background()
			// The killed one: registered, never renewed.
			mustLeases(t, mustOpen(t, u), "n")
			start := time.Now()
			mustLeases(t, mustOpen(t, u), "n") // registers, or fails the test
			if took := time.Since(start); took > 5*time.Second {
				t.Errorf("registering took %v, want about the TTL (600ms)", took)
			}
			// A live one renews every second: a newcomer is refused once
			// it sees a renewal, before the 4s it would wait for a lapse.
			// (A TTL of seconds, so that a renewal comes in time on a
			// loaded machine.)
			const ttl = 3 * time.Second
			keeper := func() *Leases {
				l, err := mustOpen(t, u).leases(LeasesConfig{Instance: "live", TTL: ttl, Partitions: 64}, 300*time.Millisecond)
				if err != nil {
					t.Fatal(err)
				}
				return l
			}
			live := keeper()
			if err := live.initOnce(ctx); err != nil {
				t.Fatal(err)
			}
			rctx, cancel := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- live.Run(rctx) }()
			defer func() { cancel(); <-done }()
			start = time.Now()
			err := keeper().Register(ctx)
			if !errors.Is(err, ErrInstanceInUse) {
				t.Fatalf("register the name of a live process: %v, want ErrInstanceInUse", err)
			}
			if took := time.Since(start); took >= ttl {
				t.Errorf("refused after %v, want within about a renewal period (1s), before the TTL", took)
			}
		})
	}
}
