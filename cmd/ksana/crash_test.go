package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// child is the built ksana binary running as a child process.
type child struct {
	cmd  *exec.Cmd
	url  string
	logs *syncBuffer
}

// startChild starts the built binary over the data directory dir, with
// the variables env added to its environment.
func startChild(t *testing.T, bin, dir string, env ...string) *child {
	t.Helper()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "KSANA_DATA="+dir, "PORT=0", "LOG_FORMAT=json", "LOG_LEVEL=info", "WORKERS=4", "MIN_INTERVAL=10ms")
	cmd.Env = append(cmd.Env, env...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := startProcess(cmd); err != nil {
		t.Fatal(err)
	}
	c := &child{cmd: cmd, logs: &syncBuffer{}}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			c.logs.Write([]byte(line + "\n"))
			var rec struct {
				Msg  string `json:"msg"`
				Addr string `json:"addr"`
			}
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "ksana: listening" {
				addr <- rec.Addr
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case a := <-addr:
		c.url = "http://127.0.0.1:" + a[strings.LastIndex(a, ":")+1:]
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("child did not start listening; logs:\n%s", c.logs.String())
	}
	return c
}

func (c *child) kill(t *testing.T) {
	t.Helper()
	if err := c.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	c.cmd.Wait()
}

// expectation is what the acknowledged writes say about one job.
type expectation struct {
	exists bool
	name   string
}

// TestCrashSafety runs the built binary under a stream of API writes and
// runs and kills it with SIGKILL at random moments, 50 times. After each
// kill jobs.json parses; after each restart every write that got a 2xx is
// there, and no jobs.bad file ever appears.
func TestCrashSafety(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("SIGKILL")
	}
	runAs(t, heavyTest)
	rounds := 50
	bin := buildKsana(t)
	cb := newCallback(t, 200, 0)
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))

	var mu sync.Mutex
	expect := map[string]expectation{} // acknowledged state
	uncertain := map[string]bool{}     // a write was in flight at the kill
	seq := 0
	client := &http.Client{Timeout: 10 * time.Second}

	for round := range rounds {
		c := startChild(t, bin, dir)
		// The state the API serves must hold every acknowledged write.
		var listed []cron.Job
		if code := call(t, "GET", c.url+"/jobs", "", &listed); code != 200 {
			t.Fatalf("round %d: list: %d", round, code)
		}
		have := map[string]cron.Job{}
		for _, j := range listed {
			have[j.ID] = j
		}
		mu.Lock()
		for id, e := range expect {
			if uncertain[id] {
				continue
			}
			j, ok := have[id]
			switch {
			case e.exists && !ok:
				t.Errorf("round %d: job %s acknowledged as created is gone", round, id)
			case !e.exists && ok:
				t.Errorf("round %d: job %s acknowledged as deleted is back", round, id)
			case ok && j.Name != e.name:
				t.Errorf("round %d: job %s has name %q, want the acknowledged %q", round, id, j.Name, e.name)
			}
		}
		// Writes in flight at the kill may or may not have landed: take
		// what the service says.
		for id := range uncertain {
			j, ok := have[id]
			expect[id] = expectation{exists: ok, name: j.Name}
		}
		clear(uncertain)
		mu.Unlock()
		if t.Failed() {
			t.Fatalf("logs of round %d:\n%s", round, c.logs.String())
		}

		// A stream of writes from 4 clients, and runs of every-50ms jobs,
		// for a random time; then SIGKILL.
		ctx, cancel := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(round), uint64(w)))
				for ctx.Err() == nil {
					mu.Lock()
					seq++
					n := seq
					var ids []string
					for id, e := range expect {
						if e.exists && !uncertain[id] {
							ids = append(ids, id)
						}
					}
					mu.Unlock()
					var method, path, body, id string
					var after expectation
					switch op := r.IntN(10); {
					case op < 5 || len(ids) < 5:
						id = fmt.Sprintf("j%05d", n)
						method, path = "POST", "/jobs"
						sched := `{"kind":"every","every":"1h"}`
						if n%4 == 0 {
							sched = `{"kind":"every","every":"50ms"}`
						}
						body = fmt.Sprintf(`{"id":%q,"name":"n%d","http":{"url":%q},"schedule":%s,"max_retries":0}`, id, n, cb.URL, sched)
						after = expectation{exists: true, name: fmt.Sprintf("n%d", n)}
					case op < 8:
						id = ids[r.IntN(len(ids))]
						method, path = "PATCH", "/jobs/"+id
						body = fmt.Sprintf(`{"name":"p%d"}`, n)
						after = expectation{exists: true, name: fmt.Sprintf("p%d", n)}
					default:
						id = ids[r.IntN(len(ids))]
						method, path = "DELETE", "/jobs/"+id
					}
					mu.Lock()
					uncertain[id] = true
					mu.Unlock()
					req, _ := http.NewRequest(method, c.url+path, strings.NewReader(body))
					req.Header.Set("Content-Type", "application/json")
					req.Header.Set("Content-Type", "application/json")
					resp, err := client.Do(req)
					if err != nil {
						return // killed: id stays uncertain
					}
					io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					mu.Lock()
					if resp.StatusCode < 300 {
						expect[id] = after
						delete(uncertain, id)
					} else if resp.StatusCode == 404 || resp.StatusCode == 409 {
						// Lost a race with another client on the same id:
						// the next round settles it.
					} else {
						delete(uncertain, id)
						t.Errorf("%s %s: %d", method, path, resp.StatusCode)
					}
					mu.Unlock()
				}
			})
		}
		time.Sleep(time.Duration(20+rng.IntN(200)) * time.Millisecond)
		c.kill(t)
		cancel()
		wg.Wait()

		// Right after the crash: the file parses and nothing was set aside.
		readJobsFile(t, dir)
		if bad := badFiles(t, dir); len(bad) > 0 {
			t.Fatalf("round %d: %v appeared; logs:\n%s", round, bad, c.logs.String())
		}
	}
	// Finally a clean stop: SIGTERM exits 0 with everything in jobs.json
	// and an empty journal.
	c := startChild(t, bin, dir)
	var before []cron.Job
	call(t, "GET", c.url+"/jobs", "", &before)
	if err := c.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := c.cmd.Wait(); err != nil {
		t.Errorf("exit after SIGTERM: %v; logs:\n%s", err, c.logs.String())
	}
	if got := readJobsFile(t, dir); len(got) != len(before) {
		t.Errorf("jobs.json after SIGTERM holds %d jobs, the API had %d", len(got), len(before))
	}
	if st, err := os.Stat(filepath.Join(dir, "jobs.journal")); err != nil {
		t.Errorf("journal after a clean stop: %v", err)
	} else if st.Size() != 0 {
		t.Errorf("journal after a clean stop has %d bytes, want none", st.Size())
	}

	mu.Lock()
	n := 0
	for _, e := range expect {
		if e.exists {
			n++
		}
	}
	mu.Unlock()
	t.Logf("%d rounds, %d writes, %d jobs at the end, %d callbacks", rounds, seq, n, cb.count())
}
