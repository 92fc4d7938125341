package storetest

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/ksana-dev/ksana/scheduler"
)

// StreamsHarness is one empty set of inboxes: a [scheduler.Sender] that
// refuses a message to an inbox holding MaxLen entries, and the
// [scheduler.Inbox] of an instance for a group.
type StreamsHarness struct {
	Sender scheduler.Sender                               // appends to inboxes
	Inbox  func(instanceID, group string) scheduler.Inbox // the consumer side
	MaxLen int                                            // the MaxLen the harness was asked for
}

// StreamsOptions are what the suite asks a harness for.
type StreamsOptions struct {
	MaxLen    int // inbox MAXLEN ~
	DLQMaxLen int // dead-letter MAXLEN ~
}

// TestStreams checks the stream primitives and then a
// [scheduler.Deliverer] over them: at-least-once delivery with a consumer
// that dies mid-way, dead-lettering exactly once, malformed messages,
// trimming. newHarness returns empty inboxes with opts.
func TestStreams(t *testing.T, newHarness func(t *testing.T, opts StreamsOptions) StreamsHarness) {
	ctx := context.Background()
	opts := StreamsOptions{MaxLen: 100000, DLQMaxLen: 1000}
	t.Run("ReadAckReclaim", func(t *testing.T) {
		h := newHarness(t, opts)
		in := h.Inbox("inst-a", "g")
		if _, err := in.Read(ctx, "c1", 10, 0); !errors.Is(err, scheduler.ErrNoGroup) {
			t.Fatalf("Read before EnsureGroup: err = %v, want ErrNoGroup", err)
		}
		var ids []string
		for i := range 3 {
			id, err := h.Sender.Send(ctx, "inst-a", scheduler.Fields{{Name: "n", Value: strconv.Itoa(i)}, {Name: "kind", Value: "job_assign"}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, id)
		}
		// The group created after the sends still sees them.
		for range 2 {
			if err := in.EnsureGroup(ctx); err != nil {
				t.Fatalf("EnsureGroup: %v", err)
			}
		}
		got, err := in.Read(ctx, "c1", 2, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := []scheduler.Message{
			{ID: ids[0], Fields: scheduler.Fields{{Name: "n", Value: "0"}, {Name: "kind", Value: "job_assign"}}},
			{ID: ids[1], Fields: scheduler.Fields{{Name: "n", Value: "1"}, {Name: "kind", Value: "job_assign"}}},
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("Read (-want +got):\n%s", d)
		}
		if n, err := in.Pending(ctx); err != nil || n != 2 {
			t.Errorf("Pending = %d, %v; want 2", n, err)
		}
		if err := in.Ack(ctx, ids[0]); err != nil {
			t.Fatal(err)
		}
		// c1 dies holding ids[1]; c2 reads the rest and later takes it over.
		got, err = in.Read(ctx, "c2", 10, 50*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff([]string{ids[2]}, msgIDs(got)); d != "" {
			t.Errorf("Read by c2 (-want +got):\n%s", d)
		}
		if err := in.Ack(ctx, ids[2]); err != nil {
			t.Fatal(err)
		}
		if got, _, err := in.Reclaim(ctx, "c2", time.Minute, 10); err != nil || len(got) != 0 {
			t.Errorf("Reclaim of entries not idle long enough = %v, %v; want none", msgIDs(got), err)
		}
		var reclaimed []scheduler.Message
		waitFor(t, "idle entry is reclaimed", func() (bool, error) {
			var err error
			var deleted []string
			reclaimed, deleted, err = in.Reclaim(ctx, "c2", 100*time.Millisecond, 10)
			if len(deleted) > 0 {
				t.Errorf("Reclaim reported deleted entries %v; none was deleted", deleted)
			}
			return len(reclaimed) > 0, err
		})
		if d := cmp.Diff(want[1:], reclaimed); d != "" {
			t.Errorf("Reclaim (-want +got):\n%s", d)
		}
		pend, err := in.PendingIdle(ctx, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		wantPend := []scheduler.PendingEntry{{ID: ids[1], Consumer: "c2", Deliveries: 2}}
		if d := cmp.Diff(wantPend, pend, cmpopts.IgnoreFields(scheduler.PendingEntry{}, "Idle")); d != "" {
			t.Errorf("PendingIdle (-want +got):\n%s", d)
		}
		if err := in.Ack(ctx, ids[1]); err != nil {
			t.Fatal(err)
		}
		if n, err := in.Len(ctx); err != nil || n != 0 {
			t.Errorf("Len after acking all = %d, %v; want 0 (XDEL after XACK)", n, err)
		}
		if got, err := in.Read(ctx, "c1", 10, 20*time.Millisecond); err != nil || len(got) != 0 {
			t.Errorf("Read of an empty inbox = %v, %v; want nothing after the block", got, err)
		}
	})
	t.Run("DeadLetterExactlyOnce", func(t *testing.T) {
		h := newHarness(t, opts)
		in := h.Inbox("inst-a", "g")
		if err := in.EnsureGroup(ctx); err != nil {
			t.Fatal(err)
		}
		fields := scheduler.Fields{{Name: "type", Value: "job_result"}, {Name: "payload", Value: `{"job_id":"j1"}`}, {Name: "dlq_reason", Value: "a field of the sender"}}
		id, err := h.Sender.Send(ctx, "inst-a", fields)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.Read(ctx, "c1", 1, 0); err != nil {
			t.Fatal(err)
		}
		if _, ok, err := in.DeadLetter(ctx, "c2", id, time.Hour, "too young"); err != nil || ok {
			t.Fatalf("DeadLetter of an entry not idle long enough = %v, %v; want false", ok, err)
		}
		var moved atomic.Int32
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Go(func() {
				_, ok, err := in.DeadLetter(ctx, fmt.Sprintf("c%d", i), id, 0, "test")
				if err != nil {
					t.Error(err)
				}
				if ok {
					moved.Add(1)
				}
			})
		}
		wg.Wait()
		if moved.Load() != 1 {
			t.Errorf("8 concurrent DeadLetter calls moved the entry %d times, want 1", moved.Load())
		}
		dls, err := in.DeadLetters(ctx, 10)
		if err != nil {
			t.Fatal(err)
		}
		want := []scheduler.DeadLetter{{SourceID: id, Deliveries: 1, Reason: "test", Fields: fields}}
		if d := cmp.Diff(want, dls, cmpopts.IgnoreFields(scheduler.DeadLetter{}, "ID")); d != "" {
			t.Errorf("DeadLetters (-want +got):\n%s", d)
		}
		if n, err := in.Pending(ctx); err != nil || n != 0 {
			t.Errorf("Pending after the move = %d, %v; want 0", n, err)
		}
		if n, err := in.Len(ctx); err != nil || n != 0 {
			t.Errorf("inbox Len after the move = %d, %v; want 0", n, err)
		}
	})
	t.Run("DeadLetterAdmin", func(t *testing.T) { testDeadLetterAdmin(t, newHarness(t, opts)) })
	t.Run("MaxLenBoundsInboxWithoutLoss", func(t *testing.T) {
		// A full inbox refuses new messages (the sender learns it) rather
		// than trimming entries that were sent and not yet handled.
		h := newHarness(t, StreamsOptions{MaxLen: 200, DLQMaxLen: 100})
		in := h.Inbox("inst-a", "g")
		if err := in.EnsureGroup(ctx); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var ok, full atomic.Int64
		for w := range 8 {
			wg.Go(func() {
				for i := range 100 {
					_, err := h.Sender.Send(ctx, "inst-a", scheduler.Fields{{Name: "seq", Value: strconv.Itoa(w*1000 + i)}})
					switch {
					case err == nil:
						ok.Add(1)
					case errors.Is(err, scheduler.ErrInboxFull):
						full.Add(1)
					default:
						t.Errorf("send: %v", err)
					}
				}
			})
		}
		wg.Wait()
		if ok.Load() != int64(h.MaxLen) || full.Load() != 800-int64(h.MaxLen) {
			t.Errorf("800 sends to an inbox of %d: %d accepted, %d refused as full; want %d and %d", h.MaxLen, ok.Load(), full.Load(), h.MaxLen, 800-h.MaxLen)
		}
		// Read but not acked: still there, still counted.
		got, err := in.Read(ctx, "c1", 50, 0)
		if err != nil || len(got) != 50 {
			t.Fatalf("Read 50 = %d, %v", len(got), err)
		}
		if _, err := h.Sender.Send(ctx, "inst-a", scheduler.Fields{{Name: "seq", Value: "x"}}); !errors.Is(err, scheduler.ErrInboxFull) {
			t.Errorf("Send to a full inbox whose entries are pending: %v, want ErrInboxFull", err)
		}
		if n, err := in.Len(ctx); err != nil || n != int64(h.MaxLen) {
			t.Errorf("Len = %d, %v; want %d: nothing trimmed", n, err, h.MaxLen)
		}
		if err := in.Ack(ctx, msgIDs(got)...); err != nil {
			t.Fatal(err)
		}
		if _, err := h.Sender.Send(ctx, "inst-a", scheduler.Fields{{Name: "seq", Value: "y"}}); err != nil {
			t.Errorf("Send after acking 50: %v, want accepted", err)
		}
	})
	t.Run("DelivererTwoConsumersOneDies", func(t *testing.T) { testTwoConsumers(t, newHarness(t, opts)) })
	t.Run("DelivererPoisonToDLQOnce", func(t *testing.T) { testPoison(t, newHarness(t, opts)) })
	t.Run("DelivererMalformed", func(t *testing.T) { testMalformed(t, newHarness(t, opts)) })
}

func msgIDs(ms []scheduler.Message) []string {
	ids := []string{}
	for _, m := range ms {
		ids = append(ids, m.ID)
	}
	return ids
}

// sendN sends n messages {"seq": i, "tag": tag} with 8 concurrent senders.
func sendN(t *testing.T, s scheduler.Sender, instance string, n int, tag string) {
	t.Helper()
	var wg sync.WaitGroup
	var next atomic.Int64
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(n) {
					return
				}
				if _, err := s.Send(context.Background(), instance, scheduler.Fields{{Name: "seq", Value: strconv.FormatInt(i, 10)}, {Name: "tag", Value: tag}}); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("send: %v", err)
	}
}

// testCfg is a delivery configuration with short intervals.
func testCfg() scheduler.Config {
	ms := time.Millisecond
	return scheduler.Config{
		InstanceID: "inst-a",
		Inbox: scheduler.InboxConfig{
			Block: 100 * ms, Count: 64, ClaimMinIdle: 300 * ms,
			MaxDeliveries: 1000, DeadMinIdle: 100 * ms, ScanInterval: 100 * ms,
		},
	}
}

// runDeliverer runs d until the returned stop is called.
func runDeliverer(t *testing.T, d *scheduler.Deliverer) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Deliverer.Run: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func testTwoConsumers(t *testing.T, h StreamsHarness) {
	const n = 10000
	ctx := context.Background()
	in := h.Inbox("inst-a", "g")
	if err := in.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	handled := map[string]int{}       // by the live consumer, by seq
	failedByDead := map[string]bool{} // seqs the dying consumer read and never acked
	deadCtx, killDead := context.WithCancel(context.Background())
	var deadSeen atomic.Int32
	live, err := scheduler.NewDeliverer(in, "live", func(ctx context.Context, m scheduler.Message) error {
		mu.Lock()
		handled[m.Fields.Get("seq")]++
		mu.Unlock()
		return nil
	}, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	dead, err := scheduler.NewDeliverer(in, "dead", func(ctx context.Context, m scheduler.Message) error {
		// The consumer dies after a hundred messages: from then on it
		// returns without acking, as a process killed mid-message would.
		if deadSeen.Add(1) > 100 || deadCtx.Err() != nil {
			killDead()
			mu.Lock()
			failedByDead[m.Fields.Get("seq")] = true
			mu.Unlock()
			return errors.New("consumer died")
		}
		mu.Lock()
		handled[m.Fields.Get("seq")]++
		mu.Unlock()
		return nil
	}, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(killDead)
	stopDead := runDeliverer(t, dead)
	go func() { <-deadCtx.Done(); stopDead() }()
	runDeliverer(t, live)
	sendN(t, h.Sender, "inst-a", n, "")
	waitFor(t, "every message handled and acked", func() (bool, error) {
		mu.Lock()
		got := len(handled)
		mu.Unlock()
		if got < n {
			return false, nil
		}
		p, err := in.Pending(ctx)
		return p == 0, err
	})
	mu.Lock()
	defer mu.Unlock()
	var missing []string
	for i := range n {
		if handled[strconv.Itoa(i)] == 0 {
			missing = append(missing, strconv.Itoa(i))
		}
	}
	if len(missing) > 0 {
		t.Errorf("%d messages never handled, first %v", len(missing), missing[:min(5, len(missing))])
	}
	if len(failedByDead) == 0 {
		t.Errorf("the dying consumer left nothing pending; the test did not exercise reclaim")
	}
	for seq := range failedByDead {
		if handled[seq] == 0 {
			t.Errorf("message %s, left pending by the dead consumer, was never reclaimed", seq)
		}
	}
	if l, err := in.Len(ctx); err != nil || l != 0 {
		t.Errorf("inbox Len after all acks = %d, %v; want 0", l, err)
	}
}

func testPoison(t *testing.T, h StreamsHarness) {
	ctx := context.Background()
	in := h.Inbox("inst-a", "g")
	cfg := testCfg()
	cfg.Inbox.ClaimMinIdle = 50 * time.Millisecond
	cfg.Inbox.MaxDeliveries = 3
	cfg.Inbox.DeadMinIdle = 50 * time.Millisecond
	cfg.Inbox.ScanInterval = 50 * time.Millisecond
	var moved atomic.Int32
	var scansAfterMove atomic.Int32
	var calls atomic.Int32
	cfg.Hooks.DLQMoved = func(scheduler.DeadLetter) { moved.Add(1) }
	cfg.Hooks.InboxPending = func(int64) {
		if moved.Load() > 0 {
			scansAfterMove.Add(1)
		}
	}
	fail := func(ctx context.Context, m scheduler.Message) error {
		calls.Add(1)
		return errors.New("always fails")
	}
	for _, name := range []string{"c1", "c2"} {
		d, err := scheduler.NewDeliverer(in, name, fail, cfg)
		if err != nil {
			t.Fatal(err)
		}
		runDeliverer(t, d)
	}
	fields := scheduler.Fields{{Name: "type", Value: "job_assign"}, {Name: "payload", Value: `{"job_id":"j-poison"}`}}
	id, err := h.Sender.Send(ctx, "inst-a", fields)
	if err != nil {
		t.Fatal(err)
	}
	// Wait for the move, then for several more scans of both consumers.
	waitFor(t, "poison message moved and 6 scans after", func() (bool, error) {
		return scansAfterMove.Load() >= 6, nil
	})
	if got := moved.Load(); got != 1 {
		t.Errorf("DLQMoved called %d times, want 1", got)
	}
	dls, err := in.DeadLetters(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(dls) != 1 {
		t.Fatalf("DLQ holds %d entries, want 1: %+v", len(dls), dls)
	}
	dl := dls[0]
	if d := cmp.Diff(fields, dl.Fields); d != "" {
		t.Errorf("dead letter fields (-want +got):\n%s", d)
	}
	if dl.SourceID != id || dl.Reason != scheduler.ReasonMaxDeliveries || dl.Deliveries <= 3 {
		t.Errorf("dead letter = source %s reason %q deliveries %d; want source %s reason %q deliveries > 3",
			dl.SourceID, dl.Reason, dl.Deliveries, id, scheduler.ReasonMaxDeliveries)
	}
	if c := calls.Load(); int64(c) < 4 {
		t.Errorf("handler called %d times, want more than dlq_max_deliveries (3)", c)
	}
	if n, err := in.Len(ctx); err != nil || n != 0 {
		t.Errorf("inbox Len = %d, %v; want 0", n, err)
	}
}

func testMalformed(t *testing.T, h StreamsHarness) {
	ctx := context.Background()
	in := h.Inbox("inst-a", "g")
	var handledOK atomic.Int32
	var calls sync.Map
	handler := func(ctx context.Context, m scheduler.Message) error {
		n, _ := calls.LoadOrStore(m.ID, new(atomic.Int32))
		n.(*atomic.Int32).Add(1)
		switch m.Fields.Get("type") {
		case "":
			return fmt.Errorf("%w: no type field", scheduler.ErrMalformed)
		case "explode":
			panic("handler bug")
		}
		handledOK.Add(1)
		return nil
	}
	d, err := scheduler.NewDeliverer(in, "c1", handler, testCfg())
	if err != nil {
		t.Fatal(err)
	}
	runDeliverer(t, d)
	bad, err := h.Sender.Send(ctx, "inst-a", scheduler.Fields{{Name: "payload", Value: "no type"}})
	if err != nil {
		t.Fatal(err)
	}
	boom, err := h.Sender.Send(ctx, "inst-a", scheduler.Fields{{Name: "type", Value: "explode"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := h.Sender.Send(ctx, "inst-a", scheduler.Fields{{Name: "type", Value: "ok"}}); err != nil {
		t.Fatal(err)
	}
	var dls []scheduler.DeadLetter
	waitFor(t, "malformed entries reach the DLQ and the good one is handled", func() (bool, error) {
		var err error
		dls, err = in.DeadLetters(ctx, 10)
		return len(dls) == 2 && handledOK.Load() == 1, err
	})
	got := map[string]string{}
	for _, dl := range dls {
		got[dl.SourceID] = dl.Reason
	}
	for _, tc := range []struct{ id, prefix string }{{bad, "malformed message: no type field"}, {boom, "panic: handler bug"}} {
		if !strings.HasPrefix(got[tc.id], tc.prefix) {
			t.Errorf("reason of %s = %q, want prefix %q", tc.id, got[tc.id], tc.prefix)
		}
		if n, _ := calls.Load(tc.id); n.(*atomic.Int32).Load() != 1 {
			t.Errorf("handler saw %s %d times, want once (no redelivery loop)", tc.id, n.(*atomic.Int32).Load())
		}
	}
}

// testDeadLetterAdmin checks an inbox that is a [scheduler.DeadLetterAdmin]:
// a dead letter requeued comes back with its original fields as a new
// entry and leaves the DLQ, one deleted is gone, and an unknown id is
// reported as such. An inbox without the capability skips it.
func testDeadLetterAdmin(t *testing.T, h StreamsHarness) {
	ctx := context.Background()
	in := h.Inbox("inst-a", "g")
	adm, ok := in.(scheduler.DeadLetterAdmin)
	if !ok {
		t.Skip("the inbox is no scheduler.DeadLetterAdmin")
	}
	if err := in.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	fields := scheduler.Fields{{Name: "type", Value: "job_result"}, {Name: "dlq_reason", Value: "a field of the sender"}}
	var dead []scheduler.DeadLetter
	for range 2 {
		id, err := h.Sender.Send(ctx, "inst-a", fields)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := in.Read(ctx, "c1", 1, 0); err != nil {
			t.Fatal(err)
		}
		dl, ok, err := in.DeadLetter(ctx, "c1", id, 0, "test")
		if err != nil || !ok {
			t.Fatalf("DeadLetter = %v, %v; want moved", ok, err)
		}
		dead = append(dead, dl)
	}
	if n, err := adm.DeadLetterLen(ctx); err != nil || n != 2 {
		t.Errorf("DeadLetterLen = %d, %v; want 2", n, err)
	}
	newID, ok, err := adm.RequeueDeadLetter(ctx, dead[0].ID)
	if err != nil || !ok || newID == "" {
		t.Fatalf("RequeueDeadLetter = %q, %v, %v; want a new id", newID, ok, err)
	}
	got, err := in.Read(ctx, "c2", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]scheduler.Message{{ID: newID, Fields: fields}}, got); d != "" {
		t.Errorf("Read after the requeue (-want +got):\n%s", d)
	}
	if _, ok, err := adm.RequeueDeadLetter(ctx, dead[0].ID); err != nil || ok {
		t.Errorf("RequeueDeadLetter again = %v, %v; want false (gone)", ok, err)
	}
	if ok, err := adm.DeleteDeadLetter(ctx, dead[1].ID); err != nil || !ok {
		t.Errorf("DeleteDeadLetter = %v, %v; want true", ok, err)
	}
	if ok, err := adm.DeleteDeadLetter(ctx, dead[1].ID); err != nil || ok {
		t.Errorf("DeleteDeadLetter again = %v, %v; want false", ok, err)
	}
	if dls, err := in.DeadLetters(ctx, 10); err != nil || len(dls) != 0 {
		t.Errorf("DeadLetters at the end = %v, %v; want none", dls, err)
	}
	if n, err := adm.DeadLetterLen(ctx); err != nil || n != 0 {
		t.Errorf("DeadLetterLen at the end = %d, %v; want 0", n, err)
	}
}
