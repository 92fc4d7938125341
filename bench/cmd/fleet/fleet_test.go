package main

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestFleetSmall runs the whole program at 20 nodes on 2 instances for a
// few seconds, kill -9 included: every request of the load is answered
// with a result, every node of the killed instance registers again
// elsewhere, and the figures are there. It uses KSANA_TEST_REDIS_URL when set, else a
// redis-server of its own.
func TestFleetSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("starts dispatcher processes; skipped under -short")
	}
	redisURL := os.Getenv("KSANA_TEST_REDIS_URL")
	if redisURL == "" {
		if _, err := exec.LookPath("redis-server"); err != nil {
			t.Skip("no KSANA_TEST_REDIS_URL and no redis-server on the PATH")
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	o := options{
		Redis: redisURL, Instances: 2, Nodes: 20, Sessions: 4, Pools: 10, Capacity: 4,
		Work: 20 * time.Millisecond, Idle: time.Second, Rate: 40, Duration: 2 * time.Second,
		Drain: 20 * time.Second, Kill: true, Log: testWriter{t},
	}
	rep, err := run(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	if rep.RegisterS <= 0 || rep.IdleRedisPerS <= 0 || rep.CPUPerJobMS <= 0 || len(rep.RSSAfterKiB) != 2 {
		t.Errorf("figures missing: %+v", rep)
	}
	if l := rep.Load; l.Sent < 70 || l.Results != l.Sent || l.P50MS < ms(o.Work) {
		t.Errorf("load: %+v, want every one of about 80 requests answered with a result, p50 at least the work time", l)
	}
	k := rep.KillPhase
	if k == nil {
		t.Fatal("no kill report")
	}
	if k.NodesMoved != 10 || k.NodesBack != k.NodesMoved {
		t.Errorf("kill: %d of %d nodes back, want all 10 of the killed instance", k.NodesBack, k.NodesMoved)
	}
	// A request in flight at the kill, sent again on another instance
	// while its job waits out the ack timeout, may go unanswered (see
	// README.md); every other request must be answered.
	if lost := k.InFlight - k.InFlightAnswered; k.Load.Unanswered > lost {
		t.Errorf("kill: %+v, want every request answered but those in flight at the kill", k)
	} else if lost > 0 {
		t.Logf("kill: %d of %d requests in flight at the kill unanswered: %v", lost, k.InFlight, k.Load.Open)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}
