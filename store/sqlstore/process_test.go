package sqlstore

import (
	"context"
	"fmt"
	"io"
	"os"
	osexec "os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// childEnv names the SQLite URL and node address a child process of
// TestSQLiteTwoProcesses runs its loop with.
const childEnv = "KSANA_SQLSTORE_TEST_CHILD"

// TestMain runs the test binary as a node-unit process when
// TestSQLiteTwoProcesses starts it with childEnv set.
func TestMain(m *testing.M) {
	if spec := os.Getenv(childEnv); spec != "" {
		if err := childLoop(spec); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// childLoop runs one claim loop on the SQLite URL and address in spec until
// standard input closes.
func childLoop(spec string) error {
	var u, addr string
	if _, err := fmt.Sscanf(spec, "%s %s", &u, &addr); err != nil {
		return fmt.Errorf("%s=%q: %w", childEnv, spec, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { io.Copy(io.Discard, os.Stdin); cancel() }()
	db, err := Open(ctx, u)
	if err != nil {
		return err
	}
	defer db.Close()
	l, err := claim.New(db.Deployments(), db.Membership(), claimtest.NewRunner(), nil, claim.Config{
		Address: addr, Interval: 100 * time.Millisecond, MembershipTTL: 2 * time.Second,
	})
	if err != nil {
		return err
	}
	return l.Run(ctx)
}

// TestSQLiteTwoProcesses is the README's trial with real processes: two
// node-units on one SQLite file take 10 deployments 5/5; one is killed
// (no clean leave) and its deployments move to the other once its
// membership expires.
func TestSQLiteTwoProcesses(t *testing.T) {
	t.Parallel()
	u := sqliteTestURL(t)
	admin := mustOpen(t, u)
	ctx := context.Background()
	for i := range 10 {
		if err := admin.Deployments().Add(ctx, claim.Deployment{ID: fmt.Sprintf("dep-%d", i), Enabled: true}); err != nil {
			t.Fatal(err)
		}
	}
	children := map[string]*osexec.Cmd{}
	for _, addr := range []string{"node-a", "node-b"} {
		cmd := osexec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"="+u+" "+addr)
		out := new(strings.Builder)
		cmd.Stdout, cmd.Stderr = out, out
		stdin, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[addr] = cmd
		t.Cleanup(func() {
			stdin.Close()
			cmd.Process.Kill()
			cmd.Wait() // output copied: out is no longer written
			if t.Failed() && out.Len() > 0 {
				t.Logf("output of %s:\n%s", addr, out)
			}
		})
	}
	placement := func() map[string]int {
		all, err := admin.Deployments().List(ctx)
		if err != nil {
			t.Fatal(err)
		}
		n := map[string]int{}
		for _, d := range all {
			n[d.Address]++
		}
		return n
	}
	waitFor(t, "10 deployments placed 5/5", 60*time.Second, func() (bool, string) {
		n := placement()
		return n["node-a"] == 5 && n["node-b"] == 5, fmt.Sprint(n)
	})
	if err := children["node-a"].Process.Kill(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "all 10 on node-b after node-a was killed", 60*time.Second, func() (bool, string) {
		n := placement()
		return n["node-b"] == 10, fmt.Sprint(n)
	})
}
