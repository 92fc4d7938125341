//go:build linux

package proc_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/internal/nodeunit/proc"
)

func Example() {
	dir, err := os.MkdirTemp("", "proc-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	r, err := proc.New(proc.Config{LogDir: dir, Trusted: regexp.MustCompile(`sh|sleep`)})
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	err = r.Start(ctx, proc.Spec{
		ID:      "greeter",
		Command: "sh",
		Args:    []string{"-c", `echo "hello, $NAME"; exec sleep 60`},
		Env:     []string{"NAME=world"},
	})
	if err != nil {
		panic(err)
	}
	// The process writes to its log file; wait for the line.
	var out []byte
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(string(out), "\n") && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		out, _ = os.ReadFile(r.LogPath("greeter"))
	}
	fmt.Print(string(out))
	fmt.Println(r.Running())

	err = r.Start(ctx, proc.Spec{ID: "cleaner", Command: "rm", Args: []string{"-rf", "/tmp/x"}})
	fmt.Println(errors.Is(err, proc.ErrUntrusted), err)

	if err := r.Close(ctx); err != nil { // SIGTERM, then SIGKILL after the grace period
		panic(err)
	}
	fmt.Println(r.Running())
	// Output:
	// hello, world
	// [greeter]
	// true deployment "cleaner": command "rm" refused: it does not match "sh|sleep"
	// []
}
