package claimtest

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/claim"
)

var (
	_ claim.Runner     = (*Runner)(nil)
	_ claim.UsageProbe = (*Probe)(nil)
)

// Runner is a fake [claim.Runner] that records which deployments run and how
// often each was started. It is safe for concurrent use.
type Runner struct {
	mu      sync.Mutex
	running map[string]claim.Deployment
	starts  map[string]int
	// StartErr, when set, is returned by Start for the deployments it
	// returns non-nil for (set before use).
	StartErr func(d claim.Deployment) error
}

// NewRunner returns an empty fake runner.
func NewRunner() *Runner {
	return &Runner{running: map[string]claim.Deployment{}, starts: map[string]int{}}
}

// Running implements [claim.Runner], in id order.
func (r *Runner) Running() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([]string, 0, len(r.running))
	for id := range r.running {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Start implements [claim.Runner]. Starting an id that already runs is an
// error, so tests catch duplicate starts.
func (r *Runner) Start(ctx context.Context, d claim.Deployment) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.StartErr != nil {
		if err := r.StartErr(d); err != nil {
			return err
		}
	}
	if _, ok := r.running[d.ID]; ok {
		return fmt.Errorf("claimtest: deployment %q already running", d.ID)
	}
	r.running[d.ID] = d
	r.starts[d.ID]++
	return nil
}

// Stop implements [claim.Runner].
func (r *Runner) Stop(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.running, id)
	return nil
}

// Crash removes id from the running set without Stop, as if its process
// died and the runner gave up on it.
func (r *Runner) Crash(id string) {
	r.mu.Lock()
	delete(r.running, id)
	r.mu.Unlock()
}

// Starts returns how many times id was started.
func (r *Runner) Starts(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.starts[id]
}

// Probe is a fake [claim.UsageProbe] answering from a table; a node absent
// from it fails. It is safe for concurrent use.
type Probe struct {
	mu    sync.Mutex
	usage map[string]claim.Usage
	calls int
	// Block, when set, makes Usage wait for ctx to end for the nodes it
	// returns true for (a probe that times out). Set before use.
	Block func(address string) bool
	// Delay, when set, makes Usage take that long (or until ctx ends) for
	// each node before answering. Set before use.
	Delay func(address string) time.Duration
}

// NewProbe returns a probe that answers usage[address].
func NewProbe(usage map[string]claim.Usage) *Probe {
	p := &Probe{usage: map[string]claim.Usage{}}
	for k, v := range usage {
		p.usage[k] = v
	}
	return p
}

// Set sets the usage of address.
func (p *Probe) Set(address string, u claim.Usage) {
	p.mu.Lock()
	p.usage[address] = u
	p.mu.Unlock()
}

// Calls returns how many probes were made.
func (p *Probe) Calls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls
}

// Usage implements [claim.UsageProbe].
func (p *Probe) Usage(ctx context.Context, n claim.NodeUnit) (claim.Usage, error) {
	p.mu.Lock()
	p.calls++
	u, ok := p.usage[n.Address]
	block := p.Block != nil && p.Block(n.Address)
	p.mu.Unlock()
	if block {
		<-ctx.Done()
		return claim.Usage{}, ctx.Err()
	}
	if p.Delay != nil {
		t := time.NewTimer(p.Delay(n.Address))
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
			return claim.Usage{}, ctx.Err()
		}
	}
	if !ok {
		return claim.Usage{}, fmt.Errorf("claimtest: no usage for %q", n.Address)
	}
	return u, nil
}
