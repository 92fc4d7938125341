package usage

import (
	"context"
	"errors"
	"sync"

	"github.com/shirou/gopsutil/v4/cpu"
	"github.com/shirou/gopsutil/v4/process"
)

// procLink places a process in the process tree.
type procLink struct {
	PID, PPID int
	PGID      int // 0 where process groups are unknown (Windows)
}

// procStat is what the collector measures of one process.
type procStat struct {
	CPU   float64 // user and system CPU time since the process started, in seconds
	Start int64   // creation time in ms since the epoch: tells a process from a later one reusing its pid
	RSS   uint64  // resident set size in bytes
}

// source is where a Collector reads the machine and its processes.
type source interface {
	// cpuTotal is the CPU time the whole machine had since boot, every
	// core summed, idle included, in seconds.
	cpuTotal(ctx context.Context) (float64, error)
	// list places every process in the tree.
	list(ctx context.Context) ([]procLink, error)
	// stat measures one process.
	stat(ctx context.Context, pid int) (procStat, error)
}

// psSource reads through gopsutil, on Linux, macOS and Windows.
type psSource struct{}

// cacheBootTime makes gopsutil read the boot time once rather than for
// every process it reads on Linux (a third of a sample's cost otherwise);
// the boot time does not change while the node-unit runs.
var cacheBootTime = sync.OnceFunc(func() { process.EnableBootTimeCache(true) })

func (psSource) cpuTotal(ctx context.Context) (float64, error) {
	ts, err := cpu.TimesWithContext(ctx, false)
	if err != nil {
		return 0, err
	}
	if len(ts) == 0 {
		return 0, errors.New("no CPU times")
	}
	t := ts[0]
	// Guest time is already part of user time on Linux.
	return t.User + t.System + t.Idle + t.Nice + t.Iowait + t.Irq + t.Softirq + t.Steal, nil
}

func (psSource) list(ctx context.Context) ([]procLink, error) {
	cacheBootTime()
	pids, err := process.PidsWithContext(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]procLink, 0, len(pids))
	for _, pid := range pids {
		p := &process.Process{Pid: pid}
		ppid, err := p.PpidWithContext(ctx)
		if err != nil {
			continue // gone, or not readable
		}
		out = append(out, procLink{PID: int(pid), PPID: int(ppid), PGID: pgid(int(pid))})
	}
	return out, nil
}

func (psSource) stat(ctx context.Context, pid int) (procStat, error) {
	cacheBootTime()
	p := &process.Process{Pid: int32(pid)}
	times, err := p.TimesWithContext(ctx)
	if err != nil {
		return procStat{}, err
	}
	mem, err := p.MemoryInfoWithContext(ctx)
	if err != nil {
		return procStat{}, err
	}
	start, err := p.CreateTimeWithContext(ctx)
	if err != nil {
		return procStat{}, err
	}
	return procStat{CPU: times.User + times.System, Start: start, RSS: mem.RSS}, nil
}
