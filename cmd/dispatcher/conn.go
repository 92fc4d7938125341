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
	out          chan []byte
	writeTimeout time.Duration

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
		ws: ws, out: make(chan []byte, queue), writeTimeout: writeTimeout,
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
	select {
	case c.out <- b:
		return nil
	case <-c.stop:
		return errClosed
	default:
		c.close(websocket.StatusPolicyViolation, "send queue full", false)
		return errQueueFull
	}
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
		case b := <-c.out:
			if err := c.write(b); err != nil {
				c.close(websocket.StatusGoingAway, "write failed", false)
				c.ws.CloseNow()
				return
			}
		case <-c.stop:
			if c.flush {
				for more := true; more; {
					select {
					case b := <-c.out:
						if c.write(b) != nil {
							c.ws.CloseNow()
							return
						}
					default:
						more = false
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

// shards runs a connection's message handlers on a fixed set of
// goroutines: messages with one key (a job id, a turn id) run in the order
// they arrived, others at once.
type shards struct {
	chans []chan func()
	wg    sync.WaitGroup
}

func newShards(n, depth int) *shards {
	s := &shards{chans: make([]chan func(), n)}
	for i := range s.chans {
		ch := make(chan func(), depth)
		s.chans[i] = ch
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			for f := range ch {
				f()
			}
		}()
	}
	return s
}

// run queues f on the goroutine of key; it blocks while that queue is
// full, which slows the connection's reader (back pressure).
func (s *shards) run(key string, f func()) {
	h := fnv.New32a()
	h.Write([]byte(key))
	s.chans[h.Sum32()%uint32(len(s.chans))] <- f
}

// stop waits for every queued handler.
func (s *shards) stop() {
	for _, ch := range s.chans {
		close(ch)
	}
	s.wg.Wait()
}
