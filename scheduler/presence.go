package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Presence stores which dispatch instances are alive: a key per instance
// with a TTL, {prefix}:schedulers:presence:<instance_id> in Redis.
type Presence interface {
	// Announce marks instanceID alive for ttl, replacing an earlier TTL.
	Announce(ctx context.Context, instanceID string, ttl time.Duration) error
	// Alive reports whether instanceID announced itself within its TTL.
	Alive(ctx context.Context, instanceID string) (bool, error)
	// Withdraw removes instanceID's presence at once.
	Withdraw(ctx context.Context, instanceID string) error
	// Instances returns, sorted, every instance that announced itself and
	// was not forgotten since: the alive ones and the dead ones whose inbox
	// may still hold messages. In Redis the set {prefix}:schedulers:all.
	Instances(ctx context.Context) ([]string, error)
	// Adopt claims the inbox of the dead instance deadID for byID until ttl
	// from now: true for one caller at a time.
	Adopt(ctx context.Context, deadID, byID string, ttl time.Duration) (bool, error)
	// Forget takes instanceID out of Instances (its inbox was drained).
	Forget(ctx context.Context, instanceID string) error
}

// Heartbeat keeps one instance's presence alive: it announces at once,
// renews every third of Config.OwnerTTL, and withdraws when it stops.
type Heartbeat struct {
	p        Presence
	id       string
	ttl      time.Duration
	interval time.Duration
	log      *slog.Logger
}

// NewHeartbeat returns the heartbeat of cfg.InstanceID, which must be
// set. The TTL is cfg.OwnerTTL.
func NewHeartbeat(p Presence, cfg Config) (*Heartbeat, error) {
	if p == nil {
		return nil, errors.New("scheduler: NewHeartbeat: nil Presence")
	}
	if err := checkInstanceID(cfg.InstanceID); err != nil {
		return nil, fmt.Errorf("scheduler: NewHeartbeat: %w", err)
	}
	ttl := cfg.WithDefaults().OwnerTTL
	return &Heartbeat{p: p, id: cfg.InstanceID, ttl: ttl, interval: ttl / 3, log: logger(cfg.Logger)}, nil
}

// Run announces the instance and renews its presence until ctx ends, then
// withdraws it and returns nil. A failed renewal is logged and retried at
// the next tick (the TTL leaves two more chances). An error is returned
// only when the first announcement fails, so that a caller learns at once
// that the server is unreachable.
func (h *Heartbeat) Run(ctx context.Context) error {
	if err := h.p.Announce(ctx, h.id, h.ttl); err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return fmt.Errorf("scheduler: announce %s: %w", h.id, err)
	}
	defer func() {
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
		defer cancel()
		if err := h.p.Withdraw(wctx, h.id); err != nil {
			h.log.Warn("scheduler: withdraw presence", "instance_id", h.id, "err", err)
		}
	}()
	t := time.NewTicker(h.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			if err := h.p.Announce(ctx, h.id, h.ttl); err != nil && ctx.Err() == nil {
				h.log.Warn("scheduler: renew presence", "instance_id", h.id, "err", err)
			}
		}
	}
}

func logger(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.DiscardHandler)
	}
	return l
}
