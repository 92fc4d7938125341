package main

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// pendingListener caps the connections not yet authenticated: every
// connection counts from its accept until it becomes a WebSocket that
// passed its token check (see authenticated), or closes. A connection
// accepted while max are pending is closed at once, so that clients that
// open connections and send nothing, or keep idle HTTP connections, hold
// at most max of them (each for at most read_header_timeout_ms or
// idle_timeout_ms), whatever their number.
type pendingListener struct {
	net.Listener
	max     int64
	pending atomic.Int64
	log     *slog.Logger

	mu        sync.Mutex
	refused   int64     // connections closed at accept since the last log line
	lastLog   time.Time // when that line was written
	logPeriod time.Duration
}

func newPendingListener(ln net.Listener, max int, log *slog.Logger) *pendingListener {
	return &pendingListener{Listener: ln, max: int64(max), log: log, logPeriod: 10 * time.Second}
}

// Accept returns the next connection while fewer than max are pending,
// and closes the ones beyond.
func (l *pendingListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		if l.pending.Add(1) <= l.max {
			return &pendingConn{Conn: c, l: l}, nil
		}
		l.pending.Add(-1)
		c.Close()
		l.refusedOne(c.RemoteAddr())
	}
}

// refusedOne logs the refused connections, at most one line a period.
func (l *pendingListener) refusedOne(addr net.Addr) {
	l.mu.Lock()
	l.refused++
	now := time.Now()
	if now.Sub(l.lastLog) < l.logPeriod {
		l.mu.Unlock()
		return
	}
	n := l.refused
	l.refused, l.lastLog = 0, now
	l.mu.Unlock()
	l.log.Warn("dispatcher: connections not yet authenticated at max_pending_conns; new ones closed", "max_pending_conns", l.max, "closed", n, "last_remote", addr.String())
}

// pendingConn is a connection counted as pending until authenticated or
// closed.
type pendingConn struct {
	net.Conn
	l    *pendingListener
	once sync.Once
}

// authenticated takes the connection out of the pending count.
func (c *pendingConn) authenticated() { c.once.Do(func() { c.l.pending.Add(-1) }) }

// Close implements net.Conn.
func (c *pendingConn) Close() error {
	c.authenticated()
	return c.Conn.Close()
}

type connKey struct{}

// withConn is the http.Server's ConnContext: handlers find their
// connection's pendingConn in the request's context.
func withConn(ctx context.Context, c net.Conn) context.Context {
	if pc, ok := c.(*pendingConn); ok {
		return context.WithValue(ctx, connKey{}, pc)
	}
	return ctx
}

// authenticatedConn takes the connection of a request out of the pending
// count.
func authenticatedConn(ctx context.Context) {
	if pc, ok := ctx.Value(connKey{}).(*pendingConn); ok {
		pc.authenticated()
	}
}
