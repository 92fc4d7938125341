package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/redisstore"
	"github.com/ksana-dev/ksana/store/storetest"
	"github.com/redis/rueidis"
)

// wire is the union of every field of the socket protocol, for tests.
type wire struct {
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
	InReplyTo string   `json:"in_reply_to,omitempty"`
	Pools     []string `json:"pools,omitempty"`
	Models    []string `json:"models,omitempty"`
	Capacity  int      `json:"capacity,omitempty"`
	Jobs      []string `json:"jobs,omitempty"`
}

// wsClient is a node or session connection driven by a test.
type wsClient struct {
	t    testing.TB
	c    *websocket.Conn
	in   chan wire
	done chan struct{}
	err  error // why the read loop ended, once done is closed
	wmu  sync.Mutex
}

func dialWS(t testing.TB, u, token string) (*wsClient, error) {
	opts := &websocket.DialOptions{}
	if token != "" {
		opts.HTTPHeader = http.Header{"Authorization": {"Bearer " + token}}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, u, opts)
	if err != nil {
		return nil, err
	}
	c.SetReadLimit(64 << 20)
	w := &wsClient{t: t, c: c, in: make(chan wire, 4096), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			_, b, err := c.Read(context.Background())
			if err != nil {
				w.err = err
				return
			}
			var m wire
			if err := json.Unmarshal(b, &m); err != nil {
				w.err = fmt.Errorf("undecodable frame %q: %w", b, err)
				return
			}
			w.in <- m
		}
	}()
	t.Cleanup(func() { c.CloseNow() })
	return w, nil
}

func mustDial(t testing.TB, u, token string) *wsClient {
	t.Helper()
	w, err := dialWS(t, u, token)
	if err != nil {
		t.Fatalf("dial %s: %v", u, err)
	}
	return w
}

func (w *wsClient) sendRaw(b []byte) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return w.c.Write(ctx, websocket.MessageText, b)
}

func (w *wsClient) send(v any) {
	w.t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.sendRaw(b); err != nil {
		w.t.Fatalf("send %s: %v", b, err)
	}
}

// next returns the next message, failing the test after within.
func (w *wsClient) next(within time.Duration) wire {
	w.t.Helper()
	select {
	case m := <-w.in:
		return m
	case <-w.done:
		select {
		case m := <-w.in:
			return m
		default:
		}
		w.t.Fatalf("connection closed: %v", w.err)
	case <-time.After(within):
		w.t.Fatalf("no message within %v", within)
	}
	return wire{}
}

// expect returns the next message of type typ, skipping none.
func (w *wsClient) expect(typ string) wire {
	w.t.Helper()
	m := w.next(10 * time.Second)
	if m.Type != typ {
		w.t.Fatalf("got %+v, want a %s message", m, typ)
	}
	return m
}

// alive checks that the connection still works: a ping gets its pong.
func (w *wsClient) alive() {
	w.t.Helper()
	w.send(wire{Type: "ping"})
	w.expect("pong")
}

// register registers a node and waits for the answer.
func (w *wsClient) register(id string, pools ...string) {
	w.t.Helper()
	w.send(wire{Type: "register", NodeID: id, Pools: pools, Capacity: 64})
	w.expect("registered")
}

// wsURL turns an http address into the ws URL of path.
func wsURL(addr, path string, query ...string) string {
	u := url.URL{Scheme: "ws", Host: addr, Path: path}
	if len(query) == 2 {
		u.RawQuery = url.Values{query[0]: {query[1]}}.Encode()
	}
	return u.String()
}

func randomPrefix(t testing.TB) string {
	var b [6]byte
	rand.Read(b[:])
	name := strings.NewReplacer("/", "-", " ", "-").Replace(t.Name())
	if len(name) > 40 {
		name = name[:40]
	}
	prefix := "ksana-disp-" + name + "-" + hex.EncodeToString(b[:])
	// Every key under it goes when t ends, also when it fails: after the
	// instances started later stop (clean-ups run last registered first).
	storetest.CleanupRedisKeys(t, prefix, storetest.TestRedisClients()...)
	return prefix
}

// backend is a Redis the test runs instances on.
type backend struct {
	name    string
	redis   redisConfig
	cluster bool
}

func backends(t testing.TB) []backend {
	t.Helper()
	return []backend{
		{name: "standalone", redis: singleRedis(testenv.RedisURL(t), "")},
		{name: "cluster", redis: redisConfig{Mode: "cluster", Client: redisstore.ClientConfig{ClusterURLs: testenv.RedisClusterURLs(t)}}, cluster: true},
	}
}

func singleRedis(url, prefix string) redisConfig {
	return redisConfig{Mode: "single", Client: redisstore.ClientConfig{URL: url}, Stores: redisstore.StoresConfig{KeyPrefix: prefix}}
}

// testPlane is the configuration of the tests' instances (nil redis: in
// memory): short deadlines, so that failures are noticed in about a
// second.
func testPlane(id string, redis *redisConfig) config {
	ms := time.Millisecond
	c := config{Plane: scheduler.Config{
		InstanceID: id,
		OwnerTTL:   2 * time.Second, // a loaded test machine can stall a process for most of a second
		Inbox:      scheduler.InboxConfig{Block: 50 * ms, ClaimMinIdle: 500 * ms, DeadMinIdle: 200 * ms, ScanInterval: 200 * ms},
		Fleet:      scheduler.FleetConfig{PresenceTTL: 2 * time.Second, RefreshInterval: 100 * ms},
		Storm:      scheduler.StormWindows{Debounce: 100 * ms, Cooldown: 300 * ms, ActionsPerSecond: 100},
		Dispatch: scheduler.DispatchConfig{
			AckTimeout: 1500 * ms, RunTimeout: 10 * time.Second, Lease: 900 * ms, QueueTimeout: 8 * time.Second,
			RetryInterval: 50 * ms, SweepInterval: 50 * ms, MaxAttempts: 4, DefaultCapacity: 8,
			RequestTimeout: time.Minute,
		},
	}}
	if redis != nil {
		r := *redis
		c.Redis = &r
	}
	return c
}

// instance is a dispatcher served in this process by serve.
type instance struct {
	addr string
	stop func() error // SIGTERM: cancels serve's context, returns its error
}

// startInstance runs serve in this process, as the binary does.
func startInstance(t testing.TB, cfg config, srv ServerConfig) *instance {
	t.Helper()
	return startInstanceLog(t, cfg, srv, nil)
}

// startInstanceLog is startInstance with the instance's log (text, info
// and above) written to w, when not nil.
func startInstanceLog(t testing.TB, cfg config, srv ServerConfig, w io.Writer) *instance {
	t.Helper()
	if srv.Listen == "" {
		srv.Listen = "127.0.0.1:0"
	}
	srv = srv.withDefaults()
	if err := srv.validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Plane = cfg.Plane.WithDefaults()
	if err := cfg.Plane.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Server = srv
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		log = slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	if w != nil {
		log = slog.New(slog.NewTextHandler(w, nil))
	}
	go func() {
		err := serve(ctx, cfg, log, pw)
		pw.CloseWithError(fmt.Errorf("serve returned %v", err))
		done <- err
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		cancel()
		t.Fatalf("instance did not start: %v", err)
	}
	go io.Copy(io.Discard, pr)
	f := strings.Fields(line)
	inst := &instance{addr: f[len(f)-1]}
	var once sync.Once
	var stopErr error
	inst.stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case stopErr = <-done:
			case <-time.After(30 * time.Second):
				stopErr = fmt.Errorf("serve did not return within 30s of its stop")
			}
		})
		return stopErr
	}
	t.Cleanup(func() { inst.stop() })
	return inst
}

type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// redisClient opens a client on the backend for store-level checks.
func redisClient(t testing.TB, r redisConfig) rueidis.Client {
	t.Helper()
	c, err := redisstore.NewClient(r.Client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// jobKeys returns a dump of the keys under prefix that hold jobs, their
// deadlines, reservations, turns, request bindings, inboxes and storm
// marks: everything but the presence, owner and fleet keys that the loops
// refresh on their own. Standalone servers only (SCAN).
func jobKeys(t testing.TB, c rueidis.Client, prefix string) map[string]string {
	t.Helper()
	ctx := context.Background()
	out := map[string]string{}
	var cursor uint64
	for {
		e, err := c.Do(ctx, c.B().Scan().Cursor(cursor).Match(prefix+"*").Count(1000).Build()).AsScanEntry()
		if err != nil {
			t.Fatalf("SCAN: %v", err)
		}
		for _, k := range e.Elements {
			// The fleet view (:v1:nodes:...), presences and owner bindings
			// change with every refresh.
			if strings.Contains(k, ":v1:nodes:") || strings.Contains(k, "presence") ||
				strings.Contains(k, "schedulers") || strings.Contains(k, "owner") {
				continue
			}
			// A hash by its content: DUMP of a hash in the hashtable
			// encoding lists its fields in an order that may change.
			if m, err := c.Do(ctx, c.B().Hgetall().Key(k).Build()).AsStrMap(); err == nil {
				fields := make([]string, 0, len(m))
				for f, v := range m {
					fields = append(fields, f+"="+v)
				}
				sort.Strings(fields)
				out[k] = strings.Join(fields, "\n")
				continue
			}
			v, err := c.Do(ctx, c.B().Dump().Key(k).Build()).ToString()
			if err != nil && !rueidis.IsRedisNil(err) {
				t.Fatalf("DUMP %s: %v", k, err)
			}
			out[k] = hex.EncodeToString([]byte(v))
		}
		cursor = e.Cursor
		if cursor == 0 {
			break
		}
	}
	return out
}

func health(addr string) map[string]any {
	resp, err := http.Get("http://" + addr + "/health")
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	var h map[string]any
	json.NewDecoder(resp.Body).Decode(&h)
	return h
}

// eventually polls cond every 20ms until it holds or within passes.
func eventually(t *testing.T, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
