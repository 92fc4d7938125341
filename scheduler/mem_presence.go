package scheduler

import (
	"context"
	"sort"
	"sync"
	"time"
)

// memTTL is a map of values with expiry times.
type memTTL struct {
	mu sync.Mutex
	m  map[string]memValue
}

type memValue struct {
	v     string
	until time.Time
}

func (t *memTTL) get(k string) (string, bool) {
	v, ok := t.m[k]
	if !ok || !time.Now().Before(v.until) {
		delete(t.m, k)
		return "", false
	}
	return v.v, true
}

func (t *memTTL) set(k, v string, ttl time.Duration) {
	if t.m == nil {
		t.m = map[string]memValue{}
	}
	t.m[k] = memValue{v: v, until: time.Now().Add(ttl)}
}

// MemPresence is the in-memory reference implementation of [Presence].
// Time comes from time.Now, so it runs under testing/synctest.
type MemPresence struct {
	t     memTTL
	known map[string]bool
	adopt memTTL
}

var _ Presence = (*MemPresence)(nil)

// NewMemPresence returns an empty presence store.
func NewMemPresence() *MemPresence { return &MemPresence{} }

// Announce implements [Presence].
func (p *MemPresence) Announce(ctx context.Context, instanceID string, ttl time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	p.t.set(instanceID, "1", ttl)
	if p.known == nil {
		p.known = map[string]bool{}
	}
	p.known[instanceID] = true
	return nil
}

// Instances implements [Presence].
func (p *MemPresence) Instances(ctx context.Context) ([]string, error) {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	out := make([]string, 0, len(p.known))
	for id := range p.known {
		out = append(out, id)
	}
	sort.Strings(out)
	return out, nil
}

// Adopt implements [Presence].
func (p *MemPresence) Adopt(ctx context.Context, deadID, byID string, ttl time.Duration) (bool, error) {
	p.adopt.mu.Lock()
	defer p.adopt.mu.Unlock()
	if _, held := p.adopt.get(deadID); held {
		return false, nil
	}
	p.adopt.set(deadID, byID, ttl)
	return true, nil
}

// Forget implements [Presence].
func (p *MemPresence) Forget(ctx context.Context, instanceID string) error {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	delete(p.known, instanceID)
	return nil
}

// Alive implements [Presence].
func (p *MemPresence) Alive(ctx context.Context, instanceID string) (bool, error) {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	_, ok := p.t.get(instanceID)
	return ok, nil
}

// Withdraw implements [Presence].
func (p *MemPresence) Withdraw(ctx context.Context, instanceID string) error {
	p.t.mu.Lock()
	defer p.t.mu.Unlock()
	delete(p.t.m, instanceID)
	return nil
}

// MemOwners is the in-memory reference implementation of [Owners]. Time
// comes from time.Now, so it runs under testing/synctest.
type MemOwners struct{ t memTTL }

var _ Owners = (*MemOwners)(nil)

// NewMemOwners returns an empty owner store.
func NewMemOwners() *MemOwners { return &MemOwners{} }

func ownerKey(kind OwnerKind, id string) string { return string(kind) + "\x00" + id }

// Bind implements [Owners].
func (o *MemOwners) Bind(ctx context.Context, kind OwnerKind, id, instanceID string, ttl time.Duration) error {
	if err := checkKind(kind); err != nil {
		return err
	}
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	o.t.set(ownerKey(kind, id), instanceID, ttl)
	return nil
}

// Renew implements [Owners].
func (o *MemOwners) Renew(ctx context.Context, kind OwnerKind, instanceID string, ttl time.Duration, ids ...string) ([]string, error) {
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	var lost []string
	for _, id := range ids {
		k := ownerKey(kind, id)
		if v, ok := o.t.get(k); ok && v != instanceID {
			lost = append(lost, id)
			continue
		}
		o.t.set(k, instanceID, ttl)
	}
	return lost, nil
}

// Owner implements [Owners].
func (o *MemOwners) Owner(ctx context.Context, kind OwnerKind, id string) (string, error) {
	if err := checkKind(kind); err != nil {
		return "", err
	}
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	if v, ok := o.t.get(ownerKey(kind, id)); ok {
		return v, nil
	}
	return "", ErrNoOwner
}

// Release implements [Owners].
func (o *MemOwners) Release(ctx context.Context, kind OwnerKind, id, instanceID string) (bool, error) {
	if err := checkKind(kind); err != nil {
		return false, err
	}
	o.t.mu.Lock()
	defer o.t.mu.Unlock()
	k := ownerKey(kind, id)
	if v, ok := o.t.get(k); ok && v == instanceID {
		delete(o.t.m, k)
		return true, nil
	}
	return false, nil
}
