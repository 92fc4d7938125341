package main

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// TestFleetSmall runs the whole program at 20 nodes on 2 instances for a
// few seconds, kill -9 included: every request is answered with a result,
// every node of the killed instance registers again elsewhere, and the
// figures are there. It uses KSANA_TEST_REDIS_URL when set, else a
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
	if k.Load.Unanswered != 0 || k.InFlightAnswered != k.InFlight {
		t.Errorf("kill: %+v, want every request answered", k)
	}
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(b []byte) (int, error) {
	w.t.Log(string(b))
	return len(b), nil
}
