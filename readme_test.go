package ksana_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestReadmeFirstExample compiles and runs the first Go code block of
// README.md, the example a newcomer copies first, as a program of its own
// module that uses this checkout. It must be a whole program that ends by
// itself with status 0, and print what the ```output block after it shows.
func TestReadmeFirstExample(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs a program")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile("(?s)```go\n(.*?)```").FindSubmatch(readme)
	if m == nil {
		t.Fatal("README.md has no ```go block")
	}
	code := string(m[1])
	rest := readme[bytes.Index(readme, m[0])+len(m[0]):]
	o := regexp.MustCompile("(?s)```output\n(.*?)```").FindSubmatch(rest)
	if o == nil {
		t.Fatal("README.md's first Go block has no ```output block after it")
	}
	wantOut := string(o[1])
	if !strings.HasPrefix(code, "package main") {
		t.Fatalf("the first Go block of README.md is not a whole program (it must start with package main):\n%s", code)
	}
	checkout, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	goMod := "module example\n\ngo 1.26.0\n\nrequire github.com/ksana-dev/ksana v0.0.0-00010101000000-000000000000\n\n" +
		"replace github.com/ksana-dev/ksana => " + checkout + "\n"
	sum, err := os.ReadFile("go.sum")
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]string{"main.go": code, "go.mod": goMod, "go.sum": string(sum)} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	// Offline: every module the example needs is one of this module's.
	env := append(os.Environ(), "GOFLAGS=-mod=mod", "GOPROXY=off", "GOWORK=off")
	for _, args := range [][]string{{"mod", "tidy"}, {"run", "."}} {
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go %s of README.md's first Go block: %v\n%s\n--- main.go:\n%s", strings.Join(args, " "), err, out, code)
		}
		if args[0] == "run" && string(out) != wantOut {
			t.Errorf("README.md's first Go block printed\n%s\nwant (its ```output block)\n%s", out, wantOut)
		}
	}
}
