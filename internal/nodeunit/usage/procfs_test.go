package usage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// statLine builds a /proc/<pid>/stat line with the fields the collector
// reads; the others are filler.
func statLine(pid int, comm string, ppid, pgid int, utime, stime, start uint64, rss int64) string {
	f := make([]string, 52)
	for i := range f {
		f[i] = "0"
	}
	f[0] = fmt.Sprint(pid)
	f[1] = "(" + comm + ")"
	f[2] = "S"
	f[3] = fmt.Sprint(ppid)
	f[4] = fmt.Sprint(pgid)
	f[13] = fmt.Sprint(utime)
	f[14] = fmt.Sprint(stime)
	f[21] = fmt.Sprint(start)
	f[23] = fmt.Sprint(rss)
	return strings.Join(f, " ") + "\n"
}

func TestParsePidStat(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    pidStat
		wantErr string
	}{
		{
			name: "real line",
			in:   "21345 (cat) R 21341 21341 12488 0 -1 4194304 101 0 0 0 7 3 0 0 20 0 1 0 330738 3133440 395 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0",
			want: pidStat{PID: 21345, PPID: 21341, PGID: 21341, Ticks: 10, StartTime: 330738, RSSPages: 395},
		},
		{
			name: "name with spaces and parentheses",
			in:   statLine(7, "a) (b c", 1, 7, 5, 6, 99, 12),
			want: pidStat{PID: 7, PPID: 1, PGID: 7, Ticks: 11, StartTime: 99, RSSPages: 12},
		},
		{name: "empty", in: "", wantErr: "no command name"},
		{name: "no pid", in: "(x) S 1 1", wantErr: "no command name"},
		{name: "bad pid", in: "x1 (x) S 1 1", wantErr: "bad pid"},
		{name: "short", in: "1 (x) S 1 1 1", wantErr: "fields after the command name"},
		{name: "bad utime", in: strings.Replace(statLine(1, "x", 0, 1, 5, 6, 9, 1), " 5 6 ", " x 6 ", 1), wantErr: "field 14"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parsePidStat([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parsePidStat: %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseCPUTotal(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    uint64
		wantErr string
	}{
		{name: "ten fields", in: "cpu  20315 0 6644 630273 542 0 141 21 7 9\ncpu0 1 2 3 4\n", want: 20315 + 6644 + 630273 + 542 + 141 + 21},
		{name: "old kernel, four values", in: "cpu 1 2 3 4\n", want: 10},
		{name: "cpu line later", in: "intr 1\ncpu 1 1 1 1 1\n", want: 5},
		{name: "no cpu line", in: "cpu0 1 2 3 4\n", wantErr: "no cpu line"},
		{name: "short", in: "cpu 1 2\n", wantErr: "fields"},
		{name: "bad number", in: "cpu 1 x 3 4\n", wantErr: "cpu field 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseCPUTotal([]byte(tt.in))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Errorf("parseCPUTotal = %d, %v; want %d", got, err, tt.want)
			}
		})
	}
}

func FuzzParsePidStat(f *testing.F) {
	f.Add([]byte(statLine(1, "init", 0, 1, 1, 2, 3, 4)))
	f.Add([]byte("1 (a) b) S 0"))
	f.Add([]byte("((("))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parsePidStat(b)
		if err == nil && (st.PID <= 0 || st.RSSPages < 0) {
			t.Errorf("parsePidStat(%q) = %+v without error", b, st)
		}
	})
}

func FuzzParseCPUTotal(f *testing.F) {
	f.Add([]byte("cpu 1 2 3 4 5 6 7 8 9 10\n"))
	f.Add([]byte("cpu\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = parseCPUTotal(b) // must not panic
	})
}

func TestSelectTree(t *testing.T) {
	// 1 init; 100 the node-unit; 101 a deployment (group 101) with child
	// 102; 103 a child of 102 in group 101; 200 a grandchild of 101 that
	// was reparented to 1 but stays in group 101; 300 unrelated; 301 its
	// child.
	all := []pidStat{
		{PID: 1, PPID: 0, PGID: 1},
		{PID: 100, PPID: 1, PGID: 100},
		{PID: 101, PPID: 100, PGID: 101},
		{PID: 102, PPID: 101, PGID: 101},
		{PID: 103, PPID: 102, PGID: 103},
		{PID: 200, PPID: 1, PGID: 101},
		{PID: 300, PPID: 1, PGID: 300},
		{PID: 301, PPID: 300, PGID: 300},
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
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []int
			for _, st := range selectTree(all, tt.self, tt.roots) {
				got = append(got, st.PID)
			}
			slices.Sort(got)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("pids (-want +got):\n%s", diff)
			}
		})
	}
}

// fakeProc writes a proc tree: total CPU ticks and one stat per process.
func fakeProc(t *testing.T, root string, total uint64, procs ...string) {
	t.Helper()
	if err := os.RemoveAll(root); err != nil {
		t.Fatal(err)
	}
	write := func(path, s string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(root, "stat"), fmt.Sprintf("cpu %d 0 0 0 0 0 0 0 0 0\ncpu0 1 1 1 1\n", total))
	for _, p := range procs {
		pid := strings.Fields(p)[0]
		write(filepath.Join(root, pid, "stat"), p)
	}
}

func TestCollectorSample(t *testing.T) {
	root := filepath.Join(t.TempDir(), "proc")
	const page = 4096
	c := NewCollector(Config{Self: 100, ProcRoot: root, PageSize: page, Roots: func() []int { return []int{101} }})
	type step struct {
		total uint64
		procs []string
		want  Reading
	}
	mb := func(pages int64) float64 { return float64(pages*page) / (1 << 20) }
	steps := []step{
		{ // first sample: no CPU figure yet
			total: 1000,
			procs: []string{statLine(100, "nodeunit", 1, 100, 10, 0, 5, 256), statLine(101, "app", 100, 101, 20, 0, 6, 512), statLine(300, "other", 1, 300, 500, 0, 7, 9999)},
			want:  Reading{Processes: 2},
		},
		{ // 200 machine ticks later: +10 and +30 ticks -> 20%
			total: 1200,
			procs: []string{statLine(100, "nodeunit", 1, 100, 15, 5, 5, 256), statLine(101, "app", 100, 101, 50, 0, 6, 768), statLine(300, "other", 1, 300, 900, 0, 7, 9999)},
			want:  Reading{Processes: 2},
		},
		{ // 101 ended and a new process reuses the pid: all its 4 ticks count; total 100 -> (1+4)/100
			total: 1300,
			procs: []string{statLine(100, "nodeunit", 1, 100, 16, 5, 5, 256), statLine(101, "new", 100, 101, 4, 0, 60, 256)},
			want:  Reading{Processes: 2},
		},
	}
	steps[0].want.MemoryMB = mb(256 + 512)
	steps[1].want.CPUPercent, steps[1].want.MemoryMB = 20, mb(256+768)
	steps[2].want.CPUPercent, steps[2].want.MemoryMB = 5, mb(512)
	for i, s := range steps {
		fakeProc(t, root, s.total, s.procs...)
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

func TestCollectorNoProc(t *testing.T) {
	c := NewCollector(Config{ProcRoot: filepath.Join(t.TempDir(), "missing")})
	got := c.Sample()
	if got.Usage != (Reading{}).Usage || got.Processes != 0 {
		t.Errorf("sample without /proc = %+v, want zeros", got)
	}
}

func TestCollectorRunEverySecond(t *testing.T) {
	root := filepath.Join(t.TempDir(), "proc")
	fakeProc(t, root, 100, statLine(100, "nodeunit", 1, 100, 1, 0, 5, 1))
	synctest.Test(t, func(t *testing.T) {
		c := NewCollector(Config{Self: 100, ProcRoot: root})
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
