package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"
	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler"
)

// TestBadInput sends a registered node, an unregistered node and a
// session every kind of bad message: each gets an error frame naming the
// field or the reason, the connection keeps working, nothing stored
// changes, and the job in flight completes afterwards.
func TestBadInput(t *testing.T) {
	redis := singleRedis(testenv.RedisURL(t), randomPrefix(t))
	plane := testPlane("bad-a", &redis)
	// The job waits while the test sends garbage: its deadline, the
	// shorter of the two timeouts, must outlast that on a loaded machine.
	plane.Plane.Dispatch.AckTimeout = 2 * time.Minute
	plane.Plane.Dispatch.RunTimeout = 2 * time.Minute
	plane.Plane.Dispatch.RequestTimeout = 5 * time.Minute
	srv := ServerConfig{MaxFrameBytes: 64 << 10}
	inst := startInstance(t, plane, srv)
	rc := redisClient(t, redis)

	n1 := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	n1.register("n1", "p")
	n2 := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	n2.register("n2", "p")
	sess := mustDial(t, wsURL(inst.addr, "/ws/session", "session_id", "s1"), "")
	sess.send(wire{Type: "job_request", RequestID: "r1", Pool: "p", Payload: []byte("hello")})
	var assign wire
	owner, other := n1, n2
	select {
	case assign = <-n1.in:
	case assign = <-n2.in:
		owner, other = n2, n1
	case <-time.After(10 * time.Second):
		t.Fatal("no job_assign within 10s")
	}
	if assign.Type != "job_assign" || assign.RequestID != "r1" || string(assign.Payload) != "hello" || assign.Attempt != 1 {
		t.Fatalf("first message to a node: %+v, want job_assign of r1, attempt 1", assign)
	}
	job := assign.JobID
	before := jobKeys(t, rc, redis.Stores.KeyPrefix)
	if len(before) == 0 {
		t.Fatal("no job keys stored after the request")
	}

	huge := `{"type":"job_result","job_id":"` + job + `","attempt":1,"payload":"` + strings.Repeat("QUFB", 20<<10) + `"}`
	for _, tc := range []struct {
		name      string
		conn      *wsClient
		raw       string
		code      string
		field     string
		inReplyTo string
	}{
		{"malformed JSON", other, `{"type":"job_ack",`, codeBadJSON, "", ""},
		{"not an object", other, `[1,2,3]`, codeBadJSON, "", ""},
		{"trailing data", other, `{"type":"ping"} {"type":"ping"}`, codeBadJSON, "", ""},
		{"empty", other, ``, codeBadJSON, "", ""},
		{"unknown type", other, `{"type":"job_teleport","job_id":"` + job + `","attempt":1}`, codeBadMessage, "type", "job_teleport"},
		{"no type", other, `{"job_id":"` + job + `","attempt":1}`, codeBadMessage, "type", ""},
		{"missing job_id", other, `{"type":"job_result","attempt":1}`, codeBadMessage, "job_id", "job_result"},
		{"missing attempt", owner, `{"type":"job_result","job_id":"` + job + `"}`, codeBadMessage, "attempt", "job_result"},
		{"attempt not a number", owner, `{"type":"job_ack","job_id":"` + job + `","attempt":"one"}`, codeBadMessage, "attempt", ""},
		{"unknown field", owner, `{"type":"job_ack","job_id":"` + job + `","attempt":1,"priority":9}`, codeBadMessage, "priority", ""},
		{"bad base64", owner, `{"type":"job_result","job_id":"` + job + `","attempt":1,"payload":"@@@"}`, codeBadMessage, "payload", ""},
		{"braces in job_id", owner, `{"type":"job_ack","job_id":"{x}","attempt":1}`, codeBadMessage, "job_id", "job_ack"},
		{"register fields on an event", owner, `{"type":"job_ack","job_id":"` + job + `","attempt":1,"capacity":3}`, codeBadMessage, "pools", "job_ack"},
		{"another node's job", other, `{"type":"job_result","job_id":"` + job + `","attempt":1,"payload":"eA=="}`, scheduler.RefusedWrongNode, "", "job_result"},
		{"another node's job, node_id forged", other, `{"type":"job_ack","job_id":"` + job + `","attempt":1,"node_id":"` + assign.NodeID + `"}`, scheduler.RefusedWrongNode, "", "job_ack"},
		{"another node's model_not_available", other, `{"type":"model_not_available","job_id":"` + job + `","attempt":1}`, scheduler.RefusedWrongNode, "", "model_not_available"},
		{"unknown job", owner, `{"type":"job_ack","job_id":"jnope","attempt":1}`, scheduler.RefusedJobNotFound, "", "job_ack"},
		{"huge frame", owner, huge, codeFrameTooLarge, "", ""},
		{"switch node id", owner, `{"type":"register","node_id":"n9","pools":["p"]}`, codeBadMessage, "node_id", "register"},
		{"session: missing request_id", sess, `{"type":"job_request","pool":"p"}`, codeBadMessage, "request_id", "job_request"},
		{"session: bad reason", sess, `{"type":"job_request","request_id":"r2","reason":"bored"}`, codeBadMessage, "reason", "job_request"},
		{"session: job_id", sess, `{"type":"job_request","request_id":"r2","job_id":"` + job + `"}`, codeBadMessage, "job_id", "job_request"},
		{"session: node event", sess, `{"type":"job_result","job_id":"` + job + `","attempt":1}`, codeBadMessage, "type", "job_result"},
		{"session: huge frame", sess, strings.Replace(huge, "job_result", "job_request", 1), codeFrameTooLarge, "", ""},
		{"session: malformed", sess, `{"type":`, codeBadJSON, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.conn.t = t
			if err := tc.conn.sendRaw([]byte(tc.raw)); err != nil {
				t.Fatalf("send: %v", err)
			}
			got := tc.conn.expect("error")
			if got.Code != tc.code || got.Field != tc.field || got.InReplyTo != tc.inReplyTo || got.Error == "" {
				t.Errorf("error frame %+v, want code %q field %q in_reply_to %q with a message", got, tc.code, tc.field, tc.inReplyTo)
			}
			tc.conn.alive()
		})
	}
	n1.t, n2.t, sess.t = t, t, t

	// A node that has not registered.
	fresh := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	for _, tc := range []struct{ raw, code, field string }{
		{`{"type":"job_ack","job_id":"` + job + `","attempt":1}`, codeNotRegistered, "type"},
		{`{"type":"register","node_id":"a b"}`, codeBadMessage, "node_id"},
		{`{"type":"register","node_id":"n3","capacity":-1}`, codeBadMessage, "capacity"},
		{`{"type":"register","node_id":"n3","pools":["{p}"]}`, codeBadMessage, "pools[0]"},
	} {
		fresh.sendRaw([]byte(tc.raw))
		if got := fresh.expect("error"); got.Code != tc.code || got.Field != tc.field {
			t.Errorf("%s: error frame %+v, want code %q field %q", tc.raw, got, tc.code, tc.field)
		}
	}
	fresh.alive()

	if diff := cmp.Diff(before, jobKeys(t, rc, redis.Stores.KeyPrefix)); diff != "" {
		t.Errorf("stored job keys changed by refused messages (-before +after):\n%s", diff)
	}

	// The instance and the connections still work: the job completes.
	for _, typ := range []string{"job_ack", "job_started"} {
		owner.send(wire{Type: typ, JobID: job, Attempt: 1})
	}
	owner.send(wire{Type: "job_result", JobID: job, Attempt: 1, Payload: []byte("world")})
	res := sess.expect("job_result")
	if res.RequestID != "r1" || string(res.Payload) != "world" || res.NodeID != assign.NodeID {
		t.Errorf("answer %+v, want r1's result world from %s", res, assign.NodeID)
	}
	// A repeated result is a replay: no error, no second answer. An event
	// of an attempt that never was is refused. (One job's messages are
	// handled in order, so the first frame back is the second one's.)
	owner.send(wire{Type: "job_result", JobID: job, Attempt: 1, Payload: []byte("again")})
	owner.send(wire{Type: "job_ack", JobID: job, Attempt: 2})
	if got := owner.expect("error"); got.Code != scheduler.RefusedTransition || got.InReplyTo != "job_ack" {
		t.Errorf("an ack of attempt 2: %+v, want invalid_transition in reply to job_ack", got)
	}
	select {
	case m := <-sess.in:
		t.Errorf("session got a second message %+v", m)
	default:
	}
}

// TestOversizedFrameCloses: a message beyond eight times max_frame_bytes
// ends the connection with status 1009; the instance keeps serving.
func TestOversizedFrameCloses(t *testing.T) {
	inst := startInstance(t, testPlane("big", nil), ServerConfig{MaxFrameBytes: 4096})
	n := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	n.sendRaw([]byte(`{"type":"ping","job_id":"` + strings.Repeat("x", 40000) + `"}`))
	<-n.done
	if got := websocket.CloseStatus(n.err); got != websocket.StatusMessageTooBig {
		t.Errorf("close status %v (%v), want %v", got, n.err, websocket.StatusMessageTooBig)
	}
	mustDial(t, wsURL(inst.addr, "/ws/node"), "").alive()
}

func TestTokens(t *testing.T) {
	inst := startInstance(t, testPlane("tok", nil), ServerConfig{NodeToken: "node-secret", SessionToken: "session-secret"})
	for _, tc := range []struct {
		path, token string
		ok          bool
	}{
		{"/ws/node", "", false},
		{"/ws/node", "node-secre", false},
		{"/ws/node", "session-secret", false},
		{"/ws/node", "node-secret", true},
		{"/ws/session?session_id=s", "", false},
		{"/ws/session?session_id=s", "node-secret", false},
		{"/ws/session?session_id=s", "session-secret", true},
	} {
		u := "ws://" + inst.addr + tc.path
		c, err := dialWS(t, u, tc.token)
		if tc.ok {
			if err != nil {
				t.Errorf("%s with token %q: %v, want a connection", tc.path, tc.token, err)
				continue
			}
			c.alive()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), "401") {
			t.Errorf("%s with token %q: %v, want 401", tc.path, tc.token, err)
		}
	}
	// A session without a valid id is refused before the upgrade.
	for _, q := range []string{"", "?session_id=", "?session_id=a%20b"} {
		resp, err := http.Get("http://" + inst.addr + "/ws/session" + q)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusBadRequest {
			t.Errorf("session%s: status %d, want 400", q, resp.StatusCode)
		}
	}
}

// TestShutdown: on SIGTERM the instance hands its connections a close
// frame (going away) after the messages queued for them, /health says
// so, and serve returns nil.
func TestShutdown(t *testing.T) {
	inst := startInstance(t, testPlane("stop", nil), ServerConfig{})
	n := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	n.register("n1", "p")
	s := mustDial(t, wsURL(inst.addr, "/ws/session", "session_id", "s1"), "")
	s.send(wire{Type: "job_request", RequestID: "r1", Pool: "p"})
	a := n.expect("job_assign")
	n.send(wire{Type: "job_ack", JobID: a.JobID, Attempt: 1})
	n.send(wire{Type: "job_result", JobID: a.JobID, Attempt: 1, Payload: []byte("x")})
	s.expect("job_result")

	resp, err := http.Get("http://" + inst.addr + "/health")
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	json.NewDecoder(resp.Body).Decode(&h)
	resp.Body.Close()
	if resp.StatusCode != 200 || h["status"] != "ok" || h["nodes"] != 1.0 || h["sessions"] != 1.0 {
		t.Errorf("health %d %v, want 200 ok with 1 node and 1 session", resp.StatusCode, h)
	}
	if err := inst.stop(); err != nil {
		t.Errorf("serve after SIGTERM: %v, want nil", err)
	}
	for _, c := range []*wsClient{n, s} {
		<-c.done
		if got := websocket.CloseStatus(c.err); got != websocket.StatusGoingAway {
			t.Errorf("close status %v (%v), want going away", got, c.err)
		}
	}
	if _, err := dialWS(t, wsURL(inst.addr, "/ws/node"), ""); err == nil {
		t.Errorf("a connection after the stop was accepted")
	}
}

// TestPingTimeout: a peer that stops answering the dispatcher's pings
// (it no longer reads) is disconnected and its node detached; a peer that
// reads stays.
func TestPingTimeout(t *testing.T) {
	inst := startInstance(t, testPlane("ping", nil), ServerConfig{PingIntervalMS: 100})
	live := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	live.register("live", "p")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mute, _, err := websocket.Dial(ctx, wsURL(inst.addr, "/ws/node"), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer mute.CloseNow()
	if err := mute.Write(ctx, websocket.MessageText, []byte(`{"type":"register","node_id":"mute","pools":["p"]}`)); err != nil {
		t.Fatal(err)
	}
	if _, b, err := mute.Read(ctx); err != nil || !strings.Contains(string(b), `"registered"`) {
		t.Fatalf("register: %s, %v", b, err)
	}
	eventually(t, "two nodes attached", 10*time.Second, func() bool { return health(inst.addr)["nodes"] == 2.0 })
	// mute reads no more, so its pongs are never sent.
	eventually(t, "the mute node detached", 10*time.Second, func() bool { return health(inst.addr)["nodes"] == 1.0 })
	live.alive()
}

// TestReplacedConnection: a node or session that connects again replaces
// its old connection, which is closed; the new one gets the jobs.
func TestReplacedConnection(t *testing.T) {
	inst := startInstance(t, testPlane("repl", nil), ServerConfig{})
	old := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	old.register("n1", "p")
	oldS := mustDial(t, wsURL(inst.addr, "/ws/session", "session_id", "s1"), "")
	oldS.alive()
	n := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	n.register("n1", "p")
	s := mustDial(t, wsURL(inst.addr, "/ws/session", "session_id", "s1"), "")
	for _, c := range []*wsClient{old, oldS} {
		<-c.done
		if got := websocket.CloseStatus(c.err); got != websocket.StatusPolicyViolation {
			t.Errorf("replaced connection closed with %v (%v), want policy violation", got, c.err)
		}
	}
	s.send(wire{Type: "job_request", RequestID: "r1", Pool: "p"})
	a := n.expect("job_assign")
	n.send(wire{Type: "job_result", JobID: a.JobID, Attempt: 1, Payload: []byte("ok")})
	if got := s.expect("job_result"); string(got.Payload) != "ok" {
		t.Errorf("answer %+v, want ok", got)
	}
}

// TestStaleAttempt: a node that does not acknowledge in time loses the
// job (job_cancel), the job goes to the other node with attempt 2, and the
// first node's late result is refused with stale_attempt; the session
// gets the second node's answer only.
func TestStaleAttempt(t *testing.T) {
	plane := testPlane("stale", nil)
	plane.Plane.Dispatch.AckTimeout = time.Second // fast registers well within it
	inst := startInstance(t, plane, ServerConfig{})
	slow := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	slow.register("slow", "p")
	s := mustDial(t, wsURL(inst.addr, "/ws/session", "session_id", "s1"), "")
	s.send(wire{Type: "job_request", RequestID: "r1", Pool: "p"})
	first := slow.expect("job_assign")
	fast := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	fast.register("fast", "p")
	if c := slow.expect("job_cancel"); c.JobID != first.JobID || c.Attempt != 1 || c.Reason == "" {
		t.Errorf("cancel %+v, want job %s attempt 1 with a reason", c, first.JobID)
	}
	second := fast.expect("job_assign")
	if second.JobID != first.JobID || second.Attempt != 2 {
		t.Fatalf("second assign %+v, want job %s attempt 2", second, first.JobID)
	}
	slow.send(wire{Type: "job_result", JobID: first.JobID, Attempt: 1, Payload: []byte("late")})
	if e := slow.expect("error"); e.Code != scheduler.RefusedStaleAttempt || e.JobID != first.JobID {
		t.Errorf("late result: %+v, want stale_attempt for %s", e, first.JobID)
	}
	fast.send(wire{Type: "job_result", JobID: second.JobID, Attempt: 2, Payload: []byte("on time")})
	if got := s.expect("job_result"); string(got.Payload) != "on time" || got.NodeID != "fast" || got.Attempt != 2 {
		t.Errorf("answer %+v, want fast's attempt 2", got)
	}
}

// TestNodeCredentials: a node credential lets its holder register only the
// node ids bound to it; the node token (when set) any; a wrong token none.
func TestNodeCredentials(t *testing.T) {
	const tokA, tokB = "token-of-node-a-0123", "token-of-node-b-0123"
	inst := startInstance(t, testPlane("cred", nil), ServerConfig{NodeToken: "fleet-wide-token-99", NodeCredentials: []NodeCredential{
		{Token: tokA, NodeIDs: []string{"a1", "a2"}},
		{Token: tokB, NodeIDs: []string{"b1"}},
	}})
	u := wsURL(inst.addr, "/ws/node")
	a := mustDial(t, u, tokA)
	a.register("a1", "p")
	other := mustDial(t, u, tokA)
	other.send(wire{Type: "register", NodeID: "b1", Pools: []string{"p"}})
	if m := other.expect("error"); m.Code != "forbidden_node" || m.Field != "node_id" {
		t.Errorf("token of a registering b1: %+v, want forbidden_node on node_id", m)
	}
	// The refused connection may still register a node its token covers.
	other.register("a2", "p")
	mustDial(t, u, tokB).register("b1", "p")
	mustDial(t, u, "fleet-wide-token-99").register("anyone", "p")
	if _, err := dialWS(t, u, "token-of-node-c-0123"); err == nil || !strings.Contains(err.Error(), "401") {
		t.Errorf("unknown token: %v, want 401", err)
	}
	if got := health(inst.addr)["nodes"]; got != 4.0 {
		t.Errorf("nodes attached = %v, want 4", got)
	}
}

// TestHTTPErrorsAreJSON: unknown paths and refused upgrades answer JSON,
// and /health's counts are JSON numbers.
func TestHTTPErrorsAreJSON(t *testing.T) {
	inst := startInstance(t, testPlane("http", nil), ServerConfig{SessionToken: "session-secret"})
	for _, tc := range []struct {
		path string
		code int
	}{{"/nope", 404}, {"/ws/session?session_id=s", 401}, {"/ws/session?session_id=a%20b", 400}} {
		resp, err := http.Get("http://" + inst.addr + tc.path)
		if err != nil {
			t.Fatal(err)
		}
		var body map[string]any
		err = json.NewDecoder(resp.Body).Decode(&body)
		resp.Body.Close()
		if resp.StatusCode != tc.code || err != nil || body["error"] == "" || resp.Header.Get("Content-Type") != "application/json" {
			t.Errorf("GET %s: %d %q %v (%v), want %d with a JSON error", tc.path, resp.StatusCode, resp.Header.Get("Content-Type"), body, err, tc.code)
		}
	}
	h := health(inst.addr)
	for _, k := range []string{"nodes", "sessions", "fleet_online"} {
		if _, ok := h[k].(float64); !ok {
			t.Errorf("/health %s = %#v, want a JSON number", k, h[k])
		}
	}
}

// lockedBuffer is a bytes.Buffer for a logger written from many goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestRegisterLogsCapacity: a node registering without a capacity is
// logged with the capacity it gets (dispatcher.default_capacity).
func TestRegisterLogsCapacity(t *testing.T) {
	var logs lockedBuffer
	plane := testPlane("cap", nil)
	plane.Plane.Dispatch.DefaultCapacity = 7
	inst := startInstanceLog(t, plane, ServerConfig{}, &logs)
	n := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	n.send(wire{Type: "register", NodeID: "n1", Pools: []string{"p"}})
	n.expect("registered")
	eventually(t, "the register logged", 5*time.Second, func() bool {
		return strings.Contains(logs.String(), `msg="dispatcher: node registered" node_id=n1`)
	})
	if l := logs.String(); !strings.Contains(l, "capacity=7") {
		t.Errorf("register logged without its effective capacity 7:\n%s", l)
	}
}

// TestReconnectListsJobs: a node that connects again (replacing its old
// connection) lists the jobs it still runs in its register. A job it had
// started and does not list goes to another node at once, as attempt 2,
// instead of holding its slot until the run timeout (10s here); the job
// it lists stays, and its result answers with attempt 1.
func TestReconnectListsJobs(t *testing.T) {
	plane := testPlane("relist", nil)
	plane.Plane.Dispatch.RunTimeout = time.Minute
	inst := startInstance(t, plane, ServerConfig{})
	old := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	old.register("n1", "p")
	s := mustDial(t, wsURL(inst.addr, "/ws/session", "session_id", "s1"), "")
	jobs := map[string]string{} // request -> job
	for _, r := range []string{"kept", "lost"} {
		s.send(wire{Type: "job_request", RequestID: r, Pool: "p", Payload: []byte(r)})
		a := old.expect("job_assign")
		jobs[string(a.Payload)] = a.JobID
		old.send(wire{Type: "job_ack", JobID: a.JobID, Attempt: 1})
		old.send(wire{Type: "job_started", JobID: a.JobID, Attempt: 1})
	}
	old.alive()                        // the events before it were taken
	time.Sleep(100 * time.Millisecond) // and written to the records
	other := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	other.register("n2", "p")
	start := time.Now()
	n := mustDial(t, wsURL(inst.addr, "/ws/node"), "")
	n.send(wire{Type: "register", NodeID: "n1", Pools: []string{"p"}, Capacity: 64, Jobs: []string{jobs["kept"]}})
	// The node is told that the lost job left it, then that it is registered.
	if m := n.expect("job_cancel"); m.JobID != jobs["lost"] || m.Attempt != 1 {
		t.Errorf("cancel %+v, want the lost job %s, attempt 1", m, jobs["lost"])
	}
	n.expect("registered")
	a := other.expect("job_assign")
	if a.JobID != jobs["lost"] || a.Attempt != 2 {
		t.Errorf("n2 got %+v, want the lost job %s as attempt 2", a, jobs["lost"])
	}
	if el := time.Since(start); el > 3*time.Second {
		t.Errorf("the lost job went on %v after the register, want at once", el)
	}
	other.send(wire{Type: "job_result", JobID: a.JobID, Attempt: 2, Payload: []byte("lost-done")})
	n.send(wire{Type: "job_result", JobID: jobs["kept"], Attempt: 1, Payload: []byte("kept-done")})
	got := map[string]wire{}
	for range 2 {
		m := s.expect("job_result")
		got[m.RequestID] = m
	}
	if m := got["kept"]; m.Attempt != 1 || string(m.Payload) != "kept-done" {
		t.Errorf("answer of the kept job %+v, want attempt 1 kept-done", m)
	}
	if m := got["lost"]; m.Attempt != 2 || string(m.Payload) != "lost-done" {
		t.Errorf("answer of the lost job %+v, want attempt 2 lost-done", m)
	}
}
