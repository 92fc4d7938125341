package redisstore

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/rueidis"
)

func newTurns(t testing.TB, c rueidis.Client, cfg TurnsConfig) *Turns {
	t.Helper()
	if cfg.Prefix == "" {
		cfg.Prefix = testPrefix(t)
	}
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Minute // tests never flush: let their keys go
	}
	s, err := NewTurns(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTurnsKeysAndTTL(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		c := srv.client
		for _, ttl := range []time.Duration{0, time.Hour} {
			s, err := NewTurns(c, TurnsConfig{Prefix: testPrefix(t), TTL: ttl})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				c.Do(context.Background(), c.B().Del().Key(s.keys.Turn("turn")).Build())
				c.Do(context.Background(), c.B().Del().Key(s.keys.Session("sess")).Build())
			})
			if _, _, err := s.SetTurnAffinity(ctx, "sess", "turn", "node"); err != nil {
				t.Fatal(err)
			}
			p := s.keys.Prefix()
			for key, field := range map[string][2]string{
				p + ":scheduler:turn:turn":    {"affinity_node_id", "node"},
				p + ":scheduler:session:sess": {"current_turn_id", "turn"},
			} {
				got, err := c.Do(ctx, c.B().Hget().Key(key).Field(field[0]).Build()).ToString()
				if err != nil || got != field[1] {
					t.Errorf("%s: HGET %s %s = %q, %v; want %q", srv.name, key, field[0], got, err, field[1])
				}
				pttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
				switch {
				case err != nil:
					t.Error(err)
				case ttl == 0 && (pttl <= 0 || pttl > (24*time.Hour).Milliseconds()):
					// Before, the keys lived for ever by default.
					t.Errorf("%s: PTTL %s = %d, want the default TTL of a day", srv.name, key, pttl)
				case ttl > 0 && (pttl <= 0 || pttl > ttl.Milliseconds()):
					t.Errorf("%s: PTTL %s = %d, want within %v", srv.name, key, pttl, ttl)
				}
			}
		}
	}
}

func TestTurnsOpHook(t *testing.T) {
	ctx := context.Background()
	c := testServers(t)[0].client
	var mu sync.Mutex
	var got []string
	hook := func(op, result string, d time.Duration) {
		mu.Lock()
		got = append(got, op+"/"+result)
		mu.Unlock()
	}
	turns := newTurns(t, c, TurnsConfig{OpHook: hook})
	turns.SetTurnAffinity(ctx, "s", "t", "n")
	turns.TurnAffinity(ctx, "t")
	turns.ClearTurnAffinity(ctx, "t")
	want := []string{
		"turn_affinity_set/ok", "turn_affinity_get/ok", "turn_affinity_clear/ok",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hook calls (-want +got):\n%s", diff)
	}
}
