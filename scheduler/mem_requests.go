package scheduler

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Defaults of request idempotency stores.
const (
	// DefaultBindingTTL is how long a request binding is kept when a
	// store's BindingTTL is zero.
	DefaultBindingTTL = 10 * time.Minute
	// DefaultBindWait bounds how long a duplicate waits for the first
	// request's binding when a store's WaitTimeout is zero.
	DefaultBindWait = 5 * time.Second
)

// MemRequestsConfig configures [MemRequests].
type MemRequestsConfig struct {
	// BindingTTL is how long a binding is kept. Default (0):
	// [DefaultBindingTTL].
	BindingTTL time.Duration
	// WaitTimeout bounds a duplicate's wait for the binding. Default (0):
	// [DefaultBindWait].
	WaitTimeout time.Duration
}

// MemRequests is the in-memory [RequestStore]: the reference
// implementation. It is safe for concurrent use. Binding expiry reads the
// time from package time (testing/synctest fakes it).
type MemRequests struct {
	cfg MemRequestsConfig

	mu       sync.Mutex
	bindings map[string]memBinding
	inflight map[string]chan struct{} // closed when the creating call ends
}

type memBinding struct {
	b       RequestBinding
	expires time.Time
}

var _ RequestStore = (*MemRequests)(nil)

// NewMemRequests returns an empty store.
func NewMemRequests(cfg MemRequestsConfig) (*MemRequests, error) {
	if cfg.BindingTTL < 0 {
		return nil, fmt.Errorf("scheduler: BindingTTL: %v is negative", cfg.BindingTTL)
	}
	if cfg.WaitTimeout < 0 {
		return nil, fmt.Errorf("scheduler: WaitTimeout: %v is negative", cfg.WaitTimeout)
	}
	if cfg.BindingTTL == 0 {
		cfg.BindingTTL = DefaultBindingTTL
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = DefaultBindWait
	}
	return &MemRequests{cfg: cfg, bindings: map[string]memBinding{}, inflight: map[string]chan struct{}{}}, nil
}

// Bind implements [RequestStore].
func (s *MemRequests) Bind(ctx context.Context, requestID string, create func(ctx context.Context) (RequestBinding, error)) (RequestBinding, bool, error) {
	if err := CheckBind(requestID, create); err != nil {
		return RequestBinding{}, false, err
	}
	var timeout <-chan time.Time // started by the first wait
	for {
		s.mu.Lock()
		if mb, ok := s.bindings[requestID]; ok && time.Now().Before(mb.expires) {
			s.mu.Unlock()
			return mb.b, false, nil
		}
		wait, busy := s.inflight[requestID]
		if !busy {
			done := make(chan struct{})
			s.inflight[requestID] = done
			s.mu.Unlock()
			return s.create(ctx, requestID, create, done)
		}
		s.mu.Unlock()
		if timeout == nil {
			t := time.NewTimer(s.cfg.WaitTimeout)
			defer t.Stop()
			timeout = t.C
		}
		select {
		case <-wait:
		case <-ctx.Done():
			return RequestBinding{}, false, fmt.Errorf("request %q: %w: %w", requestID, ErrBindWait, ctx.Err())
		case <-timeout:
			return RequestBinding{}, false, fmt.Errorf("request %q: %w after %v", requestID, ErrBindWait, s.cfg.WaitTimeout)
		}
	}
}

func (s *MemRequests) create(ctx context.Context, requestID string, create func(ctx context.Context) (RequestBinding, error), done chan struct{}) (RequestBinding, bool, error) {
	defer func() {
		s.mu.Lock()
		delete(s.inflight, requestID)
		s.mu.Unlock()
		close(done)
	}()
	b, err := create(ctx)
	var data []byte
	if err == nil {
		data, err = EncodeRequestBinding(b)
	}
	if err != nil {
		return RequestBinding{}, false, fmt.Errorf("request %q: create: %w", requestID, err)
	}
	// Keep what a JSON store would keep, so both give duplicates the same.
	if b, err = DecodeRequestBinding(data); err != nil {
		return RequestBinding{}, false, err
	}
	s.mu.Lock()
	s.bindings[requestID] = memBinding{b, time.Now().Add(s.cfg.BindingTTL)}
	s.mu.Unlock()
	return b, true, nil
}
