package usage

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/claim"
)

// DefaultInterval is the collector's default sampling period.
const DefaultInterval = time.Second

// Config tunes a [Collector].
type Config struct {
	// Roots returns the process ids of the deployment processes, each the
	// leader of its process group (proc.Runner.PIDs). Default: none, only
	// the node-unit process and its descendants count.
	Roots func() []int
	// Interval is the sampling period. Default 1s.
	Interval time.Duration
	// Self is the node-unit's process id. Default os.Getpid().
	Self int
	// Logger receives sampling errors. Default: discard.
	Logger *slog.Logger
}

// Reading is one sample.
type Reading struct {
	claim.Usage
	At        time.Time // when it was taken; zero before the first sample
	Processes int       // how many processes it covers
}

// Collector samples resource usage. Create it with [NewCollector], run it
// with [Collector.Run], and read it with [Collector.Latest]; it is safe for
// concurrent use.
type Collector struct {
	cfg Config
	src source

	mu     sync.Mutex
	latest Reading
	// state of the previous sample
	prevTotal float64
	prevCPU   map[procKey]float64
	primed    bool
	failed    bool // an error was logged already
}

// procKey tells a process from a later one that reuses its pid.
type procKey struct {
	pid   int
	start int64
}

// NewCollector returns a Collector; zero Config fields take their defaults.
func NewCollector(cfg Config) *Collector {
	if cfg.Roots == nil {
		cfg.Roots = func() []int { return nil }
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Self == 0 {
		cfg.Self = os.Getpid()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Collector{cfg: cfg, src: psSource{}}
}

// Run samples at once and then every Config.Interval until ctx ends; it
// returns nil then.
func (c *Collector) Run(ctx context.Context) error {
	c.Sample()
	t := time.NewTicker(c.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			c.Sample()
		}
	}
}

// Latest returns the most recent reading (zeros before the first).
func (c *Collector) Latest() Reading {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.latest
}

// Usage returns the most recent reading's usage.
func (c *Collector) Usage() claim.Usage { return c.Latest().Usage }

// Sample takes one sample now and returns it. The first sample has
// cpu_percent 0: CPU use needs two samples.
func (c *Collector) Sample() Reading {
	ctx := context.Background()
	now := time.Now()
	total, err := c.src.cpuTotal(ctx)
	var all []procLink
	if err == nil {
		all, err = c.src.list(ctx)
	}
	if err != nil {
		c.mu.Lock()
		defer c.mu.Unlock()
		if !c.failed {
			c.failed = true
			c.cfg.Logger.Warn("resource usage: cannot read the processes; reporting zeros", "err", err)
		}
		c.latest = Reading{At: now}
		return c.latest
	}
	tree := selectTree(all, c.cfg.Self, c.cfg.Roots())
	stats := make(map[procKey]procStat, len(tree))
	for _, l := range tree {
		st, err := c.src.stat(ctx, l.PID)
		if err != nil {
			continue // ended since the list, or not readable
		}
		stats[procKey{l.PID, st.Start}] = st
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	cpuNow := make(map[procKey]float64, len(stats))
	var used float64
	var rss uint64
	for k, st := range stats {
		cpuNow[k] = st.CPU
		rss += st.RSS
		prev, ok := c.prevCPU[k]
		switch {
		case ok && st.CPU >= prev:
			used += st.CPU - prev
		case !ok:
			used += st.CPU
		}
	}
	r := Reading{At: now, Processes: len(stats)}
	r.MemoryMB = float64(rss) / (1 << 20)
	if c.primed && total > c.prevTotal {
		r.CPUPercent = min(100, 100*used/(total-c.prevTotal))
	}
	c.prevTotal, c.prevCPU, c.primed = total, cpuNow, true
	c.latest = r
	return r
}

// selectTree returns the processes that count: self, its descendants, and
// the members of the process groups led by roots (and their descendants).
func selectTree(all []procLink, self int, roots []int) []procLink {
	children := map[int][]int{}
	byPID := make(map[int]procLink, len(all))
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
	for _, l := range all {
		byPID[l.PID] = l
		children[l.PPID] = append(children[l.PPID], l.PID)
		if l.PGID != 0 && groups[l.PGID] {
			push(l.PID)
		}
	}
	for _, r := range roots {
		if _, ok := byPID[r]; ok {
			push(r) // the root itself, also where groups are unknown
		}
	}
	push(self)
	var out []procLink
	for len(queue) > 0 {
		pid := queue[0]
		queue = queue[1:]
		if l, ok := byPID[pid]; ok {
			out = append(out, l)
		}
		for _, ch := range children[pid] {
			push(ch)
		}
	}
	return out
}
