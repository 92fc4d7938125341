package main

import (
	"os/exec"
	"testing"
)

// TestRun runs the program as the README shows it and checks what it
// prints.
func TestRun(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs for three seconds")
	}
	out, err := exec.Command("go", "run", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go run: %v\n%s", err, out)
	}
	if want := "report 1\nreport 2\nreport 3\ndone\n"; string(out) != want {
		t.Errorf("output:\n%s\nwant:\n%s", out, want)
	}
}
