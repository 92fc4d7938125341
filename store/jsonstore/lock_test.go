package jsonstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// crash ends s as the death of its process would: nothing more reaches the
// disk (changes not yet written are lost, the journal stays as it is) and
// the lock on the data directory is released, as the system releases it.
func crash(t *testing.T, s *Store) {
	t.Helper()
	s.mu.Lock()
	s.crashed = true // Close writes nothing
	s.mu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatalf("Close of a crashed store: %v", err)
	}
}

// dirFiles returns the name and contents of every file in dir.
func dirFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, path)
		out[rel] = string(data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestLockExcludesSecondOpen: while a store has a directory open, a second
// New on it fails with ErrLocked and changes no file, though the directory
// holds everything an open acts on (a journal to replay, a stray temporary
// file, a torn runs.jsonl, a jobs.json that does not parse); after Close
// the directory opens again.
func TestLockExcludesSecondOpen(t *testing.T) {
	t.Parallel()
	if !lockSupported {
		t.Skip("no flock on this platform: New takes no lock")
	}
	dir := t.TempDir()
	ctx := context.Background()
	first := open(t, dir, Config{Journal: true, FlushInterval: time.Hour})
	for _, id := range []string{"a", "b"} {
		if err := first.Save(ctx, testJob(id)); err != nil {
			t.Fatal(err)
		}
	}
	for name, content := range map[string]string{
		JobsFile + ".tmp": "a rewrite in progress",
		RunsFile:          `{"run_id":"1","job_id":"a","sta`,
		JobsFile:          "edited while in use",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	before := dirFiles(t, dir)
	if before[JournalFile] == "" {
		t.Fatal("no journal records to replay: the test would prove nothing")
	}

	// Each attempt fails, so a failed attempt does not drop the first
	// store's lock either.
	tests := []struct {
		name string
		cfg  Config
	}{
		{"journal", Config{Journal: true}},
		{"no journal", Config{}},
		{"journal again", Config{Journal: true, FlushInterval: time.Millisecond}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := New(dir, tt.cfg)
			if !errors.Is(err, ErrLocked) {
				if s != nil {
					s.Close()
				}
				t.Fatalf("second New = %v, want ErrLocked", err)
			}
			if s != nil {
				t.Errorf("second New returned a store with its error")
			}
			for _, want := range []string{dir, "in use by another process", LockFile} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
			if diff := cmp.Diff(before, dirFiles(t, dir)); diff != "" {
				t.Errorf("files after a refused New (-before +after):\n%s", diff)
			}
		})
	}

	// The first store still works and owns the directory.
	if err := first.Save(ctx, testJob("c")); err != nil {
		t.Fatalf("Save on the first store: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := first.Close(); err != nil {
		t.Errorf("second Close = %v, want nil", err)
	}
	again := open(t, dir, Config{Journal: true})
	var ids []string
	for _, j := range load(t, again) {
		ids = append(ids, j.ID)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, ids); diff != "" {
		t.Errorf("jobs after Close and reopen (-want +got):\n%s", diff)
	}
	if _, err := New(dir, Config{}); !errors.Is(err, ErrLocked) {
		t.Errorf("New beside the reopened store = %v, want ErrLocked", err)
	}
}

// TestLockReleasedWhenOpenFails: a New that fails after taking the lock
// (here jobs.json cannot be read) releases it.
func TestLockReleasedWhenOpenFails(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, JobsFile), 0o700); err != nil {
		t.Fatal(err)
	}
	if s, err := New(dir, Config{Journal: true}); err == nil || errors.Is(err, ErrLocked) {
		if s != nil {
			s.Close()
		}
		t.Fatalf("New over a jobs.json that is a directory = %v, want a read error", err)
	}
	if err := os.Remove(filepath.Join(dir, JobsFile)); err != nil {
		t.Fatal(err)
	}
	s := open(t, dir, Config{Journal: true})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestLockAcrossProcesses runs this test binary as a second process that
// opens the directory: refused while this process has it open, accepted
// after Close.
func TestLockAcrossProcesses(t *testing.T) {
	t.Parallel()
	if dir := os.Getenv("JSONSTORE_TEST_LOCK_CHILD"); dir != "" {
		s, err := New(dir, Config{})
		switch {
		case errors.Is(err, ErrLocked):
			fmt.Print("child: locked")
		case err != nil:
			fmt.Printf("child: error: %v", err)
		default:
			s.Close()
			fmt.Print("child: opened")
		}
		os.Exit(0)
	}
	if !lockSupported {
		t.Skip("no flock on this platform: New takes no lock")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	child := func() string {
		t.Helper()
		cmd := exec.Command(exe, "-test.run=^TestLockAcrossProcesses$")
		cmd.Env = append(os.Environ(), "JSONSTORE_TEST_LOCK_CHILD="+dir)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("child process: %v\n%s", err, out)
		}
		i := strings.Index(string(out), "child: ")
		if i < 0 {
			t.Fatalf("child process said nothing:\n%s", out)
		}
		return strings.TrimSpace(string(out[i:]))
	}
	s := open(t, dir, Config{})
	if err := s.Save(context.Background(), testJob("a")); err != nil {
		t.Fatal(err)
	}
	before := dirFiles(t, dir)
	if got := child(); got != "child: locked" {
		t.Errorf("another process opening the directory in use: %q, want %q", got, "child: locked")
	}
	if diff := cmp.Diff(before, dirFiles(t, dir)); diff != "" {
		t.Errorf("files after the refused open (-before +after):\n%s", diff)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := child(); got != "child: opened" {
		t.Errorf("another process opening the directory after Close: %q, want %q", got, "child: opened")
	}
}

// TestReopenWhileForking: a store closed and opened again in a loop while
// another goroutine starts processes over and over. A process being
// started holds a copy of the lock's descriptor until it runs its
// program; New waits that out instead of failing with ErrLocked.
func TestReopenWhileForking(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			exec.Command("true").Run()
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for i := range 200 {
		s, err := New(dir, Config{})
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
}
