package scheduler

import (
	"context"
	"sync"
	"time"
)

// MemStorm is the in-memory reference implementation of [StormGuard]. Time
// comes from time.Now, so it runs under testing/synctest.
type MemStorm struct {
	w  StormWindows
	mu sync.Mutex
	// per node and model
	window      map[[2]string]memWindow
	unavailable map[[2]string]time.Time // until
	// per model
	rate map[string]memWindow
}

type memWindow struct {
	until time.Time
	n     int64
}

// NewMemStorm returns a guard with windows w (zero fields mean their
// defaults).
func NewMemStorm(w StormWindows) *MemStorm {
	w = w.withDefaults()
	return &MemStorm{w: w, window: map[[2]string]memWindow{}, unavailable: map[[2]string]time.Time{}, rate: map[string]memWindow{}}
}

var _ StormGuard = (*MemStorm)(nil)

// Report implements [StormGuard].
func (m *MemStorm) Report(ctx context.Context, nodeID, model string) (StormDecision, error) {
	if err := ctx.Err(); err != nil {
		return StormDecision{}, err
	}
	now := time.Now()
	k := [2]string{nodeID, model}
	m.mu.Lock()
	defer m.mu.Unlock()
	win := m.window[k]
	if now.Before(win.until) {
		win.n++
		m.window[k] = win
		return StormDecision{Action: StormDebounced, Reports: win.n}, nil
	}
	r := m.rate[model]
	if !now.Before(r.until) {
		r = memWindow{until: now.Add(time.Second)}
	}
	if r.n >= int64(m.w.ActionsPerSecond) {
		return StormDecision{Action: StormRateLimited, Reports: 1}, nil
	}
	r.n++
	m.rate[model] = r
	m.window[k] = memWindow{until: now.Add(m.w.Debounce), n: 1}
	m.unavailable[k] = now.Add(m.w.Cooldown)
	return StormDecision{Action: StormMarked, Reports: 1}, nil
}

// Unavailable implements [StormGuard].
func (m *MemStorm) Unavailable(ctx context.Context, nodeID, model string) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Now().Before(m.unavailable[[2]string{nodeID, model}]), nil
}
