//go:build linux

package proc

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// waitFor polls cond until it holds or a generous deadline passes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive reports whether pid is a live (not zombie) process.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z'
}

// fakeClock hands every After request to the test, which decides when it
// fires.
type fakeClock struct {
	mu   sync.Mutex
	now  time.Time
	reqs chan afterReq
}

type afterReq struct {
	d    time.Duration
	fire chan time.Time
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), reqs: make(chan afterReq, 64)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func (c *fakeClock) After(d time.Duration) <-chan time.Time {
	ch := make(chan time.Time, 1)
	c.reqs <- afterReq{d: d, fire: ch}
	return ch
}

// next returns the next After request.
func (c *fakeClock) next(t *testing.T) afterReq {
	t.Helper()
	select {
	case r := <-c.reqs:
		return r
	case <-time.After(20 * time.Second):
		t.Fatal("timed out waiting for the runner to wait on the clock")
		return afterReq{}
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func newRunner(t *testing.T, clock *fakeClock, mod func(*Config)) *Runner {
	t.Helper()
	cfg := Config{
		LogDir:  t.TempDir(),
		Trusted: regexp.MustCompile(`sh|sleep`),
		Environ: []string{"PATH=" + os.Getenv("PATH"), "PARENT_VAR=parent"},
		Clock:   clock,
	}
	if mod != nil {
		mod(&cfg)
	}
	r, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() {
		done := make(chan struct{})
		go func() { // fire every wait so Close never hangs on the fake clock
			for {
				select {
				case req := <-clock.reqs:
					req.fire <- time.Time{}
				case <-done:
					return
				}
			}
		}()
		if err := r.Close(context.Background()); err != nil {
			t.Errorf("Close: %v", err)
		}
		close(done)
	})
	return r
}

func readLog(t *testing.T, r *Runner, id string) string {
	t.Helper()
	b, err := os.ReadFile(r.LogPath(id))
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("read log: %v", err)
	}
	return string(b)
}

func pidOf(r *Runner, id string) int {
	for _, p := range r.Processes() {
		if p.ID == id {
			return p.PID
		}
	}
	return 0
}

func TestStartEnvLogAndStop(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := newRunner(t, clock, nil)
	ctx := context.Background()
	spec := Spec{ID: "web/1", Command: "sh", Args: []string{"-c", `echo "$GREETING from $PARENT_VAR"; exec sleep 1000`}, Env: []string{"GREETING=hello"}}
	if err := r.Start(ctx, spec); err != nil {
		t.Fatalf("Start: %v", err)
	}
	// The child may write before the runner has recorded its pid.
	waitFor(t, "output in the log file and the pid", func() bool {
		return strings.Contains(readLog(t, r, "web/1"), "\n") && pidOf(r, "web/1") != 0
	})
	if got, want := readLog(t, r, "web/1"), "hello from parent\n"; got != want {
		t.Errorf("log = %q, want %q", got, want)
	}
	if got, want := filepath.Base(r.LogPath("web/1")), "web%2F1.log"; got != want {
		t.Errorf("log file name = %q, want %q", got, want)
	}
	if diff := cmp.Diff([]string{"web/1"}, r.Running()); diff != "" {
		t.Errorf("Running (-want +got):\n%s", diff)
	}
	pid := pidOf(r, "web/1")
	if pid == 0 || !alive(pid) {
		t.Fatalf("pid %d is not alive", pid)
	}
	// Starting the same spec again keeps the process.
	if err := r.Start(ctx, spec); err != nil {
		t.Fatalf("second Start: %v", err)
	}
	if got := pidOf(r, "web/1"); got != pid {
		t.Errorf("pid after identical Start = %d, want %d", got, pid)
	}
	// sleep exits on SIGTERM: Stop returns without the grace timer firing.
	if err := r.Stop(ctx, "web/1"); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if alive(pid) {
		t.Errorf("pid %d still alive after Stop", pid)
	}
	if got := r.Running(); len(got) != 0 {
		t.Errorf("Running after Stop = %v, want none", got)
	}
	if err := r.Stop(ctx, "web/1"); err != nil {
		t.Errorf("Stop of a stopped id: %v", err)
	}
}

func TestChangedSpecRestarts(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := newRunner(t, clock, nil)
	ctx := context.Background()
	if err := r.Start(ctx, Spec{ID: "a", Command: "sleep", Args: []string{"1000"}}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitFor(t, "first process", func() bool { return pidOf(r, "a") != 0 })
	first := pidOf(r, "a")
	if err := r.Start(ctx, Spec{ID: "a", Command: "sleep", Args: []string{"1001"}}); err != nil {
		t.Fatalf("Start with new args: %v", err)
	}
	waitFor(t, "second process", func() bool { p := pidOf(r, "a"); return p != 0 && p != first })
	if alive(first) {
		t.Errorf("old pid %d still alive after the spec changed", first)
	}
}

func TestRestartBackoff(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := newRunner(t, clock, func(c *Config) { c.MinBackoff, c.MaxBackoff = time.Second, 4*time.Second })
	if err := r.Start(context.Background(), Spec{ID: "crash", Command: "sh", Args: []string{"-c", "echo run; exit 3"}}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	var got []time.Duration
	for i := 1; i <= 4; i++ {
		req := clock.next(t)
		got = append(got, req.d)
		if runs := strings.Count(readLog(t, r, "crash"), "run\n"); runs != i {
			t.Fatalf("runs before backoff %d = %d, want %d", i, runs, i)
		}
		req.fire <- time.Time{}
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 4 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoffs (-want +got):\n%s", diff)
	}
	waitFor(t, "fifth run", func() bool { return strings.Count(readLog(t, r, "crash"), "run\n") == 5 })
	if diff := cmp.Diff([]string{"crash"}, r.Running()); diff != "" {
		t.Errorf("Running while restarting (-want +got):\n%s", diff)
	}
}

func TestLongRunResetsBackoff(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	dir := t.TempDir()
	flag := filepath.Join(dir, "flag")
	r := newRunner(t, clock, func(c *Config) { c.MinBackoff, c.ResetAfter = time.Second, time.Minute })
	// The process runs until the flag file appears, then exits.
	script := `echo run; while [ ! -e "$FLAG" ]; do sleep 0.02; done; rm -f "$FLAG"; exit 1`
	if err := r.Start(context.Background(), Spec{ID: "x", Command: "sh", Args: []string{"-c", script}, Env: []string{"FLAG=" + flag}}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	runs := func() int { return strings.Count(readLog(t, r, "x"), "run\n") }
	var got []time.Duration
	for i, ran := range []time.Duration{0, 0, time.Minute, 0} {
		waitFor(t, "run "+strconv.Itoa(i+1), func() bool { return runs() == i+1 })
		clock.Advance(ran)
		if err := os.WriteFile(flag, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		req := clock.next(t)
		got = append(got, req.d)
		req.fire <- time.Time{}
	}
	// Short, short, long (resets), short.
	want := []time.Duration{time.Second, 2 * time.Second, time.Second, 2 * time.Second}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("backoffs (-want +got):\n%s", diff)
	}
}

func TestStopTermThenKill(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := newRunner(t, clock, func(c *Config) { c.StopGrace = 7 * time.Second })
	script := `trap 'echo term' TERM; echo ready; while :; do sleep 0.05; done`
	if err := r.Start(context.Background(), Spec{ID: "stubborn", Command: "sh", Args: []string{"-c", script}}); err != nil {
		t.Fatalf("Start: %v", err)
	}
	waitFor(t, "ready", func() bool { return strings.Contains(readLog(t, r, "stubborn"), "ready\n") })
	pid := pidOf(r, "stubborn")
	stopped := make(chan error, 1)
	go func() { stopped <- r.Stop(context.Background(), "stubborn") }()
	req := clock.next(t)
	if req.d != 7*time.Second {
		t.Errorf("grace wait = %v, want 7s", req.d)
	}
	waitFor(t, "SIGTERM handled", func() bool { return strings.Contains(readLog(t, r, "stubborn"), "term\n") })
	select {
	case err := <-stopped:
		t.Fatalf("Stop returned before the grace period ended: %v", err)
	default:
	}
	if !alive(pid) {
		t.Fatalf("pid %d died on SIGTERM; the script ignores it", pid)
	}
	req.fire <- time.Time{}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Stop did not return after SIGKILL")
	}
	if alive(pid) {
		t.Errorf("pid %d alive after SIGKILL", pid)
	}
}

func TestGroupDies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		script string
		stop   bool
	}{
		{name: "stop kills children", script: `sleep 1000 & echo $! > "$OUT"; wait`, stop: true},
		{name: "exit kills leftovers", script: `sleep 1000 & echo $! > "$OUT"; exit 1`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := newFakeClock()
			r := newRunner(t, clock, nil)
			out := filepath.Join(t.TempDir(), "child")
			if err := r.Start(context.Background(), Spec{ID: "g", Command: "sh", Args: []string{"-c", tt.script}, Env: []string{"OUT=" + out}}); err != nil {
				t.Fatalf("Start: %v", err)
			}
			var child int
			waitFor(t, "child pid", func() bool {
				b, _ := os.ReadFile(out)
				child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
				return child > 0
			})
			if tt.stop {
				if err := r.Stop(context.Background(), "g"); err != nil {
					t.Fatalf("Stop: %v", err)
				}
			}
			waitFor(t, "child "+strconv.Itoa(child)+" to die", func() bool { return !alive(child) })
		})
	}
}

func TestTrusted(t *testing.T) {
	t.Parallel()
	tests := []struct {
		pattern string // "" means no expression
		command string
		want    bool
	}{
		{"", "sleep", false},
		{"", "", false},
		{"sleep", "sleep", true},
		{"sleep", "/bin/sleep", false},
		{"sleep", "sleepy", false},
		{".*/?sleep", "/bin/sleep", true},
		{"sh|sleep", "sh", true},
		{"sh|sleep", "bash", false},
		{`/opt/apps/[a-z]+`, "/opt/apps/web", true},
		{`/opt/apps/[a-z]+`, "/opt/apps/web; rm -rf /", false},
		{".*", "anything at all", true},
	}
	for _, tt := range tests {
		cfg := Config{LogDir: t.TempDir()}
		if tt.pattern != "" {
			cfg.Trusted = regexp.MustCompile(tt.pattern)
		}
		r, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Trusted(tt.command); got != tt.want {
			t.Errorf("pattern %q: Trusted(%q) = %v, want %v", tt.pattern, tt.command, got, tt.want)
		}
	}
}

func TestUntrustedRefused(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	r := newRunner(t, clock, func(c *Config) { c.Trusted = regexp.MustCompile(`sleep`); c.Logger = logger })
	marker := filepath.Join(t.TempDir(), "ran")
	spec := Spec{ID: "evil", Command: "sh", Args: []string{"-c", "touch " + marker}}
	for i := 0; i < 2; i++ {
		err := r.Start(context.Background(), spec)
		var ue *UntrustedError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUntrusted) {
			t.Fatalf("Start = %v, want an *UntrustedError", err)
		}
		if diff := cmp.Diff(&UntrustedError{ID: "evil", Command: "sh", Pattern: "sleep"}, ue); diff != "" {
			t.Errorf("error (-want +got):\n%s", diff)
		}
	}
	if got := r.Running(); len(got) != 0 {
		t.Errorf("Running = %v, want none", got)
	}
	if _, err := os.Stat(r.LogPath("evil")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("log file of a refused command exists (stat: %v)", err)
	}
	if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the refused command ran")
	}
	var levels []string
	for _, line := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(line, "command refused") {
			levels = append(levels, strings.Fields(line)[1])
		}
	}
	if diff := cmp.Diff([]string{"level=WARN", "level=DEBUG"}, levels); diff != "" {
		t.Errorf("refusal log levels (-want +got):\n%s", diff)
	}
}

func TestInvalidSpecAndClosed(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := newRunner(t, clock, nil)
	ctx := context.Background()
	for _, spec := range []Spec{{Command: "sleep"}, {ID: "x"}} {
		if err := r.Start(ctx, spec); !errors.Is(err, ErrInvalidSpec) {
			t.Errorf("Start(%+v) = %v, want ErrInvalidSpec", spec, err)
		}
	}
	if err := r.Start(ctx, Spec{ID: "s", Command: "sleep", Args: []string{"1000"}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "process", func() bool { return pidOf(r, "s") != 0 })
	pid := pidOf(r, "s")
	if err := r.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if alive(pid) {
		t.Errorf("pid %d alive after Close", pid)
	}
	if err := r.Start(ctx, Spec{ID: "s", Command: "sleep"}); !errors.Is(err, ErrClosed) {
		t.Errorf("Start after Close = %v, want ErrClosed", err)
	}
}

func TestStopContextEnds(t *testing.T) {
	t.Parallel()
	clock := newFakeClock()
	r := newRunner(t, clock, nil)
	if err := r.Start(context.Background(), Spec{ID: "t", Command: "sh", Args: []string{"-c", `trap '' TERM; echo ready; while :; do sleep 0.05; done`}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "ready", func() bool { return strings.Contains(readLog(t, r, "t"), "ready") })
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := r.Stop(ctx, "t"); !errors.Is(err, context.Canceled) {
		t.Errorf("Stop with an ended context = %v, want context.Canceled", err)
	}
	if got := r.Running(); len(got) != 0 {
		t.Errorf("Running = %v, want none once Stop was asked", got)
	}
}

func TestNewConfigErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		want string
	}{
		{"no log dir", Config{}, "LogDir"},
		{"negative grace", Config{LogDir: "x", StopGrace: -1}, "StopGrace"},
		{"negative min", Config{LogDir: "x", MinBackoff: -1}, "MinBackoff"},
		{"max below min", Config{LogDir: "x", MinBackoff: time.Minute, MaxBackoff: time.Second}, "MaxBackoff"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.cfg.LogDir != "" {
				tt.cfg.LogDir = filepath.Join(t.TempDir(), tt.cfg.LogDir)
			}
			_, err := New(tt.cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("New error = %v, want one naming %s", err, tt.want)
			}
		})
	}
}

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		n        int
		min, max time.Duration
		want     time.Duration
	}{
		{0, time.Second, 30 * time.Second, time.Second},
		{1, time.Second, 30 * time.Second, 2 * time.Second},
		{4, time.Second, 30 * time.Second, 16 * time.Second},
		{5, time.Second, 30 * time.Second, 30 * time.Second},
		{1000, time.Second, 30 * time.Second, 30 * time.Second},
		{0, time.Minute, time.Minute, time.Minute},
	}
	for _, tt := range tests {
		if got := Backoff(tt.n, tt.min, tt.max); got != tt.want {
			t.Errorf("Backoff(%d, %v, %v) = %v, want %v", tt.n, tt.min, tt.max, got, tt.want)
		}
	}
}

func TestEscapeID(t *testing.T) {
	t.Parallel()
	tests := []struct{ id, want string }{
		{"web-1", "web-1"},
		{"a.b", "a.b"},
		{".", "%2E"},
		{"..", "%2E."},
		{"a/b", "a%2Fb"},
		{"", "%"},
		{"%", "%25"},
		{"é", "%C3%A9"},
	}
	for _, tt := range tests {
		if got := EscapeID(tt.id); got != tt.want {
			t.Errorf("EscapeID(%q) = %q, want %q", tt.id, got, tt.want)
		}
	}
}

func FuzzEscapeID(f *testing.F) {
	for _, s := range []string{"web-1", "a/b", ".", "..", "", strings.Repeat("x", 200), strings.Repeat("/", 60)} {
		f.Add(s, s+"x")
	}
	safe := regexp.MustCompile(`^[A-Za-z0-9_%~-][A-Za-z0-9_.%~-]*$`)
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := EscapeID(a), EscapeID(b)
		if !safe.MatchString(ea) || len(ea) > 128 {
			t.Errorf("EscapeID(%q) = %q: not a safe file name", a, ea)
		}
		if a != b && ea == eb {
			t.Errorf("EscapeID(%q) = EscapeID(%q) = %q", a, b, ea)
		}
	})
}
