package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/ksana-dev/ksana/store/jsonstore"
)

func main() {
	if _, err := run(os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ksana-embedded:", err)
		os.Exit(1)
	}
}

// waitLimit bounds each wait: a broken API ends the program with an error
// instead of hanging.
const waitLimit = 30 * time.Second

// summary is what the program saw: the calls to /hook, the runs the API
// listed, and the job as the pause answer and jobs.json hold it.
type summary struct {
	Hooks        int64
	Runs         []cron.Run
	Paused       cron.Job // the answer to POST /admin/jobs/hook/pause
	StoredJobs   int      // jobs in jobs.json after the stop
	StoredPaused bool     // the job is in jobs.json, disabled
}

func run(w io.Writer) (summary, error) {
	var sum summary
	out := &lockedWriter{w: w} // the hook handler prints from its own goroutines
	dir, err := os.MkdirTemp("", "ksana-embedded")
	if err != nil {
		return sum, err
	}
	defer os.RemoveAll(dir)

	// The store and the runner.
	store, err := jsonstore.New(dir, jsonstore.Config{Journal: true})
	if err != nil {
		return sum, err
	}
	defer store.Close()
	runner, err := cron.New(store, cron.NewHTTPExecutor(cron.HTTPExecutorConfig{}), cron.Config{Workers: 2})
	if err != nil {
		return sum, err
	}
	api, err := httpapi.New(runner, httpapi.Config{})
	if err != nil {
		return sum, err
	}

	// Your own server: your endpoints, and the API under /admin/.
	var hooks atomic.Int64
	third := make(chan struct{})
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		n := hooks.Add(1)
		fmt.Fprintf(out, "hook called (%d), run %s\n", n, short(r.Header.Get(cron.HeaderRunID)))
		if n == 3 {
			close(third)
		}
	})
	mux.Handle("/admin/", http.StripPrefix("/admin", api))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return sum, err
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	defer srv.Close()
	base := "http://" + ln.Addr().String()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()

	// Create a job through the API: every second, calling /hook.
	body := fmt.Sprintf(`{"id":"hook","name":"self","http":{"method":"POST","url":%q},"schedule":{"kind":"every","every":"1s"}}`, base+"/hook")
	if err := call(http.MethodPost, base+"/admin/jobs", body, http.StatusCreated, nil); err != nil {
		return sum, err
	}
	fmt.Fprintln(out, "POST /admin/jobs: 201 Created")

	select {
	case <-third:
	case <-time.After(waitLimit):
		return sum, fmt.Errorf("/hook called %d times in %v, want 3", hooks.Load(), waitLimit)
	}

	// The run record lands just after the callback answers: wait for the
	// third one, at most waitLimit.
	deadline := time.Now().Add(waitLimit)
	for {
		sum.Runs = nil
		if err := call(http.MethodGet, base+"/admin/jobs/hook/runs", "", http.StatusOK, &sum.Runs); err != nil {
			return sum, err
		}
		if len(sum.Runs) >= 3 {
			break
		}
		if time.Now().After(deadline) {
			return sum, fmt.Errorf("GET /admin/jobs/hook/runs: %d runs after %v, want 3", len(sum.Runs), waitLimit)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, r := range sum.Runs {
		fmt.Fprintf(out, "run %s: %s, attempts %d, http %d\n", short(r.ID), r.Status, r.Attempts, r.HTTPStatus)
	}

	if err := call(http.MethodPost, base+"/admin/jobs/hook/pause", "", http.StatusOK, &sum.Paused); err != nil {
		return sum, err
	}
	fmt.Fprintln(out, "POST /admin/jobs/hook/pause: 200 OK")

	// Shut down: the server, then the runner (which flushes the store's
	// journal), then the store, which writes jobs.json whole.
	srv.Shutdown(context.Background())
	stop()
	if err := <-done; err != nil {
		return sum, err
	}
	if err := store.Close(); err != nil {
		return sum, err
	}
	sum.Hooks = hooks.Load()
	data, err := os.ReadFile(filepath.Join(dir, jsonstore.JobsFile))
	if err != nil {
		return sum, err
	}
	var file struct {
		Jobs []struct {
			ID      string `json:"id"`
			Enabled bool   `json:"enabled"`
		} `json:"jobs"`
	}
	if err := json.Unmarshal(data, &file); err != nil {
		return sum, fmt.Errorf("%s: %w", jsonstore.JobsFile, err)
	}
	sum.StoredJobs = len(file.Jobs)
	for _, j := range file.Jobs {
		if j.ID == "hook" && !j.Enabled {
			sum.StoredPaused = true
		}
	}
	fmt.Fprintf(out, "jobs.json: %d bytes, %d job, paused: %v\n", len(data), sum.StoredJobs, sum.StoredPaused)
	return sum, nil
}

// call sends a request with a JSON body (none when body is empty), checks
// the answer's status, and decodes its body into v when v is not nil.
func call(method, url, body string, want int, v any) error {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		return err
	}
	if method != http.MethodGet {
		// Every write is JSON, with or without a body.
		req.Header.Set("Content-Type", "application/json")
	}
	client := &http.Client{Timeout: waitLimit}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != want {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("%s %s: %s, want %d: %s", method, url, resp.Status, want, strings.TrimSpace(string(b)))
	}
	if v == nil {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(v); err != nil {
		return fmt.Errorf("%s %s: %w", method, url, err)
	}
	return nil
}

// lockedWriter serializes writes to w.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// short is the first 8 characters of a run id.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}
