package redisstore

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// privateRedis is a redis-server of the test's own, which it may kill and
// start again; the shared servers are never touched.
type privateRedis struct {
	t    *testing.T
	port string
	dir  string
	cmd  *exec.Cmd
}

func startPrivateRedis(t *testing.T) *privateRedis {
	t.Helper()
	if testing.Short() {
		t.Skip("starts a private redis-server; skipped under -short")
	}
	if _, err := exec.LookPath("redis-server"); err != nil {
		t.Fatalf("redis-server not found (./test.sh installs it): %v", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	l.Close()
	r := &privateRedis{t: t, port: port, dir: t.TempDir()}
	r.start()
	t.Cleanup(r.stop)
	return r
}

func (r *privateRedis) addr() string { return "127.0.0.1:" + r.port }

func (r *privateRedis) start() {
	r.t.Helper()
	r.cmd = exec.Command("redis-server", "--port", r.port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", r.dir)
	if err := r.cmd.Start(); err != nil {
		r.t.Fatalf("start redis-server on %s: %v", r.port, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", r.addr(), time.Second)
		if err == nil {
			c.Close()
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("redis-server on %s did not come up: %v", r.port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (r *privateRedis) stop() {
	if r.cmd != nil && r.cmd.Process != nil {
		r.cmd.Process.Kill()
		r.cmd.Wait()
		r.cmd = nil
	}
}

// TestDelivererSurvivesServerRestart kills the server under a producer
// and a running Deliverer and starts it again on the same port (without
// persistence: what was in Redis is gone). The deliverer is not restarted:
// it must recreate its group and handle every message sent afterwards.
func TestDelivererSurvivesServerRestart(t *testing.T) {
	srv := startPrivateRedis(t)
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{srv.addr()}, ForceSingleClient: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	st, err := NewStreams(c, StreamsConfig{Prefix: testPrefix(t)})
	if err != nil {
		t.Fatal(err)
	}
	in := st.Inbox("inst-a", "g")
	var mu sync.Mutex
	handled := map[int]bool{}
	cfg := scheduler.Config{InstanceID: "inst-a", Inbox: scheduler.InboxConfig{Block: 100 * time.Millisecond, ClaimMinIdle: 500 * time.Millisecond, ScanInterval: 200 * time.Millisecond}}
	d, err := scheduler.NewDeliverer(in, "c1", func(ctx context.Context, m scheduler.Message) error {
		n, err := strconv.Atoi(m.Fields.Get("seq"))
		if err != nil {
			return errors.Join(scheduler.ErrMalformed, err)
		}
		mu.Lock()
		handled[n] = true
		mu.Unlock()
		return nil
	}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan error, 1)
	go func() { runDone <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-runDone; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	// The producer retries each message until XADD succeeds.
	const total = 600
	var next atomic.Int64       // the next seq the producer sends
	sent := make([]bool, total) // sent[i]: XADD of i succeeded
	prodDone := make(chan struct{})
	go func() {
		defer close(prodDone)
		for i := range total {
			next.Store(int64(i))
			for {
				sctx, scancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := st.Send(sctx, "inst-a", scheduler.Fields{{Name: "seq", Value: strconv.Itoa(i)}})
				scancel()
				if err == nil {
					break
				}
				if ctx.Err() != nil {
					return
				}
				time.Sleep(10 * time.Millisecond)
			}
			mu.Lock()
			sent[i] = true
			mu.Unlock()
			time.Sleep(time.Millisecond)
		}
	}()
	waitUntil(t, "a third of the messages sent", func() bool { return next.Load() >= total/3 })
	srv.stop()
	srv.start()
	firstAfter := int(next.Load()) + 1 // sends from here on began after the restart
	select {
	case <-prodDone:
	case <-time.After(60 * time.Second):
		t.Fatal("producer did not finish within 60s")
	}
	waitUntil(t, "every message sent after the restart handled", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for i := firstAfter; i < total; i++ {
			if !handled[i] {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	for i := firstAfter; i < total; i++ {
		if !sent[i] {
			t.Errorf("message %d never sent", i)
		}
	}
	if firstAfter >= total {
		t.Errorf("the restart happened after the last send (%d); the test exercised nothing", firstAfter)
	}
}

// waitUntil polls cond for up to 30 s.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached in 30s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
