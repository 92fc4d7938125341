package usage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// pidStat is what the collector reads from /proc/<pid>/stat.
type pidStat struct {
	PID       int
	PPID      int
	PGID      int
	Ticks     uint64 // utime + stime, in clock ticks
	StartTime uint64 // start time after boot, in clock ticks
	RSSPages  int64  // resident set size, in pages
}

// parsePidStat parses the content of /proc/<pid>/stat. The command name,
// in parentheses, may hold spaces and parentheses: the fields start after
// the last ')'.
func parsePidStat(b []byte) (pidStat, error) {
	s := string(bytes.TrimSpace(b))
	open := strings.IndexByte(s, '(')
	close := strings.LastIndexByte(s, ')')
	if open <= 0 || close < open {
		return pidStat{}, errors.New("stat: no command name in parentheses")
	}
	pid, err := strconv.Atoi(strings.TrimSpace(s[:open]))
	if err != nil || pid <= 0 {
		return pidStat{}, fmt.Errorf("stat: bad pid %q", strings.TrimSpace(s[:open]))
	}
	f := strings.Fields(s[close+1:])
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 22 {
		return pidStat{}, fmt.Errorf("stat: %d fields after the command name, want at least 22", len(f))
	}
	st := pidStat{PID: pid}
	ints := []struct {
		field int
		dst   *int
	}{{4, &st.PPID}, {5, &st.PGID}}
	for _, x := range ints {
		v, err := strconv.Atoi(f[x.field-3])
		if err != nil {
			return pidStat{}, fmt.Errorf("stat: field %d: %w", x.field, err)
		}
		*x.dst = v
	}
	var ut, stt uint64
	uints := []struct {
		field int
		dst   *uint64
	}{{14, &ut}, {15, &stt}, {22, &st.StartTime}}
	for _, x := range uints {
		v, err := strconv.ParseUint(f[x.field-3], 10, 64)
		if err != nil {
			return pidStat{}, fmt.Errorf("stat: field %d: %w", x.field, err)
		}
		*x.dst = v
	}
	st.Ticks = ut + stt
	rss, err := strconv.ParseInt(f[24-3], 10, 64)
	if err != nil {
		return pidStat{}, fmt.Errorf("stat: field 24: %w", err)
	}
	if rss < 0 {
		rss = 0
	}
	st.RSSPages = rss
	return st, nil
}

// parseCPUTotal returns the machine's total CPU time in clock ticks: the
// sum of user, nice, system, idle, iowait, irq, softirq and steal on the
// "cpu" line of /proc/stat (guest time is already part of user).
func parseCPUTotal(b []byte) (uint64, error) {
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 5 {
			return 0, fmt.Errorf("/proc/stat: cpu line has %d fields, want at least 5", len(f))
		}
		var total uint64
		for i := 1; i < len(f) && i <= 8; i++ {
			v, err := strconv.ParseUint(f[i], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("/proc/stat: cpu field %d: %w", i, err)
			}
			total += v
		}
		return total, nil
	}
	return 0, errors.New("/proc/stat: no cpu line")
}

// procFS reads a proc file system mounted at root.
type procFS struct{ root string }

func (p procFS) cpuTotal() (uint64, error) {
	b, err := os.ReadFile(filepath.Join(p.root, "stat"))
	if err != nil {
		return 0, err
	}
	return parseCPUTotal(b)
}

// all returns the stat of every process; processes that vanish while being
// read are skipped.
func (p procFS) all() ([]pidStat, error) {
	entries, err := os.ReadDir(p.root)
	if err != nil {
		return nil, err
	}
	out := make([]pidStat, 0, len(entries))
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.root, e.Name(), "stat"))
		if err != nil {
			continue // gone
		}
		st, err := parsePidStat(b)
		if err != nil {
			continue
		}
		out = append(out, st)
	}
	return out, nil
}

// selectTree returns the processes that count: self, its descendants, and
// the members of the process groups led by roots (and their descendants).
func selectTree(all []pidStat, self int, roots []int) []pidStat {
	children := map[int][]int{}
	byPID := make(map[int]pidStat, len(all))
	groups := map[int]bool{}
	for _, r := range roots {
		groups[r] = true
	}
	var queue []int
	seen := map[int]bool{}
	push := func(pid int) {
		if !seen[pid] {
			seen[pid] = true
			queue = append(queue, pid)
		}
	}
	for _, st := range all {
		byPID[st.PID] = st
		children[st.PPID] = append(children[st.PPID], st.PID)
		if groups[st.PGID] {
			push(st.PID)
		}
	}
	push(self)
	var out []pidStat
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if st, ok := byPID[pid]; ok {
			out = append(out, st)
		}
		for _, c := range children[pid] {
			push(c)
		}
	}
	return out
}
