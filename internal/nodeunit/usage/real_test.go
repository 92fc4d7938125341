//go:build linux

package usage

import (
	"os"
	"os/exec"
	"syscall"
	"testing"
)

func TestCollectorRealProc(t *testing.T) {
	cmd := exec.Command("sleep", "1000")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	c := NewCollector(Config{Roots: func() []int { return []int{cmd.Process.Pid} }})
	c.Sample()
	got := c.Sample()
	if got.Processes < 2 {
		t.Errorf("processes = %d, want at least 2 (this one and sleep)", got.Processes)
	}
	if got.MemoryMB <= 0 {
		t.Errorf("memory_mb = %v, want > 0", got.MemoryMB)
	}
	if got.CPUPercent < 0 || got.CPUPercent > 100 {
		t.Errorf("cpu_percent = %v, want within 0-100", got.CPUPercent)
	}
}

// BenchmarkCollectorSample measures one sample of the real /proc (every
// process is listed to find the node-unit's tree); BenchmarkReadSelfStat
// is the baseline: reading and parsing one process's stat.
func BenchmarkCollectorSample(b *testing.B) {
	c := NewCollector(Config{})
	b.ReportAllocs()
	for b.Loop() {
		c.Sample()
	}
}

func BenchmarkReadSelfStat(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		data, err := os.ReadFile("/proc/self/stat")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := parsePidStat(data); err != nil {
			b.Fatal(err)
		}
	}
}
