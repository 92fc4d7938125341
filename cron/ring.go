package cron

import "slices"

// runRing is the newest runs of one job, kept in memory: the history of
// a runner without a store and of a [MemStore]. It holds up to the limit
// given to add, oldest at head once full.
type runRing struct {
	buf  []Run
	head int
}

// add adds run, dropping the oldest runs beyond limit. A limit lowered
// since the last add drops the oldest down to it; one raised keeps the
// runs there are and grows from them.
func (g *runRing) add(run Run, limit int) {
	if len(g.buf) > limit || (len(g.buf) < limit && g.head != 0) {
		var kept []Run
		if limit > 1 {
			kept = g.newest(limit - 1)
			slices.Reverse(kept)
		}
		g.buf, g.head = kept, 0
	}
	if len(g.buf) < limit {
		g.buf = append(g.buf, run)
		return
	}
	g.buf[g.head] = run
	g.head = (g.head + 1) % len(g.buf)
}

// newest returns up to limit of the newest runs, newest first (limit <=
// 0: all).
func (g *runRing) newest(limit int) []Run {
	n := len(g.buf)
	if limit <= 0 || limit > n {
		limit = n
	}
	out := make([]Run, 0, limit)
	for i := range limit {
		out = append(out, g.buf[(g.head+n-1-i)%n])
	}
	return out
}
