package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/store/storetest"
	"github.com/redis/rueidis"
)

// testServer is one Redis deployment the tests run against.
type testServer struct {
	name   string // "standalone" or "cluster"
	client rueidis.Client
}

// testServers returns a client for the standalone server and one for the
// 3-master cluster (see internal/testenv). Both are closed when t ends.
func testServers(t testing.TB) []testServer {
	t.Helper()
	standalone := newTestClient(t, []string{testenv.Addr(testenv.RedisURL(t))}, false)
	var seeds []string
	for _, u := range testenv.RedisClusterURLs(t) {
		seeds = append(seeds, testenv.Addr(u))
	}
	cluster := newTestClient(t, seeds, true)
	return []testServer{{"standalone", standalone}, {"cluster", cluster}}
}

func newTestClient(t testing.TB, addrs []string, cluster bool) rueidis.Client {
	t.Helper()
	opt := rueidis.ClientOption{InitAddress: addrs}
	if !cluster {
		opt.ForceSingleClient = true
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		t.Fatalf("redis client for %v: %v", addrs, err)
	}
	t.Cleanup(c.Close)
	if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
		t.Fatalf("redis ping %v: %v", addrs, err)
	}
	if cluster {
		if _, ok := c.Nodes()[addrs[0]]; !ok && len(c.Nodes()) < 3 {
			t.Fatalf("redis cluster %v: expected 3 masters, client sees %d nodes", addrs, len(c.Nodes()))
		}
	}
	return c
}

// testPrefix returns a key prefix no other test uses, so tests never collide
// and never need to flush a server. Every key under it is deleted, on the
// standalone server and on the cluster, when t ends, also when it fails.
func testPrefix(t testing.TB) string {
	var b [6]byte
	rand.Read(b[:])
	prefix := "ksanatest:" + hex.EncodeToString(b[:])
	storetest.CleanupRedisKeys(t, prefix, storetest.TestRedisClients()...)
	return prefix
}

// TestDeleteRedisKeys: the clean-up of a test's prefix deletes every key
// under it on every master of the cluster (keys of many slots), and no
// key of another prefix, even one that starts alike.
func TestDeleteRedisKeys(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			prefix, other := testPrefix(t), testPrefix(t)
			k, ko := NewKeys(prefix), NewKeys(other)
			var cmds rueidis.Commands
			for i := range 200 {
				id := "n" + strings.Repeat("x", i%7) + string(rune('a'+i%26)) + string(rune('a'+i/26))
				cmds = append(cmds, srv.client.B().Set().Key(k.NodeOwner(id)).Value("i").Build(),
					srv.client.B().Set().Key(ko.NodeOwner(id)).Value("i").Build())
			}
			// A key that only starts like the prefix stays.
			cmds = append(cmds, srv.client.B().Set().Key(prefix+"x:kept").Value("i").Build())
			for _, r := range srv.client.DoMulti(ctx, cmds...) {
				if err := r.Error(); err != nil {
					t.Fatal(err)
				}
			}
			n, err := storetest.DeleteRedisKeys(ctx, srv.client, prefix)
			if err != nil || n != 200 {
				t.Fatalf("DeleteRedisKeys = %d, %v; want 200", n, err)
			}
			if n, err := storetest.DeleteRedisKeys(ctx, srv.client, prefix); err != nil || n != 0 {
				t.Errorf("DeleteRedisKeys again = %d, %v; want 0", n, err)
			}
			if v, err := srv.client.Do(ctx, srv.client.B().Get().Key(ko.NodeOwner("naa")).Build()).ToString(); err != nil || v != "i" {
				t.Errorf("a key of another prefix: %q, %v; want it kept", v, err)
			}
			if err := srv.client.Do(ctx, srv.client.B().Del().Key(prefix+"x:kept").Build()).Error(); err != nil {
				t.Fatal(err)
			}
		})
	}
}
