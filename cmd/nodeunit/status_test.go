package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/internal/nodeunit/proc"
)

func TestStatusRows(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 21, 22, 36, 0, 0, time.UTC)
	dep := func(id, addr string) claim.Deployment {
		return claim.Deployment{ID: id, Type: claim.TypeDeployment, Enabled: true, Address: addr, Command: "sleep"}
	}
	ds := []claim.Deployment{
		dep("run", "a"),
		dep("crash", "b"),
		dep("refused", ""),
		dep("free", ""),
		dep("lost", "gone"),
		dep("starting", "a"),
		dep("far", "c"),
		{ID: "off", Type: claim.TypeDeployment, Command: "sleep"},
		{ID: "dm", Type: claim.TypeDaemon, Enabled: true, Command: "sleep"},
	}
	nodes := []claim.NodeUnit{{Address: "b"}, {Address: "a"}, {Address: "c"}}
	reports := map[string]nodeStatus{
		"a": {Address: "a", Deployments: []deploymentStatus{
			{ID: "dm", State: stateRunning, PID: 11, Since: now.Add(-time.Minute)},
			{ID: "refused", State: stateRefused, Reason: `command "/bin/sleep" does not match NODE_UNIT_TRUSTED_COMMAND_REGEXP "sleep"`},
			{ID: "run", State: stateRunning, PID: 10, Since: now.Add(-25 * time.Second), Restarts: 2, LastExit: "exit status 1"},
		}},
		"b": {Address: "b", Deployments: []deploymentStatus{
			{ID: "crash", State: stateRestarting, Restarts: 3, LastExit: "exit status 1", LastExitAt: now.Add(-2 * time.Second),
				NextStart: now.Add(6 * time.Second), LastOutput: "sleep: invalid time interval 'abc'"},
			{ID: "dm", State: stateRestarting, LastExit: "exit status 2", LastExitAt: now.Add(-time.Second), NextStart: now.Add(time.Second)},
			{ID: "refused", State: stateRefused, Reason: "no"},
		}},
	}
	errs := map[string]error{"c": errors.New("connection refused")}
	want := []statusRow{
		{"run", "deployment", "a", "running", "pid 10, up 25s, 2 restarts, last exit: exit status 1"},
		{"crash", "deployment", "b", "restarting", `last exit: exit status 1 (output: "sleep: invalid time interval 'abc'"), 2s ago; next start in 6s (3 restarts)`},
		{"refused", "deployment", "a", "refused", `command "/bin/sleep" does not match NODE_UNIT_TRUSTED_COMMAND_REGEXP "sleep"`},
		{"refused", "deployment", "b", "refused", "no"},
		{"refused", "deployment", "-", "waiting", "not claimed yet"},
		{"free", "deployment", "-", "waiting", "not claimed yet"},
		{"lost", "deployment", "-", "waiting", "its node-unit gone is not active; another takes it over"},
		{"starting", "deployment", "a", "starting", "not started yet"},
		{"far", "deployment", "c", "unknown", "cannot read its status: connection refused"},
		{"off", "deployment", "-", "disabled", ""},
		{"dm", "daemon", "a", "running", "pid 11, up 1m0s"},
		{"dm", "daemon", "b", "restarting", "last exit: exit status 2, 1s ago; next start in 1s"},
		{"dm", "daemon", "c", "unknown", "cannot read its status: connection refused"},
	}
	if diff := cmp.Diff(want, statusRows(ds, nodes, reports, errs, now)); diff != "" {
		t.Errorf("rows (-want +got):\n%s", diff)
	}

	// Every active node-unit refuses it.
	rows := statusRows([]claim.Deployment{dep("refused", "")}, nodes[:2], reports, nil, now)
	if got := rows[len(rows)-1]; got.State != "waiting" || got.Detail != "every active node-unit refuses it" {
		t.Errorf("last row = %+v, want waiting: every active node-unit refuses it", got)
	}
	// No node-unit at all.
	rows = statusRows([]claim.Deployment{dep("free", ""), ds[8]}, nil, nil, nil, now)
	want = []statusRow{{"free", "deployment", "-", "waiting", "no active node-unit"}, {"dm", "daemon", "-", "waiting", "no active node-unit"}}
	if diff := cmp.Diff(want, rows); diff != "" {
		t.Errorf("rows without node-units (-want +got):\n%s", diff)
	}
}

// TestBoard: the status endpoint reports the processes and the refusals of
// the last complete cycle only.
func TestBoard(t *testing.T) {
	t.Parallel()
	var observed int
	b := newBoard(claim.ObserverFunc(func(claim.Report) { observed++ }))
	started := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	procs := []proc.Process{{ID: "b", PID: 7, Started: started}, {ID: "a", LastExit: "exit status 1"}}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "a.log"), []byte("starting\nfatal: bad flag\nusage: a [-v]\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	last := func(id string) string { return lastLogLine(filepath.Join(dir, id+".log")) }

	b.refuse("x", "untrusted")
	before := b.status("n1", procs, last) // the cycle is not over: x is not reported yet
	b.ObserveCycle(claim.Report{})
	after := b.status("n1", procs, last)
	b.ObserveCycle(claim.Report{}) // a cycle without refusals clears them
	cleared := b.status("n1", nil, last)

	want := nodeStatus{Address: "n1", Deployments: []deploymentStatus{
		{ID: "a", State: stateRestarting, LastExit: "exit status 1", LastOutput: "fatal: bad flag / usage: a [-v]"},
		{ID: "b", State: stateRunning, PID: 7, Since: started},
	}}
	if diff := cmp.Diff(want, before); diff != "" {
		t.Errorf("status during the cycle (-want +got):\n%s", diff)
	}
	want.Deployments = append(want.Deployments, deploymentStatus{ID: "x", State: stateRefused, Reason: "untrusted"})
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("status after the cycle (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(nodeStatus{Address: "n1", Deployments: []deploymentStatus{}}, cleared); diff != "" {
		t.Errorf("status after a cycle without refusals (-want +got):\n%s", diff)
	}
	if observed != 2 {
		t.Errorf("next observer saw %d reports, want 2", observed)
	}

	// Over HTTP, and back through fetchStatus.
	srv := httptest.NewServer(statusHandler(func() nodeStatus { return after }))
	defer srv.Close()
	got, err := fetchStatus(t.Context(), srv.Client(), claim.NodeUnit{Address: "n1", UsageEndpoint: srv.URL + "/NodeUnit/InspectResourceUsage"})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(after, got); diff != "" {
		t.Errorf("fetched status (-want +got):\n%s", diff)
	}
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(after)
	if want := `{"address":"n1","deployments":[{"id":"a","state":"restarting","last_exit":"exit status 1","last_output":"fatal: bad flag / usage: a [-v]"},{"id":"b","state":"running","pid":7,"since":"2026-01-01T00:00:00Z"},{"id":"x","state":"refused","reason":"untrusted"}]}` + "\n"; buf.String() != want {
		t.Errorf("JSON = %s, want %s", buf.String(), want)
	}
	if _, err := fetchStatus(t.Context(), srv.Client(), claim.NodeUnit{Address: "n2", UsageEndpoint: "http://elsewhere/usage"}); err == nil {
		t.Error("fetchStatus with an endpoint not ending in the usage path: no error")
	}
}

// TestRebalanceHeldShown: a cycle that held rebalancing is in the node's
// status (JSON rebalance_held) and in a line under "nodeunit status"; the
// next cycle that does not hold clears it.
func TestRebalanceHeldShown(t *testing.T) {
	t.Parallel()
	b := newBoard(nil)
	const why = "1 deployment waits to be claimed (nobody)"
	b.ObserveCycle(claim.Report{RebalanceHeld: why})
	held := b.status("n1", nil, nil)
	var buf bytes.Buffer
	_ = json.NewEncoder(&buf).Encode(held)
	if want := `{"address":"n1","deployments":[],"rebalance_held":"1 deployment waits to be claimed (nobody)"}` + "\n"; buf.String() != want {
		t.Errorf("JSON = %s, want %s", buf.String(), want)
	}
	buf.Reset()
	if err := writeHeld(&buf, map[string]nodeStatus{"n1": held, "n2": {Address: "n2"}}); err != nil {
		t.Fatal(err)
	}
	if want := "\nnode-unit n1 holds rebalancing: " + why + "\n"; buf.String() != want {
		t.Errorf("status lines %q, want %q", buf.String(), want)
	}
	b.ObserveCycle(claim.Report{})
	if got := b.status("n1", nil, nil).RebalanceHeld; got != "" {
		t.Errorf("after a cycle that did not hold: rebalance_held %q", got)
	}
}
