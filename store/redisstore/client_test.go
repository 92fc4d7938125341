package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/ksana-dev/ksana/internal/testenv"
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
// and never need to flush a server.
func testPrefix(t testing.TB) string {
	var b [6]byte
	rand.Read(b[:])
	return "ksanatest:" + hex.EncodeToString(b[:])
}
