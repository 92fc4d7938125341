package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

func TestDecodeDeadLetter(t *testing.T) {
	fv := func(kv ...string) []rueidis.XRangeFieldValue {
		var out []rueidis.XRangeFieldValue
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, rueidis.XRangeFieldValue{Field: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name string
		in   []rueidis.XRangeFieldValue
		want scheduler.DeadLetter
	}{
		{"plain", fv("type", "job_result", "dlq_source_id", "1-1", "dlq_delivery_count", "11", "dlq_reason", "max_deliveries_exceeded"),
			scheduler.DeadLetter{ID: "9-9", SourceID: "1-1", Deliveries: 11, Reason: "max_deliveries_exceeded", Fields: scheduler.Fields{{Name: "type", Value: "job_result"}}}},
		{"original field with a reserved name is kept", fv("dlq_reason", "mine", "dlq_source_id", "1-2", "dlq_delivery_count", "1", "dlq_reason", "malformed"),
			scheduler.DeadLetter{ID: "9-9", SourceID: "1-2", Deliveries: 1, Reason: "malformed", Fields: scheduler.Fields{{Name: "dlq_reason", Value: "mine"}}}},
		{"entry not written by the move: all fields are original", fv("a", "b"),
			scheduler.DeadLetter{ID: "9-9", Fields: scheduler.Fields{{Name: "a", Value: "b"}}}},
	}
	for _, tc := range tests {
		got := decodeDeadLetter(rueidis.XRangeSlice{ID: "9-9", FieldValues: tc.in})
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s: decodeDeadLetter (-want +got):\n%s", tc.name, d)
		}
	}
}

// FuzzDecodeDeadLetter: whatever the original fields, an entry laid out as
// the move script writes it decodes back to them.
func FuzzDecodeDeadLetter(f *testing.F) {
	f.Add("type", "job_assign", "dlq_reason", "x", int64(3), "malformed: bad json")
	f.Add("", "", "dlq_source_id", "", int64(0), "")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string, deliveries int64, reason string) {
		orig := scheduler.Fields{{Name: k1, Value: v1}, {Name: k2, Value: v2}}
		var in []rueidis.XRangeFieldValue
		for _, f := range orig {
			in = append(in, rueidis.XRangeFieldValue{Field: f.Name, Value: f.Value})
		}
		in = append(in,
			rueidis.XRangeFieldValue{Field: scheduler.DLQFieldSourceID, Value: "5-5"},
			rueidis.XRangeFieldValue{Field: scheduler.DLQFieldDeliveries, Value: strconv.FormatInt(deliveries, 10)},
			rueidis.XRangeFieldValue{Field: scheduler.DLQFieldReason, Value: reason})
		got := decodeDeadLetter(rueidis.XRangeSlice{ID: "1-0", FieldValues: in})
		want := scheduler.DeadLetter{ID: "1-0", SourceID: "5-5", Deliveries: deliveries, Reason: reason, Fields: orig}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("decodeDeadLetter (-want +got):\n%s", d)
		}
	})
}

// TestSendConcurrent: messages sent to one inbox at once share calls of
// the send script, and each arrives once with all its fields, on a
// standalone server and a cluster.
func TestSendConcurrent(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			var calls atomic.Int64
			st, err := NewStreams(srv.client, StreamsConfig{Prefix: testPrefix(t), OpHook: func(op, _ string, _ time.Duration) {
				if op == "xadd" {
					calls.Add(1)
				}
			}})
			if err != nil {
				t.Fatal(err)
			}
			const senders, each = 32, 20
			var wg sync.WaitGroup
			for w := range senders {
				wg.Go(func() {
					for i := range each {
						seq := strconv.Itoa(w*each + i)
						if _, err := st.Send(ctx, "inst-a", scheduler.Fields{{Name: "seq", Value: seq}, {Name: "w", Value: strconv.Itoa(w)}, {Name: "pad", Value: seq + "-" + seq}}); err != nil {
							t.Errorf("send %s: %v", seq, err)
						}
					}
				})
			}
			wg.Wait()
			in := st.Inbox("inst-a", "g")
			if err := in.EnsureGroup(ctx); err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for {
				msgs, err := in.Read(ctx, "c", 100, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(msgs) == 0 {
					break
				}
				for _, m := range msgs {
					seq, _ := strconv.Atoi(m.Fields.Get("seq"))
					want := scheduler.Fields{{Name: "seq", Value: m.Fields.Get("seq")}, {Name: "w", Value: strconv.Itoa(seq / each)}, {Name: "pad", Value: m.Fields.Get("seq") + "-" + m.Fields.Get("seq")}}
					if d := cmp.Diff(want, m.Fields); d != "" || seen[m.Fields.Get("seq")] {
						t.Errorf("entry %s (seen before: %v) (-want +got):\n%s", m.ID, seen[m.Fields.Get("seq")], d)
					}
					seen[m.Fields.Get("seq")] = true
				}
			}
			if len(seen) != senders*each {
				t.Errorf("%d messages arrived, want %d", len(seen), senders*each)
			}
			if n := calls.Load(); n >= senders*each {
				t.Errorf("%d script calls for %d concurrent messages: none shared", n, senders*each)
			}
		})
	}
}

// TestReadBothProtocols: Read takes the entries out of the XREADGROUP
// reply as RESP3 gives it (a map of streams) and as RESP2 does (a list of
// pairs), fields in the order they were sent.
func TestReadBothProtocols(t *testing.T) {
	ctx := context.Background()
	for _, resp2 := range []bool{false, true} {
		c, err := rueidis.NewClient(rueidis.ClientOption{
			InitAddress: []string{testenv.Addr(testenv.RedisURL(t))}, ForceSingleClient: true, AlwaysRESP2: resp2, DisableCache: resp2,
		})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		st, err := NewStreams(c, StreamsConfig{Prefix: testPrefix(t)})
		if err != nil {
			t.Fatal(err)
		}
		in := st.Inbox("inst-a", "g")
		if err := in.EnsureGroup(ctx); err != nil {
			t.Fatal(err)
		}
		want := []scheduler.Message{
			{Fields: scheduler.Fields{{Name: "z", Value: "1"}, {Name: "a", Value: ""}, {Name: "m", Value: "x y"}}},
			{Fields: scheduler.Fields{{Name: "only", Value: "2"}}},
		}
		for i := range want {
			if want[i].ID, err = st.Send(ctx, "inst-a", want[i].Fields); err != nil {
				t.Fatal(err)
			}
		}
		got, err := in.Read(ctx, "c1", 10, 0)
		if err != nil {
			t.Fatalf("RESP2 %v: %v", resp2, err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("RESP2 %v: Read (-want +got):\n%s", resp2, d)
		}
		if got, err := in.Read(ctx, "c1", 10, 0); err != nil || len(got) != 0 {
			t.Errorf("RESP2 %v: second Read = %v, %v; want nothing", resp2, got, err)
		}
	}
}

// TestSendersForgetIdleInstances: the senders of instances not sent to
// for a while are dropped, so a long-lived process does not keep one for
// every instance id it ever sent to; sending to a forgotten instance
// works as before.
func TestSendersForgetIdleInstances(t *testing.T) {
	ctx := context.Background()
	c := newTestClient(t, []string{testenv.Addr(testenv.RedisURL(t))}, false)
	st, err := NewStreams(c, StreamsConfig{Prefix: testPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	f := scheduler.Fields{{Name: "k", Value: "v"}}
	for i := range 100 {
		if _, err := st.Send(ctx, fmt.Sprintf("old-%d", i), f); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range *st.senders.Load() {
		q.used.Add(-int64(2 * senderIdle)) // as if last used long ago
	}
	if _, err := st.Send(ctx, "new", f); err != nil {
		t.Fatal(err)
	}
	if n := len(*st.senders.Load()); n != 1 {
		t.Errorf("%d senders kept after 100 instances went idle, want 1 (the new one)", n)
	}
	if _, err := st.Send(ctx, "old-0", f); err != nil {
		t.Errorf("send to a forgotten instance: %v", err)
	}
	if n, err := st.Inbox("old-0", "g").Len(ctx); err != nil || n != 2 {
		t.Errorf("inbox of old-0 holds %d, %v; want 2", n, err)
	}
}

// TestSendBound: a sender appends with a bare XADD while its last reading
// of the inbox's length is fresh and under a quarter of MaxLen, and with
// the script that reads the length otherwise, so that one sender fills an
// inbox to exactly MaxLen, never past it, and is refused after.
func TestSendBound(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			const maxLen = 100
			st, err := NewStreams(srv.client, StreamsConfig{Prefix: testPrefix(t), MaxLen: maxLen})
			if err != nil {
				t.Fatal(err)
			}
			// A reading stays fresh through the test, however slow the
			// machine: which sends are bare depends on the counts alone.
			st.lenEvery = time.Hour
			send := func(i int) error {
				_, err := st.Send(ctx, "i1", scheduler.Fields{{Name: "n", Value: strconv.Itoa(i)}})
				return err
			}
			q := st.sender("i1")
			for i := range maxLen / 4 {
				if err := send(i); err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
			}
			// The first send read the length (1 after it); the 24 after it
			// were bare, until one more would reach a quarter.
			if q.seen != 1 || q.since != maxLen/4-1 {
				t.Errorf("after %d sends: the script saw %d, %d bare sends since; want 1 and %d", maxLen/4, q.seen, q.since, maxLen/4-1)
			}
			accepted := maxLen / 4
			for i := maxLen / 4; i < 2*maxLen; i++ {
				err := send(i)
				if errors.Is(err, scheduler.ErrInboxFull) {
					break
				}
				if err != nil {
					t.Fatalf("send %d: %v", i, err)
				}
				accepted++
			}
			n, err := srv.client.Do(ctx, srv.client.B().Xlen().Key(st.keys.Inbox("i1")).Build()).AsInt64()
			if err != nil {
				t.Fatal(err)
			}
			if accepted != maxLen || n != maxLen {
				t.Errorf("accepted %d messages, the inbox holds %d; want both %d (MaxLen)", accepted, n, maxLen)
			}
		})
	}
}
