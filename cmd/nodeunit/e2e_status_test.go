//go:build linux

package main

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// startEnv starts a node-unit with extra environment variables.
func (c *cluster) startEnv(name string, extra ...string) *node {
	c.t.Helper()
	saved := c.env
	c.env = append(append([]string(nil), c.env...), extra...)
	defer func() { c.env = saved }()
	return c.start(name)
}

// endpoint returns a node-unit's listener base URL from its start-up line.
func (c *cluster) endpoint(n *node) string {
	c.t.Helper()
	b, _ := os.ReadFile(n.log)
	m := regexp.MustCompile(`usage_endpoint=(\S+)/NodeUnit/InspectResourceUsage`).FindSubmatch(b)
	if m == nil {
		c.t.Fatalf("no usage endpoint in:\n%s", b)
	}
	return string(m[1])
}

// childPIDs returns the pids of pid's live child processes.
func childPIDs(pid int) []int {
	var out []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if ppidOf(child) == pid && alive(child) {
			out = append(out, child)
		}
	}
	return out
}

func ppidOf(pid int) int {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 2 {
		return 0
	}
	n, _ := strconv.Atoi(f[1])
	return n
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// statusOf parses "nodeunit status" into "id node-unit" -> "state detail".
func statusOf(out string) map[string]string {
	m := map[string]string{}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) >= 4 {
			m[f[0]+" "+f[2]] = strings.Join(f[3:], " ")
		}
	}
	return m
}

// TestWhatAUserRunsInto runs, on SQLite and on PostgreSQL, two node-units
// with different trust rules and deployments they cannot all run: a
// node-unit claims only what its trust rule lets it run, nodeunit status
// shows running, restarting (with the last exit and output) and refused
// deployments, /metrics answers, and a node-unit killed with SIGKILL takes
// its processes with it.
func TestWhatAUserRunsInto(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes for several seconds")
	}
	for _, db := range []string{"sqlite", "postgres"} {
		t.Run(db, func(t *testing.T) {
			vars := []string{
				"NODE_UNIT_SCHEDULER_INTERVAL_MS=250",
				"NODE_UNIT_MEMBERSHIP_TTL_MS=5000",
				"NODE_UNIT_STOP_GRACE_MS=5000",
				"NODE_UNIT_MAX_CLAIMS_PER_CYCLE=5",
				"LOG_LEVEL=debug",
			}
			if db == "postgres" {
				schema, _ := freshSchema(t)
				vars = append(vars, "DATABASE_URL="+withSearchPath(t, schema))
			}
			c := newCluster(t, vars...)
			a := c.startEnv("a", "NODE_UNIT_TRUSTED_COMMAND_REGEXP=sleep")
			b := c.startEnv("b", "NODE_UNIT_TRUSTED_COMMAND_REGEXP=sleep|/bin/sleep")
			eventually(t, "both node-units in the membership", func() (bool, string) {
				out, ok := c.trySub("nodes")
				return ok && strings.Count(strings.TrimSpace(out), "\n") == 2, out
			})
			aAddr, bAddr := c.address(a), c.address(b)
			c.sub("add", "--id", "picky", "/bin/sleep", "3600")  // only b runs it
			c.sub("add", "--id", "nobody", "python3", "-c", "1") // neither runs it
			c.sub("add", "--id", "crash", "sleep", "abc")        // crash-loops
			for i := 1; i <= 4; i++ {
				c.sub("add", "--id", fmt.Sprintf("ok%d", i), "sleep", "3600")
			}

			var status string
			eventually(t, "the state of every deployment in nodeunit status", func() (bool, string) {
				status = c.sub("status")
				s := statusOf(status)
				p := placement(c.sub("list"))
				ok := p["picky"] == bAddr && p["nobody"] == "-" &&
					strings.HasPrefix(s["picky "+bAddr], "running pid ") &&
					strings.HasPrefix(s["nobody "+aAddr], `refused command "python3" does not match NODE_UNIT_TRUSTED_COMMAND_REGEXP "sleep"`) &&
					strings.HasPrefix(s["nobody "+bAddr], `refused command "python3" does not match NODE_UNIT_TRUSTED_COMMAND_REGEXP "sleep|/bin/sleep"`) &&
					s["nobody -"] == "waiting every active node-unit refuses it" &&
					strings.HasPrefix(s["crash "+p["crash"]], "restarting last exit: exit status 1 (output: \"sleep: invalid time interval ") &&
					strings.HasPrefix(s["ok1 "+p["ok1"]], "running pid ")
				return ok, status
			})
			// a never claimed what it refuses: no start was refused there.
			if log, _ := os.ReadFile(a.log); strings.Contains(string(log), `msg="runner refused deployment"`) {
				t.Errorf("a claimed a deployment its trust rule refuses:\n%s", log)
			}
			resp, err := http.Get(c.endpoint(a) + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			for _, want := range []string{`ksana_claim_cycles_total{result="ok"}`, "ksana_nodeunit_memory_mb", `ksana_claim_actions_total{action="claimed"}`} {
				if !strings.Contains(string(body), want) {
					t.Errorf("a's /metrics lacks %q", want)
				}
			}

			// SIGKILL: a's deployment processes die with it (what the
			// README shows with ps -p after kill -9).
			kids := childPIDs(a.cmd.Process.Pid)
			if len(kids) == 0 {
				t.Fatalf("a runs no processes; status:\n%s", status)
			}
			if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			<-a.done
			a.done <- nil
			eventually(t, "a's processes gone after kill -9", func() (bool, string) {
				var left []int
				for _, pid := range kids {
					if alive(pid) {
						left = append(left, pid)
					}
				}
				return len(left) == 0, fmt.Sprintf("still alive: %v", left)
			})
		})
	}
}
