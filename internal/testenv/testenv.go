package testenv

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Default addresses, used when the environment names none.
const (
	DefaultPostgresURL = "postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable"
	DefaultRedisURL    = "redis://127.0.0.1:6379"
)

// PostgresURL returns the URL of the test PostgreSQL server.
// Tests must keep to their own schema or tables (see
// store/sqlstore's helpers): packages run in parallel against one server.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := env("KSANA_TEST_POSTGRES_URL", DefaultPostgresURL)
	need(t, "PostgreSQL", "KSANA_TEST_POSTGRES_URL", u, hostPort(u, "5432"))
	return u
}

// RedisURL returns the redis:// URL of the standalone test Redis server.
// Tests must use a key prefix of their own and never flush the server.
func RedisURL(t testing.TB) string {
	t.Helper()
	u := env("KSANA_TEST_REDIS_URL", DefaultRedisURL)
	need(t, "Redis", "KSANA_TEST_REDIS_URL", u, hostPort(u, "6379"))
	return u
}

// RedisClusterURLs returns the redis:// seed URLs of the test Redis Cluster.
func RedisClusterURLs(t testing.TB) []string {
	t.Helper()
	v := os.Getenv("KSANA_TEST_REDIS_CLUSTER_URLS")
	if v == "" {
		if testing.Short() {
			t.Skip("no Redis Cluster: KSANA_TEST_REDIS_CLUSTER_URLS is empty (run ./test.sh)")
		}
		t.Fatal("no Redis Cluster: KSANA_TEST_REDIS_CLUSTER_URLS is empty; ./test.sh starts one (go test -short skips this test)")
	}
	var urls []string
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			urls = append(urls, s)
		}
	}
	need(t, "Redis Cluster", "KSANA_TEST_REDIS_CLUSTER_URLS", urls[0], hostPort(urls[0], "6379"))
	return urls
}

// Addr strips the scheme from a redis:// URL: "redis://h:p" becomes "h:p".
func Addr(redisURL string) string {
	if u, err := neturl.Parse(redisURL); err == nil && u.Host != "" {
		return u.Host
	}
	return strings.TrimPrefix(redisURL, "redis://")
}

func env(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func hostPort(raw, defPort string) string {
	u, err := neturl.Parse(raw)
	if err != nil || u.Host == "" {
		return ""
	}
	if u.Port() == "" {
		return net.JoinHostPort(u.Hostname(), defPort)
	}
	return u.Host
}

func need(t testing.TB, what, envName, u, addr string) {
	t.Helper()
	if addr == "" {
		t.Fatalf("%s: cannot parse %s=%q", what, envName, u)
	}
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err == nil {
		c.Close()
		return
	}
	if testing.Short() {
		t.Skipf("%s not reachable at %s (%v); skipped under -short", what, addr, err)
	}
	t.Fatalf("%s not reachable at %s (%v): run ./test.sh, which starts it, or set %s", what, addr, err, envName)
}

// SchemaPrefix starts the name of every PostgreSQL schema that
// [PostgresSchema] makes; ./test.sh looks for it in what a run leaves
// behind.
const SchemaPrefix = "ksanatest_"

// PostgresSchema makes a schema of t's own on the test PostgreSQL server,
// named [SchemaPrefix] and random hex, and drops it with everything in it
// when t ends, also when t fails. It returns the schema's name and the
// server's URL with a search_path that selects it, so that what opens the
// URL keeps to the schema and t may run in parallel with other tests.
// It talks to the server through the database/sql driver "pgx", which the
// test binary registers (store/sqlstore and github.com/jackc/pgx/v5/stdlib
// do): testenv imports no driver, so that a module that uses it without
// PostgreSQL (bench/) needs none.
func PostgresSchema(t testing.TB) (schema, url string) {
	t.Helper()
	base := PostgresURL(t)
	var b [6]byte
	rand.Read(b[:])
	schema = SchemaPrefix + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatalf("testenv.PostgresSchema: %v (import github.com/jackc/pgx/v5/stdlib)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		admin.Close()
		t.Fatalf("create schema %s: %v", schema, err)
	}
	t.Cleanup(func() {
		defer admin.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if _, err := admin.ExecContext(ctx, "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := neturl.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return schema, u.String()
}

// RedisAddrs returns the host:port of the standalone test Redis server
// and the seeds of the test Redis Cluster (none when
// KSANA_TEST_REDIS_CLUSTER_URLS is empty), without checking that they
// answer: for the clean-ups that every test shares.
func RedisAddrs() (standalone string, cluster []string) {
	for _, s := range strings.Split(os.Getenv("KSANA_TEST_REDIS_CLUSTER_URLS"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			cluster = append(cluster, Addr(s))
		}
	}
	return Addr(env("KSANA_TEST_REDIS_URL", DefaultRedisURL)), cluster
}

// Chromium returns the browser of the browser tests: KSANA_TEST_CHROMIUM,
// else chromium on the PATH. Without one the test fails, but under
// -short, where it is skipped.
func Chromium(t testing.TB) string {
	t.Helper()
	if testing.Short() {
		t.Skip("-short: no browser test")
	}
	if p := os.Getenv("KSANA_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium: install it (apt-get install chromium; ./test.sh does) or set KSANA_TEST_CHROMIUM")
	return ""
}

// ScreenshotDir is where the browser tests save their screenshots:
// KSANA_SCREENSHOTS, to keep them, else a temporary directory of the test,
// removed when it ends.
func ScreenshotDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("KSANA_SCREENSHOTS")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots in %s", dir)
	return dir
}
