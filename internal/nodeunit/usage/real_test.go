//go:build unix

package usage

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// TestCollectorRealProcesses samples this machine: this process and a
// sleep in a process group of its own, through gopsutil. Not in parallel:
// it measures the CPU of the whole test process.
func TestCollectorRealProcesses(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	c := NewCollector(Config{Roots: func() []int { return []int{cmd.Process.Pid} }})
	c.Sample()
	// Burn CPU until this process has used 50ms more of it, so that the
	// second sample has something to show however busy the machine is
	// (50ms of the clock may give this process none).
	start := cpuTime(t)
	for deadline := time.Now().Add(30 * time.Second); cpuTime(t)-start < 50*time.Millisecond; {
		if time.Now().After(deadline) {
			t.Fatalf("this process used %v of CPU in 30s, want 50ms", cpuTime(t)-start)
		}
	}
	got := c.Sample()
	if got.Processes < 2 {
		t.Errorf("processes = %d, want at least 2 (this one and sleep)", got.Processes)
	}
	if got.MemoryMB <= 0 {
		t.Errorf("memory_mb = %v, want > 0", got.MemoryMB)
	}
	if got.CPUPercent <= 0 || got.CPUPercent > 100 {
		t.Errorf("cpu_percent = %v, want within (0, 100]", got.CPUPercent)
	}
	if g := pgid(cmd.Process.Pid); g != cmd.Process.Pid {
		t.Errorf("pgid(sleep) = %d, want %d (it leads its group)", g, cmd.Process.Pid)
	}
}

// cpuTime is the CPU time this process has used, user and system.
func cpuTime(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCollectorSample measures one sample of this machine (every
// process is listed to find the node-unit's tree); BenchmarkStatSelf is
// the baseline: measuring one process.
func BenchmarkCollectorSample(b *testing.B) {
	c := NewCollector(Config{})
	b.ReportAllocs()
	for b.Loop() {
		c.Sample()
	}
}

func BenchmarkStatSelf(b *testing.B) {
	b.ReportAllocs()
	ctx := context.Background()
	for b.Loop() {
		if _, err := (psSource{}).stat(ctx, os.Getpid()); err != nil {
			b.Fatal(err)
		}
	}
}
