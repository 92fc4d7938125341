package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// maxAddressSlots bounds how many node-units can share one data directory
// with generated addresses.
const maxAddressSlots = 64

// errLocked: another process holds the slot's lock.
var errLocked = errors.New("address file in use")

// addressSlot is a claimed address file: the file stays open, and locked,
// for the life of the process, so no other node-unit on the machine takes
// the same generated address.
type addressSlot struct {
	Address string
	Path    string
	f       *os.File
}

// Close releases the slot.
func (s *addressSlot) Close() error {
	if s == nil || s.f == nil {
		return nil
	}
	return s.f.Close()
}

// slotPath is the address file of slot n (1-based).
func slotPath(dir string, n int) string {
	if n == 1 {
		return filepath.Join(dir, "nodeunit-address")
	}
	return filepath.Join(dir, "nodeunit-address."+strconv.Itoa(n))
}

// claimAddress takes the first address file in dir that no running process
// holds, and returns its address, generating and saving one when the file
// is new or empty. gen makes a new address.
func claimAddress(dir string, gen func() (string, error)) (*addressSlot, error) {
	for n := 1; n <= maxAddressSlots; n++ {
		path := slotPath(dir, n)
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			return nil, fmt.Errorf("address file: %w", err)
		}
		if err := lockFile(f); errors.Is(err, errLocked) {
			f.Close()
			continue
		} else if err != nil {
			f.Close()
			return nil, fmt.Errorf("address file %s: lock: %w", path, err)
		}
		b, err := io.ReadAll(f)
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("address file %s: %w", path, err)
		}
		addr := strings.TrimSpace(string(b))
		if addr != "" {
			if err := validAddress(addr); err != nil {
				f.Close()
				return nil, fmt.Errorf("address file %s holds a bad address %q: %v", path, addr, err)
			}
			return &addressSlot{Address: addr, Path: path, f: f}, nil
		}
		if addr, err = gen(); err != nil {
			f.Close()
			return nil, err
		}
		err = f.Truncate(0)
		if err == nil {
			_, err = f.WriteAt([]byte(addr+"\n"), 0)
		}
		if err == nil {
			err = f.Sync()
		}
		if err != nil {
			f.Close()
			return nil, fmt.Errorf("address file %s: write: %w", path, err)
		}
		return &addressSlot{Address: addr, Path: path, f: f}, nil
	}
	return nil, fmt.Errorf("address file: all %d address files in %s are in use; set NODE_UNIT_ADDRESS or NODE_UNIT_DATA", maxAddressSlots, dir)
}

// generateAddress returns "<host name>-<8 hex digits>", or
// "nodeunit-<8 hex digits>" when the host name is unusable.
func generateAddress() (string, error) {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("generate address: %w", err)
	}
	host, _ := os.Hostname()
	host = strings.Map(func(r rune) rune {
		switch {
		case 'a' <= r && r <= 'z', 'A' <= r && r <= 'Z', '0' <= r && r <= '9', r == '-', r == '.':
			return r
		}
		return -1
	}, host)
	if host == "" || len(host) > 60 {
		host = "nodeunit"
	}
	return host + "-" + hex.EncodeToString(b[:]), nil
}
