package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
)

// SQLite compiles each statement's text before it runs it, and the
// driver compiles it again for every call that does not go through a
// prepared statement: for the short statements of the stores, about as
// long as running them. The connections an SQLite [DB] opens keep the
// statements they ran, by text, and run a text again through its
// compiled statement (stmtCacheSize texts a connection, the oldest
// dropped first).

// stmtCacheSize is how many statement texts an SQLite connection keeps
// compiled. The stores run a few dozen texts; those built for a number of
// values (IN lists) vary, and the bound keeps them from piling up.
const stmtCacheSize = 128

// cachingConnector opens SQLite connections through drv that keep their
// compiled statements.
type cachingConnector struct {
	drv driver.Driver
	dsn string
}

func (c cachingConnector) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.drv.Open(c.dsn)
	if err != nil {
		return nil, err
	}
	return newCachingConn(conn)
}

func (c cachingConnector) Driver() driver.Driver { return c.drv }

// openSQLiteCached opens an SQLite pool whose connections keep their
// compiled statements (driverName: the registered SQLite driver).
func openSQLiteCached(driverName, dsn string) (*sql.DB, error) {
	probe, err := sql.Open(driverName, dsn)
	if err != nil {
		return nil, err
	}
	drv := probe.Driver()
	probe.Close()
	return sql.OpenDB(cachingConnector{drv: drv, dsn: dsn}), nil
}

// sqliteConn is the part of the SQLite driver's connection the cache
// needs: the context-taking methods, which it implements.
type sqliteConn interface {
	driver.Conn
	driver.ConnBeginTx
	driver.ConnPrepareContext
	driver.ExecerContext
	driver.QueryerContext
	driver.Pinger
	driver.SessionResetter
	driver.Validator
}

// cachingConn is an SQLite connection that runs each statement text
// through a statement it compiled once. database/sql uses a connection
// from one goroutine at a time; within a transaction a query may run while
// the rows of another are still open, so a statement in use (its rows not
// yet closed) is not shared: the text is then compiled for that call alone.
type cachingConn struct {
	sqliteConn
	stmts map[string]*cachedStmt
	tick  uint64 // counts the statements run, to find the least recently used
}

type cachedStmt struct {
	s     driver.Stmt
	inUse bool
	used  uint64
}

func newCachingConn(c driver.Conn) (driver.Conn, error) {
	sc, ok := c.(sqliteConn)
	if !ok {
		c.Close()
		return nil, errors.New("sqlstore: the SQLite driver's connection lacks context methods")
	}
	return &cachingConn{sqliteConn: sc, stmts: map[string]*cachedStmt{}}, nil
}

// stmt returns the compiled statement of query, and release to call once
// its result is read: a statement of the cache, or one compiled for this
// call when the cached one is in use.
func (c *cachingConn) stmt(ctx context.Context, query string) (driver.Stmt, func(), error) {
	c.tick++
	if cs, ok := c.stmts[query]; ok {
		if cs.inUse {
			s, err := c.sqliteConn.PrepareContext(ctx, query)
			if err != nil {
				return nil, nil, err
			}
			return s, func() { s.Close() }, nil
		}
		cs.inUse, cs.used = true, c.tick
		return cs.s, func() { cs.inUse = false }, nil
	}
	s, err := c.sqliteConn.PrepareContext(ctx, query)
	if err != nil {
		return nil, nil, err
	}
	if len(c.stmts) >= stmtCacheSize {
		c.evict()
	}
	cs := &cachedStmt{s: s, inUse: true, used: c.tick}
	c.stmts[query] = cs
	return s, func() { cs.inUse = false }, nil
}

// evict drops the least recently used statement that is not in use.
func (c *cachingConn) evict() {
	var oldest string
	var at uint64
	for q, cs := range c.stmts {
		if !cs.inUse && (oldest == "" || cs.used < at) {
			oldest, at = q, cs.used
		}
	}
	if cs, ok := c.stmts[oldest]; ok {
		cs.s.Close()
		delete(c.stmts, oldest)
	}
}

func (c *cachingConn) ExecContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Result, error) {
	s, release, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	defer release()
	return s.(driver.StmtExecContext).ExecContext(ctx, args)
}

func (c *cachingConn) QueryContext(ctx context.Context, query string, args []driver.NamedValue) (driver.Rows, error) {
	s, release, err := c.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	rows, err := s.(driver.StmtQueryContext).QueryContext(ctx, args)
	if err != nil {
		release()
		return nil, err
	}
	return &releasingRows{columnTyper: rows.(columnTyper), release: release}, nil
}

// Close closes the cached statements, then the connection.
func (c *cachingConn) Close() error {
	for q, cs := range c.stmts {
		cs.s.Close()
		delete(c.stmts, q)
	}
	return c.sqliteConn.Close()
}

// columnTyper is the SQLite driver's rows: database/sql reads the column
// types through these methods.
type columnTyper interface {
	driver.Rows
	driver.RowsColumnTypeDatabaseTypeName
	driver.RowsColumnTypeLength
	driver.RowsColumnTypeNullable
	driver.RowsColumnTypePrecisionScale
	driver.RowsColumnTypeScanType
}

// releasingRows gives its statement back to the cache once closed.
type releasingRows struct {
	columnTyper
	release func()
}

func (r *releasingRows) Close() error {
	err := r.columnTyper.Close()
	if r.release != nil {
		r.release()
		r.release = nil
	}
	return err
}
