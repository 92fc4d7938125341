package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/coder/websocket"
	"github.com/coder/websocket/wsjson"

	"github.com/ksana-dev/ksana/internal/reconnect"
)

// message is the JSON shape of the dispatcher's messages, the fields a
// node uses.
type message struct {
	Type      string   `json:"type"`
	JobID     string   `json:"job_id,omitempty"`
	Attempt   int      `json:"attempt,omitempty"`
	NodeID    string   `json:"node_id,omitempty"`
	SessionID string   `json:"session_id,omitempty"`
	RequestID string   `json:"request_id,omitempty"`
	TurnID    string   `json:"turn_id,omitempty"`
	Pool      string   `json:"pool,omitempty"`
	Model     string   `json:"model,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Payload   []byte   `json:"payload,omitempty"`
	Error     string   `json:"error,omitempty"`
	Code      string   `json:"code,omitempty"`
	Field     string   `json:"field,omitempty"`
	Pools     []string `json:"pools,omitempty"`
	Models    []string `json:"models,omitempty"`
	Capacity  int      `json:"capacity,omitempty"`
}

type node struct {
	id          string
	pools       []string
	models      []string
	capacity    int
	delay       time.Duration
	silent      float64
	unavailable float64
	dieAfter    int64
	token       string
	quiet       bool

	jobs atomic.Int64
	conn reconnect.Pacer
}

func main() {
	var n node
	urls := flag.String("url", "ws://127.0.0.1:7200/ws/node", "dispatcher URLs, comma separated")
	flag.StringVar(&n.id, "id", "node-1", "node_id")
	pools := flag.String("pools", "zh-en", "pools served, comma separated")
	models := flag.String("models", "", "models installed, comma separated")
	flag.IntVar(&n.capacity, "capacity", 0, "jobs at once (0: the dispatcher's default)")
	flag.DurationVar(&n.delay, "delay", 200*time.Millisecond, "time from job_started to job_result")
	flag.Float64Var(&n.silent, "silent", 0, "share of jobs never answered")
	flag.Float64Var(&n.unavailable, "unavailable", 0, "share of jobs answered with model_not_available")
	flag.Int64Var(&n.dieAfter, "die-after", 0, "exit abruptly after job_started of the n-th job")
	flag.StringVar(&n.token, "token", os.Getenv("DISPATCH_NODE_TOKEN"), "bearer token")
	flag.BoolVar(&n.quiet, "quiet", false, "do not print each job")
	flag.Parse()
	n.pools, n.models = list(*pools), list(*models)
	n.conn.Name = "dispatch-node " + n.id
	if n.silent < 0 || n.silent > 1 || n.unavailable < 0 || n.unavailable > 1 {
		fmt.Fprintln(os.Stderr, "dispatch-node: -silent and -unavailable are shares between 0 and 1")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	targets := list(*urls)
	if len(targets) == 0 {
		fmt.Fprintln(os.Stderr, "dispatch-node: -url is empty")
		os.Exit(2)
	}
	for i := 0; ctx.Err() == nil; i++ {
		u := targets[i%len(targets)]
		err := n.serve(ctx, u)
		if ctx.Err() != nil {
			break
		}
		pause := n.conn.Failed(u, err)
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

func list(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// serve connects to one dispatcher and handles its jobs until the
// connection ends.
func (n *node) serve(ctx context.Context, url string) error {
	opts := &websocket.DialOptions{}
	if n.token != "" {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + n.token}}
	}
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	c, _, err := websocket.Dial(dctx, url, opts)
	cancel()
	if err != nil {
		return err
	}
	n.conn.Connected(url)
	defer c.CloseNow()
	c.SetReadLimit(8 << 20)
	var wmu sync.Mutex
	send := func(m message) error {
		wmu.Lock()
		defer wmu.Unlock()
		wctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		return wsjson.Write(wctx, c, m)
	}
	if err := send(message{Type: "register", NodeID: n.id, Pools: n.pools, Models: n.models, Capacity: n.capacity}); err != nil {
		return err
	}
	jctx, stopJobs := context.WithCancel(ctx)
	defer stopJobs()
	var mu sync.Mutex
	running := map[string]context.CancelFunc{}
	go func() {
		<-ctx.Done()
		c.Close(websocket.StatusNormalClosure, "node stopping")
	}()
	for {
		var m message
		if err := wsjson.Read(ctx, c, &m); err != nil {
			return err
		}
		switch m.Type {
		case "registered":
			fmt.Printf("node %s registered on %s\n", n.id, url)
		case "error":
			fmt.Fprintf(os.Stderr, "dispatch-node %s: refused %s (job %s): %s %s\n", n.id, m.Code, m.JobID, m.Field, m.Error)
			if m.Field == "node_id" || (m.JobID == "" && m.Code == "bad_message") {
				return errors.New(m.Error)
			}
		case "job_cancel":
			mu.Lock()
			if stop := running[m.JobID]; stop != nil {
				stop()
			}
			mu.Unlock()
			n.print("cancel %s attempt %d (%s)", m.JobID, m.Attempt, m.Reason)
		case "job_assign":
			jc, stop := context.WithCancel(jctx)
			mu.Lock()
			running[m.JobID] = stop
			mu.Unlock()
			go func() {
				n.run(jc, m, send)
				mu.Lock()
				delete(running, m.JobID)
				mu.Unlock()
				stop()
			}()
		}
	}
}

func (n *node) print(format string, args ...any) {
	if !n.quiet {
		fmt.Printf("node "+n.id+": "+format+"\n", args...)
	}
}

// run does one job as the flags say.
func (n *node) run(ctx context.Context, m message, send func(message) error) {
	ev := func(t string, payload []byte) error {
		return send(message{Type: t, JobID: m.JobID, Attempt: m.Attempt, Model: m.Model, Payload: payload})
	}
	if rand.Float64() < n.unavailable {
		n.print("job %s attempt %d: model_not_available", m.JobID, m.Attempt)
		ev("model_not_available", nil)
		return
	}
	if ev("job_ack", nil) != nil || ev("job_started", nil) != nil {
		return
	}
	if k := n.jobs.Add(1); n.dieAfter > 0 && k >= n.dieAfter {
		fmt.Fprintf(os.Stderr, "dispatch-node %s: dying mid-job %s\n", n.id, m.JobID)
		os.Exit(3)
	}
	if rand.Float64() < n.silent {
		n.print("job %s attempt %d (request %s, turn %s): staying silent", m.JobID, m.Attempt, m.RequestID, m.TurnID)
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(n.delay):
	}
	n.print("job %s attempt %d (request %s, turn %s): result", m.JobID, m.Attempt, m.RequestID, m.TurnID)
	ev("job_result", append([]byte("done:"), m.Payload...))
}
