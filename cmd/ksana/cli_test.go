//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
)

// cli runs the built binary with args, the environment env and stdin, and
// returns its exit status and outputs.
func cli(t *testing.T, bin string, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := runProcess(cmd)
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), out.String(), errOut.String()
	}
	if err != nil {
		t.Fatalf("ksana %q: %v", args, err)
	}
	return 0, out.String(), errOut.String()
}

// TestCLI drives a running ksana (the built binary, on a JSON file) with
// the built binary's commands.
func TestCLI(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildKsana(t)
	m := startMember(t, bin, "cli", "KSANA_DATA="+t.TempDir(), "KSANA_API_TOKEN=tok-secret-000001")
	hook := newCallback(t, 200, 0)
	env := []string{"KSANA_ADDR=" + m.url, "KSANA_API_TOKEN=tok-secret-000001"}
	dir := t.TempDir()
	jobFile := filepath.Join(dir, "job.json")
	if err := os.WriteFile(jobFile, []byte(`{"id":"daily","name":"report","http":{"url":"`+hook.URL+`/daily"},"schedule":{"kind":"cron","cron":"0 9 * * *","tz":"Europe/Paris"}}`), 0o600); err != nil {
		t.Fatal(err)
	}

	tests := []struct {
		name     string
		env      []string // nil: env
		stdin    string
		args     []string
		code     int
		stdout   []string // each must appear
		stderr   []string
		noStdout bool
	}{
		{"add from a file", nil, "", []string{"jobs", "add", "-f", jobFile}, 0, []string{"daily", "cron 0 9 * * * (Europe/Paris)", "max_retries"}, nil, false},
		{"add from stdin, json", nil, `{"id":"hourly","http":{"url":"` + hook.URL + `/hourly"},"schedule":{"kind":"every","every":"1h"}}`,
			[]string{"jobs", "add", "-f", "-", "-o", "json"}, 0, []string{`"id": "hourly"`, `"every": "1h"`}, nil, false},
		{"add an id in use", nil, "", []string{"jobs", "add", "-f", jobFile}, 1, nil, []string{"already exists", "field id", "HTTP 409"}, true},
		{"add a bad schedule", nil, `{"http":{"url":"` + hook.URL + `"},"schedule":{"kind":"cron","cron":"0 25 * * *"}}`,
			[]string{"jobs", "add", "-f", "-"}, 1, nil, []string{"field schedule.cron", "HTTP 400"}, true},
		{"add without -f", nil, "", []string{"jobs", "add"}, 2, nil, []string{"-f is required"}, true},
		{"add a missing file", nil, "", []string{"jobs", "add", "-f", filepath.Join(dir, "none.json")}, 2, nil, []string{"none.json"}, true},
		{"ls", nil, "", []string{"jobs", "ls"}, 0, []string{"ID", "NEXT RUN", "daily", "hourly", "every 1h"}, nil, false},
		{"ls filtered", nil, "", []string{"jobs", "ls", "-kind", "every"}, 0, []string{"hourly"}, nil, false},
		{"ls a page", nil, "", []string{"jobs", "ls", "-limit", "1"}, 0, []string{"daily"}, []string{"more jobs follow: -after daily"}, false},
		{"ls the next page", nil, "", []string{"jobs", "ls", "-limit", "1", "-after", "daily"}, 0, []string{"hourly"}, nil, false},
		{"ls a bad filter", nil, "", []string{"jobs", "ls", "-kind", "weekly"}, 1, nil, []string{"-kind: must be"}, true},
		{"ls bad -status names the flag", nil, "", []string{"jobs", "ls", "-status", "weird"}, 1, nil, []string{"ksana jobs ls: -status: must be", "HTTP 400"}, true},
		{"ls bad -enabled", nil, "", []string{"jobs", "ls", "-enabled", "yes"}, 2, nil, []string{"-enabled"}, true},
		{"get, flags after the id", nil, "", []string{"jobs", "get", "daily", "-o", "json"}, 0, []string{`"name": "report"`}, nil, false},
		{"get unknown", nil, "", []string{"jobs", "get", "nope"}, 1, nil, []string{`job "nope" not found`, "HTTP 404"}, true},
		{"get without id", nil, "", []string{"jobs", "get"}, 2, nil, []string{"takes ID"}, true},
		{"edit from stdin", nil, `{"name":"renamed"}`, []string{"jobs", "edit", "daily", "-f", "-"}, 0, []string{"renamed"}, nil, false},
		{"edit a bad tz", nil, `{"schedule":{"tz":"Mars/Olympus"}}`, []string{"jobs", "edit", "daily", "-f", "-"}, 1, nil, []string{"field schedule.tz"}, true},
		{"pause", nil, "", []string{"jobs", "pause", "daily"}, 0, []string{"enabled", "false"}, nil, false},
		{"next of a paused job", nil, "", []string{"jobs", "next", "daily", "-n", "3"}, 0, []string{"is paused", "UTC", "Europe/Paris", "09:00:00 CE"}, nil, false},
		{"next bad n", nil, "", []string{"jobs", "next", "daily", "-n", "5000"}, 2, nil, []string{"-n: must be from 1 to 1000"}, true},
		{"next -n 0", nil, "", []string{"jobs", "next", "daily", "-n", "0"}, 2, nil, []string{"-n: must be from 1 to 1000, got 0"}, true},
		{"resume", nil, "", []string{"jobs", "resume", "daily"}, 0, []string{"true"}, nil, false},
		{"run now", nil, "", []string{"jobs", "run", "hourly"}, 0, []string{"queued run", "of hourly"}, nil, false},
		{"audit", nil, "", []string{"audit"}, 0, []string{"WHO", "ACTION", "CHANGED", "1 ", "admin", "create", "created", "update", "daily", "name", "enabled", "run-now", "hourly", "run "}, nil, false},
		{"audit of a job, a page", nil, "", []string{"audit", "-job", "daily", "-limit", "2"}, 0, []string{"created", "name"}, []string{"more entries follow: -after 3"}, false},
		{"audit, the next page", nil, "", []string{"audit", "-job", "daily", "-after", "3", "-o", "json"}, 0, []string{`"action": "pause"`, `"job_id": "daily"`, `"who": "admin"`}, nil, false},
		{"audit bad -after", nil, "", []string{"audit", "-after", "x"}, 2, nil, []string{"-after must be"}, true},
		{"audit bad -limit", nil, "", []string{"audit", "-limit", "5000"}, 1, nil, []string{"-limit: must be"}, true},
		{"audit newest first", nil, "", []string{"audit", "-reverse", "-limit", "2"}, 0, []string{"run-now", "hourly"}, []string{"older entries not shown"}, false},
		{"health", nil, "", []string{"health"}, 0, []string{"status", "ok"}, nil, false},
		{"health json", nil, "", []string{"health", "-o", "json"}, 0, []string{`"status": "ok"`}, nil, false},
		{"a wrong token", []string{"KSANA_ADDR=" + m.url, "KSANA_API_TOKEN=wrong"}, "", []string{"jobs", "ls"}, 1, nil, []string{"HTTP 401"}, true},
		{"-token wins over the environment", []string{"KSANA_ADDR=" + m.url, "KSANA_API_TOKEN=wrong"}, "", []string{"jobs", "ls", "-token", "tok-secret-000001"}, 0, []string{"daily"}, nil, false},
		{"-addr", []string{"KSANA_ADDR=http://127.0.0.1:1", "KSANA_API_TOKEN=tok-secret-000001"}, "", []string{"jobs", "get", "daily", "-addr", m.url}, 0, []string{"renamed"}, nil, false},
		{"no service", []string{"KSANA_ADDR=http://127.0.0.1:1"}, "", []string{"health"}, 1, nil, []string{"connection refused"}, true},
		{"a bad address", []string{"KSANA_ADDR=127.0.0.1:7100"}, "", []string{"health"}, 2, nil, []string{"KSANA_ADDR"}, true},
		{"bad -o", nil, "", []string{"health", "-o", "yaml"}, 2, nil, []string{"table or json"}, true},
		{"unknown command", nil, "", []string{"jobs", "list"}, 2, nil, []string{`unknown command "jobs list"`, "jobs ls"}, true},
		{"did you mean", nil, "", []string{"job", "ls"}, 2, nil, []string{`unknown command "job ls"; did you mean "jobs ls"?`}, true},
		{"did you mean, one word", nil, "", []string{"helth"}, 2, nil, []string{`did you mean "health"?`}, true},
		{"runs get unknown", nil, "", []string{"runs", "get", "nope"}, 1, nil, []string{`run "nope" not found`, "HTTP 404"}, true},
		{"jobs alone", nil, "", []string{"jobs"}, 2, nil, []string{"jobs ls|get"}, true},
		{"help of a command", nil, "", []string{"jobs", "runs", "-h"}, 0, nil, []string{"Usage: ksana jobs runs", "-status"}, true},
		{"an extra argument", nil, "", []string{"jobs", "rm", "a", "b"}, 2, nil, []string{"takes ID"}, true},
		{"ksana -h", nil, "", []string{"-h"}, 0, []string{"ksana jobs next ID", "ksana health", "KSANA_DATA"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := tt.env
			if e == nil {
				e = env
			}
			code, out, errOut := cli(t, bin, e, tt.stdin, tt.args...)
			if code != tt.code {
				t.Fatalf("ksana %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.args, code, tt.code, out, errOut)
			}
			for _, s := range tt.stdout {
				if !strings.Contains(out, s) {
					t.Errorf("ksana %q: stdout lacks %q:\n%s", tt.args, s, out)
				}
			}
			for _, s := range tt.stderr {
				if !strings.Contains(errOut, s) {
					t.Errorf("ksana %q: stderr lacks %q:\n%s", tt.args, s, errOut)
				}
			}
			if tt.noStdout && out != "" {
				t.Errorf("ksana %q: stdout %q, want none", tt.args, out)
			}
		})
	}

	// JSON output is the API's: it decodes into the cron types, and says
	// what the service holds.
	c, err := client.New(m.url, nil, "tok-secret-000001")
	if err != nil {
		t.Fatal(err)
	}
	var jobs []cron.Job
	jsonOut(t, bin, env, &jobs, "jobs", "ls", "-o", "json", "-enabled", "true")
	if len(jobs) != 2 || jobs[0].ID != "daily" || jobs[0].Name != "renamed" || jobs[0].Paused || jobs[1].ID != "hourly" {
		t.Errorf("jobs ls -o json = %+v, want daily (renamed, enabled) and hourly", jobs)
	}
	var next client.Next
	jsonOut(t, bin, env, &next, "jobs", "next", "daily", "-n", "4", "-o", "json")
	want, err := c.Next(context.Background(), "daily", 4)
	if err != nil {
		t.Fatal(err)
	}
	if next.JobID != "daily" || next.TZ != "Europe/Paris" || len(next.Times) != 4 || !next.Times[0].Equal(want.Times[0]) {
		t.Errorf("jobs next -o json = %+v, want %+v", next, want)
	}
	waitFor(t, "the run of hourly in its history", func() bool {
		rs, err := c.Runs(context.Background(), "hourly", client.RunsOptions{})
		return err == nil && len(rs) == 1
	})
	var runs []cron.Run
	jsonOut(t, bin, env, &runs, "jobs", "runs", "hourly", "-o", "json", "-status", "success")
	if len(runs) != 1 || runs[0].JobID != "hourly" || runs[0].HTTPStatus != http.StatusOK {
		t.Errorf("jobs runs -o json = %+v, want the one successful run of hourly", runs)
	}
	if code, out, _ := cli(t, bin, env, "", "jobs", "runs", "hourly"); code != 0 || !strings.Contains(out, "success") || !strings.Contains(out, runs[0].ID) {
		t.Errorf("jobs runs: exit %d, table:\n%s", code, out)
	}
	// ksana runs: the history across jobs.
	var all []cron.Run
	jsonOut(t, bin, env, &all, "runs", "-o", "json", "-job", "hourly,daily", "-status", "success,failed", "-since", "1h", "-limit", "5")
	if len(all) != 1 || all[0].ID != runs[0].ID {
		t.Errorf("runs -o json = %+v, want the one run of hourly", all)
	}
	for _, c := range []struct {
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{[]string{"runs"}, 0, runs[0].ID, ""},
		{[]string{"runs", "-job", "daily"}, 0, "REASON", ""},
		{[]string{"runs", "-until", "1h"}, 0, "SLOTS", ""},
		{[]string{"runs", "-status", "paused"}, 1, "", "ksana runs: -status: must be"},
		{[]string{"runs", "-since", "yesterday"}, 2, "", "-since must be"},
		{[]string{"runs", "-limit", "5000"}, 1, "", "-limit: must be"},
		{[]string{"runs", "-after", "junk"}, 1, "", "-after: must be"},
	} {
		code, out, errOut := cli(t, bin, env, "", c.args...)
		if code != c.code || !strings.Contains(out, c.stdout) || !strings.Contains(errOut, c.stderr) {
			t.Errorf("ksana %q: exit %d, stdout %q, stderr %q; want exit %d, %q in stdout, %q in stderr", c.args, code, out, errOut, c.code, c.stdout, c.stderr)
		}
		if c.args[len(c.args)-1] == "1h" && strings.Contains(out, runs[0].ID) {
			t.Errorf("ksana %q lists a run of now:\n%s", c.args, out)
		}
	}
	// ksana runs get: one run by its id, waited for; its trigger and who asked.
	var ticket struct {
		RunID string `json:"run_id"`
	}
	jsonOut(t, bin, env, &ticket, "jobs", "run", "hourly", "-o", "json")
	var one cron.Run
	jsonOut(t, bin, env, &one, "runs", "get", ticket.RunID, "-wait", "30s", "-o", "json")
	if one.ID != ticket.RunID || one.JobID != "hourly" || one.Status != cron.StatusSuccess || one.Trigger != cron.TriggerRunNow || one.TriggeredBy != "admin" {
		t.Errorf("runs get %s -wait 30s = %+v, want the success of hourly, a run-now by admin", ticket.RunID, one)
	}
	if code, out, _ := cli(t, bin, env, "", "runs", "get", ticket.RunID); code != 0 || !strings.Contains(out, "run-now by admin") || !strings.Contains(out, "success") {
		t.Errorf("runs get: exit %d, table:\n%s", code, out)
	}
	if code, _, errOut := cli(t, bin, env, "", "runs", "get", "nope", "-wait", "300ms"); code != 1 || !strings.Contains(errOut, "has not ended after -wait 300ms") {
		t.Errorf("runs get nope -wait 300ms: exit %d, %q; want 1 and that it has not ended", code, errOut)
	}
	if hook.count() != 2 {
		t.Errorf("the callback was called %d times, want 2 (the runs now)", hook.count())
	}
	if code, out, _ := cli(t, bin, env, "", "jobs", "rm", "hourly"); code != 0 || !strings.Contains(out, "deleted hourly") {
		t.Errorf("jobs rm: exit %d, %q", code, out)
	}
	if _, err := c.Get(context.Background(), "hourly"); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("hourly after jobs rm: %v, want not found", err)
	}
}

func jsonOut(t *testing.T, bin string, env []string, out any, args ...string) {
	t.Helper()
	code, stdout, stderr := cli(t, bin, env, "", args...)
	if code != 0 {
		t.Fatalf("ksana %q: exit %d: %s", args, code, stderr)
	}
	if err := json.Unmarshal([]byte(stdout), out); err != nil {
		t.Fatalf("ksana %q: stdout is not the JSON expected: %v\n%s", args, err, stdout)
	}
}

// TestCLIShared drives two instances on one PostgreSQL database: a job
// added through one is previewed, paused and listed through the other,
// whichever instance holds it.
func TestCLIShared(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("processes on PostgreSQL")
	}
	bin := buildKsana(t)
	env := []string{"DATABASE_URL=" + postgresSchemaURL(t, "ksana_cli_test"), "KSANA_LEASE_TTL=2s"}
	a, b := startMember(t, bin, "a", env...), startMember(t, bin, "b", env...)
	onA, onB := []string{"KSANA_ADDR=" + a.url}, []string{"KSANA_ADDR=" + b.url}
	for i := range 6 {
		body := fmt.Sprintf(`{"id":"j%d","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"cron","cron":"0 9 * * *","tz":"Europe/Paris"}}`, i)
		if code, _, errOut := cli(t, bin, onA, body, "jobs", "add", "-f", "-"); code != 0 {
			t.Fatalf("jobs add on a: exit %d: %s", code, errOut)
		}
	}
	if code, _, errOut := cli(t, bin, onB, "", "jobs", "pause", "j3"); code != 0 {
		t.Fatalf("jobs pause j3 on b: exit %d: %s", code, errOut)
	}
	for i := range 6 {
		id := fmt.Sprintf("j%d", i)
		var na, nb client.Next
		jsonOut(t, bin, onA, &na, "jobs", "next", id, "-n", "3", "-o", "json")
		jsonOut(t, bin, onB, &nb, "jobs", "next", id, "-n", "3", "-o", "json")
		if diff := cmp.Diff(na, nb); diff != "" {
			t.Errorf("jobs next %s (-on a +on b):\n%s", id, diff)
		}
		if len(na.Times) != 3 || na.Paused != (id == "j3") || na.TZ != "Europe/Paris" {
			t.Errorf("jobs next %s = %+v, want 3 times in Europe/Paris, paused only for j3", id, na)
		}
	}
	var paused []cron.Job
	jsonOut(t, bin, onA, &paused, "jobs", "ls", "-enabled", "false", "-o", "json")
	if len(paused) != 1 || paused[0].ID != "j3" {
		t.Errorf("jobs ls -enabled false on a = %v, want j3", ids(paused))
	}
	if code, _, errOut := cli(t, bin, onB, "", "jobs", "next", "nope"); code != 1 || !strings.Contains(errOut, "HTTP 404") {
		t.Errorf("jobs next nope on b: exit %d, %q; want 1 and the 404", code, errOut)
	}
	// A run-now asked of b is read by its id on a, with its trigger, from
	// the shared database.
	var ticket struct {
		RunID string `json:"run_id"`
	}
	jsonOut(t, bin, onB, &ticket, "jobs", "run", "j1", "-o", "json")
	var run cron.Run
	jsonOut(t, bin, onA, &run, "runs", "get", ticket.RunID, "-wait", "30s", "-o", "json")
	if run.ID != ticket.RunID || run.JobID != "j1" || run.Trigger != cron.TriggerRunNow || run.TriggeredBy != "anonymous" || run.Status == "" {
		t.Errorf("runs get %s on a = %+v; want the run-now of j1 by anonymous, ended", ticket.RunID, run)
	}
}

func ids(jobs []cron.Job) []string {
	out := make([]string, 0, len(jobs))
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}
