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
	// ProcRoot is where the proc file system is mounted. Default "/proc".
	ProcRoot string
	// PageSize is the size of a memory page in bytes. Default
	// os.Getpagesize().
	PageSize int
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
	fs  procFS

	mu     sync.Mutex
	latest Reading
	// state of the previous sample
	prevTotal uint64
	prevTicks map[procKey]uint64
	primed    bool
	failed    bool // an error was logged already
}

// procKey tells a process from a later one that reuses its pid.
type procKey struct {
	pid   int
	start uint64
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
	if cfg.ProcRoot == "" {
		cfg.ProcRoot = "/proc"
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = os.Getpagesize()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Collector{cfg: cfg, fs: procFS{root: cfg.ProcRoot}}
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
	now := time.Now()
	total, err := c.fs.cpuTotal()
	var all []pidStat
	if err == nil {
		all, err = c.fs.all()
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if !c.failed {
			c.failed = true
			c.cfg.Logger.Warn("resource usage: cannot read the proc file system; reporting zeros", "root", c.cfg.ProcRoot, "err", err)
		}
		c.latest = Reading{At: now}
		return c.latest
	}
	tree := selectTree(all, c.cfg.Self, c.cfg.Roots())
	ticks := make(map[procKey]uint64, len(tree))
	var used uint64
	var rss int64
	for _, st := range tree {
		k := procKey{st.PID, st.StartTime}
		ticks[k] = st.Ticks
		rss += st.RSSPages
		prev, ok := c.prevTicks[k]
		switch {
		case ok && st.Ticks >= prev:
			used += st.Ticks - prev
		case !ok:
			used += st.Ticks
		}
	}
	r := Reading{At: now, Processes: len(tree)}
	r.MemoryMB = float64(rss) * float64(c.cfg.PageSize) / (1 << 20)
	if c.primed && total > c.prevTotal {
		r.CPUPercent = min(100, 100*float64(used)/float64(total-c.prevTotal))
	}
	c.prevTotal, c.prevTicks, c.primed = total, ticks, true
	c.latest = r
	return r
}
