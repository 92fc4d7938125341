package main

import (
	"context"
	"encoding/hex"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/ksana-dev/ksana/internal/reconnect"
)

// message is the JSON shape of the messages a session sends and gets.
type message struct {
	Type      string `json:"type"`
	JobID     string `json:"job_id,omitempty"`
	Attempt   int    `json:"attempt,omitempty"`
	NodeID    string `json:"node_id,omitempty"`
	SessionID string `json:"session_id,omitempty"`
	RequestID string `json:"request_id,omitempty"`
	TurnID    string `json:"turn_id,omitempty"`
	Pool      string `json:"pool,omitempty"`
	Model     string `json:"model,omitempty"`
	Reason    string `json:"reason,omitempty"`
	Payload   []byte `json:"payload,omitempty"`
	Error     string `json:"error,omitempty"`
	Code      string `json:"code,omitempty"`
	Field     string `json:"field,omitempty"`
}

type request struct {
	msg    message
	sentAt time.Time
}

type session struct {
	id, token string
	urls      []string

	mu       sync.Mutex
	conn     *websocket.Conn
	pending  map[string]*request // request id -> request, until answered
	answered chan answer
	retry    reconnect.Pacer // used by connectLoop only
}

// answer is an answer and how long it took since the request was sent.
type answer struct {
	m message
	d time.Duration
}

func main() {
	var s session
	urls := flag.String("url", "ws://127.0.0.1:7200/ws/session", "dispatcher URLs, comma separated")
	flag.StringVar(&s.id, "id", "session-1", "session_id")
	turns := flag.Int("turns", 3, "turns")
	perTurn := flag.Int("per-turn", 4, "requests per turn")
	pool := flag.String("pool", "zh-en", "pool of every request")
	model := flag.String("model", "", "model of every request")
	interval := flag.Duration("interval", 0, "pause between two requests of a turn")
	prefix := flag.String("prefix", "", "request id prefix (default: random)")
	timeout := flag.Duration("timeout", time.Minute, "give up after this long")
	flag.StringVar(&s.token, "token", os.Getenv("DISPATCH_SESSION_TOKEN"), "bearer token")
	flag.Parse()
	for _, u := range strings.Split(*urls, ",") {
		if u = strings.TrimSpace(u); u != "" {
			s.urls = append(s.urls, u)
		}
	}
	if len(s.urls) == 0 || *turns < 1 || *perTurn < 1 {
		fmt.Fprintln(os.Stderr, "dispatch-session: need -url, -turns >= 1 and -per-turn >= 1")
		os.Exit(2)
	}
	if *prefix == "" {
		var b [4]byte
		for i := range b {
			b[i] = byte(rand.IntN(256))
		}
		*prefix = hex.EncodeToString(b[:])
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	s.pending = map[string]*request{}
	s.retry.Name = "dispatch-session " + s.id
	s.answered = make(chan answer, 64)
	go s.connectLoop(ctx)

	start := time.Now()
	var lat []time.Duration
	failed := 0
	for t := range *turns {
		turn := fmt.Sprintf("%s-t%d", *prefix, t)
		var ids []string
		for j := range *perTurn {
			reason := "max_duration"
			if j == *perTurn-1 {
				reason = "manual"
			}
			id := fmt.Sprintf("%s-r%d-%d", *prefix, t, j)
			ids = append(ids, id)
			s.send(ctx, message{Type: "job_request", RequestID: id, TurnID: turn, Pool: *pool, Model: *model, Reason: reason, Payload: []byte(id)})
			if *interval > 0 && j < *perTurn-1 {
				select {
				case <-time.After(*interval):
				case <-ctx.Done():
				}
			}
		}
		for range ids {
			select {
			case a := <-s.answered:
				m, d := a.m, a.d
				lat = append(lat, d)
				if m.Type != "job_result" {
					failed++
					fmt.Printf("%s turn %s: %s after %v: %s\n", m.RequestID, m.TurnID, m.Type, d.Round(time.Microsecond), m.Error)
				} else {
					fmt.Printf("%s turn %s: %s on %s (attempt %d) in %v: %q\n", m.RequestID, m.TurnID, m.Type, m.NodeID, m.Attempt, d.Round(time.Microsecond), m.Payload)
				}
			case <-ctx.Done():
				s.mu.Lock()
				n := len(s.pending)
				s.mu.Unlock()
				fmt.Fprintf(os.Stderr, "dispatch-session: %d requests unanswered: %v\n", n, ctx.Err())
				os.Exit(1)
			}
		}
	}
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	fmt.Printf("%d requests in %v, %d failed; latency p50 %v, max %v\n", len(lat), time.Since(start).Round(time.Millisecond), failed,
		lat[len(lat)/2].Round(time.Microsecond), lat[len(lat)-1].Round(time.Microsecond))
	if failed == len(lat) {
		fmt.Fprintln(os.Stderr, "dispatch-session: every request failed")
		os.Exit(1)
	}
}

// take forgets an answered request and reports how long its answer
// took; ok is false for a request answered before.
func (s *session) take(requestID string) (d time.Duration, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.pending[requestID]
	if r == nil {
		return 0, false
	}
	delete(s.pending, requestID)
	return time.Since(r.sentAt), true
}

// send records a request and writes it when connected (or at the next
// connection).
func (s *session) send(ctx context.Context, m message) {
	s.mu.Lock()
	s.pending[m.RequestID] = &request{msg: m, sentAt: time.Now()}
	c := s.conn
	s.mu.Unlock()
	if c != nil {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		wsjson.Write(wctx, c, m)
		cancel()
	}
}

// connectLoop keeps a connection to one of the URLs; each new connection
// gets the unanswered requests again.
func (s *session) connectLoop(ctx context.Context) {
	for i := 0; ctx.Err() == nil; i++ {
		u := s.urls[i%len(s.urls)]
		err := s.serve(ctx, u)
		if ctx.Err() != nil {
			return
		}
		pause := s.retry.Failed(u, err)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func (s *session) serve(ctx context.Context, base string) error {
	u, err := url.Parse(base)
	if err != nil {
		return err
	}
	q := u.Query()
	q.Set("session_id", s.id)
	u.RawQuery = q.Encode()
	opts := &websocket.DialOptions{}
	if s.token != "" {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + s.token}}
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	c, _, err := websocket.Dial(dctx, u.String(), opts)
	cancel()
	if err != nil {
		return err
	}
	s.retry.Connected(base)
	defer c.CloseNow()
	c.SetReadLimit(8 << 20)
	s.mu.Lock()
	s.conn = c
	var again []message
	for _, r := range s.pending {
		again = append(again, r.msg)
	}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.conn = nil
		s.mu.Unlock()
	}()
	for _, m := range again {
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err := wsjson.Write(wctx, c, m)
		cancel()
		if err != nil {
			return err
		}
	}
	for {
		var m message
		if err := wsjson.Read(ctx, c, &m); err != nil {
			return err
		}
		switch m.Type {
		case "job_result", "job_failed":
			if d, ok := s.take(m.RequestID); ok {
				s.answered <- answer{m, d}
			}
		case "error":
			// A refused request is answered: sending it again would be
			// refused again.
			if d, ok := s.take(m.RequestID); ok {
				m.Type, m.Error = "error", m.Code+": "+m.Error
				s.answered <- answer{m, d}
			} else {
				fmt.Fprintf(os.Stderr, "dispatch-session %s: refused %s: %s\n", s.id, m.Code, m.Error)
			}
		}
	}
}
