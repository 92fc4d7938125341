package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/scheduler/console"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Message types of the socket protocol besides the scheduler.Envelope
// types (job_assign, job_cancel, job_ack, job_started, asr_partial,
// job_result, model_not_available, job_failed).
const (
	typeRegister   = "register"    // node → dispatcher: node_id, pools, models, capacity, status, jobs
	typeRegistered = "registered"  // dispatcher → node: the registration took effect
	typeRequest    = "job_request" // session → dispatcher: request_id, turn_id, pool, model, reason, payload
	typePing       = "ping"        // either way: a heartbeat, answered with pong
	typePong       = "pong"
	typeError      = "error" // dispatcher → peer: a message was refused
)

// Codes of error frames besides scheduler.Refusal's (bad_message,
// wrong_node, stale_attempt, invalid_transition, job_not_found, stopping).
const (
	codeBadJSON       = "bad_json"                  // not one JSON object
	codeBadMessage    = scheduler.RefusedBadMessage // a field is missing or wrong (field names it)
	codeFrameTooLarge = "frame_too_large"
	codeNotRegistered = "not_registered" // a node event before register
	codeForbiddenNode = "forbidden_node" // the node's credential does not cover this node id
	codeInternal      = "internal"
)

// inbound is any message a node or a session sends.
type inbound struct {
	scheduler.Envelope
	Pools    []string `json:"pools,omitempty"`
	Models   []string `json:"models,omitempty"`
	Capacity int      `json:"capacity,omitempty"`
	Status   string   `json:"status,omitempty"`
	Jobs     []string `json:"jobs,omitempty"` // register: the jobs the node still runs
}

// errorFrame tells a peer why its message was refused; the connection
// stays open.
type errorFrame struct {
	Type      string `json:"type"`                  // "error"
	Code      string `json:"code"`                  // see the code constants
	Field     string `json:"field,omitempty"`       // the field at fault, when one is
	Error     string `json:"error"`                 // a readable explanation
	InReplyTo string `json:"in_reply_to,omitempty"` // the type of the refused message
	JobID     string `json:"job_id,omitempty"`
	RequestID string `json:"request_id,omitempty"`
}

// server serves one dispatch instance over HTTP and WebSocket.
type server struct {
	d        *scheduler.Dispatcher
	st       scheduler.Stores
	cfg      ServerConfig
	log      *slog.Logger
	reg      *prometheus.Registry
	nodeTok  []byte // sha256 of the token, nil when none is required
	sessTok  []byte
	metTok   []byte       // of /metrics
	creds    []credential // node_credentials
	stopping atomic.Bool

	mu    sync.Mutex
	conns map[*wsConn]struct{}
	owned map[string]*wsConn // "node/<id>" or "session/<id>" -> its newest connection
	wg    sync.WaitGroup     // connection handlers
}

func newServer(d *scheduler.Dispatcher, st scheduler.Stores, cfg ServerConfig, log *slog.Logger, reg *prometheus.Registry) *server {
	s := &server{d: d, st: st, cfg: cfg, log: log, reg: reg, conns: map[*wsConn]struct{}{}, owned: map[string]*wsConn{}}
	if cfg.NodeToken != "" {
		h := sha256.Sum256([]byte(cfg.NodeToken))
		s.nodeTok = h[:]
	}
	if cfg.SessionToken != "" {
		h := sha256.Sum256([]byte(cfg.SessionToken))
		s.sessTok = h[:]
	}
	if cfg.MetricsToken != "" {
		h := sha256.Sum256([]byte(cfg.MetricsToken))
		s.metTok = h[:]
	}
	for _, c := range cfg.NodeCredentials {
		h := sha256.Sum256([]byte(c.Token))
		s.creds = append(s.creds, credential{hash: h[:], nodes: c.NodeIDs})
	}
	return s
}

// credential is a node token bound to the node ids it may register.
type credential struct {
	hash  []byte
	nodes []string
}

// nodeAuth checks the bearer token of a node connection: the node token
// lets any node id in, a node credential only its node ids (returned);
// with neither configured every connection gets in. ok is false for a
// missing or wrong token.
func (s *server) nodeAuth(r *http.Request) (nodes []string, ok bool) {
	if s.nodeTok == nil && s.creds == nil {
		return nil, true
	}
	tok, bearer := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	got := sha256.Sum256([]byte(tok))
	if s.nodeTok != nil && subtle.ConstantTimeCompare(got[:], s.nodeTok) == 1 {
		return nil, bearer
	}
	for _, c := range s.creds {
		if subtle.ConstantTimeCompare(got[:], c.hash) == 1 {
			return c.nodes, bearer
		}
	}
	return nil, false
}

func (s *server) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /ws/node", s.serveNode)
	mux.HandleFunc("GET /ws/session", s.serveSession)
	metrics := promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) {
		if !authorized(r, s.metTok) {
			w.Header().Set("WWW-Authenticate", "Bearer")
			httpError(w, http.StatusUnauthorized, "missing or wrong bearer token")
			return
		}
		metrics.ServeHTTP(w, r)
	})
	mux.HandleFunc("GET /health", s.serveHealth)
	if c, err := console.New(s.d, console.Config{
		ReadToken: s.cfg.ConsoleReadToken, AdminToken: s.cfg.ConsoleAdminToken, Logger: s.log,
	}); err != nil {
		// The configuration was validated: this is a bug, not a setting.
		s.log.Error("dispatcher: the console at /ui/ is off", "err", err)
	} else {
		mux.Handle("/ui/", c)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		httpError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path+" (/ws/node, /ws/session, /metrics, /health, /ui/)")
	})
	return mux
}

// httpError answers an HTTP request with a JSON error body {"error": msg}.
func httpError(w http.ResponseWriter, code int, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

func (s *server) serveHealth(w http.ResponseWriter, r *http.Request) {
	nodes, sessions := s.d.Counts()
	online := 0
	for _, n := range s.d.Fleet() {
		if n.Online {
			online++
		}
	}
	status, code := "ok", http.StatusOK
	if s.stopping.Load() {
		status, code = "stopping", http.StatusServiceUnavailable
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	json.NewEncoder(w).Encode(map[string]any{
		"status": status, "instance_id": s.d.InstanceID(), "nodes": nodes, "sessions": sessions,
		"fleet_online": online,
	})
}

// authorized compares the request's bearer token with want (a SHA-256)
// in constant time; a nil want lets every request in.
func authorized(r *http.Request, want []byte) bool {
	if want == nil {
		return true
	}
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	got := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(got[:], want) == 1 && ok
}

// accept upgrades an authorized request (see authorized).
func (s *server) accept(w http.ResponseWriter, r *http.Request, authorized bool) *wsConn {
	if !authorized {
		w.Header().Set("WWW-Authenticate", "Bearer")
		httpError(w, http.StatusUnauthorized, "missing or wrong bearer token")
		return nil
	}
	if s.stopping.Load() {
		httpError(w, http.StatusServiceUnavailable, "instance stopping")
		return nil
	}
	// The server's deadlines are for HTTP requests: a WebSocket's writes
	// have their own timeout (write_timeout_ms, per message) and its pings
	// find a peer that is gone. The connection no longer counts as
	// pending (max_pending_conns).
	rc := http.NewResponseController(w)
	if err := errors.Join(rc.SetReadDeadline(time.Time{}), rc.SetWriteDeadline(time.Time{})); err != nil {
		s.log.Debug("dispatcher: lift deadlines", "remote", r.RemoteAddr, "err", err)
	}
	authenticatedConn(r.Context())
	ws, err := websocket.Accept(w, r, nil)
	if err != nil {
		s.log.Debug("dispatcher: upgrade", "remote", r.RemoteAddr, "err", err)
		return nil
	}
	ws.SetReadLimit(8 * s.cfg.MaxFrameBytes)
	c := newConn(ws, s.cfg.SendQueue, time.Duration(s.cfg.WriteTimeoutMS)*time.Millisecond)
	go c.pinger(time.Duration(s.cfg.PingIntervalMS) * time.Millisecond)
	s.mu.Lock()
	if s.stopping.Load() { // a shutdown began meanwhile
		s.mu.Unlock()
		c.close(websocket.StatusGoingAway, "instance stopping", false)
		<-c.done()
		return nil
	}
	s.conns[c] = struct{}{}
	s.wg.Add(1)
	s.mu.Unlock()
	return c
}

// own records c as the connection of key and closes the one it replaces:
// the newest connection of a node or session is the one that counts.
func (s *server) own(key string, c *wsConn) {
	s.mu.Lock()
	old := s.owned[key]
	s.owned[key] = c
	s.mu.Unlock()
	if old != nil && old != c {
		old.close(websocket.StatusPolicyViolation, "replaced by a newer connection", true)
	}
}

// disown forgets c as the connection of key, unless a newer one took it.
func (s *server) disown(key string, c *wsConn) {
	s.mu.Lock()
	if s.owned[key] == c {
		delete(s.owned, key)
	}
	s.mu.Unlock()
}

func (s *server) release(c *wsConn) {
	c.close(websocket.StatusNormalClosure, "", true)
	<-c.done()
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	s.wg.Done()
}

// shutdown hands every connection a close frame after its queued
// messages, and waits for the handlers (they detach their node or
// session) until ctx ends.
func (s *server) shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.stopping.Store(true) // under mu: no handler registers after this
	for c := range s.conns {
		c.close(websocket.StatusGoingAway, "instance stopping", true)
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() { s.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// decode parses one frame into m. Unknown fields, trailing data and wrong
// types are errors naming the field.
func decode(b []byte, m *inbound) *errorFrame {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	err := dec.Decode(m)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			return &errorFrame{Code: codeBadJSON, Error: "trailing data after the JSON object"}
		}
		return nil
	}
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return &errorFrame{Code: codeBadJSON, Error: fmt.Sprintf("malformed JSON at byte %d: %v", se.Offset, se)}
	case errors.As(err, &te):
		field := te.Field
		if i := strings.LastIndexByte(field, '.'); i >= 0 {
			field = field[i+1:] // "Envelope.attempt" names attempt
		}
		if field == "" {
			return &errorFrame{Code: codeBadJSON, Error: "a message is one JSON object"}
		}
		return &errorFrame{Code: codeBadMessage, Field: field, Error: fmt.Sprintf("%s: %s is not a %s", field, te.Value, te.Type)}
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return &errorFrame{Code: codeBadMessage, Field: field, Error: field + ": unknown field"}
	case strings.Contains(err.Error(), "base64"):
		return &errorFrame{Code: codeBadMessage, Field: "payload", Error: "payload: not standard base64: " + err.Error()}
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return &errorFrame{Code: codeBadJSON, Error: "empty or truncated JSON"}
	default:
		return &errorFrame{Code: codeBadJSON, Error: err.Error()}
	}
}

// refusal turns an error of the Dispatcher into an error frame: the code
// is scheduler.Refusal's, or internal for an error that is no refusal.
func (s *server) refusal(err error, m scheduler.Envelope) *errorFrame {
	f := &errorFrame{Code: scheduler.Refusal(err), Error: err.Error(), JobID: m.JobID, RequestID: m.RequestID, InReplyTo: string(m.Type)}
	var me *scheduler.MessageError
	if errors.As(err, &me) {
		f.Field = me.Field
	}
	if f.Code == "" {
		s.log.Warn("dispatcher: message failed", "type", m.Type, "job_id", m.JobID, "request_id", m.RequestID, "err", err)
		f.Code, f.Error = codeInternal, "internal error; the dispatcher's log has the cause"
	}
	return f
}

func (c *wsConn) refuse(f *errorFrame, inReplyTo string) {
	f.Type = typeError
	if f.InReplyTo == "" {
		f.InReplyTo = inReplyTo
	}
	c.sendJSON(f)
}

// connCtx is the context of a connection's calls into the Dispatcher: it
// outlives the HTTP request so that the detach at the end still runs.
func connCtx() (context.Context, context.CancelFunc) {
	return context.WithCancel(context.Background())
}

// serveNode serves /ws/node: the first message registers the node; job
// events follow, each for a job assigned to this node.
func (s *server) serveNode(w http.ResponseWriter, r *http.Request) {
	allowed, ok := s.nodeAuth(r)
	c := s.accept(w, r, ok)
	if c == nil {
		return
	}
	defer s.release(c)
	ctx, cancel := connCtx()
	defer cancel()
	work := newShards(s.cfg.Workers, 64)
	nodeID := ""
	defer func() {
		work.stop()
		if nodeID != "" {
			s.disown("node/"+nodeID, c)
			if err := s.d.DetachNode(ctx, nodeID, c); err != nil {
				s.log.Warn("dispatcher: detach node", "node_id", nodeID, "err", err)
			}
			s.log.Info("dispatcher: node disconnected", "node_id", nodeID)
		}
	}()
	s.readLoop(c, func(m inbound) {
		switch m.Type {
		case typeRegister:
			info := scheduler.NodeInfo{NodeID: m.NodeID, Pools: m.Pools, Models: m.Models, Capacity: m.Capacity, Status: m.Status, Jobs: m.Jobs}
			if info.Jobs == nil && nodeID == "" {
				// A new connection's register lists the jobs the node still
				// runs; none listed, it runs none: the jobs it had
				// acknowledged were lost with its old connection.
				info.Jobs = []string{}
			}
			if nodeID != "" && m.NodeID != nodeID {
				c.refuse(&errorFrame{Code: codeBadMessage, Field: "node_id", Error: fmt.Sprintf("node_id: this connection is node %q; open another connection for %q", nodeID, m.NodeID)}, typeRegister)
				return
			}
			if allowed != nil && !slices.Contains(allowed, m.NodeID) {
				s.log.Warn("dispatcher: node id refused for its credential", "node_id", m.NodeID, "remote", r.RemoteAddr)
				c.refuse(&errorFrame{Code: codeForbiddenNode, Field: "node_id", Error: fmt.Sprintf("node_id: the credential presented may not register node %q", m.NodeID)}, typeRegister)
				return
			}
			if err := s.d.AttachNode(ctx, info, c); err != nil {
				c.refuse(s.refusal(err, m.Envelope), typeRegister)
				return
			}
			nodeID = m.NodeID
			s.own("node/"+nodeID, c)
			capacity := m.Capacity
			if capacity == 0 {
				capacity = s.d.Config().Dispatch.DefaultCapacity
			}
			s.log.Info("dispatcher: node registered", "node_id", nodeID, "pools", m.Pools, "models", m.Models, "capacity", capacity)
			c.sendJSON(map[string]string{"type": typeRegistered, "node_id": nodeID, "instance_id": s.d.InstanceID()})
		case scheduler.TypeJobAck, scheduler.TypeJobStarted, scheduler.TypeASRPartial, scheduler.TypeJobResult, scheduler.TypeModelNotAvailable:
			if nodeID == "" {
				c.refuse(&errorFrame{Code: codeNotRegistered, Field: "type", Error: "send register before job events", JobID: m.JobID}, string(m.Type))
				return
			}
			if m.Pools != nil || m.Models != nil || m.Capacity != 0 || m.Status != "" || m.Jobs != nil {
				c.refuse(&errorFrame{Code: codeBadMessage, Field: "pools", Error: "pools, models, capacity, status and jobs belong to register", JobID: m.JobID}, string(m.Type))
				return
			}
			env := m.Envelope
			work.run(env.JobID, func() {
				if err := s.d.NodeEvent(ctx, nodeID, env); err != nil {
					c.refuse(s.refusal(err, env), string(env.Type))
				}
			})
		default:
			s.unknown(c, m, "register, job_ack, job_started, asr_partial, job_result, model_not_available, ping")
		}
	})
}

// serveSession serves /ws/session?session_id=ID: job_request messages,
// answered with job_result or job_failed, one per request.
func (s *server) serveSession(w http.ResponseWriter, r *http.Request) {
	sessionID := r.URL.Query().Get("session_id")
	if err := scheduler.CheckID("session_id", sessionID); err != nil {
		httpError(w, http.StatusBadRequest, "query parameter "+err.Error())
		return
	}
	c := s.accept(w, r, authorized(r, s.sessTok))
	if c == nil {
		return
	}
	defer s.release(c)
	ctx, cancel := connCtx()
	defer cancel()
	if err := s.d.AttachSession(ctx, sessionID, c); err != nil {
		c.refuse(s.refusal(err, scheduler.Envelope{SessionID: sessionID}), "")
		return
	}
	s.own("session/"+sessionID, c)
	work := newShards(s.cfg.Workers, 64)
	defer func() {
		work.stop()
		s.disown("session/"+sessionID, c)
		if err := s.d.DetachSession(ctx, sessionID, c); err != nil {
			s.log.Warn("dispatcher: detach session", "session_id", sessionID, "err", err)
		}
	}()
	s.readLoop(c, func(m inbound) {
		if m.Type != typeRequest {
			s.unknown(c, m, "job_request, ping")
			return
		}
		if m.Pools != nil || m.Models != nil || m.Capacity != 0 || m.Status != "" || m.Jobs != nil {
			c.refuse(&errorFrame{Code: codeBadMessage, Field: "pools", Error: "pools, models, capacity, status and jobs belong to a node's register", RequestID: m.RequestID}, typeRequest)
			return
		}
		if m.JobID != "" || m.Attempt != 0 || m.NodeID != "" || m.Error != "" || (m.SessionID != "" && m.SessionID != sessionID) {
			c.refuse(&errorFrame{Code: codeBadMessage, Field: "job_id", Error: "a job_request carries request_id, turn_id, pool, model, reason and payload only", RequestID: m.RequestID}, typeRequest)
			return
		}
		req := scheduler.Request{RequestID: m.RequestID, TurnID: m.TurnID, Pool: m.Pool, Model: m.Model, Reason: m.Reason, Payload: m.Payload}
		if err := scheduler.CheckRequest(req); err != nil {
			c.refuse(s.refusal(err, m.Envelope), typeRequest)
			return
		}
		// A turn's requests are submitted in order: its first job has its
		// node before the next one selects.
		key := req.TurnID
		if key == "" {
			key = req.RequestID
		}
		work.run(key, func() {
			if _, err := s.d.Submit(ctx, sessionID, req); err != nil {
				c.refuse(s.refusal(err, m.Envelope), typeRequest)
			}
		})
	})
}

func (s *server) unknown(c *wsConn, m inbound, want string) {
	if m.Type == "" {
		c.refuse(&errorFrame{Code: codeBadMessage, Field: "type", Error: "type: required (" + want + ")"}, "")
		return
	}
	c.refuse(&errorFrame{Code: codeBadMessage, Field: "type", Error: fmt.Sprintf("type: unknown type %q (%s)", m.Type, want)}, string(m.Type))
}

// readLoop reads a connection's messages until it closes: frames too
// large or that do not decode get an error frame, pings a pong, and every
// other message goes to handle.
func (s *server) readLoop(c *wsConn, handle func(inbound)) {
	ctx := context.Background()
	for {
		b, tooBig, err := readFrame(ctx, c.ws, s.cfg.MaxFrameBytes)
		if err != nil {
			return
		}
		if tooBig {
			c.refuse(&errorFrame{Code: codeFrameTooLarge, Error: fmt.Sprintf("message larger than max_frame_bytes (%d); dropped", s.cfg.MaxFrameBytes)}, "")
			continue
		}
		var m inbound
		if f := decode(b, &m); f != nil {
			c.refuse(f, "")
			continue
		}
		if m.Type == typePing {
			c.sendJSON(map[string]string{"type": typePong})
			continue
		}
		handle(m)
	}
}
