package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"math"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"modernc.org/sqlite"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// meter measures what a database sends and does: statements and rows
// through a recorder, bytes received from PostgreSQL through the
// connection, and the CPU time of the PostgreSQL backend serving the
// (single) connection.
type meter struct {
	db    *DB
	rec   *recorder
	bytes atomic.Int64 // read from the PostgreSQL socket
	pid   int          // PostgreSQL backend, 0 on SQLite
	cpu   time.Duration
}

// countingConn counts the bytes read from a connection.
type countingConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// openMetered opens a fresh database of backend b with one connection,
// every statement and row recorded and, on PostgreSQL, every byte counted.
func openMetered(t testing.TB, b backend) *meter {
	t.Helper()
	m := &meter{}
	u := b.url(t)
	var (
		d   *dialect
		dsn string
	)
	if b.name == "postgres" {
		cfg, err := pgx.ParseConfig(u)
		if err != nil {
			t.Fatal(err)
		}
		dial := cfg.DialFunc
		cfg.DialFunc = func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return countingConn{c, &m.bytes}, nil
		}
		m.rec, d, dsn = &recorder{Driver: stdlib.GetDefaultDriver()}, postgresDialect, stdlib.RegisterConnConfig(cfg)
		t.Cleanup(func() { stdlib.UnregisterConnConfig(dsn) })
	} else {
		var err error
		m.rec = &recorder{Driver: &sqlite.Driver{}}
		if d, dsn, err = parseURL(u); err != nil {
			t.Fatal(err)
		}
	}
	name := fmt.Sprintf("sqlstore-meter-%d", recorderSeq.Add(1))
	sql.Register(name, m.rec)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	db, err := openWith(ctx, d, name, dsn)
	if err != nil {
		t.Fatalf("open %s metered: %v", b.name, err)
	}
	db.x.SetMaxOpenConns(1)
	db.x.SetMaxIdleConns(1)
	db.x.SetConnMaxIdleTime(0)
	db.x.SetConnMaxLifetime(0)
	t.Cleanup(func() { db.Close() })
	m.db = db
	if b.name == "postgres" {
		if err := db.x.GetContext(ctx, &m.pid, "SELECT pg_backend_pid()"); err != nil {
			t.Fatal(err)
		}
	}
	m.rec.take()
	m.take()
	return m
}

// sample is a reading of the meter.
type sample struct {
	stmts, rows int
	bytes       int64
	serverCPU   time.Duration // -1 when it cannot be read
}

// take returns what happened since the previous take.
func (m *meter) take() sample {
	s := sample{bytes: m.bytes.Swap(0), serverCPU: -1}
	if cpu := m.serverCPU(); cpu >= 0 {
		s.serverCPU, m.cpu = cpu-m.cpu, cpu
	}
	s.stmts, s.rows = m.rec.takeCounts()
	return s
}

// serverCPU is the CPU time the PostgreSQL backend has used so far, from
// /proc/PID/schedstat (Linux; the server runs on this machine in tests),
// or -1.
func (m *meter) serverCPU() time.Duration {
	if m.pid == 0 {
		return -1
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", m.pid))
	if err != nil {
		return -1
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return -1
	}
	ns, err := strconv.ParseInt(f[0], 10, 64)
	if err != nil {
		return -1
	}
	return time.Duration(ns)
}

// fullOnly hides the Viewer of a store, so that a loop reads every row:
// the cycle as it was before views.
type fullOnly struct{ claim.Store }

// seedFleet fills the tables: nodes active node-units node-0000.., the
// deployments bound evenly to them (node-0000, the measured one, first),
// and two daemons.
func seedFleet(t testing.TB, db *DB, deployments, nodes int) {
	t.Helper()
	addDeployments(t, db, 0, deployments, 0, nodes)
	exec(t, db, `INSERT INTO deployment (id, type, enabled, command) VALUES ('daemon-1', 'daemon', TRUE, '/bin/true'), ('daemon-2', 'daemon', TRUE, '/bin/true')`)
	m := db.Membership()
	for i := range nodes {
		if err := m.Heartbeat(context.Background(), claim.NodeUnit{Address: fmt.Sprintf("node-%04d", i),
			UsageEndpoint: fmt.Sprintf("http://10.0.%d.%d:41067/NodeUnit/InspectResourceUsage", i/256, i%256)}); err != nil {
			t.Fatal(err)
		}
	}
	if db.d.name == "postgres" {
		exec(t, db, "ANALYZE deployment")
		exec(t, db, "ANALYZE node_unit")
		exec(t, db, "ANALYZE deployment_address_count")
	} else {
		exec(t, db, "ANALYZE")
	}
}

// addDeployments inserts deployments dep-FROM.. dep-TO-1 with realistic
// payloads, deployment i bound to node-(first + i mod (nodes-first)).
func addDeployments(t testing.TB, db *DB, from, to, first, nodes int) {
	t.Helper()
	const cols = `'dep-' || lpad(CAST(i AS TEXT), 7, '0'), 'deployment', TRUE,
		'node-' || lpad(CAST(%d + i %% %d AS TEXT), 4, '0'), '@acme/service-' || CAST(i %% 97 AS TEXT), '1.4.2',
		'/opt/apps/service/bin/run', '["--port","8080","--config","/etc/service/config.yaml"]',
		'{"LOG_LEVEL":"info","REGION":"eu-west-1"}'`
	insert := `INSERT INTO deployment (id, type, enabled, address, package_name, package_version, command, args, env) `
	if db.d.name == "postgres" {
		exec(t, db, fmt.Sprintf(insert+`SELECT `+cols+` FROM generate_series(%d, %d) AS i`, first, nodes-first, from, to-1))
		return
	}
	// SQLite has no lpad: zero-pad with substr.
	q := fmt.Sprintf(insert+`WITH RECURSIVE s(i) AS (SELECT %d UNION ALL SELECT i + 1 FROM s WHERE i + 1 < %d)
		SELECT 'dep-' || substr('0000000' || i, -7), 'deployment', 1, 'node-' || substr('0000' || (%d + i %% %d), -4),
		'@acme/service-' || (i %% 97), '1.4.2', '/opt/apps/service/bin/run',
		'["--port","8080","--config","/etc/service/config.yaml"]', '{"LOG_LEVEL":"info","REGION":"eu-west-1"}' FROM s`, from, to, first, nodes-first)
	exec(t, db, q)
}

// newFleetLoop returns the loop of node-0000 over store, which stays
// active with the others for the whole test.
func newFleetLoop(t testing.TB, store claim.Store, db *DB) *claim.Loop {
	t.Helper()
	loop, err := claim.New(store, db.Membership(), claimtest.NewRunner(), nil, claim.Config{
		Address: "node-0000", Interval: time.Second, MembershipTTL: 24 * time.Hour,
	})
	if err != nil {
		t.Fatal(err)
	}
	return loop
}

// steady runs warm cycles and then n measured ones, in which nothing may
// change. It returns the fewest statements, rows and bytes of a measured
// cycle (a cycle that reads no row in full) and the mean server CPU.
func steady(t testing.TB, m *meter, loop *claim.Loop, warm, n int) sample {
	t.Helper()
	ctx := context.Background()
	for range warm {
		if _, err := loop.Cycle(ctx); err != nil {
			t.Fatal(err)
		}
	}
	m.take()
	least := sample{stmts: math.MaxInt, rows: math.MaxInt, bytes: math.MaxInt64}
	var cpu time.Duration
	for range n {
		r, err := loop.Cycle(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Claimed)+len(r.Started)+len(r.Stopped) > 0 {
			t.Fatalf("steady cycle changed something: %+v", r)
		}
		s := m.take()
		least.stmts, least.rows, least.bytes = min(least.stmts, s.stmts), min(least.rows, s.rows), min(least.bytes, s.bytes)
		cpu += s.serverCPU
	}
	least.serverCPU = -1
	if m.pid != 0 {
		least.serverCPU = cpu / time.Duration(n)
	}
	return least
}

// recRows counts the rows a statement returns.
type recRows struct {
	driver.Rows
	r *recorder
}

func (rs recRows) Next(dest []driver.Value) error {
	err := rs.Rows.Next(dest)
	if err == nil {
		rs.r.mu.Lock()
		rs.r.rows++
		rs.r.mu.Unlock()
	}
	return err
}
