//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// cluster runs node-units and sub-commands of this binary (see TestMain)
// in one directory, sharing the default SQLite database in ./data.
type cluster struct {
	t   *testing.T
	dir string
	env []string
}

func newCluster(t *testing.T, vars ...string) *cluster {
	// Under -race a process sleeps 1 s at exit unless told otherwise; a
	// race found in a child still fails its exit status.
	env := []string{"NODEUNIT_TEST_MAIN=1", "GORACE=atexit_sleep_ms=0"}
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || name == "LOG_LEVEL" || name == "LOG_FORMAT" || strings.HasPrefix(name, "NODE_UNIT_") || name == "NODEUNIT_TEST_MAIN" || name == "GORACE" {
			continue
		}
		env = append(env, kv)
	}
	return &cluster{t: t, dir: t.TempDir(), env: append(env, vars...)}
}

func (c *cluster) command(args ...string) *exec.Cmd {
	self, err := os.Executable()
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Dir = c.dir
	cmd.Env = c.env
	return cmd
}

// sub runs a sub-command and returns its standard output.
func (c *cluster) sub(args ...string) string {
	c.t.Helper()
	var out, errOut bytes.Buffer
	cmd := c.command(args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		c.t.Fatalf("nodeunit %s: %v\nstderr: %s", strings.Join(args, " "), err, errOut.String())
	}
	return out.String()
}

// trySub runs a sub-command that may fail while the node-units start
// (before the first creates the tables): its stdout, or its stderr.
func (c *cluster) trySub(args ...string) (string, bool) {
	c.t.Helper()
	var out, errOut bytes.Buffer
	cmd := c.command(args...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return errOut.String(), false
	}
	return out.String(), true
}

// node is a running node-unit.
type node struct {
	cmd  *exec.Cmd
	log  string
	done chan error
}

func (c *cluster) start(name string) *node {
	c.t.Helper()
	logPath := filepath.Join(c.dir, name+".log")
	f, err := os.Create(logPath)
	if err != nil {
		c.t.Fatal(err)
	}
	cmd := c.command("run")
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		c.t.Fatal(err)
	}
	f.Close()
	n := &node{cmd: cmd, log: logPath, done: make(chan error, 1)}
	go func() { n.done <- cmd.Wait() }()
	c.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-n.done
		if c.t.Failed() {
			b, _ := os.ReadFile(logPath)
			c.t.Logf("%s log:\n%s", name, b)
		}
	})
	return n
}

// placement parses "nodeunit list" into id -> address ("-" when unassigned).
func placement(list string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n")[1:] {
		f := strings.Fields(line)
		if len(f) >= 4 {
			m[f[0]] = f[3]
		}
	}
	return m
}

// counts returns the number of deployments per address, sorted.
func counts(p map[string]string) []int {
	byAddr := map[string]int{}
	for _, a := range p {
		byAddr[a]++
	}
	var out []int
	for _, n := range byAddr {
		out = append(out, n)
	}
	sort.Ints(out)
	return out
}

// children returns the command names of pid's child processes.
func children(pid int) []string {
	var names []string
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		open, close := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || close < open {
			continue
		}
		f := strings.Fields(s[close+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		if ppid, _ := strconv.Atoi(f[1]); ppid == pid {
			names = append(names, s[open+1:close])
		}
	}
	return names
}

func countSleeps(pid int) int {
	n := 0
	for _, name := range children(pid) {
		if name == "sleep" {
			n++
		}
	}
	return n
}

// eventually polls cond every 250 ms for up to 40 s.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	start := time.Now()
	defer func() { t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond)) }()
	deadline := start.Add(40 * time.Second)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s; last state:\n%s", what, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// TestTwoNodeUnitsSplitAndFailOver is the README walkthrough: two
// node-units on one SQLite file take 10 deployments 5/5; one is killed and
// the other ends up running all 10; the survivor shuts down cleanly.
func TestTwoNodeUnitsSplitAndFailOver(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts processes for several seconds")
	}
	c := newCluster(t,
		// A TTL of many intervals: a loaded machine can delay a
		// heartbeat, and a node-unit found lost by mistake would upset
		// the 5/5 split (nothing moves deployments back without rebalance).
		"NODE_UNIT_SCHEDULER_INTERVAL_MS=250",
		"NODE_UNIT_MEMBERSHIP_TTL_MS=5000",
		"NODE_UNIT_TRUSTED_COMMAND_REGEXP=sleep",
		"NODE_UNIT_STOP_GRACE_MS=5000",
		"LOG_LEVEL=debug",
	)
	a := c.start("a")
	b := c.start("b")
	eventually(t, "both node-units in the membership", func() (bool, string) {
		out, ok := c.trySub("nodes")
		return ok && strings.Count(strings.TrimSpace(out), "\n") == 2, out
	})
	for i := 1; i <= 10; i++ {
		c.sub("add", "--id", fmt.Sprintf("d%02d", i), "sleep", "3600")
	}

	var split map[string]string
	eventually(t, "10 deployments split 5/5", func() (bool, string) {
		out := c.sub("list")
		split = placement(out)
		return split["d01"] != "" && !strings.Contains(out, " - ") && cmp.Equal(counts(split), []int{5, 5}), out
	})
	eventually(t, "5 sleep processes under each node-unit", func() (bool, string) {
		na, nb := countSleeps(a.cmd.Process.Pid), countSleeps(b.cmd.Process.Pid)
		return na == 5 && nb == 5, fmt.Sprintf("a runs %d, b runs %d", na, nb)
	})

	// Kill a without letting it leave: b takes its deployments over once
	// a's membership expires, and a's processes die with it.
	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-a.done
	a.done <- nil // for the cleanup
	bAddr := c.address(b)
	eventually(t, "all 10 deployments on b", func() (bool, string) {
		out := c.sub("list")
		p := placement(out)
		want := map[string]string{}
		for id := range split {
			want[id] = bAddr
		}
		return cmp.Equal(want, p), out
	})
	eventually(t, "10 sleep processes under b", func() (bool, string) {
		n := countSleeps(b.cmd.Process.Pid)
		return n == 10, fmt.Sprintf("b runs %d", n)
	})

	// SIGTERM: b stops its processes, leaves, and exits with status 0.
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-b.done:
		b.done <- err
		if err != nil {
			t.Errorf("b exited with %v after SIGTERM, want status 0", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("b did not exit after SIGTERM")
	}
	if out := c.sub("nodes"); strings.Contains(out, bAddr) {
		t.Errorf("b is still a member after shutdown:\n%s", out)
	}
	// Every deployment that moved has a log file under each node-unit.
	moved := 0
	for id, addr := range split {
		if addr == bAddr {
			continue
		}
		moved++
		logs, _ := filepath.Glob(filepath.Join(c.dir, "data", "logs", "*", id+".log"))
		if len(logs) != 2 {
			t.Errorf("log files of %s = %v, want one under each node-unit", id, logs)
		}
	}
	if moved != 5 {
		t.Errorf("%d deployments moved, want 5", moved)
	}
}

// address returns a node-unit's address from its start-up log line.
func (c *cluster) address(n *node) string {
	c.t.Helper()
	b, _ := os.ReadFile(n.log)
	m := regexp.MustCompile(`msg="node-unit started" address=(\S+)`).FindSubmatch(b)
	if m == nil {
		c.t.Fatalf("no start-up line with the address in:\n%s", b)
	}
	return string(m[1])
}
