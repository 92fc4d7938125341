package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

// Mount the API of a runner and manage a job through it.
func Example() {
	exec := cron.ExecutorFunc(func(ctx context.Context, j *cron.Job, info cron.RunInfo) cron.Result {
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200}
	})
	runner, err := cron.New(nil, exec, cron.Config{})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- runner.Run(ctx) }()
	defer func() { stop(); <-done }()

	api, err := httpapi.New(runner, httpapi.Config{})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()

	call := func(method, path, body string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		var j struct {
			Name       string `json:"name"`
			Enabled    *bool  `json:"enabled"`
			MaxRetries *int   `json:"max_retries"`
			Error      string `json:"error"`
			Field      string `json:"field"`
		}
		_ = json.Unmarshal(b, &j)
		switch {
		case j.Error != "":
			fmt.Printf("%s %s: %d error=%q field=%q\n", method, path, resp.StatusCode, j.Error, j.Field)
		case j.Enabled != nil:
			fmt.Printf("%s %s: %d name=%s enabled=%v max_retries=%d\n", method, path, resp.StatusCode, j.Name, *j.Enabled, *j.MaxRetries)
		default:
			fmt.Printf("%s %s: %d\n", method, path, resp.StatusCode)
		}
	}
	call("POST", "/jobs", `{"id":"ping","name":"ping","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"5m"}}`)
	call("PATCH", "/jobs/ping", `{"name":"ping service"}`)
	call("POST", "/jobs/ping/pause", ``)
	call("PATCH", "/jobs/ping", `{"schedule":{"kind":"every","every":"never"}}`)
	call("DELETE", "/jobs/ping", ``)
	call("GET", "/jobs/ping", ``)
	// Output:
	// POST /jobs: 201 name=ping enabled=true max_retries=3
	// PATCH /jobs/ping: 200 name=ping service enabled=true max_retries=3
	// POST /jobs/ping/pause: 200 name=ping service enabled=false max_retries=3
	// PATCH /jobs/ping: 400 error="must be a duration such as \"5m\", got \"never\"" field="schedule.every"
	// DELETE /jobs/ping: 204
	// GET /jobs/ping: 404 error="job \"ping\" not found" field=""
}
