package redisstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
	"github.com/redis/rueidis"
)

func newReservations(t testing.TB, c rueidis.Client, hook OpHook) *Reservations {
	t.Helper()
	s, err := NewReservations(c, ReservationsConfig{Prefix: testPrefix(t), OpHook: hook})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestReservationsConformance(t *testing.T) {
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			storetest.TestReservationStore(t, func(t *testing.T) storetest.ReservationHarness {
				// The server's clock runs: expiry is waited for.
				return storetest.ReservationHarness{Store: newReservations(t, srv.client, nil), Elapse: time.Sleep}
			})
		})
	}
}

// TestReservationsKey checks the layout and that the ZSET's key expires
// with its last reservation, never before a live one.
func TestReservationsKey(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		s := newReservations(t, srv.client, nil)
		if err := s.Reserve(ctx, "n1", "long", 4, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.Reserve(ctx, "n1", "short", 4, time.Minute); err != nil {
			t.Fatal(err)
		}
		key := s.keys.Prefix() + ":v1:nodes:{node:n1}:reserved"
		c := srv.client
		pttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil || pttl < (59*time.Minute).Milliseconds() {
			t.Errorf("%s: PTTL %s = %d, %v; want about an hour (the longest reservation)", srv.name, key, pttl, err)
		}
		members, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
		if err != nil || len(members) != 2 {
			t.Errorf("%s: ZRANGE %s = %v, %v; want the 2 jobs", srv.name, key, members, err)
		}
	}
}

func TestReservationsOpHook(t *testing.T) {
	ctx := context.Background()
	var got []string
	s := newReservations(t, testServers(t)[0].client, func(op, result string, d time.Duration) { got = append(got, op+"/"+result) })
	s.Reserve(ctx, "n", "j", 1, time.Minute)
	if err := s.Reserve(ctx, "n", "k", 1, time.Minute); !errors.Is(err, scheduler.ErrNodeFull) {
		t.Fatalf("Reserve on a full node: %v", err)
	}
	s.Count(ctx, "n")
	s.Release(ctx, "n", "j")
	want := []string{"reserve/ok", "reserve/ok", "reserve_count/ok", "release/ok"}
	if len(got) != len(want) {
		t.Fatalf("hook calls = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("hook call %d = %s, want %s", i, got[i], want[i])
		}
	}
}
