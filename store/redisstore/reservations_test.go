package redisstore

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

func newReservations(t testing.TB, c rueidis.Client, hook OpHook) *Reservations {
	t.Helper()
	s, err := NewReservations(c, ReservationsConfig{Prefix: testPrefix(t), OpHook: hook})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestReservationsKey checks the layout and that the ZSET's key expires
// with its last reservation, never before a live one.
func TestReservationsKey(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		s := newReservations(t, srv.client, nil)
		if err := s.Reserve(ctx, "n1", "long", 4, time.Hour); err != nil {
			t.Fatal(err)
		}
		if err := s.Reserve(ctx, "n1", "short", 4, time.Minute); err != nil {
			t.Fatal(err)
		}
		key := s.keys.Prefix() + ":v1:nodes:{node:n1}:reserved"
		c := srv.client
		pttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
		if err != nil || pttl < (59*time.Minute).Milliseconds() {
			t.Errorf("%s: PTTL %s = %d, %v; want about an hour (the longest reservation)", srv.name, key, pttl, err)
		}
		members, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
		if err != nil || len(members) != 2 {
			t.Errorf("%s: ZRANGE %s = %v, %v; want the 2 jobs", srv.name, key, members, err)
		}
	}
}

func TestReservationsOpHook(t *testing.T) {
	ctx := context.Background()
	var got []string
	s := newReservations(t, testServers(t)[0].client, func(op, result string, d time.Duration) { got = append(got, op+"/"+result) })
	s.Reserve(ctx, "n", "j", 1, time.Minute)
	if err := s.Reserve(ctx, "n", "k", 1, time.Minute); !errors.Is(err, scheduler.ErrNodeFull) {
		t.Fatalf("Reserve on a full node: %v", err)
	}
	s.Count(ctx, "n")
	s.Release(ctx, "n", "j")
	want := []string{"reserve/ok", "reserve/ok", "reserve_count/ok", "release/ok"}
	if len(got) != len(want) {
		t.Fatalf("hook calls = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("hook call %d = %s, want %s", i, got[i], want[i])
		}
	}
}

// TestReservationsExpiredMember: a job whose reservation expired but is
// still in the ZSET counts as gone: it is reserved again only when the
// others leave room, while a live one is renewed even on a full node.
func TestReservationsExpiredMember(t *testing.T) {
	ctx := context.Background()
	const past, future = "1", "9000000000000" // ms: long gone, far ahead
	tests := []struct {
		name        string
		stored      map[string]string // member -> score before
		job         string
		capacity    int
		wantErr     error
		wantMembers []string // after, in score order
		wantRenewed bool     // job's score is now about now+ttl
	}{
		{"expired, others fill the node", map[string]string{"a": past, "b": future}, "a", 1, scheduler.ErrNodeFull, []string{"b"}, false},
		{"expired, room left", map[string]string{"a": past, "b": future}, "a", 2, nil, []string{"a", "b"}, true},
		{"live on a full node", map[string]string{"a": future, "b": future}, "a", 1, nil, []string{"a", "b"}, true},
		{"new job reclaims an expired one", map[string]string{"a": past}, "c", 1, nil, []string{"c"}, true},
	}
	for _, srv := range testServers(t) {
		c := srv.client
		for _, tt := range tests {
			s := newReservations(t, c, nil)
			key := s.keys.NodeReserved("n")
			for m, score := range tt.stored {
				if err := c.Do(ctx, c.B().Zadd().Key(key).ScoreMember().ScoreMember(mustFloat(t, score), m).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.Do(ctx, c.B().Pexpire().Key(key).Milliseconds(time.Hour.Milliseconds()).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			before := time.Now()
			err := s.Reserve(ctx, "n", tt.job, tt.capacity, time.Minute)
			if !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("%s %s: Reserve error = %v, want %v", srv.name, tt.name, err, tt.wantErr)
			}
			members, err := c.Do(ctx, c.B().Zrange().Key(key).Min("0").Max("-1").Build()).AsStrSlice()
			if diff := cmp.Diff(tt.wantMembers, members); err != nil || diff != "" {
				t.Errorf("%s %s: members after (-want +got): %v\n%s", srv.name, tt.name, err, diff)
			}
			if !tt.wantRenewed {
				continue
			}
			score, err := c.Do(ctx, c.B().Zscore().Key(key).Member(tt.job).Build()).AsFloat64()
			want := before.Add(time.Minute)
			if got := time.UnixMilli(int64(score)); err != nil || got.Before(want.Add(-10*time.Second)) || got.After(want.Add(10*time.Second)) {
				t.Errorf("%s %s: expiry of %s = %v, %v; want about %v", srv.name, tt.name, tt.job, got, err, want)
			}
		}
	}
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestOpenOnSlot: a new job takes its node's slot in its open step, a
// full node refuses and nothing is stored (no job, no deadline, no slot),
// and an existing job is returned with no slot taken; on a standalone
// server and on a cluster (where it is three calls).
func TestOpenOnSlot(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			prefix := testPrefix(t)
			jobs, err := NewJobs(srv.client, JobsConfig{Prefix: prefix, MaxAttempts: 3, TTL: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			res, err := NewReservations(srv.client, ReservationsConfig{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			due := time.Now().Add(time.Minute)
			spec := func(id string) scheduler.JobSpec {
				return scheduler.JobSpec{RequestID: id, SessionID: "s1", Payload: []byte(id), Instance: "i1"}
			}
			rec, entry, created, err := jobs.OpenOnSlot(ctx, "ja", spec("ra"), "n1", 1, time.Minute, due)
			if err != nil || !created || rec.State != "DISPATCHED" || rec.NodeID != "n1" || rec.Attempt != 1 {
				t.Fatalf("OpenOnSlot(ja) = %+v, created %v, %v; want ja created, DISPATCHED to n1", rec, created, err)
			}
			if diff := cmp.Diff(scheduler.BookEntry{Spec: spec("ra"), Tried: []string{"n1"}, Waiters: []string{"s1"}}, entry); diff != "" {
				t.Errorf("entry of ja (-want +got):\n%s", diff)
			}
			stored, err := jobs.Job(ctx, "ja")
			if err != nil || stored != rec {
				t.Errorf("Job(ja) = %+v, %v; want %+v as OpenOnSlot returned it", stored, err, rec)
			}
			if ids, err := res.Jobs(ctx, "n1"); err != nil || !cmp.Equal(ids, []string{"ja"}) {
				t.Errorf("slots of n1 = %v, %v; want [ja]", ids, err)
			}
			// n1 has one slot: a second job is refused and leaves nothing.
			if _, _, _, err := jobs.OpenOnSlot(ctx, "jb", spec("rb"), "n1", 1, time.Minute, due); !errors.Is(err, scheduler.ErrNodeFull) {
				t.Fatalf("OpenOnSlot(jb) on a full node: %v, want ErrNodeFull", err)
			}
			if _, err := jobs.Job(ctx, "jb"); !errors.Is(err, scheduler.ErrJobNotFound) {
				t.Errorf("Job(jb) after a refusal: %v, want ErrJobNotFound", err)
			}
			dueKey := NewKeys(prefix).Due(dueShardOf("jb", dueShards(srv.client)))
			if _, err := srv.client.Do(ctx, srv.client.B().Zscore().Key(dueKey).Member("jb").Build()).AsFloat64(); !isNil(err) {
				t.Errorf("deadline of jb after a refusal: %v, want none", err)
			}
			// The existing job is returned as it is, on another node with
			// room, and takes no slot there.
			rec2, _, created, err := jobs.OpenOnSlot(ctx, "ja", spec("ra"), "n2", 1, time.Minute, due)
			if err != nil || created || rec2 != rec {
				t.Errorf("OpenOnSlot(ja) again = %+v, created %v, %v; want the stored record, not created", rec2, created, err)
			}
			if ids, err := res.Jobs(ctx, "n2"); err != nil || len(ids) != 0 {
				t.Errorf("slots of n2 = %v, %v; want none", ids, err)
			}
			if _, _, _, err := jobs.OpenOnSlot(ctx, "jc", spec("rc"), "n1", 0, time.Minute, due); !errors.Is(err, scheduler.ErrInvalidArgument) {
				t.Errorf("OpenOnSlot with capacity 0: %v, want ErrInvalidArgument", err)
			}
		})
	}
}
