package main

import (
	"os"
	"testing"
)

// TestMain lets the tests run this test binary as the nodeunit binary:
// with NODEUNIT_TEST_MAIN=1 it runs main's code on its arguments instead
// of the tests (the end-to-end test starts node-units and sub-commands
// this way, without a separate build).
func TestMain(m *testing.M) {
	if os.Getenv("NODEUNIT_TEST_MAIN") == "1" {
		os.Exit(run(os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
