package main

import "testing"

// TestRun runs the example end to end: a job created through the mounted
// API calls back three times, is paused, and the runner stops cleanly.
func TestRun(t *testing.T) {
	if err := run(); err != nil {
		t.Fatalf("run: %v", err)
	}
}
