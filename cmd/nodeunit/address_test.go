package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestClaimAddressSlots(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	n := 0
	gen := func() (string, error) { n++; return fmt.Sprintf("gen-%d", n), nil }

	a, err := claimAddress(dir, gen)
	if err != nil {
		t.Fatal(err)
	}
	// The first slot is held: a second node-unit gets the second one.
	b, err := claimAddress(dir, gen)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		slot       *addressSlot
		addr, file string
	}{
		{a, "gen-1", "nodeunit-address"},
		{b, "gen-2", "nodeunit-address.2"},
	}
	for _, tt := range tests {
		if tt.slot.Address != tt.addr || filepath.Base(tt.slot.Path) != tt.file {
			t.Errorf("slot = %s in %s, want %s in %s", tt.slot.Address, filepath.Base(tt.slot.Path), tt.addr, tt.file)
		}
		if got, _ := os.ReadFile(tt.slot.Path); string(got) != tt.addr+"\n" {
			t.Errorf("%s holds %q, want %q", tt.file, got, tt.addr+"\n")
		}
	}
	// A restarted node-unit takes its address back from the file.
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := claimAddress(dir, gen)
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	defer b.Close()
	if again.Address != "gen-1" || n != 2 {
		t.Errorf("after restart: address %q (generated %d), want gen-1 without generating", again.Address, n)
	}
}

func TestClaimAddressErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.WriteFile(slotPath(dir, 1), []byte("bad address\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := claimAddress(dir, generateAddress)
	if err == nil || !strings.Contains(err.Error(), "bad address") {
		t.Errorf("error = %v, want one about the bad address in the file", err)
	}
	genErr := errors.New("no randomness")
	_, err = claimAddress(t.TempDir(), func() (string, error) { return "", genErr })
	if !errors.Is(err, genErr) {
		t.Errorf("error = %v, want the generator's", err)
	}
}

func TestGenerateAddress(t *testing.T) {
	t.Parallel()
	a, err := generateAddress()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := generateAddress()
	if !regexp.MustCompile(`^[A-Za-z0-9.-]+-[0-9a-f]{8}$`).MatchString(a) || a == b {
		t.Errorf("generated %q and %q: want host-8hex, distinct", a, b)
	}
	if err := validAddress(a); err != nil {
		t.Errorf("generated address %q is not valid: %v", a, err)
	}
}
