package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
)

// message is a frame of the dispatcher's socket protocol, the fields the
// fleet's nodes and sessions use.
type message struct {
	Type      string   `json:"type"`
	JobID     string   `json:"job_id,omitempty"`
	Attempt   int      `json:"attempt,omitempty"`
	NodeID    string   `json:"node_id,omitempty"`
	RequestID string   `json:"request_id,omitempty"`
	Pool      string   `json:"pool,omitempty"`
	Payload   []byte   `json:"payload,omitempty"`
	Error     string   `json:"error,omitempty"`
	Code      string   `json:"code,omitempty"`
	Pools     []string `json:"pools,omitempty"`
	Capacity  int      `json:"capacity,omitempty"`
	Jobs      []string `json:"jobs,omitempty"`
}

// dialer opens the WebSocket connections of the whole fleet. At most
// perInstance dials run at once against one instance, below the
// dispatcher's max_pending_conns (256 by default), which closes
// connections accepted beyond it.
type dialer struct {
	client *http.Client
	slots  []chan struct{}
}

func newDialer(instances, perInstance int) *dialer {
	d := &dialer{client: &http.Client{Transport: &http.Transport{
		MaxIdleConnsPerHost: -1, DisableKeepAlives: true, DisableCompression: true,
	}}}
	for range instances {
		d.slots = append(d.slots, make(chan struct{}, perInstance))
	}
	return d
}

func (d *dialer) dial(ctx context.Context, inst int, url string) (*websocket.Conn, error) {
	select {
	case d.slots[inst] <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-d.slots[inst] }()
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(dctx, url, &websocket.DialOptions{HTTPClient: d.client})
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(1 << 20)
	return c, nil
}

// backoff is the pause before the attempt-th reconnect: none before the
// first (a node goes straight to the next instance of its list), then
// from 100 ms doubling to 5 s, with jitter.
func backoff(attempt int) time.Duration {
	if attempt == 0 {
		return time.Duration(rand.Int64N(int64(50 * time.Millisecond)))
	}
	d := 100 * time.Millisecond << min(attempt-1, 6)
	d = min(d, 5*time.Second)
	return d/2 + time.Duration(rand.Int64N(int64(d/2)))
}

func writeJSON(ctx context.Context, c *websocket.Conn, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	return c.Write(wctx, websocket.MessageText, b)
}

// counter counts by reason code.
type counter struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counter) add(k string) {
	c.mu.Lock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
	c.mu.Unlock()
}

func (c *counter) snapshot() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]int, len(c.m))
	for k, v := range c.m {
		out[k] = v
	}
	return out
}

// fleetNode is a node: it registers with its pool and capacity, acks and
// starts every job at once and sends its result after work. When its
// connection drops it goes to the next instance of its list and registers
// there with the jobs it still runs.
type fleetNode struct {
	id       string
	pool     string
	capacity int
	work     time.Duration
	urls     []string
	home     int
	dial     *dialer
	errs     *counter
	onReg    func(n *fleetNode, inst int, at time.Time)

	mu       sync.Mutex
	conn     *websocket.Conn
	inst     int            // instance of the current registration, -1 while none
	running  map[string]int // job id -> attempt, acked and not answered
	finished []message      // results not yet sent (no connection)
}

func (n *fleetNode) run(ctx context.Context) {
	cur, fails := n.home, 0
	for ctx.Err() == nil {
		c, err := n.dial.dial(ctx, cur, n.urls[cur]+"/ws/node")
		if err == nil {
			n.serve(ctx, c, cur)
			c.CloseNow()
			fails = 0
		}
		n.mu.Lock()
		n.conn, n.inst = nil, -1
		n.mu.Unlock()
		if ctx.Err() != nil {
			return
		}
		// The next instance of the list; back off once every instance
		// failed in a row.
		cur = (cur + 1) % len(n.urls)
		select {
		case <-time.After(backoff(fails / len(n.urls))):
		case <-ctx.Done():
			return
		}
		fails++
	}
}

// serve registers on c and handles its frames until it fails.
func (n *fleetNode) serve(ctx context.Context, c *websocket.Conn, inst int) {
	n.mu.Lock()
	jobs := make([]string, 0, len(n.running)+len(n.finished))
	for id := range n.running {
		jobs = append(jobs, id)
	}
	for _, m := range n.finished {
		jobs = append(jobs, m.JobID)
	}
	n.mu.Unlock()
	reg := message{Type: "register", NodeID: n.id, Pools: []string{n.pool}, Capacity: n.capacity, Jobs: jobs}
	if writeJSON(ctx, c, reg) != nil {
		return
	}
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		var m message
		if err := json.Unmarshal(b, &m); err != nil {
			n.errs.add("node:bad_frame")
			continue
		}
		switch m.Type {
		case "registered":
			n.mu.Lock()
			n.conn, n.inst = c, inst
			pending := n.finished
			n.finished = nil
			n.mu.Unlock()
			n.onReg(n, inst, time.Now())
			for _, r := range pending {
				n.send(ctx, r)
			}
		case "job_assign":
			n.mu.Lock()
			if a, ok := n.running[m.JobID]; ok && a == m.Attempt {
				n.mu.Unlock()
				continue
			}
			n.running[m.JobID] = m.Attempt
			n.mu.Unlock()
			id, attempt := m.JobID, m.Attempt
			writeJSON(ctx, c, message{Type: "job_ack", JobID: id, Attempt: attempt})
			writeJSON(ctx, c, message{Type: "job_started", JobID: id, Attempt: attempt})
			time.AfterFunc(n.work, func() { n.finish(ctx, id, attempt) })
		case "job_cancel":
			n.mu.Lock()
			if n.running[m.JobID] == m.Attempt {
				delete(n.running, m.JobID)
			}
			n.mu.Unlock()
		case "ping":
			writeJSON(ctx, c, message{Type: "pong"})
		case "error":
			n.errs.add("node:" + m.Code)
		}
	}
}

// finish answers a job, unless it was cancelled meanwhile.
func (n *fleetNode) finish(ctx context.Context, id string, attempt int) {
	n.mu.Lock()
	if a, ok := n.running[id]; !ok || a != attempt {
		n.mu.Unlock()
		return
	}
	delete(n.running, id)
	n.mu.Unlock()
	n.send(ctx, message{Type: "job_result", JobID: id, Attempt: attempt, Payload: []byte("ok")})
}

// send writes m on the current connection; with none (reconnecting) it
// keeps m for the next registration.
func (n *fleetNode) send(ctx context.Context, m message) {
	n.mu.Lock()
	c := n.conn
	if c == nil {
		n.finished = append(n.finished, m)
		n.mu.Unlock()
		return
	}
	n.mu.Unlock()
	if err := writeJSON(ctx, c, m); err != nil {
		n.mu.Lock()
		n.finished = append(n.finished, m)
		n.mu.Unlock()
	}
}

func (n *fleetNode) instance() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.inst
}

// request is one job request of a session.
type request struct {
	id       string
	pool     string
	sent     time.Time
	answered time.Time // zero while unanswered
	failed   string    // the reason code of a job_failed or a refusal
	resent   []string  // when and where it was sent again, for explain
}

// fleetSession is a session: it sends job requests and collects their
// answers. When its connection drops it goes to the next instance of its
// list and sends its unanswered requests again (a request id gets the one
// answer of its job wherever it is sent).
type fleetSession struct {
	id   string
	urls []string
	home int
	dial *dialer
	errs *counter

	mu      sync.Mutex
	conn    *websocket.Conn
	reqs    map[string]*request
	open    map[string]*request // unanswered
	ready   chan struct{}       // closed at the first connection
	readyOK atomic.Bool
}

func (s *fleetSession) run(ctx context.Context) {
	cur, fails := s.home, 0
	for ctx.Err() == nil {
		c, err := s.dial.dial(ctx, cur, s.urls[cur]+"/ws/session?session_id="+s.id)
		if err == nil {
			fails = 0
			s.mu.Lock()
			s.conn = c
			resend := make([]*request, 0, len(s.open))
			for _, r := range s.open {
				resend = append(resend, r)
				r.resent = append(r.resent, time.Now().Format("15:04:05.000")+" to "+s.urls[cur])
			}
			s.mu.Unlock()
			if s.readyOK.CompareAndSwap(false, true) {
				close(s.ready)
			}
			for _, r := range resend {
				writeJSON(ctx, c, message{Type: "job_request", RequestID: r.id, Pool: r.pool})
			}
			s.read(ctx, c)
			s.mu.Lock()
			s.conn = nil
			s.mu.Unlock()
			c.CloseNow()
		}
		if ctx.Err() != nil {
			return
		}
		cur = (cur + 1) % len(s.urls)
		select {
		case <-time.After(backoff(fails / len(s.urls))):
		case <-ctx.Done():
			return
		}
		fails++
	}
}

func (s *fleetSession) read(ctx context.Context, c *websocket.Conn) {
	for {
		_, b, err := c.Read(ctx)
		if err != nil {
			return
		}
		var m message
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		switch m.Type {
		case "job_result":
			s.answer(m.RequestID, "")
		case "job_failed":
			s.answer(m.RequestID, "job_failed:"+m.Error)
		case "error":
			if m.RequestID != "" {
				s.answer(m.RequestID, "refused:"+m.Code)
			} else {
				s.errs.add("session:" + m.Code)
			}
		case "ping":
			writeJSON(ctx, c, message{Type: "pong"})
		}
	}
}

func (s *fleetSession) answer(id, failed string) {
	now := time.Now()
	s.mu.Lock()
	if r, ok := s.open[id]; ok {
		delete(s.open, id)
		r.answered, r.failed = now, failed
	}
	s.mu.Unlock()
}

// submit sends a new request; without a connection it waits in open for
// the next one.
func (s *fleetSession) submit(ctx context.Context, id, pool string) {
	r := &request{id: id, pool: pool, sent: time.Now()}
	s.mu.Lock()
	s.reqs[id] = r
	s.open[id] = r
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		writeJSON(ctx, c, message{Type: "job_request", RequestID: id, Pool: pool})
	}
}

func nodeID(i int) string    { return fmt.Sprintf("fleet-n%05d", i) }
func sessionID(i int) string { return "fleet-s" + strconv.Itoa(i) }
