package usage

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/ksana-dev/ksana/claim"
)

// fakeSource is a source whose machine and processes the test sets.
type fakeSource struct {
	mu    sync.Mutex
	total float64
	links []procLink
	stats map[int]procStat
	err   error
}

func (f *fakeSource) set(total float64, procs ...fakeProc) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.total, f.links, f.stats = total, nil, map[int]procStat{}
	for _, p := range procs {
		f.links = append(f.links, p.procLink)
		f.stats[p.PID] = p.procStat
	}
}

type fakeProc struct {
	procLink
	procStat
}

func proc(pid, ppid, pgid int, cpu float64, start int64, rssMB uint64) fakeProc {
	return fakeProc{procLink{pid, ppid, pgid}, procStat{CPU: cpu, Start: start, RSS: rssMB << 20}}
}

func (f *fakeSource) cpuTotal(context.Context) (float64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.total, f.err
}

func (f *fakeSource) list(context.Context) ([]procLink, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.links), f.err
}

func (f *fakeSource) stat(_ context.Context, pid int) (procStat, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.stats[pid]
	if !ok {
		return procStat{}, errors.New("no such process")
	}
	return st, nil
}

func usageOf(cpu float64, memMB float64) claim.Usage {
	return claim.Usage{CPUPercent: cpu, MemoryMB: memMB}
}

func TestSelectTree(t *testing.T) {
	t.Parallel()
	// 1 init; 100 the node-unit; 101 a deployment (group 101) with child
	// 102; 103 a child of 102 in group 103; 200 a grandchild of 101 that
	// was reparented to 1 but stays in group 101; 300 unrelated; 301 its
	// child; 400 a deployment reparented to 1 where groups are unknown.
	all := []procLink{
		{PID: 1, PPID: 0, PGID: 1},
		{PID: 100, PPID: 1, PGID: 100},
		{PID: 101, PPID: 100, PGID: 101},
		{PID: 102, PPID: 101, PGID: 101},
		{PID: 103, PPID: 102, PGID: 103},
		{PID: 200, PPID: 1, PGID: 101},
		{PID: 300, PPID: 1, PGID: 300},
		{PID: 301, PPID: 300, PGID: 300},
		{PID: 400, PPID: 1, PGID: 0},
		{PID: 401, PPID: 400, PGID: 0},
	}
	tests := []struct {
		name  string
		self  int
		roots []int
		want  []int
	}{
		{"descendants and groups", 100, []int{101}, []int{100, 101, 102, 103, 200}},
		{"descendants only", 100, nil, []int{100, 101, 102, 103}},
		{"unknown self", 999, nil, nil},
		{"root outside the tree", 999, []int{300}, []int{300, 301}},
		{"groups unknown: the root and its descendants", 100, []int{400}, []int{100, 101, 102, 103, 400, 401}},
		{"a root that ended", 100, []int{500}, []int{100, 101, 102, 103}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, l := range selectTree(all, tt.self, tt.roots) {
				got = append(got, l.PID)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pids (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCollectorSample(t *testing.T) {
	t.Parallel()
	src := &fakeSource{}
	c := NewCollector(Config{Self: 100, Roots: func() []int { return []int{101} }})
	c.src = src
	steps := []struct {
		total float64
		procs []fakeProc
		want  Reading
	}{
		{ // first sample: no CPU figure yet; 300 is not ours
			total: 1000,
			procs: []fakeProc{proc(100, 1, 100, 10, 5, 1), proc(101, 100, 101, 20, 6, 2), proc(300, 1, 300, 500, 7, 99)},
			want:  Reading{Processes: 2, Usage: usageOf(0, 3)},
		},
		{ // 200 s of machine time later: +10 s and +30 s -> 20%
			total: 1200,
			procs: []fakeProc{proc(100, 1, 100, 20, 5, 1), proc(101, 100, 101, 50, 6, 3), proc(300, 1, 300, 900, 7, 99)},
			want:  Reading{Processes: 2, Usage: usageOf(20, 4)},
		},
		{ // 101 ended and a new process reuses the pid: all its 4 s count; (1+4)/100
			total: 1300,
			procs: []fakeProc{proc(100, 1, 100, 21, 5, 1), proc(101, 100, 101, 4, 60, 1)},
			want:  Reading{Processes: 2, Usage: usageOf(5, 2)},
		},
		{ // the machine's time did not move: no CPU figure; a process listed but gone is skipped
			total: 1300,
			procs: []fakeProc{proc(100, 1, 100, 21, 5, 1)},
			want:  Reading{Processes: 1, Usage: usageOf(0, 1)},
		},
		{ // more than the machine had (clock steps): capped at 100
			total: 1310,
			procs: []fakeProc{proc(100, 1, 100, 100, 5, 1)},
			want:  Reading{Processes: 1, Usage: usageOf(100, 1)},
		},
	}
	for i, s := range steps {
		src.set(s.total, s.procs...)
		if i == 3 {
			src.links = append(src.links, procLink{PID: 102, PPID: 100, PGID: 101}) // no stat
		}
		got := c.Sample()
		got.At = time.Time{}
		if diff := cmp.Diff(s.want, got); diff != "" {
			t.Errorf("sample %d (-want +got):\n%s", i, diff)
		}
		if diff := cmp.Diff(got.Usage, c.Usage()); diff != "" {
			t.Errorf("sample %d: Usage differs from the sample (-sample +Usage):\n%s", i, diff)
		}
	}
}

func TestCollectorSourceFails(t *testing.T) {
	t.Parallel()
	c := NewCollector(Config{})
	c.src = &fakeSource{err: errors.New("not permitted")}
	got := c.Sample()
	if got.Usage != (Reading{}).Usage || got.Processes != 0 || got.At.IsZero() {
		t.Errorf("sample of a failing source = %+v, want zeros at a time", got)
	}
}

func TestCollectorRunEverySecond(t *testing.T) {
	t.Parallel()
	src := &fakeSource{}
	src.set(100, proc(100, 1, 100, 1, 5, 1))
	synctest.Test(t, func(t *testing.T) {
		c := NewCollector(Config{Self: 100})
		c.src = src
		start := time.Now()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error)
		go func() { done <- c.Run(ctx) }()
		synctest.Wait()
		if got := c.Latest().At; !got.Equal(start) {
			t.Errorf("first sample at %v, want at once (%v)", got, start)
		}
		time.Sleep(3500 * time.Millisecond)
		synctest.Wait()
		if got, want := c.Latest().At.Sub(start), 3*time.Second; got != want {
			t.Errorf("latest sample %v after start, want %v", got, want)
		}
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
}
