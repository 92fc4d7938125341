package scheduler_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ksana-dev/ksana/scheduler"
)

// flakyPresence fails Announce while down is set.
type flakyPresence struct {
	*scheduler.MemPresence
	down atomic.Bool
}

func (f *flakyPresence) Announce(ctx context.Context, id string, ttl time.Duration) error {
	if f.down.Load() {
		return errors.New("server down")
	}
	return f.MemPresence.Announce(ctx, id, ttl)
}

func TestHeartbeat(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &flakyPresence{MemPresence: scheduler.NewMemPresence()}
		hb, err := scheduler.NewHeartbeat(p, scheduler.Config{InstanceID: "i1", OwnerTTL: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- hb.Run(ctx) }()
		alive := func() bool {
			synctest.Wait()
			ok, err := p.Alive(context.Background(), "i1")
			if err != nil {
				t.Fatal(err)
			}
			return ok
		}
		steps := []struct {
			name    string
			down    bool
			advance time.Duration
			want    bool
		}{
			{"announced at once", false, 0, true},
			{"renewed past several TTLs", false, 5 * time.Minute, true},
			{"one failed renewal is covered by the TTL", true, 15 * time.Second, true},
			{"expires when renewals keep failing", true, 30 * time.Second, false},
			{"comes back when the server does", false, 11 * time.Second, true},
		}
		for _, s := range steps {
			p.down.Store(s.down)
			time.Sleep(s.advance)
			if got := alive(); got != s.want {
				t.Errorf("%s: Alive = %v, want %v", s.name, got, s.want)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		if alive() {
			t.Errorf("presence still there after Run returned; want withdrawn")
		}
	})
}

func TestHeartbeatFirstAnnounceFails(t *testing.T) {
	p := &flakyPresence{MemPresence: scheduler.NewMemPresence()}
	p.down.Store(true)
	hb, err := scheduler.NewHeartbeat(p, scheduler.Config{InstanceID: "i1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := hb.Run(t.Context()); err == nil {
		t.Errorf("Run with an unreachable store = nil, want an error")
	}
}

func TestBindings(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		o := scheduler.NewMemOwners()
		var mu sync.Mutex
		var lost []string
		b, err := scheduler.NewBindings(o, scheduler.Config{InstanceID: "a", OwnerTTL: 30 * time.Second}, func(kind scheduler.OwnerKind, id string) {
			mu.Lock()
			lost = append(lost, string(kind)+":"+id)
			mu.Unlock()
		})
		if err != nil {
			t.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go b.Run(runCtx)
		for _, c := range []struct {
			kind scheduler.OwnerKind
			id   string
		}{{scheduler.OwnerNode, "n1"}, {scheduler.OwnerNode, "n2"}, {scheduler.OwnerSession, "s1"}} {
			if err := b.Connect(ctx, c.kind, c.id); err != nil {
				t.Fatal(err)
			}
		}
		if err := b.Connect(ctx, "job", "x"); err == nil {
			t.Errorf("Connect with an unknown kind = nil, want an error")
		}
		owners := func() map[string]string {
			synctest.Wait()
			got := map[string]string{}
			for _, k := range []struct {
				kind scheduler.OwnerKind
				id   string
			}{{scheduler.OwnerNode, "n1"}, {scheduler.OwnerNode, "n2"}, {scheduler.OwnerSession, "s1"}} {
				v, err := o.Owner(ctx, k.kind, k.id)
				if errors.Is(err, scheduler.ErrNoOwner) {
					v = ""
				} else if err != nil {
					t.Fatal(err)
				}
				got[string(k.kind)+":"+k.id] = v
			}
			return got
		}
		time.Sleep(5 * time.Minute) // ten TTLs: only renewal keeps the bindings
		if d := cmp.Diff(map[string]string{"node:n1": "a", "node:n2": "a", "session:s1": "a"}, owners()); d != "" {
			t.Errorf("owners after 5 min (-want +got):\n%s", d)
		}
		// n2 reconnects to instance b.
		if err := o.Bind(ctx, scheduler.OwnerNode, "n2", "b", 30*time.Second); err != nil {
			t.Fatal(err)
		}
		time.Sleep(11 * time.Second) // one renewal round
		synctest.Wait()
		mu.Lock()
		if d := cmp.Diff([]string{"node:n2"}, lost); d != "" {
			t.Errorf("lost bindings (-want +got):\n%s", d)
		}
		mu.Unlock()
		if d := cmp.Diff([]string{"n1"}, b.Bound(scheduler.OwnerNode)); d != "" {
			t.Errorf("Bound(node) (-want +got):\n%s", d)
		}
		// The old connection of n2 closes: b's binding stays.
		if ok, err := b.Disconnect(ctx, scheduler.OwnerNode, "n2"); err != nil || ok {
			t.Errorf("Disconnect(n2) = %v, %v; want false (owned by b)", ok, err)
		}
		if ok, err := b.Disconnect(ctx, scheduler.OwnerNode, "n1"); err != nil || !ok {
			t.Errorf("Disconnect(n1) = %v, %v; want true", ok, err)
		}
		if d := cmp.Diff(map[string]string{"node:n1": "", "node:n2": "b", "session:s1": "a"}, owners()); d != "" {
			t.Errorf("owners after disconnects (-want +got):\n%s", d)
		}
	})
}

func TestSnapshotSync(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := scheduler.NewMemSnapshots()
		cfg := scheduler.Config{Fleet: scheduler.FleetConfig{RefreshInterval: 2 * time.Second, PresenceTTL: 10 * time.Second, RemoveStaleAfter: time.Minute}}
		var mu sync.Mutex
		local := []scheduler.NodeSnapshot{{NodeID: "n1", InstanceID: "a"}, {NodeID: "n2", InstanceID: "a"}}
		var last []string
		s, err := scheduler.NewSnapshotSync(store, cfg, func() []scheduler.NodeSnapshot {
			mu.Lock()
			defer mu.Unlock()
			return append([]scheduler.NodeSnapshot(nil), local...)
		}, func(fleet []scheduler.NodeSnapshot) {
			mu.Lock()
			defer mu.Unlock()
			last = last[:0]
			for _, n := range fleet {
				last = append(last, fmt.Sprintf("%s online=%v", n.NodeID, n.Online))
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		// Another instance's node, seen once.
		if err := store.Upsert(context.Background(), time.Now(), 10*time.Second, time.Minute, scheduler.NodeSnapshot{NodeID: "other", InstanceID: "b"}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		fleet := func() []string {
			synctest.Wait()
			mu.Lock()
			defer mu.Unlock()
			return append([]string(nil), last...)
		}
		steps := []struct {
			name    string
			advance time.Duration
			edit    func()
			want    []string
		}{
			{"first refresh", 0, nil, []string{"n1 online=true", "n2 online=true", "other online=true"}},
			{"other's presence expired", 12 * time.Second, nil, []string{"n1 online=true", "n2 online=true", "other online=false"}},
			{"n2 leaves this instance", 0, func() { local = local[:1] }, nil},
			{"n2 offline", 20 * time.Second, nil, []string{"n1 online=true", "n2 online=false", "other online=false"}},
			{"stale nodes removed", 45 * time.Second, nil, []string{"n1 online=true"}},
		}
		for _, st := range steps {
			if st.edit != nil {
				mu.Lock()
				st.edit()
				mu.Unlock()
			}
			time.Sleep(st.advance)
			if st.want == nil {
				continue
			}
			if d := cmp.Diff(st.want, fleet()); d != "" {
				t.Errorf("%s: fleet (-want +got):\n%s", st.name, d)
			}
		}
		for _, id := range []string{"n2", "other"} {
			inAll, inLast, pres, snap := store.Has(id)
			if inAll || inLast || pres || snap {
				t.Errorf("stale %s still stored: all=%v last_seen=%v presence=%v snapshot=%v", id, inAll, inLast, pres, snap)
			}
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

// deliveryCfg has short intervals; under synctest they cost nothing.
func deliveryCfg() scheduler.Config {
	return scheduler.Config{Inbox: scheduler.InboxConfig{
		Block: time.Second, Count: 10, ClaimMinIdle: 30 * time.Second,
		MaxDeliveries: 3, DeadMinIdle: time.Minute, ScanInterval: 5 * time.Second,
	}}
}

func TestDelivererDeadLetters(t *testing.T) {
	tests := []struct {
		name       string
		dlq        bool
		fields     scheduler.Fields
		handler    func(m scheduler.Message) error
		wantCalls  int32
		wantReason string // "" means nothing in the DLQ
		wantLen    int64  // inbox length at the end
	}{
		{
			name: "always failing goes to the DLQ after max deliveries", dlq: true,
			fields:    scheduler.Fields{{Name: "k", Value: "v"}},
			handler:   func(scheduler.Message) error { return errors.New("boom") },
			wantCalls: 4, wantReason: scheduler.ReasonMaxDeliveries,
		},
		{
			name: "malformed goes at once", dlq: true,
			fields:    scheduler.Fields{{Name: "k", Value: "v"}},
			handler:   func(scheduler.Message) error { return fmt.Errorf("%w: no type", scheduler.ErrMalformed) },
			wantCalls: 1, wantReason: "malformed message: no type",
		},
		{
			name: "panic goes at once", dlq: true,
			fields:    scheduler.Fields{{Name: "k", Value: "v"}},
			handler:   func(scheduler.Message) error { panic("bug") },
			wantCalls: 1, wantReason: "panic: bug",
		},
		{
			name: "dlq off: a failing message stays pending and is retried", dlq: false,
			fields:    scheduler.Fields{{Name: "k", Value: "v"}},
			handler:   func(scheduler.Message) error { return errors.New("boom") },
			wantCalls: 11, wantLen: 1,
		},
		{
			name: "dlq off: a malformed message is dropped", dlq: false,
			fields:    scheduler.Fields{{Name: "k", Value: "v"}},
			handler:   func(scheduler.Message) error { return scheduler.ErrMalformed },
			wantCalls: 1,
		},
		{
			name: "success acks and deletes", dlq: true,
			fields:    scheduler.Fields{{Name: "k", Value: "v"}},
			handler:   func(scheduler.Message) error { return nil },
			wantCalls: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ms := scheduler.NewMemStreams(0, 0)
				in := ms.Inbox("a", "g")
				cfg := deliveryCfg()
				cfg.Inbox.NoDeadLetters = !tc.dlq
				var moved atomic.Int32
				var pending atomic.Int64
				cfg.Hooks.DLQMoved = func(scheduler.DeadLetter) { moved.Add(1) }
				cfg.Hooks.InboxPending = func(n int64) { pending.Store(n) }
				var calls atomic.Int32
				d, err := scheduler.NewDeliverer(in, "c1", func(ctx context.Context, m scheduler.Message) error {
					calls.Add(1)
					return tc.handler(m)
				}, cfg)
				if err != nil {
					t.Fatal(err)
				}
				id, err := ms.Send(context.Background(), "a", tc.fields)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- d.Run(ctx) }()
				time.Sleep(5*time.Minute + time.Second)
				synctest.Wait()
				cancel()
				if err := <-done; err != nil {
					t.Errorf("Run = %v", err)
				}
				if got := calls.Load(); got != tc.wantCalls {
					t.Errorf("handler calls = %d, want %d", got, tc.wantCalls)
				}
				dls, err := in.DeadLetters(context.Background(), 10)
				if err != nil {
					t.Fatal(err)
				}
				var want []scheduler.DeadLetter
				if tc.wantReason != "" {
					want = []scheduler.DeadLetter{{SourceID: id, Reason: tc.wantReason, Fields: tc.fields, Deliveries: int64(tc.wantCalls)}}
				}
				if d := cmp.Diff(want, dls, cmpopts.EquateEmpty(), cmp.FilterPath(func(p cmp.Path) bool { return p.Last().String() == ".ID" }, cmp.Ignore())); d != "" {
					t.Errorf("DLQ (-want +got):\n%s", d)
				}
				if got := moved.Load(); got != int32(len(want)) {
					t.Errorf("DLQMoved calls = %d, want %d", got, len(want))
				}
				if n, _ := in.Len(context.Background()); n != tc.wantLen {
					t.Errorf("inbox Len = %d, want %d", n, tc.wantLen)
				}
				if got := pending.Load(); got != tc.wantLen {
					t.Errorf("InboxPending hook = %d, want %d", got, tc.wantLen)
				}
			})
		})
	}
}

// failingInbox wraps an Inbox and fails Read a number of times, first with
// ErrNoGroup (as after a server restart) and then with another error.
type failingInbox struct {
	scheduler.Inbox
	fails atomic.Int32
}

func (f *failingInbox) Read(ctx context.Context, consumer string, count int, block time.Duration) ([]scheduler.Message, error) {
	switch n := f.fails.Add(-1); {
	case n >= 3:
		return nil, fmt.Errorf("read: %w", scheduler.ErrNoGroup)
	case n >= 0:
		return nil, errors.New("connection refused")
	}
	return f.Inbox.Read(ctx, consumer, count, block)
}

func TestDelivererRecoversFromStoreErrors(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := scheduler.NewMemStreams(0, 0)
		in := &failingInbox{Inbox: ms.Inbox("a", "g")}
		in.fails.Store(6)
		var got atomic.Int32
		d, err := scheduler.NewDeliverer(in, "c1", func(ctx context.Context, m scheduler.Message) error {
			got.Add(1)
			return nil
		}, deliveryCfg())
		if err != nil {
			t.Fatal(err)
		}
		for i := range 5 {
			if _, err := ms.Send(context.Background(), "a", scheduler.Fields{{Name: "i", Value: fmt.Sprint(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		time.Sleep(10 * time.Second)
		synctest.Wait()
		if got.Load() != 5 {
			t.Errorf("handled %d messages after the store recovered, want 5", got.Load())
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
}

func TestStormUnderSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		g := scheduler.NewMemStorm(scheduler.StormWindows{Debounce: 5 * time.Second, Cooldown: 30 * time.Second, ActionsPerSecond: 2})
		steps := []struct {
			advance   time.Duration
			node      string
			want      scheduler.StormDecision
			wantUnavl bool
		}{
			{0, "n1", scheduler.StormDecision{Action: scheduler.StormMarked, Reports: 1}, true},
			{0, "n1", scheduler.StormDecision{Action: scheduler.StormDebounced, Reports: 2}, true},
			{0, "n2", scheduler.StormDecision{Action: scheduler.StormMarked, Reports: 1}, true},
			{0, "n3", scheduler.StormDecision{Action: scheduler.StormRateLimited, Reports: 1}, false},
			{time.Second, "n3", scheduler.StormDecision{Action: scheduler.StormMarked, Reports: 1}, true},
			{4 * time.Second, "n1", scheduler.StormDecision{Action: scheduler.StormMarked, Reports: 1}, true},
		}
		for i, s := range steps {
			time.Sleep(s.advance)
			got, err := g.Report(ctx, s.node, "m")
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(s.want, got); d != "" {
				t.Errorf("step %d (%s): decision (-want +got):\n%s", i, s.node, d)
			}
			if u, _ := g.Unavailable(ctx, s.node, "m"); u != s.wantUnavl {
				t.Errorf("step %d (%s): Unavailable = %v, want %v", i, s.node, u, s.wantUnavl)
			}
		}
		time.Sleep(31 * time.Second)
		if u, _ := g.Unavailable(ctx, "n1", "m"); u {
			t.Errorf("Unavailable after the cool-down = true, want false")
		}
	})
}

// racingOwners runs during before each Renew, as a connection closing
// while the renewal is under way would.
type racingOwners struct {
	*scheduler.MemOwners
	during func()
}

func (r *racingOwners) Renew(ctx context.Context, kind scheduler.OwnerKind, instanceID string, ttl time.Duration, ids ...string) ([]string, error) {
	if r.during != nil {
		r.during()
		r.during = nil
	}
	return r.MemOwners.Renew(ctx, kind, instanceID, ttl, ids...)
}

func TestBindingsDisconnectDuringRenewal(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		o := &racingOwners{MemOwners: scheduler.NewMemOwners()}
		b, err := scheduler.NewBindings(o, scheduler.Config{InstanceID: "a", OwnerTTL: 30 * time.Second}, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"n1", "n2"} {
			if err := b.Connect(ctx, scheduler.OwnerNode, id); err != nil {
				t.Fatal(err)
			}
		}
		o.during = func() {
			if _, err := b.Disconnect(ctx, scheduler.OwnerNode, "n1"); err != nil {
				t.Error(err)
			}
		}
		runCtx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go b.Run(runCtx)
		time.Sleep(11 * time.Second) // one renewal round
		synctest.Wait()
		got := map[string]string{}
		for _, id := range []string{"n1", "n2"} {
			v, err := o.Owner(ctx, scheduler.OwnerNode, id)
			if errors.Is(err, scheduler.ErrNoOwner) {
				v = ""
			}
			got[id] = v
		}
		if d := cmp.Diff(map[string]string{"n1": "", "n2": "a"}, got); d != "" {
			t.Errorf("owners after a disconnect during renewal (-want +got):\n%s", d)
		}
	})
}

// ackCounter counts the calls of Ack and the ids they acknowledge.
type ackCounter struct {
	scheduler.Inbox
	calls, ids atomic.Int32
}

func (a *ackCounter) Ack(ctx context.Context, ids ...string) error {
	a.calls.Add(1)
	a.ids.Add(int32(len(ids)))
	return a.Inbox.Ack(ctx, ids...)
}

// TestDelivererGathersAcks: messages handled one at a time, 10ms apart,
// are acknowledged together, in one call per 100ms, each within 100ms of
// being handled, and what is handled when Run returns is acknowledged
// before it does.
func TestDelivererGathersAcks(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ms := scheduler.NewMemStreams(0, 0)
		in := &ackCounter{Inbox: ms.Inbox("a", "g")}
		var handled atomic.Int32
		d, err := scheduler.NewDeliverer(in, "c1", func(ctx context.Context, m scheduler.Message) error {
			handled.Add(1)
			return nil
		}, deliveryCfg())
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- d.Run(ctx) }()
		send := func(i int) {
			if _, err := ms.Send(context.Background(), "a", scheduler.Fields{{Name: "i", Value: fmt.Sprint(i)}}); err != nil {
				t.Fatal(err)
			}
		}
		pending := func() int64 {
			n, err := in.Pending(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
		for i := range 50 {
			send(i)
			time.Sleep(10 * time.Millisecond)
			synctest.Wait()
			if p := pending(); p > 10 {
				t.Fatalf("after message %d: %d pending, want at most the 10 of the last 100ms", i, p)
			}
		}
		time.Sleep(100 * time.Millisecond)
		synctest.Wait()
		if handled.Load() != 50 || pending() != 0 || in.ids.Load() != 50 {
			t.Errorf("handled %d, acknowledged %d, %d pending; want 50, 50, 0", handled.Load(), in.ids.Load(), pending())
		}
		// 500ms of messages: about one call per 100ms, not one a message.
		if c := in.calls.Load(); c > 7 {
			t.Errorf("%d calls of Ack for 50 messages over 500ms, want one per 100ms (about 5)", c)
		}
		// Handled just before Run returns: acknowledged on the way out.
		send(50)
		synctest.Wait()
		if pending() != 1 || handled.Load() != 51 {
			t.Fatalf("the last message: handled %d, %d pending; want 51 and 1 (not yet acknowledged)", handled.Load(), pending())
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
		if p := pending(); p != 0 {
			t.Errorf("after Run returned: %d pending, want 0", p)
		}
	})
}
