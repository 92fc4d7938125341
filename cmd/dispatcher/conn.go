package main

import (
	"context"
	"encoding/json"
	"errors"
	"hash/fnv"
	"io"
	"sync"
	"time"

	"github.com/coder/websocket"
	"github.com/ksana-dev/ksana/scheduler"
)

var (
	errClosed    = errors.New("connection closed")
	errQueueFull = errors.New("send queue full: the peer reads too slowly")
)

// wsConn is one WebSocket connection, a node's or a session's: it
// implements scheduler.NodeConn and scheduler.SessionConn. Send never
// blocks: it queues the message for the connection's writer, and a peer
// that lets the queue fill up is disconnected (its jobs then go to other
// nodes; a session reconnects and sends its requests again to get their
// stored answers).
type wsConn struct {
	ws           *websocket.Conn
	writeTimeout time.Duration

	// The messages queued for the writer: at most max, in a slice that
	// grows only as far as it is used; wake has a value when the writer
	// has something to write.
	qmu     sync.Mutex
	q       [][]byte
	writing int // taken by the writer and not yet written: they count too
	max     int
	wake    chan struct{}

	once       sync.Once
	stop       chan struct{} // closed by close
	code       websocket.StatusCode
	reason     string
	flush      bool
	writerDone chan struct{}
}

var (
	_ scheduler.NodeConn    = (*wsConn)(nil)
	_ scheduler.SessionConn = (*wsConn)(nil)
)

func newConn(ws *websocket.Conn, queue int, writeTimeout time.Duration) *wsConn {
	c := &wsConn{
		ws: ws, max: queue, wake: make(chan struct{}, 1), writeTimeout: writeTimeout,
		stop: make(chan struct{}), writerDone: make(chan struct{}),
	}
	go c.writer()
	return c
}

// Send implements scheduler.NodeConn and scheduler.SessionConn.
func (c *wsConn) Send(_ context.Context, m scheduler.Envelope) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	return c.enqueue(b)
}

// sendJSON queues any frame.
func (c *wsConn) sendJSON(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return c.enqueue(b)
}

func (c *wsConn) enqueue(b []byte) error {
	select {
	case <-c.stop:
		return errClosed
	default:
	}
	c.qmu.Lock()
	if len(c.q)+c.writing >= c.max {
		c.qmu.Unlock()
		c.close(websocket.StatusPolicyViolation, "send queue full", false)
		return errQueueFull
	}
	c.q = append(c.q, b)
	c.qmu.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// take returns the messages queued so far and empties the queue; they
// count against the bound until written (see wrote).
func (c *wsConn) take() [][]byte {
	c.qmu.Lock()
	defer c.qmu.Unlock()
	q := c.q
	c.q, c.writing = nil, len(q)
	return q
}

// wrote notes that one message taken was written.
func (c *wsConn) wrote() {
	c.qmu.Lock()
	c.writing--
	c.qmu.Unlock()
}

// close ends the connection once: with flush, the messages queued so far
// are written first; then the close frame (code, reason) is sent.
func (c *wsConn) close(code websocket.StatusCode, reason string, flush bool) {
	c.once.Do(func() {
		c.code, c.reason, c.flush = code, reason, flush
		close(c.stop)
	})
}

// done is closed when the writer has finished, close frame included.
func (c *wsConn) done() <-chan struct{} { return c.writerDone }

func (c *wsConn) write(b []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.writeTimeout)
	defer cancel()
	return c.ws.Write(ctx, websocket.MessageText, b)
}

func (c *wsConn) writer() {
	defer close(c.writerDone)
	for {
		select {
		case <-c.wake:
			for _, b := range c.take() {
				if err := c.write(b); err != nil {
					c.close(websocket.StatusGoingAway, "write failed", false)
					c.ws.CloseNow()
					return
				}
				c.wrote()
			}
		case <-c.stop:
			if c.flush {
				for _, b := range c.take() {
					if c.write(b) != nil {
						c.ws.CloseNow()
						return
					}
				}
			}
			c.ws.Close(c.code, c.reason)
			return
		}
	}
}

// pinger pings the peer every interval until the connection ends; a
// peer that does not answer within interval (a vanished machine, a
// half-open connection) is disconnected, so that its node's jobs go to
// other nodes without waiting for TCP to notice.
func (c *wsConn) pinger(interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), interval)
		err := c.ws.Ping(ctx)
		cancel()
		if err != nil {
			select {
			case <-c.stop:
				return
			default:
			}
			c.close(websocket.StatusGoingAway, "ping timeout", false)
			c.ws.CloseNow()
			return
		}
	}
}

// readFrame reads the next message whole, up to limit bytes. A larger
// message is read to its end and dropped (tooBig); the connection's read
// limit (set on the websocket.Conn) bounds how large that may be.
func readFrame(ctx context.Context, ws *websocket.Conn, limit int64) (b []byte, tooBig bool, err error) {
	_, r, err := ws.Reader(ctx)
	if err != nil {
		return nil, false, err
	}
	b, err = io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, false, err
	}
	if int64(len(b)) > limit {
		if _, err := io.Copy(io.Discard, r); err != nil {
			return nil, true, err
		}
		return nil, true, nil
	}
	return b, false, nil
}

// shards runs a connection's message handlers: messages with one key (a
// job id, a turn id) run in the order they arrived, others at once, on up
// to n goroutines (a key's lane is its hash modulo n). A lane has a
// goroutine only while it has handlers to run, and its queue grows only as
// far as it is used, so an idle connection costs no goroutine and next to
// no memory.
type shards struct {
	mu    sync.Mutex
	cond  sync.Cond // signalled when a lane's queue shrinks
	lanes []lane
	depth int
	wg    sync.WaitGroup
}

// lane is one key hash's queue of handlers; busy while its goroutine runs.
type lane struct {
	q    []func()
	busy bool
}

func newShards(n, depth int) *shards {
	s := &shards{lanes: make([]lane, n), depth: depth}
	s.cond.L = &s.mu
	return s
}

// run queues f on the lane of key; it blocks while that lane holds depth
// handlers, which slows the connection's reader (back pressure).
func (s *shards) run(key string, f func()) {
	h := fnv.New32a()
	h.Write([]byte(key))
	i := int(h.Sum32() % uint32(len(s.lanes)))
	s.mu.Lock()
	l := &s.lanes[i]
	for len(l.q) >= s.depth {
		s.cond.Wait()
	}
	l.q = append(l.q, f)
	if !l.busy {
		l.busy = true
		s.wg.Add(1)
		go s.drain(l)
	}
	s.mu.Unlock()
}

// drain runs the handlers of l until its queue is empty, then lets the
// queue's memory go and ends.
func (s *shards) drain(l *lane) {
	defer s.wg.Done()
	s.mu.Lock()
	for len(l.q) > 0 {
		f := l.q[0]
		l.q[0] = nil
		l.q = l.q[1:]
		s.cond.Broadcast()
		s.mu.Unlock()
		f()
		s.mu.Lock()
	}
	l.q, l.busy = nil, false
	s.mu.Unlock()
}

// stop waits for every queued handler.
func (s *shards) stop() { s.wg.Wait() }
