package redisstore

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

// TestDispatcherSurvivesRedisRestart restarts a private Redis (without
// persistence: everything in it is lost) under two Dispatchers: requests
// in flight get job_failed from their instance's request timeout, the
// loops recover on their own, and requests made after the restart get
// their results.
func TestDispatcherSurvivesRedisRestart(t *testing.T) {
	srv := startPrivateRedis(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.addr()}, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	cfg := storetest.DispatchTestConfig("x")
	prefix := testPrefix(t)
	p := storetest.NewTestPlane(t, storetest.DispatcherHarness{Stores: func() scheduler.Stores {
		st, err := NewStores(c, cfg, StoresConfig{KeyPrefix: prefix, Group: "g"})
		if err != nil {
			t.Fatal(err)
		}
		return st
	}})
	// The jobs in flight at the restart vanish with Redis and are
	// answered job_failed once RequestTimeout passes: short, but with
	// room for the loops' back-off after the outage on a loaded machine
	// (at 4s, the first request after the restart once timed out in a
	// run of the whole suite on 2 cores with other work beside it).
	short := func(c *scheduler.Config) { c.Dispatch.RequestTimeout = 8 * time.Second }
	a := p.Start("inst-a", false, short)
	b := p.Start("inst-b", false, short)
	n := storetest.NewTestNode(scheduler.NodeInfo{NodeID: "n1", Capacity: 64})
	n.Decide = func(m scheduler.Envelope) storetest.NodeAction {
		if strings.HasPrefix(string(m.Payload), "hold") {
			return storetest.Hold
		}
		return storetest.Answer
	}
	n.Attach(t, a)
	s := storetest.NewTestSession("s1")
	s.Attach(t, b)
	storetest.Eventually(t, "B sees n1", 10*time.Second, func() bool {
		f := b.Fleet()
		return len(f) == 1 && f[0].Online
	})
	submit := func(req, payload string) {
		// A request made while Redis is down fails; the session retries.
		storetest.Eventually(t, "submit "+req, 20*time.Second, func() bool {
			_, err := b.Submit(context.Background(), "s1", scheduler.Request{RequestID: req, Payload: []byte(payload)})
			return err == nil
		})
	}
	var before, held, after []string
	for i := range 20 {
		r := fmt.Sprintf("before-%d", i)
		before = append(before, r)
		submit(r, r)
	}
	s.WaitAnswers(t, before, 10*time.Second)
	for i := range 5 {
		r := fmt.Sprintf("held-%d", i)
		held = append(held, r)
		submit(r, "hold"+r)
	}
	storetest.Eventually(t, "n1 holds 5 jobs", 10*time.Second, func() bool { return n.Held() == 5 })
	srv.stop()
	srv.start()
	for i := range 20 {
		r := fmt.Sprintf("after-%d", i)
		after = append(after, r)
		submit(r, r)
	}
	got := s.WaitAnswers(t, append(append(append([]string{}, before...), held...), after...), 30*time.Second)
	for _, r := range append(before, after...) {
		if len(got[r]) != 1 || got[r][0].Type != scheduler.TypeJobResult || string(got[r][0].Payload) != "done:"+r {
			t.Errorf("request %s: answers %+v, want one job_result", r, got[r])
		}
	}
	for _, r := range held {
		// The job vanished with Redis: the instance answers job_failed.
		if len(got[r]) != 1 || got[r][0].Type != scheduler.TypeJobFailed {
			t.Errorf("request %s in flight at the restart: answers %+v, want one job_failed", r, got[r])
		}
	}
}

// TestReclaimReportsDeletedEntries: an entry deleted while pending is
// reported by Reclaim, not silently dropped.
func TestReclaimReportsDeletedEntries(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			prefix := testPrefix(t)
			st, err := NewStreams(srv.client, StreamsConfig{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			in := st.Inbox("inst-a", "g")
			if err := in.EnsureGroup(ctx); err != nil {
				t.Fatal(err)
			}
			var ids []string
			for i := range 3 {
				id, err := st.Send(ctx, "inst-a", scheduler.Fields{{Name: "seq", Value: strconv.Itoa(i)}})
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			if got, err := in.Read(ctx, "c1", 10, 0); err != nil || len(got) != 3 {
				t.Fatalf("Read = %d, %v", len(got), err)
			}
			key := NewKeys(prefix).Inbox("inst-a")
			if err := srv.client.Do(ctx, srv.client.B().Xdel().Key(key).Id(ids[1]).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			msgs, deleted, err := in.Reclaim(ctx, "c2", 0, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(msgs) != 2 || len(deleted) != 1 || deleted[0] != ids[1] {
				t.Errorf("Reclaim = %d messages, deleted %v; want 2 and [%s]", len(msgs), deleted, ids[1])
			}
		})
	}
}
