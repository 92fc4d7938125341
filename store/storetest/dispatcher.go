package storetest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
)

// DispatcherHarness gives [TestDispatcher] stores over one backend.
type DispatcherHarness struct {
	// Stores returns stores over the harness's backend; every call of one
	// harness shares the backend, so Dispatchers built on them form one
	// plane.
	Stores func() scheduler.Stores
	// Poison appends raw fields to an instance's inbox (optional): the
	// soak uses it to check that malformed messages reach the DLQ.
	Poison func(instanceID string, fields scheduler.Fields) error
	// SoakJobs is the size of the soak. Default 10000.
	SoakJobs int
}

// TestDispatcher runs [scheduler.Dispatcher] end to end over the harness's
// stores: two instances, nodes on one and sessions on the other, turns,
// node and instance failures, duplicate requests, model_not_available, and
// a soak with random faults checked against the plane's invariants.
func TestDispatcher(t *testing.T, newHarness func(t *testing.T) DispatcherHarness) {
	for _, c := range dispatchCases {
		t.Run(c.name, func(t *testing.T) { c.run(t, newHarness(t)) })
	}
}

// TestDispatcherSynctest is [TestDispatcher] with every case run inside a
// testing/synctest bubble: time is fake, so the suite's deadlines, leases
// and waits pass at once and never depend on the machine's speed. It is
// for stores whose goroutines and timers all live in the test, such as
// [scheduler.NewMemStores]; newHarness is called inside the bubble.
func TestDispatcherSynctest(t *testing.T, newHarness func(t *testing.T) DispatcherHarness) {
	for _, c := range dispatchCases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { c.run(t, newHarness(t)) })
		})
	}
}

// dispatchCases are the cases of [TestDispatcher].
var dispatchCases = []struct {
	name string
	run  func(t *testing.T, h DispatcherHarness)
}{
	{"TwoInstancesTurns", testDispatchTurns},
	{"NodeDetachedMidJob", testDispatchNodeDetached},
	{"InstanceDies", testDispatchInstanceDies},
	{"SessionMovesAfterCrash", testDispatchSessionMoves},
	{"DuplicateRequests", testDispatchDuplicates},
	{"ModelNotAvailable", testDispatchModelNotAvailable},
	{"TurnNodeTriedIsLeft", testDispatchTurnNodeTried},
	{"NoNode", testDispatchNoNode},
	{"LongJobKeepsLease", testDispatchLongJob},
	{"BadNodeEvents", testDispatchBadEvents},
	{"TurnJobsAtOnce", testDispatchTurnAtOnce},
	{"TurnAcrossInstances", testDispatchTurnAcrossInstances},
	{"AckTimeout", testDispatchAckTimeout},
	{"RunTimeout", testDispatchRunTimeout},
	{"RunTimeoutBeforeLease", testDispatchRunTimeoutBeforeLease},
	{"RunTimeoutAcrossInstances", testDispatchRunTimeoutAcross},
	{"NodeMovesMidJob", testDispatchNodeMoves},
	{"UndeliverableCostsNoAttempt", testDispatchUndeliverable},
	{"OutdatedAssignsDropped", testDispatchOutdatedAssigns},
	{"TwoChoices", testDispatchTwoChoices},
	{"EndLeftByCrash", testDispatchEndLeftByCrash},
	{"ForgottenJobsAfterCrash", testDispatchForgottenAfterCrash},
	{"ForgottenJobsSameInstance", testDispatchForgottenSameInstance},
	{"RestartWithSameID", testDispatchRestartSameID},
	{"NodesGoingAwaySpendNoAttempts", testDispatchNodesGoingAway},
	{"QueueTimeoutSpansRequeues", testDispatchQueueTimeoutSpansRequeues},
	{"Overload", testDispatchOverload},
	{"Soak", testDispatchSoak},
}

// DispatchTestConfig is the configuration of the suite's instances: short
// deadlines, so failures are noticed in well under a second, and queues
// that refuse nothing (the soak offers its 10,000 jobs at once; the
// overload case sets its own bound).
func DispatchTestConfig(instanceID string) scheduler.Config {
	ms := time.Millisecond
	return scheduler.Config{
		InstanceID: instanceID,
		OwnerTTL:   time.Second,
		Inbox:      scheduler.InboxConfig{Block: 50 * ms, ClaimMinIdle: 500 * ms, MaxDeliveries: 5, DeadMinIdle: 200 * ms, ScanInterval: 200 * ms},
		Fleet:      scheduler.FleetConfig{PresenceTTL: time.Second, RefreshInterval: 100 * ms, RemoveStaleAfter: 10 * time.Minute},
		Storm:      scheduler.StormWindows{Debounce: 100 * ms, Cooldown: 5 * time.Second, ActionsPerSecond: 100},
		Dispatch: scheduler.DispatchConfig{
			AckTimeout: time.Second, RunTimeout: 8 * time.Second, Lease: 600 * ms, QueueTimeout: 4 * time.Second,
			RetryInterval: 50 * ms, SweepInterval: 50 * ms, MaxAttempts: 3, DefaultCapacity: 8,
			RequestTimeout: 30 * time.Second, QueueLimit: scheduler.MaxQueueLimit,
		},
	}
}

// TestPlane is a set of Dispatchers over one backend, for tests.
type TestPlane struct {
	t       testing.TB
	h       DispatcherHarness
	mu      sync.Mutex
	cancels map[string]context.CancelFunc
	dones   map[string]chan error
	ds      map[string]*scheduler.Dispatcher
}

// NewTestPlane returns an empty plane over h.
func NewTestPlane(t testing.TB, h DispatcherHarness) *TestPlane {
	p := &TestPlane{t: t, h: h, cancels: map[string]context.CancelFunc{}, dones: map[string]chan error{}, ds: map[string]*scheduler.Dispatcher{}}
	t.Cleanup(p.StopAll)
	return p
}

// noCleanup hides the clean-up a stopping Dispatcher does (withdrawing its
// presence, taking its nodes offline), so that stopping it looks like a
// crash to the others.
type noCleanupPresence struct{ scheduler.Presence }

func (noCleanupPresence) Withdraw(context.Context, string) error { return nil }

type noCleanupSnapshots struct{ scheduler.NodeSnapshots }

func (noCleanupSnapshots) Offline(context.Context, string, string) error { return nil }

// Start starts instance id with cfg (nil: [DispatchTestConfig]); crashy
// instances skip their clean-up when stopped.
func (p *TestPlane) Start(id string, crashy bool, mutate func(*scheduler.Config)) *scheduler.Dispatcher {
	p.t.Helper()
	st := p.h.Stores()
	if crashy {
		st.Presence = noCleanupPresence{st.Presence}
		st.Snapshots = noCleanupSnapshots{st.Snapshots}
	}
	cfg := DispatchTestConfig(id)
	if mutate != nil {
		mutate(&cfg)
	}
	d, err := scheduler.NewDispatcher(st, cfg)
	if err != nil {
		p.t.Fatalf("NewDispatcher(%s): %v", id, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	p.mu.Lock()
	p.cancels[id], p.dones[id], p.ds[id] = cancel, done, d
	p.mu.Unlock()
	return d
}

// Stop stops instance id and waits for its Run to return.
func (p *TestPlane) Stop(id string) {
	p.mu.Lock()
	cancel, done := p.cancels[id], p.dones[id]
	delete(p.cancels, id)
	p.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			p.t.Errorf("Run(%s) = %v, want nil after a stop", id, err)
		}
	case <-time.After(10 * time.Second):
		p.t.Errorf("Run(%s) did not return within 10s of its stop", id)
	}
}

// StopAll stops every instance still running.
func (p *TestPlane) StopAll() {
	p.mu.Lock()
	var ids []string
	for id := range p.cancels {
		ids = append(ids, id)
	}
	p.mu.Unlock()
	for _, id := range ids {
		p.Stop(id)
	}
}

// NodeAction is what a [TestNode] does with a job.
type NodeAction int

// The actions of a [TestNode].
const (
	Answer            NodeAction = iota // job_ack, job_started, job_result
	Hold                                // job_ack, job_started; the result waits for Release
	Silent                              // nothing at all
	NotAvailable                        // model_not_available
	AnswerWithPartial                   // asr_partial instead of job_started, then the result
)

// TestNode is a node for tests: it answers the jobs it is sent at once,
// or as its Decide function says.
type TestNode struct {
	ID     string
	Info   scheduler.NodeInfo
	Decide func(m scheduler.Envelope) NodeAction // nil: Answer

	d      atomic.Pointer[scheduler.Dispatcher]
	mu     sync.Mutex
	ran    map[string][]int // job -> attempts received
	held   []scheduler.Envelope
	cancel []scheduler.Envelope
	errs   []error
	wg     sync.WaitGroup
}

// NewTestNode returns a node with info (its NodeID must be set).
func NewTestNode(info scheduler.NodeInfo) *TestNode {
	return &TestNode{ID: info.NodeID, Info: info, ran: map[string][]int{}}
}

// SetDecide replaces the node's Decide function; unlike an assignment to
// the field, it is safe while the node is attached.
func (n *TestNode) SetDecide(f func(m scheduler.Envelope) NodeAction) {
	n.mu.Lock()
	n.Decide = f
	n.mu.Unlock()
}

// Attach attaches the node to d (a reconnect when it was attached elsewhere).
func (n *TestNode) Attach(t testing.TB, d *scheduler.Dispatcher) {
	t.Helper()
	n.d.Store(d)
	if err := d.AttachNode(context.Background(), n.Info, n); err != nil {
		t.Fatalf("AttachNode(%s): %v", n.ID, err)
	}
}

// Reattach attaches the node to d saying that it runs only jobs (a
// reconnect after which the node lost the others).
func (n *TestNode) Reattach(t testing.TB, d *scheduler.Dispatcher, jobs ...string) {
	t.Helper()
	info := n.Info
	info.Jobs = append([]string{}, jobs...)
	n.d.Store(d)
	if err := d.AttachNode(context.Background(), info, n); err != nil {
		t.Fatalf("AttachNode(%s): %v", n.ID, err)
	}
}

// Forget drops the held jobs but those of keep, as a node that lost them
// with its connection.
func (n *TestNode) Forget(keep ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	var held []scheduler.Envelope
	for _, m := range n.held {
		for _, k := range keep {
			if m.JobID == k {
				held = append(held, m)
			}
		}
	}
	n.held = held
}

// Detach detaches the node from its instance.
func (n *TestNode) Detach(t testing.TB) {
	t.Helper()
	d := n.d.Swap(nil)
	if d == nil {
		return
	}
	if err := d.DetachNode(context.Background(), n.ID, n); err != nil {
		t.Errorf("DetachNode(%s): %v", n.ID, err)
	}
}

// Send implements [scheduler.NodeConn].
func (n *TestNode) Send(ctx context.Context, m scheduler.Envelope) error {
	if m.NodeID != n.ID {
		return fmt.Errorf("node %s got a message for %s", n.ID, m.NodeID)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if m.Type == scheduler.TypeJobCancel {
		n.cancel = append(n.cancel, m)
		return nil
	}
	n.ran[m.JobID] = append(n.ran[m.JobID], m.Attempt)
	act := Answer
	if n.Decide != nil {
		act = n.Decide(m)
	}
	switch act {
	case Silent:
		return nil
	case Hold:
		n.held = append(n.held, m)
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		n.act(m, act)
	}()
	return nil
}

func (n *TestNode) event(m scheduler.Envelope, t scheduler.MessageType, payload []byte) error {
	d := n.d.Load()
	if d == nil {
		return errors.New("detached")
	}
	return d.NodeEvent(context.Background(), n.ID, scheduler.Envelope{Type: t, JobID: m.JobID, Attempt: m.Attempt, Model: m.Model, Payload: payload})
}

func (n *TestNode) act(m scheduler.Envelope, act NodeAction) {
	var err error
	switch act {
	case NotAvailable:
		err = n.event(m, scheduler.TypeModelNotAvailable, nil)
	case Answer, Hold, AnswerWithPartial:
		if err = n.event(m, scheduler.TypeJobAck, nil); err == nil {
			if act == AnswerWithPartial {
				err = n.event(m, scheduler.TypeASRPartial, []byte("partial"))
			} else {
				err = n.event(m, scheduler.TypeJobStarted, nil)
			}
		}
		if err == nil && act != Hold {
			err = n.event(m, scheduler.TypeJobResult, ResultOf(m.Payload))
		}
	}
	if err != nil {
		n.mu.Lock()
		n.errs = append(n.errs, fmt.Errorf("%s attempt %d: %w", m.JobID, m.Attempt, err))
		n.mu.Unlock()
	}
}

// ResultOf is what a [TestNode] answers for a payload.
func ResultOf(payload []byte) []byte { return append([]byte("done:"), payload...) }

// ReleaseHeld sends the results of the held jobs through the node's
// current instance and returns the errors of each.
func (n *TestNode) ReleaseHeld() map[string]error {
	n.mu.Lock()
	held := n.held
	n.held = nil
	n.mu.Unlock()
	out := map[string]error{}
	for _, m := range held {
		out[m.JobID] = n.event(m, scheduler.TypeJobResult, ResultOf(m.Payload))
	}
	return out
}

// Ran returns the attempts the node received per job.
func (n *TestNode) Ran() map[string][]int {
	n.mu.Lock()
	defer n.mu.Unlock()
	out := make(map[string][]int, len(n.ran))
	for k, v := range n.ran {
		out[k] = append([]int(nil), v...)
	}
	return out
}

// Held returns how many jobs the node holds.
func (n *TestNode) Held() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.held)
}

// Errors returns the errors its events got back, and waits for its
// goroutines first.
func (n *TestNode) Errors() []error {
	n.wg.Wait()
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]error(nil), n.errs...)
}

// TestSession is a session for tests: it records every answer.
type TestSession struct {
	ID string
	d  atomic.Pointer[scheduler.Dispatcher]

	mu      sync.Mutex
	answers map[string][]scheduler.Envelope // request id -> answers
	byJob   map[string]string               // job id -> request id
}

// NewTestSession returns a session.
func NewTestSession(id string) *TestSession {
	return &TestSession{ID: id, answers: map[string][]scheduler.Envelope{}, byJob: map[string]string{}}
}

// Attach attaches the session to d.
func (s *TestSession) Attach(t testing.TB, d *scheduler.Dispatcher) {
	t.Helper()
	s.d.Store(d)
	if err := d.AttachSession(context.Background(), s.ID, s); err != nil {
		t.Fatalf("AttachSession(%s): %v", s.ID, err)
	}
}

// Send implements [scheduler.SessionConn].
func (s *TestSession) Send(ctx context.Context, m scheduler.Envelope) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	req := m.RequestID
	if req == "" {
		req = s.byJob[m.JobID]
	}
	s.answers[req] = append(s.answers[req], m)
	return nil
}

// Submit submits a request through the session's instance.
func (s *TestSession) Submit(t testing.TB, r scheduler.Request) string {
	t.Helper()
	s.mu.Lock()
	s.byJob[scheduler.JobIDFor(r.RequestID)] = r.RequestID
	s.mu.Unlock()
	id, err := s.d.Load().Submit(context.Background(), s.ID, r)
	if err != nil {
		t.Errorf("Submit(%s, %s): %v", s.ID, r.RequestID, err)
	}
	return id
}

// Answers returns the answers per request id.
func (s *TestSession) Answers() map[string][]scheduler.Envelope {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string][]scheduler.Envelope, len(s.answers))
	for k, v := range s.answers {
		out[k] = append([]scheduler.Envelope(nil), v...)
	}
	return out
}

// WaitAnswers waits until every request of reqs has an answer.
func (s *TestSession) WaitAnswers(t testing.TB, reqs []string, within time.Duration) map[string][]scheduler.Envelope {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		a := s.Answers()
		missing := 0
		for _, r := range reqs {
			if len(a[r]) == 0 {
				missing++
			}
		}
		if missing == 0 {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: %d of %d requests unanswered after %v", s.ID, missing, len(reqs), within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Eventually polls cond every 10ms until it holds or within passes.
func Eventually(t testing.TB, what string, within time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// eventuallyNone waits until left returns "", what is still not so, and
// fails the test with its last answer after within.
func eventuallyNone(t testing.TB, what string, within time.Duration, left func() string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		l := left()
		if l == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %s", what, within, l)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// firstOf returns the first n of s, for a message.
func firstOf(s []string, n int) []string { return s[:min(n, len(s))] }

// waitFleet waits until d sees every node of ids online.
func waitFleet(t testing.TB, d *scheduler.Dispatcher, ids ...string) {
	t.Helper()
	Eventually(t, "fleet view of "+d.InstanceID(), 10*time.Second, func() bool {
		online := map[string]bool{}
		for _, s := range d.Fleet() {
			online[s.NodeID] = s.Online
		}
		for _, id := range ids {
			if !online[id] {
				return false
			}
		}
		return true
	})
}

// checkAnsweredOnce checks that each request got exactly one answer, a
// result of its payload.
func checkAnsweredOnce(t testing.TB, s *TestSession, payloads map[string]string) {
	t.Helper()
	a := s.Answers()
	for req, p := range payloads {
		got := a[req]
		switch {
		case len(got) != 1:
			t.Errorf("session %s request %s: %d answers, want 1: %+v", s.ID, req, len(got), got)
		case got[0].Type != scheduler.TypeJobResult || string(got[0].Payload) != string(ResultOf([]byte(p))):
			t.Errorf("session %s request %s: answer %s %q (%s), want job_result %q", s.ID, req, got[0].Type, got[0].Payload, got[0].Error, ResultOf([]byte(p)))
		}
	}
}

// checkQuiet checks the plane's resting invariants over st: every job of
// reqs RELEASED or FAILED, no reservation left on the nodes, every
// instance's inbox without pending entries and no deadline left.
func checkQuiet(t testing.TB, st scheduler.Stores, reqs []string, nodes []string, instances []string) {
	t.Helper()
	ctx := context.Background()
	// The bound is slack for a loaded machine under -race (the sweeps
	// that release the last jobs run late there); the property is that
	// the plane comes to rest at all.
	eventuallyNone(t, "plane at rest", 60*time.Second, func() string {
		var left []string
		for _, n := range nodes {
			if c, err := st.Reservations.Jobs(ctx, n); err != nil {
				left = append(left, fmt.Sprintf("reservations of %s: %v", n, err))
			} else if len(c) != 0 {
				left = append(left, fmt.Sprintf("node %s reserved by %d job(s) %v", n, len(c), firstOf(c, 3)))
			}
		}
		for _, id := range instances {
			if p, err := st.Inbox(id).Pending(ctx); err != nil && !errors.Is(err, scheduler.ErrNoGroup) {
				left = append(left, fmt.Sprintf("pending of %s: %v", id, err))
			} else if p != 0 {
				left = append(left, fmt.Sprintf("inbox of %s: %d pending", id, p))
			}
		}
		if due, ok := st.Due.(DueProbe); ok {
			var open []string
			for _, r := range reqs {
				if _, ok, err := due.Due(ctx, scheduler.JobIDFor(r)); err != nil {
					left = append(left, fmt.Sprintf("deadline of %s: %v", r, err))
					break
				} else if ok {
					open = append(open, scheduler.JobIDFor(r))
				}
			}
			if len(open) > 0 {
				states := map[string]int{}
				for _, id := range firstOf(open, 50) {
					if rec, err := st.Jobs.Job(ctx, id); err != nil {
						states[err.Error()]++
					} else {
						states[string(rec.State)]++
					}
				}
				left = append(left, fmt.Sprintf("%d job(s) with a deadline %v, the first 50 in states %v", len(open), firstOf(open, 3), states))
			}
		}
		return strings.Join(left, "; ")
	})
	for _, r := range reqs {
		rec, err := st.Jobs.Job(ctx, scheduler.JobIDFor(r))
		if err != nil {
			t.Errorf("request %s: job: %v", r, err)
			continue
		}
		if rec.State != fsm.Released && rec.State != fsm.Failed {
			t.Errorf("request %s: job %s in %s, want RELEASED or FAILED", r, rec.ID, rec.State)
		}
	}
}

func testDispatchTurns(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	b := p.Start("inst-b", false, nil)
	var nodes []*TestNode
	for i := range 3 {
		n := NewTestNode(scheduler.NodeInfo{NodeID: fmt.Sprintf("n%d", i), Pools: []string{"zh-en"}, Capacity: 8})
		n.Attach(t, a)
		nodes = append(nodes, n)
	}
	waitFleet(t, b, "n0", "n1", "n2")
	s := NewTestSession("s1")
	s.Attach(t, b)
	payloads := map[string]string{}
	var reqs []string
	turnOf := map[string]string{}
	const turns, perTurn = 6, 4
	for tu := range turns {
		turn := fmt.Sprintf("t%d", tu)
		for j := range perTurn {
			reason := string("max_duration")
			if j == perTurn-1 {
				reason = []string{"manual", "timeout"}[tu%2]
			}
			req := fmt.Sprintf("r-%d-%d", tu, j)
			payloads[req] = req
			reqs = append(reqs, req)
			turnOf[scheduler.JobIDFor(req)] = turn
			s.Submit(t, scheduler.Request{RequestID: req, TurnID: turn, Pool: "zh-en", Reason: reason, Payload: []byte(req)})
		}
		s.WaitAnswers(t, reqs, 10*time.Second)
		// The turn ended with a manual or timeout finalize: its affinity is gone.
		if aff, err := h.Stores().Turns.TurnAffinity(context.Background(), turn); err != nil || aff != "" {
			t.Errorf("turn %s after its finalize: affinity %q, %v; want none", turn, aff, err)
		}
	}
	checkAnsweredOnce(t, s, payloads)
	// Each turn's jobs ran on one node.
	checkTurnsOnOneNode(t, nodes, turnOf)
	for _, n := range nodes {
		if errs := n.Errors(); len(errs) > 0 {
			t.Errorf("node %s: events refused: %v", n.ID, errs)
		}
	}
	checkQuiet(t, h.Stores(), reqs, []string{"n0", "n1", "n2"}, []string{"inst-a", "inst-b"})
}

func testDispatchNodeDetached(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	b := p.Start("inst-b", false, nil)
	n1 := NewTestNode(scheduler.NodeInfo{NodeID: "n1", Capacity: 8})
	n1.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n1.Attach(t, a)
	waitFleet(t, b, "n1")
	s := NewTestSession("s1")
	s.Attach(t, b)
	var reqs []string
	payloads := map[string]string{}
	for i := range 4 {
		r := fmt.Sprintf("r%d", i)
		reqs, payloads[r] = append(reqs, r), r
		s.Submit(t, scheduler.Request{RequestID: r, Payload: []byte(r)})
	}
	Eventually(t, "n1 holds all 4 jobs", 10*time.Second, func() bool { return n1.Held() == 4 })
	n2 := NewTestNode(scheduler.NodeInfo{NodeID: "n2", Capacity: 8})
	n2.Attach(t, a)
	waitFleet(t, b, "n2")
	// n1 goes away mid-job: its jobs go to n2 at once, as attempt 2.
	start := time.Now()
	d := n1.d.Load()
	n1.Detach(t)
	s.WaitAnswers(t, reqs, 5*time.Second)
	if el := time.Since(start); el > 900*time.Millisecond {
		t.Errorf("failover after the detach took %v, want well under the ack timeout (1s)", el)
	}
	checkAnsweredOnce(t, s, payloads)
	for job, attempts := range n2.Ran() {
		if len(attempts) != 1 || attempts[0] != 2 {
			t.Errorf("n2 ran %s with attempts %v, want [2]", job, attempts)
		}
	}
	// n1's late results of attempt 1 are refused and change nothing.
	n1.d.Store(d)
	for job, err := range n1.ReleaseHeld() {
		var te *fsm.TransitionError
		if !errors.As(err, &te) || !errors.Is(err, fsm.ErrStaleAttempt) {
			t.Errorf("late result of %s on n1: %v, want a stale attempt", job, err)
		}
	}
	checkAnsweredOnce(t, s, payloads)
	checkQuiet(t, h.Stores(), reqs, []string{"n1", "n2"}, []string{"inst-a", "inst-b"})
}

func testDispatchInstanceDies(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", true, nil)
	b := p.Start("inst-b", false, nil)
	n1 := NewTestNode(scheduler.NodeInfo{NodeID: "n1", Capacity: 16})
	n1.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n1.Attach(t, a)
	waitFleet(t, b, "n1")
	s := NewTestSession("s1")
	s.Attach(t, b)
	var reqs []string
	payloads := map[string]string{}
	submit := func(n int) {
		for range n {
			r := fmt.Sprintf("r%d", len(reqs))
			reqs, payloads[r] = append(reqs, r), r
			s.Submit(t, scheduler.Request{RequestID: r, Payload: []byte(r)})
		}
	}
	submit(3)
	Eventually(t, "n1 holds 3 jobs", 10*time.Second, func() bool { return n1.Held() == 3 })
	// A dies without any clean-up, its node still bound to it.
	p.Stop("inst-a")
	// Messages keep going to A's inbox while its presence lasts.
	n1.SetDecide(nil)
	submit(3)
	// The node notices and reconnects to B, then sends its results there.
	n1.Attach(t, b)
	for job, err := range n1.ReleaseHeld() {
		if err != nil {
			t.Errorf("result of %s through B after the reconnect: %v", job, err)
		}
	}
	s.WaitAnswers(t, reqs, 15*time.Second)
	checkAnsweredOnce(t, s, payloads)
	// B adopted A's inbox: nothing is left in it.
	ctx := context.Background()
	Eventually(t, "A's inbox drained", 10*time.Second, func() bool {
		n, err := h.Stores().Inbox("inst-a").Len(ctx)
		return err == nil && n == 0
	})
	checkQuiet(t, h.Stores(), reqs, []string{"n1"}, []string{"inst-a", "inst-b"})
}

// testDispatchSessionMoves: the instance of a session dies, its presence
// still alive for a minute; the session sends its request again through
// another instance, and the answer of the job, finished on a third, reaches
// it there at once, not once the dead instance's inbox is adopted.
func testDispatchSessionMoves(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", true, func(c *scheduler.Config) { c.OwnerTTL = time.Minute })
	b := p.Start("inst-b", false, nil)
	c := p.Start("inst-c", false, nil)
	n1 := NewTestNode(scheduler.NodeInfo{NodeID: "n1", Capacity: 4})
	n1.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n1.Attach(t, c)
	waitFleet(t, a, "n1")
	s := NewTestSession("s1")
	s.Attach(t, a)
	req := scheduler.Request{RequestID: "r0", Payload: []byte("r0")}
	s.Submit(t, req)
	Eventually(t, "n1 holds the job", 10*time.Second, func() bool { return n1.Held() == 1 })
	p.Stop("inst-a")
	s.Attach(t, b)
	s.Submit(t, req)
	for job, err := range n1.ReleaseHeld() {
		if err != nil {
			t.Errorf("result of %s: %v", job, err)
		}
	}
	s.WaitAnswers(t, []string{"r0"}, 5*time.Second)
	checkAnsweredOnce(t, s, map[string]string{"r0": "r0"})
}

func testDispatchDuplicates(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	// 200 submits at once on a loaded machine: an ack later than the
	// suite's 1s would fail the attempt over (a second run of the job that
	// is not a duplicate); this case checks duplicates alone.
	patient := func(c *scheduler.Config) { c.Dispatch.AckTimeout = 5 * time.Second }
	a := p.Start("inst-a", false, patient)
	b := p.Start("inst-b", false, patient)
	n := NewTestNode(scheduler.NodeInfo{NodeID: "n1", Capacity: 64})
	n.Attach(t, a)
	waitFleet(t, b, "n1")
	s1, s2 := NewTestSession("s1"), NewTestSession("s2")
	s1.Attach(t, a)
	s2.Attach(t, b)
	payloads := map[string]string{}
	var reqs []string
	var wg sync.WaitGroup
	for i := range 50 {
		r := fmt.Sprintf("dup-%d", i)
		payloads[r] = r
		reqs = append(reqs, r)
		for _, s := range []*TestSession{s1, s2, s1, s2} {
			wg.Go(func() { s.Submit(t, scheduler.Request{RequestID: r, Payload: []byte(r)}) })
		}
	}
	wg.Wait()
	s1.WaitAnswers(t, reqs, 10*time.Second)
	s2.WaitAnswers(t, reqs, 10*time.Second)
	checkAnsweredOnce(t, s1, payloads)
	checkAnsweredOnce(t, s2, payloads)
	for job, att := range n.Ran() {
		if len(att) != 1 {
			t.Errorf("job %s ran %d times (%v), want once", job, len(att), att)
		}
	}
	if got := len(n.Ran()); got != len(reqs) {
		t.Errorf("node ran %d jobs, want %d: one per request id", got, len(reqs))
	}
	// A request id seen again after its job ended is answered at once.
	late := NewTestSession("s3")
	late.Attach(t, b)
	late.Submit(t, scheduler.Request{RequestID: "dup-0", Payload: []byte("dup-0")})
	checkAnsweredOnce(t, late, map[string]string{"dup-0": "dup-0"})
	checkQuiet(t, h.Stores(), reqs, []string{"n1"}, []string{"inst-a", "inst-b"})
}

func testDispatchModelNotAvailable(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	n1 := NewTestNode(scheduler.NodeInfo{NodeID: "n1", Models: []string{"m"}, Capacity: 8})
	n1.Decide = func(scheduler.Envelope) NodeAction { return NotAvailable }
	n2 := NewTestNode(scheduler.NodeInfo{NodeID: "n2", Models: []string{"m"}, Capacity: 8})
	n1.Attach(t, a)
	n2.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	payloads := map[string]string{}
	var reqs []string
	// Selection is random: ten more requests once n1 had one (it gets one
	// within the first 40 unless the random choice passes it over 40 times).
	for i, after := 0, -1; i < 40 && (after < 0 || i < after+10); i++ {
		r := fmt.Sprintf("m%d", i)
		payloads[r] = r
		reqs = append(reqs, r)
		s.Submit(t, scheduler.Request{RequestID: r, Model: "m", Payload: []byte(r)})
		s.WaitAnswers(t, reqs, 5*time.Second)
		if after < 0 && len(n1.Ran()) > 0 {
			after = i
		}
	}
	checkAnsweredOnce(t, s, payloads)
	// Once n1 said model_not_available it is marked and not selected for m.
	if got := len(n1.Ran()); got != 1 {
		t.Errorf("n1 received %d jobs of model m, want 1 (then the storm mark keeps it out)", got)
	}
	off, err := h.Stores().Storm.Unavailable(context.Background(), "n1", "m")
	if err != nil || !off {
		t.Errorf("Unavailable(n1, m) = %v, %v; want true", off, err)
	}
	checkQuiet(t, h.Stores(), reqs, []string{"n1", "n2"}, []string{"inst-a"})
}

// testDispatchTurnNodeTried: a job that fails over from its turn's node
// goes to another node, though the turn's affinity still names the first.
func testDispatchTurnNodeTried(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	n1 := NewTestNode(scheduler.NodeInfo{NodeID: "n1", Capacity: 8})
	n1.Decide = func(scheduler.Envelope) NodeAction { return NotAvailable } // no model: no storm mark
	n2 := NewTestNode(scheduler.NodeInfo{NodeID: "n2", Capacity: 8})
	n1.Attach(t, a)
	n2.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	if _, _, err := h.Stores().Turns.SetTurnAffinity(context.Background(), "s1", "turn-1", "n1"); err != nil {
		t.Fatal(err)
	}
	s.Submit(t, scheduler.Request{RequestID: "r1", TurnID: "turn-1", Payload: []byte("r1")})
	got := s.WaitAnswers(t, []string{"r1"}, 5*time.Second)["r1"]
	if len(got) != 1 || got[0].Type != scheduler.TypeJobResult || got[0].NodeID != "n2" {
		t.Errorf("answer = %+v, want one job_result from n2 (n1, the turn's node, was tried)", got)
	}
	if ran := len(n1.Ran()); ran != 1 {
		t.Errorf("n1 received the job %d times, want once", ran)
	}
	checkQuiet(t, h.Stores(), []string{"r1"}, []string{"n1", "n2"}, []string{"inst-a"})
}

func testDispatchNoNode(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, func(c *scheduler.Config) { c.Dispatch.QueueTimeout = 300 * time.Millisecond })
	s := NewTestSession("s1")
	s.Attach(t, a)
	n := NewTestNode(scheduler.NodeInfo{NodeID: "n1", Pools: []string{"en-fr"}})
	n.Attach(t, a)
	s.Submit(t, scheduler.Request{RequestID: "nope", Pool: "zh-en", Payload: []byte("x")})
	got := s.WaitAnswers(t, []string{"nope"}, 5*time.Second)["nope"]
	if len(got) != 1 || got[0].Type != scheduler.TypeJobFailed || !strings.HasPrefix(got[0].Error, scheduler.FailNoNode) {
		t.Errorf("answer to a request no node can take = %+v, want one job_failed %s", got, scheduler.FailNoNode)
	}
	if len(n.Ran()) != 0 {
		t.Errorf("a node of another pool ran %v", n.Ran())
	}
	checkQuiet(t, h.Stores(), []string{"nope"}, []string{"n1"}, []string{"inst-a"})
}

func testDispatchLongJob(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	n := NewTestNode(scheduler.NodeInfo{NodeID: "n1"})
	n.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	s.Submit(t, scheduler.Request{RequestID: "long", Payload: []byte("long")})
	Eventually(t, "n1 holds the job", 5*time.Second, func() bool { return n.Held() == 1 })
	// Five leases and more than the ack timeout pass: the lease is renewed
	// while the node holds the job, so it is not rescued.
	time.Sleep(5 * 600 * time.Millisecond)
	if att := n.Ran()[scheduler.JobIDFor("long")]; len(att) != 1 {
		t.Fatalf("the long job was sent %d times (%v), want once", len(att), att)
	}
	for job, err := range n.ReleaseHeld() {
		if err != nil {
			t.Errorf("result of %s after 3s: %v", job, err)
		}
	}
	checkAnsweredOnce(t, s, map[string]string{"long": "long"})
	checkQuiet(t, h.Stores(), []string{"long"}, []string{"n1"}, []string{"inst-a"})
}

func testDispatchBadEvents(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	n1 := NewTestNode(scheduler.NodeInfo{NodeID: "n1"})
	n1.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n1.Attach(t, a)
	n2 := NewTestNode(scheduler.NodeInfo{NodeID: "n2"})
	n2.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n2.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	job := s.Submit(t, scheduler.Request{RequestID: "r", Payload: []byte("r")})
	Eventually(t, "a node holds the job", 5*time.Second, func() bool { return n1.Held()+n2.Held() == 1 })
	owner, other := "n1", "n2"
	if n2.Held() == 1 {
		owner, other = "n2", "n1"
	}
	ctx := context.Background()
	var before scheduler.JobRecord
	Eventually(t, "the job is RUNNING", 5*time.Second, func() bool {
		var err error
		before, err = h.Stores().Jobs.Job(ctx, job)
		return err == nil && before.State == fsm.Running
	})
	tests := []struct {
		name string
		node string
		m    scheduler.Envelope
		want error
	}{
		{"result of another node's job", other, scheduler.Envelope{Type: scheduler.TypeJobResult, JobID: job, Attempt: 1}, scheduler.ErrWrongNode},
		{"future attempt", owner, scheduler.Envelope{Type: scheduler.TypeJobResult, JobID: job, Attempt: 2}, fsm.ErrFutureAttempt},
		{"unknown job", owner, scheduler.Envelope{Type: scheduler.TypeJobAck, JobID: "nope", Attempt: 1}, scheduler.ErrJobNotFound},
		{"missing job_id", owner, scheduler.Envelope{Type: scheduler.TypeJobAck, Attempt: 1}, scheduler.ErrBadMessage},
		{"attempt 0", owner, scheduler.Envelope{Type: scheduler.TypeJobAck, JobID: job}, scheduler.ErrBadMessage},
		{"not a node event", owner, scheduler.Envelope{Type: scheduler.TypeJobAssign, JobID: job, Attempt: 1}, scheduler.ErrBadMessage},
		{"unknown type", owner, scheduler.Envelope{Type: "hello", JobID: job, Attempt: 1}, scheduler.ErrBadMessage},
		{"braces in job_id", owner, scheduler.Envelope{Type: scheduler.TypeJobAck, JobID: "{x}", Attempt: 1}, scheduler.ErrBadMessage},
	}
	for _, tt := range tests {
		if err := a.NodeEvent(ctx, tt.node, tt.m); !errors.Is(err, tt.want) {
			t.Errorf("%s: NodeEvent = %v, want %v", tt.name, err, tt.want)
		}
	}
	after, err := h.Stores().Jobs.Job(ctx, job)
	if err != nil {
		t.Fatal(err)
	}
	if after.State != before.State || after.Attempt != before.Attempt || after.NodeID != before.NodeID {
		t.Errorf("bad events moved the job: %+v, was %+v", after, before)
	}
	for _, n := range []*TestNode{n1, n2} {
		n.ReleaseHeld()
	}
	checkAnsweredOnce(t, s, map[string]string{"r": "r"})
}

// testDispatchTurnAtOnce: a turn's jobs submitted at once still go to one
// node: the second selects only after the first wrote the affinity.
func testDispatchTurnAtOnce(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	var nodes []*TestNode
	for i := range 4 {
		n := NewTestNode(scheduler.NodeInfo{NodeID: fmt.Sprintf("n%d", i), Capacity: 64})
		n.Attach(t, a)
		nodes = append(nodes, n)
	}
	s := NewTestSession("s1")
	s.Attach(t, a)
	var reqs []string
	payloads := map[string]string{}
	var wg sync.WaitGroup
	for tu := range 5 {
		for j := range 8 {
			r := fmt.Sprintf("t%d-%d", tu, j)
			reqs, payloads[r] = append(reqs, r), r
			wg.Go(func() {
				s.Submit(t, scheduler.Request{RequestID: r, TurnID: fmt.Sprintf("turn-%d", tu), Reason: "max_duration", Payload: []byte(r)})
			})
		}
	}
	wg.Wait()
	s.WaitAnswers(t, reqs, 10*time.Second)
	checkAnsweredOnce(t, s, payloads)
	for tu := range 5 {
		used := map[string]bool{}
		for _, n := range nodes {
			for j := range 8 {
				if len(n.Ran()[scheduler.JobIDFor(fmt.Sprintf("t%d-%d", tu, j))]) > 0 {
					used[n.ID] = true
				}
			}
		}
		if len(used) != 1 {
			t.Errorf("turn %d's 8 concurrent jobs ran on %v, want one node", tu, used)
		}
	}
}

// testDispatchAckTimeout: a node that never acknowledges loses the job to
// another node after the ack timeout; its late ack is refused.
func testDispatchAckTimeout(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	mute := NewTestNode(scheduler.NodeInfo{NodeID: "mute"})
	mute.Decide = func(scheduler.Envelope) NodeAction { return Silent }
	mute.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	job := s.Submit(t, scheduler.Request{RequestID: "r", Payload: []byte("r")})
	Eventually(t, "mute got the job", 5*time.Second, func() bool { return len(mute.Ran()[job]) == 1 })
	ok := NewTestNode(scheduler.NodeInfo{NodeID: "ok"})
	ok.Attach(t, a)
	start := time.Now()
	s.WaitAnswers(t, []string{"r"}, 10*time.Second)
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("answer %v after the second node came, want about the ack timeout (1s)", el)
	}
	checkAnsweredOnce(t, s, map[string]string{"r": "r"})
	if got := ok.Ran()[job]; len(got) != 1 || got[0] != 2 {
		t.Errorf("second node ran attempts %v, want [2]", got)
	}
	if err := a.NodeEvent(context.Background(), "mute", scheduler.Envelope{Type: scheduler.TypeJobAck, JobID: job, Attempt: 1}); !errors.Is(err, fsm.ErrStaleAttempt) {
		t.Errorf("late ack of attempt 1: %v, want a stale attempt", err)
	}
	checkQuiet(t, h.Stores(), []string{"r"}, []string{"mute", "ok"}, []string{"inst-a"})
}

// testDispatchRunTimeout: a job held past the run timeout goes to another
// node, even though its node keeps its lease.
func testDispatchRunTimeout(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, func(c *scheduler.Config) { c.Dispatch.RunTimeout = 1500 * time.Millisecond })
	slow := NewTestNode(scheduler.NodeInfo{NodeID: "slow"})
	slow.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	slow.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	job := s.Submit(t, scheduler.Request{RequestID: "r", Payload: []byte("r")})
	Eventually(t, "slow holds the job", 5*time.Second, func() bool { return slow.Held() == 1 })
	fast := NewTestNode(scheduler.NodeInfo{NodeID: "fast"})
	fast.Attach(t, a)
	s.WaitAnswers(t, []string{"r"}, 10*time.Second)
	checkAnsweredOnce(t, s, map[string]string{"r": "r"})
	if got := fast.Ran()[job]; len(got) != 1 || got[0] != 2 {
		t.Errorf("fast node ran attempts %v, want [2]", got)
	}
	for _, err := range slow.ReleaseHeld() {
		if !errors.Is(err, fsm.ErrStaleAttempt) {
			t.Errorf("result after the run timeout: %v, want a stale attempt", err)
		}
	}
	checkQuiet(t, h.Stores(), []string{"r"}, []string{"slow", "fast"}, []string{"inst-a"})
}

// testDispatchRunTimeoutBeforeLease: the run timeout bounds an attempt
// from dispatch to result, also when it is much shorter than the lease:
// the job leaves its node within SweepInterval of it, not at the lease's
// end.
func testDispatchRunTimeoutBeforeLease(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, func(c *scheduler.Config) {
		c.Dispatch.RunTimeout = 800 * time.Millisecond
		c.Dispatch.Lease = 6 * time.Second
		c.Dispatch.AckTimeout = 6 * time.Second
	})
	slow := NewTestNode(scheduler.NodeInfo{NodeID: "slow"})
	slow.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	slow.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	start := time.Now()
	job := s.Submit(t, scheduler.Request{RequestID: "r", Payload: []byte("r")})
	Eventually(t, "slow holds the job", 5*time.Second, func() bool { return slow.Held() == 1 })
	fast := NewTestNode(scheduler.NodeInfo{NodeID: "fast"})
	fast.Attach(t, a)
	// Well before the lease (6s) would end: the run timeout (0.8s) and a
	// sweep (50ms), with room for a loaded machine.
	Eventually(t, "the job on the fast node", 4*time.Second, func() bool { return len(fast.Ran()[job]) == 1 })
	s.WaitAnswers(t, []string{"r"}, 5*time.Second)
	if took := time.Since(start); took >= 6*time.Second {
		t.Errorf("the attempt ended after %v, past the lease; want about the run timeout", took)
	}
	if got := fast.Ran()[job]; len(got) != 1 || got[0] != 2 {
		t.Errorf("fast node ran attempts %v, want [2]", got)
	}
	slow.ReleaseHeld()
	checkQuiet(t, h.Stores(), []string{"r"}, []string{"slow", "fast"}, []string{"inst-a"})
}

// testDispatchNodeMoves: a node that reconnects to another instance while
// it runs a job keeps the job: the old instance's detach of its old
// connection does not fail it over, and the result sent through the new
// instance answers the request with attempt 1.
func testDispatchNodeMoves(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	b := p.Start("inst-b", false, nil)
	st := h.Stores()
	Eventually(t, "both instances announced", 5*time.Second, func() bool {
		x, _ := st.Presence.Alive(context.Background(), "inst-a")
		y, _ := st.Presence.Alive(context.Background(), "inst-b")
		return x && y
	})
	n := NewTestNode(scheduler.NodeInfo{NodeID: "n1"})
	n.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	job := s.Submit(t, scheduler.Request{RequestID: "r", Payload: []byte("r")})
	Eventually(t, "n1 runs the job, through A", 5*time.Second, func() bool {
		rec, err := h.Stores().Jobs.Job(context.Background(), job)
		return err == nil && rec.State == fsm.Running
	})
	// The node connects to B, then A sees its old connection close.
	n.Attach(t, b)
	if err := a.DetachNode(context.Background(), n.ID, n); err != nil {
		t.Fatal(err)
	}
	// The job runs on for several leases: B renews its lease now.
	time.Sleep(4 * 600 * time.Millisecond)
	for id, err := range n.ReleaseHeld() {
		if err != nil {
			t.Errorf("result of %s through B: %v", id, err)
		}
	}
	got := s.WaitAnswers(t, []string{"r"}, 10*time.Second)
	if m := got["r"][0]; m.Type != scheduler.TypeJobResult || m.Attempt != 1 {
		t.Errorf("answer %+v, want job_result of attempt 1", m)
	}
	if ran := n.Ran()[job]; len(ran) != 1 {
		t.Errorf("the node got attempts %v of the job, want [1] (no failover)", ran)
	}
	checkQuiet(t, h.Stores(), []string{"r"}, []string{"n1"}, []string{"inst-a", "inst-b"})
}

// testDispatchUndeliverable: nodes that are gone while another instance's
// fleet view still shows them cost no attempt: a job sent to one waits for
// a node, and runs its first attempt when the nodes come back.
func testDispatchUndeliverable(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	var nodes []*TestNode
	for i := range 3 {
		n := NewTestNode(scheduler.NodeInfo{NodeID: fmt.Sprintf("n%d", i), Pools: []string{"p"}})
		n.Attach(t, a)
		nodes = append(nodes, n)
	}
	// B reads the fleet once, at its start, and keeps showing the nodes
	// after they are gone.
	b := p.Start("inst-b", false, func(c *scheduler.Config) { c.Fleet.RefreshInterval = time.Hour })
	waitFleet(t, b, "n0", "n1", "n2")
	st := h.Stores()
	ctx := context.Background()
	Eventually(t, "both instances announced", 5*time.Second, func() bool {
		x, _ := st.Presence.Alive(ctx, "inst-a")
		y, _ := st.Presence.Alive(ctx, "inst-b")
		return x && y
	})
	for _, n := range nodes {
		n.Detach(t)
	}
	s := NewTestSession("s1")
	s.Attach(t, b)
	reqs := []string{"r0", "r1", "r2"}
	payloads := map[string]string{}
	for _, r := range reqs {
		payloads[r] = r
		s.Submit(t, scheduler.Request{RequestID: r, Pool: "p", Payload: []byte(r)})
	}
	// Each job went to a node that was gone and came back to wait.
	Eventually(t, "the jobs back in CREATED after a dispatch", 5*time.Second, func() bool {
		for _, r := range reqs {
			e, err := st.Jobs.Entry(ctx, scheduler.JobIDFor(r))
			rec, jerr := st.Jobs.Job(ctx, scheduler.JobIDFor(r))
			if err != nil || jerr != nil || len(e.Tried) == 0 || rec.State.Active() {
				return false
			}
		}
		return true
	})
	for _, n := range nodes {
		n.Attach(t, a)
	}
	got := s.WaitAnswers(t, reqs, 10*time.Second)
	for _, r := range reqs {
		if m := got[r][0]; m.Type != scheduler.TypeJobResult || m.Attempt != 1 {
			t.Errorf("%s: %s of attempt %d (%s), want job_result of attempt 1", r, m.Type, m.Attempt, m.Error)
		}
	}
	checkQuiet(t, st, reqs, []string{"n0", "n1", "n2"}, []string{"inst-a", "inst-b"})
}

// testDispatchOutdatedAssigns: job_assigns left in a dead instance's
// inbox are not delivered once their attempt is over, when another
// instance adopts the inbox.
func testDispatchOutdatedAssigns(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", true, nil)
	// B holds the session; its adoption loop is too slow to matter here.
	b := p.Start("inst-b", false, func(c *scheduler.Config) {
		c.OwnerTTL = time.Minute
		c.Dispatch.AckTimeout = 600 * time.Millisecond // n1's presence (1s) ends within the second attempt
		c.Dispatch.QueueTimeout = 20 * time.Second
	})
	n := NewTestNode(scheduler.NodeInfo{NodeID: "n1"})
	n.Attach(t, a)
	waitFleet(t, b, "n1")
	s := NewTestSession("s1")
	s.Attach(t, b)
	// A dies; B keeps sending n1's job to A's inbox while n1's presence
	// lasts, each attempt ending at its ack timeout.
	p.Stop("inst-a")
	job := s.Submit(t, scheduler.Request{RequestID: "r", Payload: []byte("r")})
	st := h.Stores()
	ctx := context.Background()
	Eventually(t, "n1 offline for B and the job waiting", 10*time.Second, func() bool {
		rec, err := st.Jobs.Job(ctx, job)
		online := false
		for _, f := range b.Fleet() {
			online = online || (f.NodeID == "n1" && f.Online)
		}
		return err == nil && rec.Attempt > 1 && rec.State == "CREATED" && !online
	})
	if l, err := st.Inbox("inst-a").Len(ctx); err != nil || l == 0 {
		t.Fatalf("A's inbox holds %d entries (%v), want the outdated job_assigns", l, err)
	}
	// The node reconnects to B and runs the job's current attempt.
	n.Attach(t, b)
	s.WaitAnswers(t, []string{"r"}, 10*time.Second)
	// C adopts A's inbox: the outdated assigns must not reach the node.
	p.Start("inst-c", false, nil)
	Eventually(t, "A's inbox drained", 10*time.Second, func() bool {
		l, err := st.Inbox("inst-a").Len(ctx)
		return err == nil && l == 0
	})
	Eventually(t, "C's and B's inboxes handled", 5*time.Second, func() bool {
		for _, id := range []string{"inst-b", "inst-c"} {
			if p, err := st.Inbox(id).Pending(ctx); err != nil || p != 0 {
				return false
			}
			if l, err := st.Inbox(id).Len(ctx); err != nil || l != 0 {
				return false
			}
		}
		return true
	})
	if ran := n.Ran()[job]; len(ran) != 1 {
		t.Errorf("the node got attempts %v of the job, want only the current one", ran)
	}
}

// testDispatchTwoChoices: with two_choices, held jobs spread over the
// nodes by their load.
func testDispatchTwoChoices(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, func(c *scheduler.Config) { c.Dispatch.Selection = scheduler.SelectTwoChoices })
	var nodes []*TestNode
	for i := range 2 {
		n := NewTestNode(scheduler.NodeInfo{NodeID: fmt.Sprintf("n%d", i), Capacity: 100})
		n.Decide = func(scheduler.Envelope) NodeAction { return Hold }
		n.Attach(t, a)
		nodes = append(nodes, n)
	}
	s := NewTestSession("s1")
	s.Attach(t, a)
	const jobs = 40
	for i := range jobs {
		s.Submit(t, scheduler.Request{RequestID: fmt.Sprintf("r%d", i), Payload: []byte("x")})
	}
	Eventually(t, "all jobs held", 10*time.Second, func() bool { return nodes[0].Held()+nodes[1].Held() == jobs })
	// With two nodes, the less loaded of the two is always taken: the
	// loads never differ by more than the jobs in flight at once (one).
	if d := nodes[0].Held() - nodes[1].Held(); d < -2 || d > 2 {
		t.Errorf("two_choices spread %d and %d jobs, want even", nodes[0].Held(), nodes[1].Held())
	}
	for _, n := range nodes {
		n.ReleaseHeld()
	}
}

// testDispatchSoak runs many jobs through two instances with random
// faults: nodes that detach and come back, nodes that go silent (ack
// timeouts), model_not_available, and poison messages in the inboxes.
func testDispatchSoak(t *testing.T, h DispatcherHarness) {
	total := h.SoakJobs
	if total == 0 {
		total = 10000
	}
	if testing.Short() {
		total = min(total, 1000)
	}
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	b := p.Start("inst-b", false, nil)
	rng := rand.New(rand.NewPCG(1, 2))
	var rngMu sync.Mutex
	// chance(n) is true n times in 10,000.
	chance := func(n int) bool {
		rngMu.Lock()
		defer rngMu.Unlock()
		return rng.IntN(10000) < n
	}
	var nodes []*TestNode
	var nodeIDs []string
	for i := range 6 {
		n := NewTestNode(scheduler.NodeInfo{NodeID: fmt.Sprintf("n%d", i), Models: []string{"m1", "m2"}, Capacity: 64})
		n.Decide = func(m scheduler.Envelope) NodeAction {
			switch {
			case chance(30):
				return Silent
			case chance(3):
				return NotAvailable
			case chance(1000):
				return AnswerWithPartial
			}
			return Answer
		}
		if i%2 == 0 {
			n.Attach(t, a)
		} else {
			n.Attach(t, b)
		}
		nodes = append(nodes, n)
		nodeIDs = append(nodeIDs, n.ID)
	}
	waitFleet(t, a, nodeIDs...)
	waitFleet(t, b, nodeIDs...)
	s1, s2 := NewTestSession("s1"), NewTestSession("s2")
	s1.Attach(t, a)
	s2.Attach(t, b)
	poisoned := 0
	if h.Poison != nil {
		for i, inst := range []string{"inst-a", "inst-b", "inst-a"} {
			if err := h.Poison(inst, scheduler.Fields{{Name: "v", Value: "1"}, {Name: "type", Value: "job_assign"}, {Name: "job_id", Value: "{bad}" + strconv.Itoa(i)}}); err != nil {
				t.Fatal(err)
			}
			poisoned++
		}
	}
	stop := make(chan struct{})
	var faults sync.WaitGroup
	faults.Go(func() {
		// Now and then a node detaches and comes back on another instance.
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(300 * time.Millisecond):
			}
			n := nodes[i%len(nodes)]
			n.Detach(t)
			if i%2 == 0 {
				n.Attach(t, b)
			} else {
				n.Attach(t, a)
			}
		}
	})
	var reqs []string
	var wg sync.WaitGroup
	sem := make(chan struct{}, 64)
	for i := range total {
		r := fmt.Sprintf("soak-%d", i)
		reqs = append(reqs, r)
		s := s1
		if i%2 == 1 {
			s = s2
		}
		model := []string{"m1", "m2", ""}[i%3]
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			s.Submit(t, scheduler.Request{RequestID: r, TurnID: fmt.Sprintf("turn-%d", i/5), Model: model, Payload: []byte(r)})
		})
	}
	wg.Wait()
	var r1, r2 []string
	for i, r := range reqs {
		if i%2 == 0 {
			r1 = append(r1, r)
		} else {
			r2 = append(r2, r)
		}
	}
	s1.WaitAnswers(t, r1, 120*time.Second)
	s2.WaitAnswers(t, r2, 120*time.Second)
	close(stop)
	faults.Wait()
	// Every request answered exactly once: a result of its payload, or a
	// job_failed once its attempts were used up.
	results, failed := 0, 0
	reasons := map[string]int{}
	for _, s := range []*TestSession{s1, s2} {
		for req, got := range s.Answers() {
			if len(got) != 1 {
				t.Errorf("request %s: %d answers, want 1", req, len(got))
				continue
			}
			switch got[0].Type {
			case scheduler.TypeJobResult:
				results++
				if string(got[0].Payload) != string(ResultOf([]byte(req))) {
					t.Errorf("request %s: result %q", req, got[0].Payload)
				}
			default:
				failed++
				why, _, _ := strings.Cut(got[0].Error, ":")
				reasons[why]++
			}
		}
	}
	t.Logf("soak: %d jobs, %d results, %d failed %v", total, results, failed, reasons)
	if results+failed != total {
		t.Errorf("%d answers for %d requests", results+failed, total)
	}
	st := h.Stores()
	checkQuiet(t, st, reqs, nodeIDs, []string{"inst-a", "inst-b"})
	if h.Poison != nil {
		n := 0
		for _, inst := range []string{"inst-a", "inst-b"} {
			dl, err := st.Inbox(inst).DeadLetters(context.Background(), 100)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range dl {
				if !strings.HasPrefix(d.Fields.Get("job_id"), "{bad}") {
					t.Errorf("DLQ of %s holds %v, which the test did not poison", inst, d.Fields)
				}
			}
			n += len(dl)
		}
		if n != poisoned {
			t.Errorf("DLQs hold %d entries, want the %d poisoned", n, poisoned)
		}
	}
}

// slowAffinity delays each write of a turn's affinity, widening the moment
// between a job leaving CREATED and its turn having a node.
type slowAffinity struct {
	scheduler.TurnStore
	delay time.Duration
}

func (s slowAffinity) SetTurnAffinity(ctx context.Context, sessionID, turnID, nodeID string) (string, bool, error) {
	time.Sleep(s.delay)
	return s.TurnStore.SetTurnAffinity(ctx, sessionID, turnID, nodeID)
}

// testDispatchTurnAcrossInstances: a turn's requests come to two instances
// (a client that sends each request to both). The first request is made
// on B; its duplicate on A returns only once the turn has its node, so the
// next request, made on A before B sees it, goes to the same node.
func testDispatchTurnAcrossInstances(t *testing.T, h DispatcherHarness) {
	stores := h.Stores
	h.Stores = func() scheduler.Stores {
		st := stores()
		st.Turns = slowAffinity{st.Turns, 100 * time.Millisecond}
		return st
	}
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	b := p.Start("inst-b", false, nil)
	var nodes []*TestNode
	for i := range 3 {
		n := NewTestNode(scheduler.NodeInfo{NodeID: fmt.Sprintf("n%d", i), Pools: []string{"p"}, Capacity: 8})
		n.Attach(t, a)
		nodes = append(nodes, n)
	}
	waitFleet(t, b, "n0", "n1", "n2")
	sA, sB := NewTestSession("s-a"), NewTestSession("s-b")
	sA.Attach(t, a)
	sB.Attach(t, b)
	jobs := h.Stores().Jobs
	var reqs []string
	turnOf := map[string]string{}
	payloads := map[string]string{}
	var wg sync.WaitGroup
	const turns = 6
	for tu := range turns {
		turn := fmt.Sprintf("t%d", tu)
		first, next := fmt.Sprintf("x-%d-0", tu), fmt.Sprintf("x-%d-1", tu)
		for _, q := range []string{first, next} {
			reqs = append(reqs, q)
			turnOf[scheduler.JobIDFor(q)] = turn
			payloads[q] = q
		}
		req := func(q, reason string) scheduler.Request {
			return scheduler.Request{RequestID: q, TurnID: turn, Pool: "p", Reason: reason, Payload: []byte(q)}
		}
		wg.Go(func() { sB.Submit(t, req(first, "max_duration")) })
		Eventually(t, "the first job made on B", 5*time.Second, func() bool {
			_, err := jobs.Job(context.Background(), scheduler.JobIDFor(first))
			return err == nil
		})
		sA.Submit(t, req(first, "max_duration")) // the duplicate: returns once the turn has its node
		sA.Submit(t, req(next, "manual"))        // made on A
		wg.Go(func() { sB.Submit(t, req(next, "manual")) })
	}
	wg.Wait()
	sA.WaitAnswers(t, reqs, 10*time.Second)
	sB.WaitAnswers(t, reqs, 10*time.Second)
	checkAnsweredOnce(t, sA, payloads)
	checkAnsweredOnce(t, sB, payloads)
	checkTurnsOnOneNode(t, nodes, turnOf)
}

// checkTurnsOnOneNode checks that the jobs of each turn (turnOf: job id
// to turn) ran on one node.
func checkTurnsOnOneNode(t testing.TB, nodes []*TestNode, turnOf map[string]string) {
	t.Helper()
	nodesOf := map[string]map[string]bool{}
	for _, n := range nodes {
		for job := range n.Ran() {
			tu := turnOf[job]
			if nodesOf[tu] == nil {
				nodesOf[tu] = map[string]bool{}
			}
			nodesOf[tu][n.ID] = true
		}
	}
	for tu, ns := range nodesOf {
		if len(ns) != 1 {
			t.Errorf("turn %s ran on %d nodes %v, want 1 (turn affinity)", tu, len(ns), ns)
		}
	}
}

// forgottenConfig makes the run timeout far longer than the rest of the
// suite's deadlines, so that a job left to it is told from one settled
// within a lease.
func forgottenConfig(c *scheduler.Config) { c.Dispatch.RunTimeout = 2 * time.Minute }

// testDispatchForgottenAfterCrash: instance A dies with jobs running on its
// node; the node reconnects to B having lost two of its three jobs. The two
// go to another node at once (not at the run timeout, 2 minutes here), the
// third stays on the node and is answered through B with attempt 1.
func testDispatchForgottenAfterCrash(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", true, forgottenConfig)
	b := p.Start("inst-b", false, forgottenConfig)
	n1 := NewTestNode(scheduler.NodeInfo{NodeID: "n1", Capacity: 8})
	n1.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n1.Attach(t, a)
	waitFleet(t, b, "n1")
	s := NewTestSession("s1")
	s.Attach(t, b)
	reqs := []string{"r0", "r1", "r2"}
	payloads := map[string]string{}
	for _, r := range reqs {
		payloads[r] = r
		s.Submit(t, scheduler.Request{RequestID: r, Payload: []byte(r)})
	}
	waitRunning(t, h.Stores(), "n1", reqs...)
	p.Stop("inst-a") // dies without clean-up
	n2 := NewTestNode(scheduler.NodeInfo{NodeID: "n2", Capacity: 8})
	n2.Attach(t, b)
	kept := scheduler.JobIDFor("r0")
	n1.SetDecide(nil)
	n1.Forget(kept)
	start := time.Now()
	n1.Reattach(t, b, kept)
	s.WaitAnswers(t, []string{"r1", "r2"}, 10*time.Second)
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the lost jobs were answered %v after the node came back, want well within the run timeout", el)
	}
	for _, r := range []string{"r1", "r2"} {
		if got := n2.Ran()[scheduler.JobIDFor(r)]; len(got) != 1 || got[0] != 2 {
			t.Errorf("n2 ran %s with attempts %v, want [2]", r, got)
		}
	}
	for job, err := range n1.ReleaseHeld() {
		if err != nil {
			t.Errorf("result of the kept job %s through B: %v", job, err)
		}
	}
	got := s.WaitAnswers(t, reqs, 10*time.Second)
	if m := got["r0"][0]; m.Type != scheduler.TypeJobResult || m.Attempt != 1 {
		t.Errorf("answer of the kept job %+v, want job_result of attempt 1", m)
	}
	checkAnsweredOnce(t, s, payloads)
	checkQuiet(t, h.Stores(), reqs, []string{"n1", "n2"}, []string{"inst-a", "inst-b"})
}

// testDispatchForgottenSameInstance: a node that reconnects to the same
// instance (the new connection replaces the old) having lost its job: the
// job goes to another node at once.
func testDispatchForgottenSameInstance(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, forgottenConfig)
	n1 := NewTestNode(scheduler.NodeInfo{NodeID: "n1"})
	n1.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n1.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	s.Submit(t, scheduler.Request{RequestID: "r", Payload: []byte("r")})
	waitRunning(t, h.Stores(), "n1", "r")
	n2 := NewTestNode(scheduler.NodeInfo{NodeID: "n2"})
	n2.Attach(t, a)
	n1.SetDecide(nil)
	n1.Forget()
	start := time.Now()
	n1.Reattach(t, a) // replaces its connection, running nothing
	got := s.WaitAnswers(t, []string{"r"}, 10*time.Second)
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("the lost job was answered %v after the node came back, want well within the run timeout", el)
	}
	if m := got["r"][0]; m.Type != scheduler.TypeJobResult || m.Attempt != 2 {
		t.Errorf("answer %+v, want job_result of attempt 2", m)
	}
	checkQuiet(t, h.Stores(), []string{"r"}, []string{"n1", "n2"}, []string{"inst-a"})
}

// testDispatchRestartSameID: an instance killed with jobs running on its
// node and started again with the same instance id, to which the node
// reconnects having lost them: every job is answered well within the run
// timeout, and the plane comes to rest.
func testDispatchRestartSameID(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", true, forgottenConfig)
	n1 := NewTestNode(scheduler.NodeInfo{NodeID: "n1", Capacity: 8})
	n1.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n1.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	reqs := []string{"r0", "r1", "r2", "r3"}
	payloads := map[string]string{}
	for _, r := range reqs {
		payloads[r] = r
		s.Submit(t, scheduler.Request{RequestID: r, Payload: []byte(r)})
	}
	waitRunning(t, h.Stores(), "n1", reqs...)
	p.Stop("inst-a") // killed: no clean-up
	a = p.Start("inst-a", false, forgottenConfig)
	start := time.Now()
	n1.SetDecide(nil)
	n1.Forget()
	n1.Reattach(t, a)
	s.Attach(t, a) // the session reconnects and sends its requests again
	for _, r := range reqs {
		s.Submit(t, scheduler.Request{RequestID: r, Payload: []byte(r)})
	}
	got := s.WaitAnswers(t, reqs, 20*time.Second)
	if el := time.Since(start); el > 10*time.Second {
		t.Errorf("answered %v after the restart, want well within the run timeout", el)
	}
	for _, r := range reqs {
		if m := got[r][0]; m.Type != scheduler.TypeJobResult || m.Attempt != 2 {
			t.Errorf("request %s: answer %+v, want job_result of attempt 2", r, m)
		}
	}
	checkQuiet(t, h.Stores(), reqs, []string{"n1"}, []string{"inst-a"})
}

// testDispatchNodesGoingAway: a job running when every node of its pool
// goes away and comes back: the node it ran on costs one attempt, the
// nodes it was sent to on the way, which went away before they
// acknowledged it, cost none. The job ends with its result, not
// max_attempts.
func testDispatchNodesGoingAway(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, nil)
	n1 := NewTestNode(scheduler.NodeInfo{NodeID: "n1", Pools: []string{"p"}})
	n1.Decide = func(scheduler.Envelope) NodeAction { return Hold }
	n1.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	job := s.Submit(t, scheduler.Request{RequestID: "r", Pool: "p", Payload: []byte("r")})
	waitRunning(t, h.Stores(), "n1", "r")
	// The other two nodes are going away: they take no job any more.
	quiet := func(scheduler.Envelope) NodeAction { return Silent }
	n2 := NewTestNode(scheduler.NodeInfo{NodeID: "n2", Pools: []string{"p"}})
	n3 := NewTestNode(scheduler.NodeInfo{NodeID: "n3", Pools: []string{"p"}})
	n2.Decide, n3.Decide = quiet, quiet
	n2.Attach(t, a)
	n3.Attach(t, a)
	n1.Detach(t)
	for range 2 {
		var on string
		Eventually(t, "the job sent to a node going away", 10*time.Second, func() bool {
			rec, err := h.Stores().Jobs.Job(context.Background(), job)
			on = rec.NodeID
			return err == nil && rec.State == fsm.Dispatched && on != "n1"
		})
		map[string]*TestNode{"n2": n2, "n3": n3}[on].Detach(t)
	}
	// They come back and answer.
	for _, n := range []*TestNode{n1, n2, n3} {
		n.SetDecide(nil)
		n.Forget()
		n.Attach(t, a)
	}
	got := s.WaitAnswers(t, []string{"r"}, 15*time.Second)
	if m := got["r"][0]; m.Type != scheduler.TypeJobResult || m.Attempt != 2 {
		t.Errorf("answer %+v, want job_result of attempt 2 (one attempt spent on the node it ran on)", m)
	}
	checkQuiet(t, h.Stores(), []string{"r"}, []string{"n1", "n2", "n3"}, []string{"inst-a"})
}

// testDispatchQueueTimeoutSpansRequeues: a job sent again and again to a
// node that goes away before it acknowledges waits for a node all along:
// the queue timeout counts from when it began to wait, not from its last
// return, so it fails with no_node instead of bouncing for ever.
func testDispatchQueueTimeoutSpansRequeues(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	a := p.Start("inst-a", false, func(c *scheduler.Config) { c.Dispatch.QueueTimeout = time.Second })
	flaky := NewTestNode(scheduler.NodeInfo{NodeID: "flaky"})
	flaky.Decide = func(scheduler.Envelope) NodeAction { return Silent }
	s := NewTestSession("s1")
	s.Attach(t, a)
	start := time.Now()
	job := s.Submit(t, scheduler.Request{RequestID: "r", Payload: []byte("r")})
	for i := 0; len(s.Answers()["r"]) == 0 && i < 10; i++ {
		time.Sleep(300 * time.Millisecond) // waiting for a node
		flaky.Attach(t, a)
		Eventually(t, "the job on the flaky node, or answered", 10*time.Second, func() bool {
			rec, err := h.Stores().Jobs.Job(context.Background(), job)
			return len(s.Answers()["r"]) > 0 || (err == nil && rec.State == fsm.Dispatched)
		})
		flaky.Detach(t)
	}
	got := s.WaitAnswers(t, []string{"r"}, 10*time.Second)
	if m := got["r"][0]; m.Type != scheduler.TypeJobFailed || !strings.HasPrefix(m.Error, scheduler.FailNoNode) {
		t.Errorf("answer %+v, want job_failed %s", m, scheduler.FailNoNode)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("failed after %v, want about the queue timeout (1s) and a retry", el)
	}
	checkQuiet(t, h.Stores(), []string{"r"}, []string{"flaky"}, []string{"inst-a"})
}

// waitRunning waits until the jobs of reqs run on node.
func waitRunning(t testing.TB, st scheduler.Stores, node string, reqs ...string) {
	t.Helper()
	Eventually(t, fmt.Sprintf("%d job(s) running on %s", len(reqs), node), 10*time.Second, func() bool {
		for _, r := range reqs {
			rec, err := st.Jobs.Job(context.Background(), scheduler.JobIDFor(r))
			if err != nil || rec.State != fsm.Running || rec.NodeID != node {
				return false
			}
		}
		return true
	})
}

// testDispatchRunTimeoutAcross: the run timeout bounds every
// attempt within SweepInterval (and slack for a loaded machine), with a
// long lease renewed rarely, a sweep as slow as the binary's default and
// the node on another instance than its jobs' sessions: jobs acknowledged
// and started at once, then left silent, all leave their node long before
// the lease would end.
func testDispatchRunTimeoutAcross(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	cfg := func(c *scheduler.Config) {
		c.Dispatch.RunTimeout = 1500 * time.Millisecond
		c.Dispatch.Lease = 15 * time.Second
		c.Dispatch.SweepInterval = 500 * time.Millisecond
		c.Dispatch.AckTimeout = 10 * time.Second
	}
	a := p.Start("inst-a", false, cfg)
	b := p.Start("inst-b", false, cfg)
	slow := NewTestNode(scheduler.NodeInfo{NodeID: "slow", Capacity: 32})
	slow.Decide = func(m scheduler.Envelope) NodeAction {
		if m.Attempt == 1 {
			return Hold
		}
		return Answer
	}
	slow.Attach(t, a)
	waitFleet(t, b, "slow")
	s := NewTestSession("s1")
	s.Attach(t, b)
	var reqs []string
	start := time.Now()
	for i := range 12 {
		r := fmt.Sprintf("r%d", i)
		reqs = append(reqs, r)
		s.Submit(t, scheduler.Request{RequestID: r, Payload: []byte(r)})
		time.Sleep(37 * time.Millisecond) // spread over the sweeps
	}
	got := s.WaitAnswers(t, reqs, 12*time.Second)
	if el := time.Since(start); el > 8*time.Second {
		t.Errorf("the last attempt ended %v after the first submit, want about the run timeout (1.5s) and a sweep (0.5s), far less than the lease (15s)", el)
	}
	for _, r := range reqs {
		if m := got[r][0]; m.Type != scheduler.TypeJobResult || m.Attempt != 2 {
			t.Errorf("request %s: answer %+v, want job_result of attempt 2", r, m)
		}
	}
	slow.ReleaseHeld()
	checkQuiet(t, h.Stores(), reqs, []string{"slow"}, []string{"inst-a", "inst-b"})
}

// noRelease drops the calls that end a job after its result's step (the
// release of the job, of its node's slot and of its deadline), as an
// instance that dies right after that step would.
type noReleaseJobs struct{ scheduler.JobStore }

func (noReleaseJobs) ReleaseJobs(_ context.Context, jobs []scheduler.JobAttempt) ([]scheduler.JobTransition, []error) {
	errs := make([]error, len(jobs))
	for i := range errs {
		errs[i] = errors.New("instance died")
	}
	return make([]scheduler.JobTransition, len(jobs)), errs
}

type noReleaseSlots struct{ scheduler.ReservationStore }

func (noReleaseSlots) ReleaseSlots(context.Context, []scheduler.Slot) error {
	return errors.New("instance died")
}

type noRemoveDue struct{ scheduler.DueIndex }

func (noRemoveDue) Remove(context.Context, ...string) error { return errors.New("instance died") }

// testDispatchEndLeftByCrash: the end of a job is its result's step (one
// atomic step) followed by its release, its slot's and its deadline's, which
// the instance does right after, in separate calls (on a cluster
// the job, the node's slots and the deadline shard lie in different
// slots). An instance that dies in between leaves a FINISHED job holding
// its slot: another instance's sweeper claims it at the deadline it had
// (here its ack deadline, 1s after the dispatch) and finishes the release
// within a sweep of it, plus the time the index may take to show one
// process a deadline another one wrote (store/redisstore: DueRefresh,
// 2s); the session is answered once.
func testDispatchEndLeftByCrash(t *testing.T, h DispatcherHarness) {
	p := NewTestPlane(t, h)
	dead := h
	dead.Stores = func() scheduler.Stores {
		st := h.Stores()
		st.Jobs = noReleaseJobs{st.Jobs}
		st.Reservations = noReleaseSlots{st.Reservations}
		st.Due = noRemoveDue{st.Due}
		return st
	}
	pd := NewTestPlane(t, dead)
	a := pd.Start("inst-a", true, nil)
	p.Start("inst-b", false, nil)
	n := NewTestNode(scheduler.NodeInfo{NodeID: "n1"})
	n.Attach(t, a)
	s := NewTestSession("s1")
	s.Attach(t, a)
	start := time.Now()
	job := s.Submit(t, scheduler.Request{RequestID: "r", Payload: []byte("r")})
	s.WaitAnswers(t, []string{"r"}, 5*time.Second)
	pd.Stop("inst-a") // dies before its release
	st := h.Stores()
	Eventually(t, "the job released by the other instance", 10*time.Second, func() bool {
		rec, err := st.Jobs.Job(context.Background(), job)
		return err == nil && rec.State == fsm.Released
	})
	// The bound: the deadline the job had (the ack timeout, 1s), the
	// index's refresh (2s on Redis) and a sweep (50ms), with room for a
	// loaded machine.
	if el := time.Since(start); el > 4500*time.Millisecond {
		t.Errorf("released %v after the submit, want within the ack deadline (1s), the index's refresh (2s) and a sweep", el)
	}
	checkAnsweredOnce(t, s, map[string]string{"r": "r"})
	checkQuiet(t, st, []string{"r"}, []string{"n1"}, []string{"inst-b"})
}
