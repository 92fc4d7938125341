package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
	"github.com/ksana-dev/ksana/store/jsonstore"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "ksana-embedded:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := os.MkdirTemp("", "ksana-embedded")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)

	// The store and the runner.
	store, err := jsonstore.New(dir, jsonstore.Config{Journal: true})
	if err != nil {
		return err
	}
	defer store.Close()
	runner, err := cron.New(store, cron.NewHTTPExecutor(cron.HTTPExecutorConfig{}), cron.Config{Workers: 2})
	if err != nil {
		return err
	}
	api, err := httpapi.New(runner, httpapi.Config{})
	if err != nil {
		return err
	}

	// Your own server: your endpoints, and the API under /admin/.
	var hooks atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /hook", func(w http.ResponseWriter, r *http.Request) {
		n := hooks.Add(1)
		fmt.Printf("hook called (%d), run %s\n", n, r.Header.Get(cron.HeaderRunID)[:8])
	})
	mux.Handle("/admin/", http.StripPrefix("/admin", api))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: mux}
	go srv.Serve(ln)
	base := "http://" + ln.Addr().String()

	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- runner.Run(ctx) }()

	// Create a job through the API: every second, calling /hook.
	body := fmt.Sprintf(`{"id":"hook","name":"self","http":{"method":"POST","url":%q},"schedule":{"kind":"every","every":"1s"}}`, base+"/hook")
	resp, err := http.Post(base+"/admin/jobs", "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	resp.Body.Close()
	fmt.Println("POST /admin/jobs:", resp.Status)

	for hooks.Load() < 3 {
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(100 * time.Millisecond) // let the last run's record land

	resp, err = http.Get(base + "/admin/jobs/hook/runs")
	if err != nil {
		return err
	}
	var runs []cron.Run
	err = json.NewDecoder(resp.Body).Decode(&runs)
	resp.Body.Close()
	if err != nil {
		return err
	}
	for _, r := range runs {
		fmt.Printf("run %s: %s, attempts %d, http %d\n", r.ID[:8], r.Status, r.Attempts, r.HTTPStatus)
	}

	resp, err = http.Post(base+"/admin/jobs/hook/pause", "application/json", nil)
	if err != nil {
		return err
	}
	resp.Body.Close()
	fmt.Println("POST /admin/jobs/hook/pause:", resp.Status)

	// Shut down: the server, then the runner (which flushes the store).
	srv.Shutdown(context.Background())
	stop()
	if err := <-done; err != nil {
		return err
	}
	data, err := os.ReadFile(dir + "/" + jsonstore.JobsFile)
	if err != nil {
		return err
	}
	fmt.Printf("jobs.json: %d bytes, paused job kept\n", len(data))
	return nil
}
