package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/internal/nodeunit/proc"
	"github.com/ksana-dev/ksana/internal/nodeunit/usage"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// StatusPath is where a node-unit serves the state of its deployments,
// beside the usage endpoint.
const StatusPath = "/NodeUnit/Status"

// Deployment states in a node-unit's status.
const (
	stateRunning    = "running"    // its process runs
	stateRestarting = "restarting" // its process ended; it starts again after a backoff
	stateRefused    = "refused"    // the trust rule refuses its command: it is not claimed, or not started
)

// nodeStatus is the JSON body of GET /NodeUnit/Status.
type nodeStatus struct {
	Address     string             `json:"address"`
	Deployments []deploymentStatus `json:"deployments"`
	// RebalanceHeld says why this node-unit, holding more deployments than
	// another, releases none (NODE_UNIT_REBALANCE): deployments wait to be
	// claimed, or node-units they are bound to are missing.
	RebalanceHeld string `json:"rebalance_held,omitempty"`
}

// deploymentStatus is one deployment as a node-unit sees it.
type deploymentStatus struct {
	ID         string    `json:"id"`
	State      string    `json:"state"`
	PID        int       `json:"pid,omitempty"`
	Since      time.Time `json:"since,omitzero"`     // start of the current run
	Restarts   int       `json:"restarts,omitempty"` // starts after the first
	LastExit   string    `json:"last_exit,omitempty"`
	LastExitAt time.Time `json:"last_exit_at,omitzero"`
	NextStart  time.Time `json:"next_start,omitzero"`
	// LastOutput is the last two lines the process wrote to its log,
	// given once a run has ended, for the error message a crash-looping
	// command prints.
	LastOutput string `json:"last_output,omitempty"`
	Reason     string `json:"reason,omitempty"` // why it is refused
}

// board collects the refusals of the claim loop's cycles for the status
// endpoint, and passes each cycle's report on to next.
type board struct {
	next claim.Observer

	mu      sync.Mutex
	pending map[string]string // refusals of the cycle under way: id -> reason
	refused map[string]string // refusals of the last complete cycle
	held    string            // the last cycle's Report.RebalanceHeld
}

func newBoard(next claim.Observer) *board {
	return &board{next: next, pending: map[string]string{}, refused: map[string]string{}}
}

// refuse records that the runner refused id in the current cycle.
func (b *board) refuse(id, reason string) {
	b.mu.Lock()
	b.pending[id] = reason
	b.mu.Unlock()
}

// ObserveCycle ends a cycle: its refusals become the ones reported.
func (b *board) ObserveCycle(r claim.Report) {
	b.mu.Lock()
	b.refused, b.pending = b.pending, map[string]string{}
	b.held = r.RebalanceHeld
	b.mu.Unlock()
	if b.next != nil {
		b.next.ObserveCycle(r)
	}
}

// status combines the runner's processes with the last cycle's refusals;
// lastLine returns the last line of a deployment's log.
func (b *board) status(address string, procs []proc.Process, lastLine func(id string) string) nodeStatus {
	st := nodeStatus{Address: address, Deployments: []deploymentStatus{}}
	for _, p := range procs {
		d := deploymentStatus{ID: p.ID, State: stateRunning, PID: p.PID, Since: p.Started, Restarts: p.Restarts,
			LastExit: p.LastExit, LastExitAt: p.LastExitAt, NextStart: p.NextStart}
		if p.PID == 0 {
			d.State = stateRestarting
		}
		if p.LastExit != "" && lastLine != nil {
			d.LastOutput = lastLine(p.ID)
		}
		st.Deployments = append(st.Deployments, d)
	}
	b.mu.Lock()
	st.RebalanceHeld = b.held
	for id, reason := range b.refused {
		st.Deployments = append(st.Deployments, deploymentStatus{ID: id, State: stateRefused, Reason: reason})
	}
	b.mu.Unlock()
	slices.SortFunc(st.Deployments, func(a, b deploymentStatus) int { return strings.Compare(a.ID, b.ID) })
	return st
}

// statusHandler serves GET /NodeUnit/Status.
func statusHandler(status func() nodeStatus) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", "no-store")
		_ = json.NewEncoder(w).Encode(status())
	})
}

// statusURL is the status endpoint of a node-unit, found beside its usage
// endpoint.
func statusURL(n claim.NodeUnit) (string, error) {
	base, ok := strings.CutSuffix(n.UsageEndpoint, usage.Path)
	if !ok || base == "" {
		return "", fmt.Errorf("its usage endpoint %q does not end in %s", n.UsageEndpoint, usage.Path)
	}
	return base + StatusPath, nil
}

// fetchStatus reads one node-unit's status.
func fetchStatus(ctx context.Context, client *http.Client, n claim.NodeUnit) (nodeStatus, error) {
	u, err := statusURL(n)
	if err != nil {
		return nodeStatus{}, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nodeStatus{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nodeStatus{}, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return nodeStatus{}, err
	}
	if resp.StatusCode != http.StatusOK {
		return nodeStatus{}, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	var st nodeStatus
	if err := json.Unmarshal(body, &st); err != nil {
		return nodeStatus{}, fmt.Errorf("GET %s: %w", u, err)
	}
	return st, nil
}

// statusRow is one line of "nodeunit status".
type statusRow struct {
	ID, Type, NodeUnit, State, Detail string
}

// statusRows builds the status table from the deployments, the active
// node-units and what each of them reported (or the error reading it).
// now is the reference for uptimes and waits.
func statusRows(ds []claim.Deployment, nodes []claim.NodeUnit, reports map[string]nodeStatus, errs map[string]error, now time.Time) []statusRow {
	byNode := map[string]map[string]deploymentStatus{}
	for addr, st := range reports {
		m := map[string]deploymentStatus{}
		for _, d := range st.Deployments {
			m[d.ID] = d
		}
		byNode[addr] = m
	}
	active := map[string]bool{}
	var addrs []string
	for _, n := range nodes {
		active[n.Address] = true
		addrs = append(addrs, n.Address)
	}
	slices.Sort(addrs)
	// on is the row of deployment d on node-unit addr.
	on := func(d claim.Deployment, addr string) statusRow {
		row := statusRow{ID: d.ID, Type: string(d.Type), NodeUnit: addr}
		if err := errs[addr]; err != nil {
			row.State, row.Detail = "unknown", "cannot read its status: "+err.Error()
			return row
		}
		s, ok := byNode[addr][d.ID]
		if !ok {
			row.State, row.Detail = "starting", "not started yet"
			return row
		}
		row.State = s.State
		switch s.State {
		case stateRunning:
			row.Detail = fmt.Sprintf("pid %d, up %s", s.PID, roundAge(now.Sub(s.Since)))
			if s.Restarts > 0 {
				row.Detail += fmt.Sprintf(", %d restarts, last exit: %s", s.Restarts, s.LastExit)
			}
		case stateRestarting:
			row.Detail = fmt.Sprintf("last exit: %s, %s ago; next start in %s", s.LastExit, roundAge(now.Sub(s.LastExitAt)), roundAge(s.NextStart.Sub(now)))
			if s.LastOutput != "" {
				row.Detail = fmt.Sprintf("last exit: %s (output: %q), %s ago; next start in %s", s.LastExit, s.LastOutput, roundAge(now.Sub(s.LastExitAt)), roundAge(s.NextStart.Sub(now)))
			}
			if s.Restarts > 0 {
				row.Detail += fmt.Sprintf(" (%d restarts)", s.Restarts)
			}
		case stateRefused:
			row.Detail = s.Reason
		}
		return row
	}
	var rows []statusRow
	for _, d := range ds {
		switch {
		case !d.Enabled:
			rows = append(rows, statusRow{ID: d.ID, Type: string(d.Type), NodeUnit: "-", State: "disabled"})
		case d.Type == claim.TypeDaemon:
			if len(addrs) == 0 {
				rows = append(rows, statusRow{ID: d.ID, Type: string(d.Type), NodeUnit: "-", State: "waiting", Detail: "no active node-unit"})
			}
			for _, a := range addrs {
				rows = append(rows, on(d, a))
			}
		case d.Type != claim.TypeDeployment:
			rows = append(rows, statusRow{ID: d.ID, Type: string(d.Type), NodeUnit: "-", State: "invalid", Detail: "unknown type: node-units skip it"})
		case d.Address != "" && active[d.Address]:
			rows = append(rows, on(d, d.Address))
		default:
			refusedBy := 0
			for _, a := range addrs {
				if s, ok := byNode[a][d.ID]; ok && s.State == stateRefused {
					refusedBy++
					rows = append(rows, on(d, a))
				}
			}
			row := statusRow{ID: d.ID, Type: string(d.Type), NodeUnit: "-", State: "waiting"}
			switch {
			case d.Address != "":
				row.Detail = fmt.Sprintf("its node-unit %s is not active; another takes it over", d.Address)
			case len(addrs) == 0:
				row.Detail = "no active node-unit"
			case refusedBy == len(addrs):
				row.Detail = "every active node-unit refuses it"
			default:
				row.Detail = "not claimed yet"
			}
			rows = append(rows, row)
		}
	}
	return rows
}

// roundAge shows a duration to the second (to the minute above an hour).
func roundAge(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	if d >= time.Hour {
		return d.Round(time.Minute).String()
	}
	return d.Round(time.Second).String()
}

func writeStatus(w io.Writer, rows []statusRow) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTYPE\tNODE_UNIT\tSTATE\tDETAIL")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.ID, r.Type, r.NodeUnit, r.State, r.Detail)
	}
	return tw.Flush()
}

// writeHeld adds a line after the table for each node-unit that holds
// rebalancing, and why.
func writeHeld(w io.Writer, reports map[string]nodeStatus) error {
	for _, addr := range slices.Sorted(maps.Keys(reports)) {
		if why := reports[addr].RebalanceHeld; why != "" {
			if _, err := fmt.Fprintf(w, "\nnode-unit %s holds rebalancing: %s\n", addr, why); err != nil {
				return err
			}
		}
	}
	return nil
}

// statusTimeout bounds the read of one node-unit's status.
const statusTimeout = 5 * time.Second

func cmdStatus(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if code, done := noArgs("status", args, stdout, stderr); done {
		return code
	}
	return withReadDB("status", getenv, stderr, func(ctx context.Context, c baseConfig, db *sqlstore.DB) error {
		nodes, err := activeNodes(ctx, c, db)
		if err != nil {
			return err
		}
		ds, err := listDeployments(ctx, db)
		if err != nil {
			return err
		}
		reports := make([]nodeStatus, len(nodes))
		errs := make([]error, len(nodes))
		var wg sync.WaitGroup
		client := &http.Client{Timeout: statusTimeout}
		for i, n := range nodes {
			wg.Go(func() { reports[i], errs[i] = fetchStatus(ctx, client, n) })
		}
		wg.Wait()
		byAddr := map[string]nodeStatus{}
		errByAddr := map[string]error{}
		for i, n := range nodes {
			if errs[i] != nil {
				errByAddr[n.Address] = errs[i]
				continue
			}
			byAddr[n.Address] = reports[i]
		}
		if err := writeStatus(stdout, statusRows(ds, nodes, byAddr, errByAddr, time.Now())); err != nil {
			return err
		}
		return writeHeld(stdout, byAddr)
	})
}

// lastLogLine returns the last two non-empty lines of the file at path
// (a failing command often prints its error, then a hint), joined by " / ",
// at most 300 bytes; "" when there is none.
func lastLogLine(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	const tail = 4096
	st, err := f.Stat()
	if err != nil {
		return ""
	}
	off := max(st.Size()-tail, 0)
	buf := make([]byte, st.Size()-off)
	n, _ := f.ReadAt(buf, off)
	var lines []string
	for _, l := range strings.Split(string(buf[:n]), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			lines = append(lines, l)
		}
	}
	if off > 0 && len(lines) > 0 {
		lines = lines[1:] // the first may be cut
	}
	lines = lines[max(len(lines)-2, 0):]
	last := strings.Join(lines, " / ")
	if len(last) > 300 {
		last = last[:300]
	}
	return last
}
