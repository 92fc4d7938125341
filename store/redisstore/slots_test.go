package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// recordingClient is a rueidis.Client that keeps every command sent
// through Do and DoMulti, as the server receives it (a pipeline's
// commands one by one).
type recordingClient struct {
	rueidis.Client
	mu   sync.Mutex
	cmds [][]string
}

func (c *recordingClient) record(cmd rueidis.Completed) {
	c.mu.Lock()
	c.cmds = append(c.cmds, append([]string(nil), cmd.Commands()...))
	c.mu.Unlock()
}

func (c *recordingClient) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	c.record(cmd)
	return c.Client.Do(ctx, cmd)
}

func (c *recordingClient) DoMulti(ctx context.Context, cmds ...rueidis.Completed) []rueidis.RedisResult {
	for _, cmd := range cmds {
		c.record(cmd)
	}
	return c.Client.DoMulti(ctx, cmds...)
}

// take returns the commands sent since the last call and forgets them.
func (c *recordingClient) take() [][]string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.cmds
	c.cmds = nil
	return out
}

// stepCall is one command a step sent: whether it is a script, and the
// Cluster slots of its keys.
type stepCall struct {
	name   string
	script bool
	keys   []string
	slots  map[int64]bool
}

func (s stepCall) String() string { return fmt.Sprintf("%s %v (slots %v)", s.name, s.keys, s.slots) }

// calls describes cmds (a script call that repeats one before it, as a
// script missing on the server makes it, counts once), asking the cluster for the slot of every key
// (CLUSTER KEYSLOT), so that the test does not trust this package's own
// reading of a hash tag.
func calls(t *testing.T, c rueidis.Client, cmds [][]string) []stepCall {
	t.Helper()
	var out []stepCall
	sent := map[string]bool{}
	for _, cmd := range cmds {
		sc := stepCall{name: strings.ToUpper(cmd[0]), slots: map[int64]bool{}}
		if strings.HasPrefix(sc.name, "EVAL") {
			call := strings.Join(cmd[2:], "\x00")
			if sent[call] {
				continue // the same call sent again, with its script, after NOSCRIPT
			}
			sent[call] = true
		}
		switch sc.name {
		case "EVALSHA", "EVAL", "EVALSHA_RO", "EVAL_RO":
			n, err := strconv.Atoi(cmd[2])
			if err != nil {
				t.Fatalf("%v: numkeys %q", cmd, cmd[2])
			}
			sc.script, sc.keys = true, cmd[3:3+n]
		default:
			sc.keys = cmd[1:2]
		}
		for _, k := range sc.keys {
			slot, err := c.Do(context.Background(), c.B().ClusterKeyslot().Key(k).Build()).AsInt64()
			if err != nil {
				t.Fatalf("CLUSTER KEYSLOT %s: %v", k, err)
			}
			sc.slots[slot] = true
		}
		out = append(out, sc)
	}
	return out
}

// oneScript fails unless the step sent exactly one command, a script whose
// keys lie in one slot, and returns that slot.
func oneScript(t *testing.T, step string, cs []stepCall) int64 {
	t.Helper()
	if len(cs) != 1 || !cs[0].script || len(cs[0].slots) != 1 {
		t.Errorf("%s: sent %v; want one script on the keys of one slot", step, cs)
		return -1
	}
	for s := range cs[0].slots {
		return s
	}
	return -1
}

// TestClusterStepsAreOneScript: on a Redis Cluster each step of a job's
// life is one script on one slot, as on a standalone server: opening it
// with its deadline, its acknowledgement and start, its result with its
// outcome, its release (one script per deadline shard for a batch of
// jobs), the renewal of its deadline (one command on the job's slot).
// Opening a job on a node's slot is the one step that spans two slots (the
// node's reservations and the job's record): there it is the reserve
// script on the node's slot, then the open script on the job's.
func TestClusterStepsAreOneScript(t *testing.T) {
	ctx := context.Background()
	var seeds []string
	for _, u := range testenv.RedisClusterURLs(t) {
		seeds = append(seeds, testenv.Addr(u))
	}
	cluster := newTestClient(t, seeds, true)
	rc := &recordingClient{Client: cluster}
	s := newJobs(t, rc, JobsConfig{})
	keys := s.keys
	due, err := NewDue(rc, DueConfig{Prefix: keys.Prefix()})
	if err != nil {
		t.Fatal(err)
	}
	spec := func(id string) scheduler.JobSpec {
		return scheduler.JobSpec{RequestID: "r-" + id, SessionID: "s-" + id, Payload: []byte("x")}
	}
	at := time.Now().Add(time.Hour)
	var jobs []scheduler.JobAttempt
	for i := range 20 {
		id := "job-" + strconv.Itoa(i)
		rc.take()
		_, _, created, err := s.Open(ctx, id, spec(id), "", at)
		if err != nil || !created {
			t.Fatalf("open %s: created %v, %v", id, created, err)
		}
		cs := calls(t, cluster, rc.take())
		slot := oneScript(t, "open "+id, cs)
		if len(cs) == 1 && len(cs[0].keys) != 2 {
			t.Errorf("open %s: keys %v; want the job's record and its deadline shard", id, cs[0].keys)
		}
		if _, ok, err := due.Due(ctx, id); err != nil || !ok {
			t.Errorf("open %s: deadline stored %v, %v", id, ok, err)
		}
		rc.take()
		if err := due.Set(ctx, id, at.Add(time.Minute)); err != nil {
			t.Fatal(err)
		}
		if cs := calls(t, cluster, rc.take()); len(cs) != 1 || !cs[0].slots[slot] {
			t.Errorf("deadline of %s: sent %v; want one command on the job's slot %d", id, cs, slot)
		}

		// A duplicate open finds the job, in one script too.
		if _, _, created, err := s.Open(ctx, id, spec(id), "", at); err != nil || created {
			t.Fatalf("open %s again: created %v, %v", id, created, err)
		}
		oneScript(t, "open "+id+" again", calls(t, cluster, rc.take()))

		for _, ev := range []fsm.Event{fsm.Dispatch, fsm.Ack, fsm.Start} {
			if _, err := s.ApplyJob(ctx, id, ev, 1, "node-1"); err != nil {
				t.Fatalf("%s %s: %v", ev, id, err)
			}
			if got := oneScript(t, string(ev)+" "+id, calls(t, cluster, rc.take())); got != slot {
				t.Errorf("%s %s: slot %d; want the job's %d", ev, id, got, slot)
			}
		}
		if _, _, err := s.Finish(ctx, id, fsm.Result, 1, "node-1", scheduler.Outcome{Status: scheduler.OutcomeResult, Attempt: 1, NodeID: "node-1"}); err != nil {
			t.Fatalf("result %s: %v", id, err)
		}
		if got := oneScript(t, "result "+id, calls(t, cluster, rc.take())); got != slot {
			t.Errorf("result %s: slot %d; want the job's %d", id, got, slot)
		}
		jobs = append(jobs, scheduler.JobAttempt{ID: id, Attempt: 1})
	}

	// The release of many jobs: one script per deadline shard among them.
	shards := map[int]bool{}
	for _, j := range jobs {
		shards[DueShard(j.ID)] = true
	}
	_, errs := s.ReleaseJobs(ctx, jobs)
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	cs := calls(t, cluster, rc.take())
	if len(cs) != len(shards) {
		t.Errorf("release of %d jobs over %d shards: %d commands; want one script a shard", len(jobs), len(shards), len(cs))
	}
	for _, c := range cs {
		if !c.script || len(c.slots) != 1 {
			t.Errorf("release: sent %v; want a script on the keys of one slot", c)
		}
	}
	for _, j := range jobs {
		if rec, err := s.Job(ctx, j.ID); err != nil || rec.State != fsm.Released {
			t.Errorf("job %s after the release: %v, %v", j.ID, rec.State, err)
		}
	}

	// Opening on a node's slot: the reserve script on the node's slot,
	// then the open script on the job's.
	rc.take()
	if _, _, created, err := s.OpenOnSlot(ctx, "job-slot", spec("job-slot"), "node-1", 4, time.Minute, at); err != nil || !created {
		t.Fatalf("open on a slot: created %v, %v", created, err)
	}
	cs = calls(t, cluster, rc.take())
	if len(cs) != 2 || !cs[0].script || len(cs[0].keys) != 1 || cs[0].keys[0] != keys.NodeReserved("node-1") {
		t.Fatalf("open on a slot: sent %v; want the reserve script on the node's key, then the open script", cs)
	}
	oneScript(t, "open on a slot, the open", cs[1:])
}

// TestClusterOpenOnSlotCrashBound: on a cluster, a crash between the two
// calls of [Jobs.OpenOnSlot] (the reserve script ran, the open script did
// not) leaves a slot that no job holds; it is the node's again once the
// reservation's ttl passed on the server's clock, with no sweeper.
func TestClusterOpenOnSlotCrashBound(t *testing.T) {
	ctx := context.Background()
	var seeds []string
	for _, u := range testenv.RedisClusterURLs(t) {
		seeds = append(seeds, testenv.Addr(u))
	}
	cluster := newTestClient(t, seeds, true)
	s := newJobs(t, cluster, JobsConfig{})
	res, err := NewReservations(cluster, ReservationsConfig{Prefix: s.keys.Prefix()})
	if err != nil {
		t.Fatal(err)
	}
	const ttl = 300 * time.Millisecond
	// The first half of an OpenOnSlot whose process died before the open.
	// The server reserved between sent and done: the slot is surely held
	// until sent+ttl, and surely free from done+ttl on.
	sent := time.Now()
	if err := res.Reserve(ctx, "node-1", "lost", 1, ttl); err != nil {
		t.Fatal(err)
	}
	done := time.Now()
	spec := scheduler.JobSpec{RequestID: "r", SessionID: "s"}
	_, _, _, err = s.OpenOnSlot(ctx, "next", spec, "node-1", 1, time.Minute, time.Now().Add(time.Hour))
	if !errors.Is(err, scheduler.ErrNodeFull) {
		if time.Since(sent) < ttl {
			t.Fatalf("open on the node holding the lost slot: %v; want %v", err, scheduler.ErrNodeFull)
		}
		t.Skipf("the machine took %v, past the ttl, to open", time.Since(sent))
	}
	time.Sleep(time.Until(done.Add(ttl + 20*time.Millisecond)))
	if _, _, created, err := s.OpenOnSlot(ctx, "next", spec, "node-1", 1, time.Minute, time.Now().Add(time.Hour)); err != nil || !created {
		t.Fatalf("open once the lost slot's ttl passed: created %v, %v", created, err)
	}
	if ids, err := res.Jobs(ctx, "node-1"); err != nil || len(ids) != 1 || ids[0] != "next" {
		t.Errorf("node's reservations: %v, %v; want [next]", ids, err)
	}
}
