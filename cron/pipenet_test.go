package cron

import (
	"context"
	"net"
	"net/http"
	"sync"
	"syscall"
	"testing"
)

// pipeNet is an in-memory network for HTTP tests under testing/synctest:
// every dial, whatever its address, connects through net.Pipe to one
// http.Server. A goroutine blocked on a pipe is durably blocked, so the
// bubble's clock moves on while a request waits, and the executor's
// timeouts and waits between attempts take no real time.
type pipeNet struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
	srv   *http.Server
	// Client dials the server; use it as the executor's client.
	Client *http.Client
}

// newPipeNet serves h on a new pipeNet until the test ends. Call it inside
// the synctest bubble.
func newPipeNet(t *testing.T, h http.Handler) *pipeNet {
	t.Helper()
	n := &pipeNet{conns: make(chan net.Conn), done: make(chan struct{}), srv: &http.Server{Handler: h}}
	tr := &http.Transport{DialContext: n.dial, MaxIdleConnsPerHost: 16}
	n.Client = &http.Client{Transport: tr}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = n.srv.Serve(n)
	}()
	t.Cleanup(func() {
		tr.CloseIdleConnections()
		_ = n.srv.Close()
		<-served
	})
	return n
}

// Stop closes the listener: later dials are refused.
func (n *pipeNet) Stop() { _ = n.Close() }

func (n *pipeNet) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, s := net.Pipe()
	select {
	case n.conns <- s:
		return c, nil
	case <-n.done:
		return nil, &net.OpError{Op: "dial", Net: network, Err: syscall.ECONNREFUSED}
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Accept implements net.Listener.
func (n *pipeNet) Accept() (net.Conn, error) {
	select {
	case c := <-n.conns:
		return c, nil
	case <-n.done:
		return nil, net.ErrClosed
	}
}

// Close implements net.Listener.
func (n *pipeNet) Close() error {
	n.once.Do(func() { close(n.done) })
	return nil
}

// Addr implements net.Listener.
func (n *pipeNet) Addr() net.Addr { return pipeAddr{} }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "pipe" }
