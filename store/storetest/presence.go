package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
)

// shortTTL is the TTL the suites let expire; waitFor polls for up to
// waitLimit, which leaves a loaded machine plenty of room.
const (
	shortTTL  = 300 * time.Millisecond
	waitLimit = 20 * time.Second
)

// waitFor polls cond until it returns true or waitLimit passes.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	deadline := time.Now().Add(waitLimit)
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still false after %v", what, waitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestPresence checks a [scheduler.Presence]: announce, alive, withdraw,
// and expiry when not renewed. newPresence returns an empty store.
func TestPresence(t *testing.T, newPresence func(t *testing.T) scheduler.Presence) {
	ctx := context.Background()
	t.Run("AnnounceAliveWithdraw", func(t *testing.T) {
		p := newPresence(t)
		steps := []struct {
			name string
			do   func() error
			want map[string]bool
		}{
			{"empty", func() error { return nil }, map[string]bool{"a": false, "b": false}},
			{"announce a", func() error { return p.Announce(ctx, "a", time.Minute) }, map[string]bool{"a": true, "b": false}},
			{"announce b", func() error { return p.Announce(ctx, "b", time.Minute) }, map[string]bool{"a": true, "b": true}},
			{"withdraw a", func() error { return p.Withdraw(ctx, "a") }, map[string]bool{"a": false, "b": true}},
			{"withdraw a again", func() error { return p.Withdraw(ctx, "a") }, map[string]bool{"a": false, "b": true}},
		}
		for _, s := range steps {
			if err := s.do(); err != nil {
				t.Fatalf("%s: %v", s.name, err)
			}
			got := map[string]bool{}
			for id := range s.want {
				ok, err := p.Alive(ctx, id)
				if err != nil {
					t.Fatalf("%s: Alive(%s): %v", s.name, id, err)
				}
				got[id] = ok
			}
			if d := cmp.Diff(s.want, got); d != "" {
				t.Errorf("after %s: alive (-want +got):\n%s", s.name, d)
			}
		}
	})
	t.Run("ExpiresWhenNotRenewed", func(t *testing.T) {
		p := newPresence(t)
		if err := p.Announce(ctx, "short", shortTTL); err != nil {
			t.Fatal(err)
		}
		if err := p.Announce(ctx, "long", time.Minute); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "short-lived presence expires", func() (bool, error) {
			ok, err := p.Alive(ctx, "short")
			return !ok, err
		})
		if ok, err := p.Alive(ctx, "long"); err != nil || !ok {
			t.Errorf("Alive(long) = %v, %v; want true", ok, err)
		}
	})
	t.Run("RenewalExtends", func(t *testing.T) {
		p := newPresence(t)
		if err := p.Announce(ctx, "x", shortTTL); err != nil {
			t.Fatal(err)
		}
		if err := p.Announce(ctx, "x", time.Minute); err != nil {
			t.Fatal(err)
		}
		time.Sleep(2 * shortTTL) // the first TTL is over; the renewed one is not
		if ok, err := p.Alive(ctx, "x"); err != nil || !ok {
			t.Errorf("Alive(x) after renewal = %v, %v; want true", ok, err)
		}
	})
}

// TestOwners checks a [scheduler.Owners]: bind, owner, renew,
// compare-and-delete, and expiry. newOwners returns an empty store.
func TestOwners(t *testing.T, newOwners func(t *testing.T) scheduler.Owners) {
	ctx := context.Background()
	owner := func(t *testing.T, o scheduler.Owners, kind scheduler.OwnerKind, id string) string {
		t.Helper()
		got, err := o.Owner(ctx, kind, id)
		if errors.Is(err, scheduler.ErrNoOwner) {
			return ""
		}
		if err != nil {
			t.Fatalf("Owner(%s %s): %v", kind, id, err)
		}
		return got
	}
	for _, kind := range []scheduler.OwnerKind{scheduler.OwnerNode, scheduler.OwnerSession} {
		t.Run(string(kind), func(t *testing.T) {
			t.Run("CompareAndDelete", func(t *testing.T) {
				o := newOwners(t)
				if got := owner(t, o, kind, "n1"); got != "" {
					t.Fatalf("Owner of unbound id = %q, want none", got)
				}
				if err := o.Bind(ctx, kind, "n1", "inst-a", time.Minute); err != nil {
					t.Fatal(err)
				}
				// The id reconnects to instance b: the newest connection wins.
				if err := o.Bind(ctx, kind, "n1", "inst-b", time.Minute); err != nil {
					t.Fatal(err)
				}
				tests := []struct {
					name      string
					instance  string
					wantOK    bool
					wantOwner string
				}{
					{"old owner leaves the new binding alone", "inst-a", false, "inst-b"},
					{"owner releases", "inst-b", true, ""},
					{"second release is a no-op", "inst-b", false, ""},
				}
				for _, tc := range tests {
					ok, err := o.Release(ctx, kind, "n1", tc.instance)
					if err != nil {
						t.Fatalf("%s: %v", tc.name, err)
					}
					if ok != tc.wantOK {
						t.Errorf("%s: Release = %v, want %v", tc.name, ok, tc.wantOK)
					}
					if got := owner(t, o, kind, "n1"); got != tc.wantOwner {
						t.Errorf("%s: owner = %q, want %q", tc.name, got, tc.wantOwner)
					}
				}
			})
			t.Run("Renew", func(t *testing.T) {
				o := newOwners(t)
				if err := o.Bind(ctx, kind, "mine", "inst-a", time.Minute); err != nil {
					t.Fatal(err)
				}
				if err := o.Bind(ctx, kind, "taken", "inst-b", time.Minute); err != nil {
					t.Fatal(err)
				}
				// "expired" was never bound (or its binding expired): renew binds it again.
				lost, err := o.Renew(ctx, kind, "inst-a", time.Minute, "mine", "taken", "expired")
				if err != nil {
					t.Fatal(err)
				}
				if d := cmp.Diff([]string{"taken"}, lost); d != "" {
					t.Errorf("Renew lost (-want +got):\n%s", d)
				}
				got := map[string]string{}
				for _, id := range []string{"mine", "taken", "expired"} {
					got[id] = owner(t, o, kind, id)
				}
				want := map[string]string{"mine": "inst-a", "taken": "inst-b", "expired": "inst-a"}
				if d := cmp.Diff(want, got); d != "" {
					t.Errorf("owners after Renew (-want +got):\n%s", d)
				}
			})
			t.Run("ExpiresWhenNotRenewed", func(t *testing.T) {
				o := newOwners(t)
				if err := o.Bind(ctx, kind, "n2", "inst-a", shortTTL); err != nil {
					t.Fatal(err)
				}
				if got := owner(t, o, kind, "n2"); got != "inst-a" {
					t.Fatalf("owner = %q, want inst-a", got)
				}
				waitFor(t, "owner binding expires", func() (bool, error) {
					return owner(t, o, kind, "n2") == "", nil
				})
			})
		})
	}
}
