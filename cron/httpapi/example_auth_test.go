package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/httpapi"
)

// Serve the API to tokens of several roles, replace them while serving,
// and keep the audit log of writes in a sink.
func ExampleTokenSet() {
	// The runner audits every change, whoever makes it; a sink sees each
	// record.
	runner, err := cron.New(nil, cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result {
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1}
	}), cron.Config{AuditSink: printAudit})
	if err != nil {
		panic(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- runner.Run(ctx) }()
	defer func() { stop(); <-done }()

	tokens, err := httpapi.NewTokenSet([]httpapi.Token{
		{Secret: "view-me-secret-001", Role: httpapi.RoleViewer, Name: "grafana"},
		{Secret: "ops-me-secret-0001", Role: httpapi.RoleOperator, Name: "oncall"},
		{Secret: "root-me-secret-001", Role: httpapi.RoleAdmin, Name: "deploy"},
	})
	if err != nil {
		panic(err)
	}
	api, err := httpapi.New(runner, httpapi.Config{Authenticator: tokens})
	if err != nil {
		panic(err)
	}
	srv := httptest.NewServer(api)
	defer srv.Close()

	call := func(token, method, path, body string) {
		req, _ := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 400 {
			fmt.Printf("%s %s: %d %s", method, path, resp.StatusCode, b)
			return
		}
		fmt.Printf("%s %s: %d\n", method, path, resp.StatusCode)
	}
	call("root-me-secret-001", "POST", "/jobs", `{"id":"ping","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"5m"}}`)
	call("view-me-secret-001", "POST", "/jobs/ping/pause", "")
	call("ops-me-secret-0001", "POST", "/jobs/ping/pause", "")
	call("ops-me-secret-0001", "DELETE", "/jobs/ping", "")
	// A reload: the operator's token is gone.
	if err := tokens.Store([]httpapi.Token{{Secret: "root-me-secret-001", Role: httpapi.RoleAdmin, Name: "deploy"}}); err != nil {
		panic(err)
	}
	call("ops-me-secret-0001", "GET", "/jobs", "")
	// Output:
	// audit 1: deploy (admin) create job=ping
	// POST /jobs: 201
	// POST /jobs/ping/pause: 403 {"error":"pause needs the operator role; this token has viewer","role":"operator"}
	// audit 2: oncall (operator) pause job=ping
	// POST /jobs/ping/pause: 200
	// DELETE /jobs/ping: 403 {"error":"delete needs the admin role; this token has operator","role":"admin"}
	// GET /jobs: 401 {"error":"missing or wrong bearer token (Authorization: Bearer <token>)"}
}

// printAudit is a [cron.Config.AuditSink] that prints each record.
func printAudit(_ context.Context, e cron.AuditEntry) {
	fmt.Printf("audit %d: %s (%s) %s job=%s\n", e.ID, e.Who, e.Role, e.Action, e.JobID)
}
