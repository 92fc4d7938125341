package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"
)

// OwnerKind says what an owner binding binds: a node or a session.
type OwnerKind string

// The kinds of owner bindings.
const (
	OwnerNode    OwnerKind = "node"    // {prefix}:nodes:owner:{node:<node_id>}
	OwnerSession OwnerKind = "session" // {prefix}:sessions:owner:{session:<session_id>}
)

// ErrNoOwner is returned by [Owners.Owner] when nothing owns the id.
var ErrNoOwner = errors.New("no owner")

// Owners stores owner bindings: which instance holds the WebSocket of a
// node or a session, with a TTL, so that another instance can route to it.
type Owners interface {
	// Bind makes instanceID the owner of id for ttl, whoever owned it
	// before: a new connection always wins.
	Bind(ctx context.Context, kind OwnerKind, id, instanceID string, ttl time.Duration) error
	// Renew extends the bindings of ids that instanceID still owns, and
	// binds again those whose binding expired. It returns the ids now owned
	// by another instance, which it leaves alone.
	Renew(ctx context.Context, kind OwnerKind, instanceID string, ttl time.Duration, ids ...string) (lost []string, err error)
	// Owner returns the owning instance of id, or [ErrNoOwner].
	Owner(ctx context.Context, kind OwnerKind, id string) (string, error)
	// Release deletes the binding only if instanceID still owns it
	// (compare-and-delete) and reports whether it did.
	Release(ctx context.Context, kind OwnerKind, id, instanceID string) (bool, error)
}

// Bindings holds this instance's owner bindings: [Bindings.Connect] binds a
// node or session when its connection opens, [Bindings.Disconnect] releases
// it when the connection closes, and [Bindings.Run] renews all of them every
// third of Config.OwnerTTL. A binding taken over by another instance (the
// node reconnected elsewhere) is dropped and reported to the OnLost callback.
type Bindings struct {
	o        Owners
	id       string
	ttl      time.Duration
	interval time.Duration
	log      *slog.Logger
	onLost   func(kind OwnerKind, id string)

	mu    sync.Mutex
	bound map[OwnerKind]map[string]struct{}
}

// NewBindings returns the bindings of cfg.InstanceID (which must be
// resolved). onLost, when not nil, is called from Run for each binding lost
// to another instance.
func NewBindings(o Owners, cfg Config, onLost func(kind OwnerKind, id string)) (*Bindings, error) {
	if o == nil {
		return nil, errors.New("scheduler: NewBindings: nil Owners")
	}
	if err := checkInstanceID(cfg.InstanceID); err != nil {
		return nil, fmt.Errorf("scheduler: NewBindings: %w", err)
	}
	ttl := cfg.WithDefaults().OwnerTTL
	return &Bindings{
		o: o, id: cfg.InstanceID, ttl: ttl, interval: ttl / 3, log: logger(cfg.Logger), onLost: onLost,
		bound: map[OwnerKind]map[string]struct{}{OwnerNode: {}, OwnerSession: {}},
	}, nil
}

func checkKind(kind OwnerKind) error {
	if kind != OwnerNode && kind != OwnerSession {
		return fmt.Errorf("scheduler: unknown owner kind %q (node|session)", kind)
	}
	return nil
}

// Connect binds id to this instance and keeps renewing the binding.
func (b *Bindings) Connect(ctx context.Context, kind OwnerKind, id string) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	if err := b.o.Bind(ctx, kind, id, b.id, b.ttl); err != nil {
		return fmt.Errorf("scheduler: bind %s %s: %w", kind, id, err)
	}
	b.mu.Lock()
	b.bound[kind][id] = struct{}{}
	b.mu.Unlock()
	return nil
}

// Disconnect stops renewing id and deletes its binding if this instance
// still owns it. It reports whether the binding was deleted: false means
// the id had already moved to another instance (or expired).
func (b *Bindings) Disconnect(ctx context.Context, kind OwnerKind, id string) (bool, error) {
	if err := checkKind(kind); err != nil {
		return false, err
	}
	b.mu.Lock()
	delete(b.bound[kind], id)
	b.mu.Unlock()
	ok, err := b.o.Release(ctx, kind, id, b.id)
	if err != nil {
		return false, fmt.Errorf("scheduler: release %s %s: %w", kind, id, err)
	}
	return ok, nil
}

// Bound returns the ids of kind this instance holds, sorted.
func (b *Bindings) Bound(kind OwnerKind) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	ids := make([]string, 0, len(b.bound[kind]))
	for id := range b.bound[kind] {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Run renews the bindings until ctx ends and returns nil. It does not
// release them: on shutdown, connections close and call Disconnect, and
// bindings of a crashed instance expire after their TTL.
func (b *Bindings) Run(ctx context.Context) error {
	t := time.NewTicker(b.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			b.renew(ctx)
		}
	}
}

func (b *Bindings) renew(ctx context.Context) {
	for _, kind := range []OwnerKind{OwnerNode, OwnerSession} {
		ids := b.Bound(kind)
		if len(ids) == 0 {
			continue
		}
		lost, err := b.o.Renew(ctx, kind, b.id, b.ttl, ids...)
		if err != nil {
			if ctx.Err() == nil {
				b.log.Warn("scheduler: renew owner bindings", "kind", kind, "count", len(ids), "err", err)
			}
			continue
		}
		isLost := make(map[string]bool, len(lost))
		for _, id := range lost {
			isLost[id] = true
			b.mu.Lock()
			delete(b.bound[kind], id)
			b.mu.Unlock()
			if b.onLost != nil {
				b.onLost(kind, id)
			}
		}
		// An id disconnected while the renewal ran may have been bound
		// again by it: release it once more (compare-and-delete).
		b.mu.Lock()
		var gone []string
		for _, id := range ids {
			if _, ok := b.bound[kind][id]; !ok && !isLost[id] {
				gone = append(gone, id)
			}
		}
		b.mu.Unlock()
		for _, id := range gone {
			if _, err := b.o.Release(ctx, kind, id, b.id); err != nil && ctx.Err() == nil {
				b.log.Warn("scheduler: release owner binding", "kind", kind, "id", id, "err", err)
			}
		}
	}
}
