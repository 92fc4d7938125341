package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/console"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

// Mount the console of a runner under /jobs-ui/ in a service's mux, next
// to its API, and read the jobs page.
func Example() {
	runner, err := cron.New(nil, cron.NewHTTPExecutor(cron.HTTPExecutorConfig{}), cron.Config{})
	if err != nil {
		panic(err)
	}
	if _, err := runner.Add(context.Background(), cron.Job{ID: "nightly", Name: "nightly report",
		HTTP: cron.HTTPConfig{URL: "https://example.com/report"}, Schedule: cron.Cron("0 3 * * *")}); err != nil {
		panic(err)
	}
	api, err := httpapi.New(runner, httpapi.Config{})
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/api/", http.StripPrefix("/api", api))
	mux.Handle("/jobs-ui/", console.New(runner, console.Config{API: api}))
	srv := httptest.NewServer(mux)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/jobs-ui/jobs/nightly")
	if err != nil {
		panic(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, resp.Header.Get("Content-Type"))
	fmt.Println(strings.Contains(string(page), "every day at 03:00 (UTC)"))
	fmt.Println(strings.Contains(string(page), `href="/jobs-ui/assets/console.css"`))
	// Output:
	// 200 OK text/html; charset=utf-8
	// true
	// true
}
