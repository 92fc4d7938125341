package proc

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// Defaults of [Config].
const (
	DefaultMinBackoff = time.Second
	DefaultMaxBackoff = 30 * time.Second
	DefaultResetAfter = time.Minute
	DefaultStopGrace  = 10 * time.Second
)

// Errors a caller branches on.
var (
	// ErrUntrusted: the command does not match the trusted expression.
	ErrUntrusted = errors.New("untrusted command")
	// ErrClosed: the Runner was closed.
	ErrClosed = errors.New("runner closed")
	// ErrInvalidSpec: the spec has no id or no command.
	ErrInvalidSpec = errors.New("invalid spec")
)

// UntrustedError reports a command refused by [Config.Trusted].
type UntrustedError struct {
	ID      string // the deployment id
	Command string // the refused command
	Pattern string // the trusted expression, "" when none is set
}

// Error names the deployment, the command and the expression.
func (e *UntrustedError) Error() string {
	if e.Pattern == "" {
		return fmt.Sprintf("deployment %q: command %q refused: no trusted command expression is set", e.ID, e.Command)
	}
	return fmt.Sprintf("deployment %q: command %q refused: it does not match %q", e.ID, e.Command, e.Pattern)
}

// Unwrap returns [ErrUntrusted].
func (e *UntrustedError) Unwrap() error { return ErrUntrusted }

// Spec is what the Runner needs to run one deployment.
type Spec struct {
	ID      string   // unique key: at most one process per ID
	Command string   // program name (looked up in PATH) or path
	Args    []string // arguments after the command
	Env     []string // extra KEY=VALUE pairs, added to the node-unit's environment
}

func (s Spec) equal(o Spec) bool {
	return s.ID == o.ID && s.Command == o.Command && slices.Equal(s.Args, o.Args) && slices.Equal(s.Env, o.Env)
}

// Clock is the time source of the Runner.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

type realClock struct{}

func (realClock) Now() time.Time                         { return time.Now() }
func (realClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Config tunes a [Runner].
type Config struct {
	// LogDir receives one log file per deployment id. Required; created
	// when missing.
	LogDir string
	// Trusted must match a command as a whole for it to run. Default nil:
	// every command is refused.
	Trusted *regexp.Regexp
	// MinBackoff is the wait before the first restart. Default 1s.
	MinBackoff time.Duration
	// MaxBackoff caps the doubling restart wait. Default 30s.
	MaxBackoff time.Duration
	// ResetAfter: a run at least this long resets the backoff. Default 1m.
	ResetAfter time.Duration
	// StopGrace is how long Stop waits after SIGTERM before SIGKILL.
	// Default 10s.
	StopGrace time.Duration
	// Environ is the base environment of every process. Default
	// os.Environ() at New.
	Environ []string
	// Clock drives backoff and grace waits. Default: the real clock.
	Clock Clock
	// Logger receives start, exit, restart and refusal records. Default:
	// discard.
	Logger *slog.Logger
}

// Process describes one supervised deployment.
type Process struct {
	ID       string    // the deployment id
	PID      int       // 0 while waiting to be restarted
	Restarts int       // starts after the first
	Started  time.Time // start of the current run, zero while waiting
	// LastExit is how the previous run ended ("exit status 1", "signal:
	// killed", or why it could not start), "" before any run ended.
	LastExit string
	// LastExitAt is when the previous run ended, zero before any did.
	LastExitAt time.Time
	// NextStart is when a process waiting to be restarted starts again,
	// zero while it runs.
	NextStart time.Time
}

// Runner supervises local processes. Create it with [New].
type Runner struct {
	cfg     Config
	trusted *regexp.Regexp // anchored form of cfg.Trusted

	mu      sync.Mutex
	procs   map[string]*supervised
	refused map[string]string // id -> command already logged at warning level
	closed  bool
	wg      sync.WaitGroup
}

type supervised struct {
	spec Spec
	stop chan struct{} // closed to ask the supervisor to stop
	done chan struct{} // closed when the supervisor has returned

	mu         sync.Mutex
	pid        int
	restarts   int
	started    time.Time
	lastExit   string
	lastExitAt time.Time
	nextStart  time.Time
}

// New returns a Runner. It fails when LogDir is empty or cannot be created,
// or when a duration is negative.
func New(cfg Config) (*Runner, error) {
	if cfg.LogDir == "" {
		return nil, errors.New("proc: Config.LogDir is empty")
	}
	for name, d := range map[string]time.Duration{
		"MinBackoff": cfg.MinBackoff, "MaxBackoff": cfg.MaxBackoff,
		"ResetAfter": cfg.ResetAfter, "StopGrace": cfg.StopGrace,
	} {
		if d < 0 {
			return nil, fmt.Errorf("proc: Config.%s is negative: %v", name, d)
		}
	}
	if cfg.MinBackoff == 0 {
		cfg.MinBackoff = DefaultMinBackoff
	}
	if cfg.MaxBackoff == 0 {
		cfg.MaxBackoff = DefaultMaxBackoff
	}
	if cfg.MaxBackoff < cfg.MinBackoff {
		return nil, fmt.Errorf("proc: Config.MaxBackoff %v is below MinBackoff %v", cfg.MaxBackoff, cfg.MinBackoff)
	}
	if cfg.ResetAfter == 0 {
		cfg.ResetAfter = DefaultResetAfter
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.Environ == nil {
		cfg.Environ = os.Environ()
	}
	if cfg.Clock == nil {
		cfg.Clock = realClock{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return nil, fmt.Errorf("proc: log directory: %w", err)
	}
	r := &Runner{cfg: cfg, procs: map[string]*supervised{}, refused: map[string]string{}}
	if cfg.Trusted != nil {
		r.trusted = regexp.MustCompile(`^(?:` + cfg.Trusted.String() + `)$`)
	}
	return r, nil
}

// Trusted reports whether command may run: it matches [Config.Trusted] as
// a whole.
func (r *Runner) Trusted(command string) bool {
	return r.trusted != nil && r.trusted.MatchString(command)
}

// Backoff returns the wait before restart number n (0 for the first
// restart): min doubled n times, capped at max.
func Backoff(n int, min, max time.Duration) time.Duration {
	d := min
	for i := 0; i < n && d < max; i++ {
		d *= 2
	}
	return clampDur(d, max)
}

func clampDur(d, max time.Duration) time.Duration {
	if d > max || d <= 0 {
		return max
	}
	return d
}

// LogPath returns the log file of a deployment id.
func (r *Runner) LogPath(id string) string {
	return filepath.Join(r.cfg.LogDir, EscapeID(id)+".log")
}

// EscapeID turns an id into a file name: ASCII letters, digits, '_', '-'
// and inner '.' stay, every other byte becomes %XX, and a result longer
// than 128 bytes is cut and suffixed with a hash of the id, so distinct ids
// get distinct names.
func EscapeID(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		case c == '.' && i > 0:
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	s := b.String()
	if s == "" {
		return "%"
	}
	if len(s) > 128 {
		sum := sha256.Sum256([]byte(id))
		s = s[:100] + "~" + hex.EncodeToString(sum[:8])
	}
	return s
}

// Start supervises spec: it starts the command unless a process with this
// id already runs the same spec. A running id with a different spec is
// stopped first and started again with the new one. A command that is not
// trusted is refused with an [*UntrustedError] and never run. ctx bounds
// only the wait for a replaced process to stop; the new process lives
// until Stop or Close.
func (r *Runner) Start(ctx context.Context, spec Spec) error {
	if err := r.Check(spec); err != nil {
		if errors.Is(err, ErrUntrusted) {
			r.logRefusal(spec, err)
		}
		return err
	}
	spec.Args = slices.Clone(spec.Args)
	spec.Env = slices.Clone(spec.Env)
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return fmt.Errorf("proc: start %q: %w", spec.ID, ErrClosed)
		}
		old := r.procs[spec.ID]
		if old == nil {
			s := &supervised{spec: spec, stop: make(chan struct{}), done: make(chan struct{})}
			r.procs[spec.ID] = s
			delete(r.refused, spec.ID)
			r.wg.Add(1)
			r.mu.Unlock()
			go r.supervise(s)
			return nil
		}
		r.mu.Unlock()
		if old.spec.equal(spec) {
			return nil
		}
		r.cfg.Logger.Info("deployment changed: restarting", "id", spec.ID, "command", spec.Command)
		if err := r.Stop(ctx, spec.ID); err != nil {
			return err
		}
	}
}

// Check reports, without starting or logging anything, whether Start
// would accept spec: an error wrapping [ErrInvalidSpec] when it has no id
// or no command, an [*UntrustedError] when its command is not trusted.
func (r *Runner) Check(spec Spec) error {
	if spec.ID == "" || spec.Command == "" {
		return fmt.Errorf("proc: %w: id %q, command %q: both are required", ErrInvalidSpec, spec.ID, spec.Command)
	}
	if !r.Trusted(spec.Command) {
		pattern := ""
		if r.cfg.Trusted != nil {
			pattern = r.cfg.Trusted.String()
		}
		return &UntrustedError{ID: spec.ID, Command: spec.Command, Pattern: pattern}
	}
	return nil
}

// logRefusal logs a refused start: at warning level the first time for an
// id and command, at debug level after.
func (r *Runner) logRefusal(spec Spec, err error) {
	pattern := ""
	if r.cfg.Trusted != nil {
		pattern = r.cfg.Trusted.String()
	}
	r.mu.Lock()
	first := r.refused[spec.ID] != spec.Command
	r.refused[spec.ID] = spec.Command
	r.mu.Unlock()
	level := slog.LevelDebug
	if first {
		level = slog.LevelWarn
	}
	r.cfg.Logger.Log(context.Background(), level, "command refused: not trusted",
		"id", spec.ID, "command", spec.Command, "trusted", pattern, "err", err)
}

// Stop stops the process of id: SIGTERM to its group, SIGKILL after
// [Config.StopGrace]. It returns when the process has exited, or with
// ctx's error when ctx ends first (the process is still killed in the
// background). Stopping an unknown id does nothing.
func (r *Runner) Stop(ctx context.Context, id string) error {
	r.mu.Lock()
	s := r.procs[id]
	if s != nil {
		delete(r.procs, id)
		close(s.stop)
	}
	r.mu.Unlock()
	if s == nil {
		return nil
	}
	select {
	case <-s.done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("proc: stop %q: %w", id, ctx.Err())
	}
}

// Close stops every process at once, waits for them, and makes further
// Start calls fail with [ErrClosed]. It returns ctx's error when ctx ends
// first.
func (r *Runner) Close(ctx context.Context) error {
	r.mu.Lock()
	r.closed = true
	all := r.procs
	r.procs = map[string]*supervised{}
	for _, s := range all {
		close(s.stop)
	}
	r.mu.Unlock()
	done := make(chan struct{})
	go func() { r.wg.Wait(); close(done) }()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("proc: close: %w", ctx.Err())
	}
}

// Running returns the supervised ids in ascending order, including those
// waiting to be restarted.
func (r *Runner) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	ids := make([]string, 0, len(r.procs))
	for id := range r.procs {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// Processes describes every supervised id, in ascending id order.
func (r *Runner) Processes() []Process {
	r.mu.Lock()
	list := make([]*supervised, 0, len(r.procs))
	for _, s := range r.procs {
		list = append(list, s)
	}
	r.mu.Unlock()
	out := make([]Process, 0, len(list))
	for _, s := range list {
		s.mu.Lock()
		out = append(out, Process{ID: s.spec.ID, PID: s.pid, Restarts: s.restarts, Started: s.started,
			LastExit: s.lastExit, LastExitAt: s.lastExitAt, NextStart: s.nextStart})
		s.mu.Unlock()
	}
	slices.SortFunc(out, func(a, b Process) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// PIDs returns the process ids of the running processes (each the leader
// of its own process group).
func (r *Runner) PIDs() []int {
	var pids []int
	for _, p := range r.Processes() {
		if p.PID > 0 {
			pids = append(pids, p.PID)
		}
	}
	return pids
}

func (r *Runner) supervise(s *supervised) {
	defer r.wg.Done()
	defer close(s.done)
	log := r.cfg.Logger.With("id", s.spec.ID)
	failures := 0
	for attempt := 0; ; attempt++ {
		start := r.cfg.Clock.Now()
		stopped, err := r.runOnce(s, attempt, log)
		if stopped {
			return
		}
		end := r.cfg.Clock.Now()
		ran := end.Sub(start)
		if ran >= r.cfg.ResetAfter {
			failures = 0
		}
		wait := Backoff(failures, r.cfg.MinBackoff, r.cfg.MaxBackoff)
		failures++
		s.mu.Lock()
		s.lastExit, s.lastExitAt, s.nextStart = err.Error(), end, end.Add(wait)
		s.mu.Unlock()
		log.Warn("deployment process ended: restarting after backoff", "err", err, "ran", ran.Round(time.Millisecond), "backoff", wait)
		select {
		case <-s.stop:
			return
		case <-r.cfg.Clock.After(wait):
		}
	}
}

// runOnce starts one run and waits for it to end. stopped reports that the
// run ended because Stop was called.
func (r *Runner) runOnce(s *supervised, attempt int, log *slog.Logger) (stopped bool, err error) {
	select {
	case <-s.stop:
		return true, nil
	default:
	}
	f, err := os.OpenFile(r.LogPath(s.spec.ID), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return false, fmt.Errorf("open log file: %w", err)
	}
	defer f.Close()
	cmd := exec.Command(s.spec.Command, s.spec.Args...)
	cmd.Env = append(slices.Clone(r.cfg.Environ), s.spec.Env...)
	cmd.Stdin = nil
	cmd.Stdout = f
	cmd.Stderr = f
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(f, "node-unit: start %s: %v\n", s.spec.Command, err)
		return false, fmt.Errorf("start: %w", err)
	}
	pid := cmd.Process.Pid
	s.mu.Lock()
	s.pid, s.restarts, s.started, s.nextStart = pid, attempt, r.cfg.Clock.Now(), time.Time{}
	s.mu.Unlock()
	log.Info("deployment process started", "pid", pid, "command", s.spec.Command, "restarts", attempt)

	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		s.mu.Lock()
		s.pid, s.started = 0, time.Time{}
		s.mu.Unlock()
	}()
	select {
	case err := <-exited:
		killGroup(pid) // leftovers of the run must not outlive it
		return false, exitError(err)
	case <-s.stop:
	}
	signalGroup(pid, false)
	select {
	case err := <-exited:
		killGroup(pid)
		log.Info("deployment process stopped", "pid", pid, "signal", "SIGTERM", "status", exitError(err).Error())
		return true, nil
	case <-r.cfg.Clock.After(r.cfg.StopGrace):
	}
	signalGroup(pid, true)
	err = <-exited
	log.Warn("deployment process killed after grace period", "pid", pid, "grace", r.cfg.StopGrace, "status", exitError(err).Error())
	return true, nil
}

func exitError(err error) error {
	if err == nil {
		return errors.New("exit status 0")
	}
	return err
}
