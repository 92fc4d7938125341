package redisstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// Defaults of [RequestsConfig].
const (
	DefaultRequestLockTTL = 30 * time.Second
	DefaultRequestPoll    = 5 * time.Millisecond
)

// RequestsConfig configures [Requests].
type RequestsConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// LockTTL is how long a request id's lock lives while create runs.
	// Once the binding is stored, the creator extends the lock to the
	// binding's TTL, so that late duplicates find the binding and fail to
	// take the lock in the same round trip. create should take well under
	// LockTTL. Default (0):
	// [DefaultRequestLockTTL]. It may not exceed BindingTTL.
	LockTTL time.Duration
	// BindingTTL is how long a binding lives. Default (0):
	// [scheduler.DefaultBindingTTL].
	BindingTTL time.Duration
	// WaitTimeout bounds how long a duplicate waits for the binding.
	// Default (0): [scheduler.DefaultBindWait].
	WaitTimeout time.Duration
	// PollInterval is a waiting duplicate's first pause between reads; it
	// doubles up to eight times that. Default (0): [DefaultRequestPoll].
	PollInterval time.Duration
	// OpHook observes every Redis operation ("request_binding_get",
	// "request_lock", "request_binding_set", "request_unlock"). Default
	// (nil): none.
	OpHook OpHook
}

// Requests is the Redis [scheduler.RequestStore]: per request id a lock,
// {prefix}:v1:requests:lock:<request_id> (SET NX PX), and a binding,
// {prefix}:v1:requests:binding:<request_id> (JSON, PX). The two keys lie in
// different Redis Cluster slots, so no script touches both: Bind uses
// single-key commands in an order that keeps create to one call.
//
// Every attempt reads the binding and tries the lock together, in one
// round trip (GET binding, SET lock NX). A fresh request then calls create
// and stores its binding (SET binding NX): three commands in two round
// trips. A duplicate of a finished one costs that first round trip alone.
// create runs once per request id unless a caller stalls for longer than
// LockTTL between its read and its lock attempt, or create outlasts
// LockTTL; even then the binding is written with NX, so every caller
// returns the one stored binding, and a create that derives its job from
// the request id ([scheduler.JobIDFor]) makes no second job.
type Requests struct {
	c    rueidis.Client
	keys Keys
	cfg  RequestsConfig
}

var _ scheduler.RequestStore = (*Requests)(nil)

// unlockLua deletes the lock only if it still holds the caller's token.
var unlockScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// NewRequests returns the request store on c.
func NewRequests(c rueidis.Client, cfg RequestsConfig) (*Requests, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewRequests: nil client")
	}
	for name, d := range map[string]time.Duration{"LockTTL": cfg.LockTTL, "BindingTTL": cfg.BindingTTL, "WaitTimeout": cfg.WaitTimeout, "PollInterval": cfg.PollInterval} {
		if d < 0 {
			return nil, fmt.Errorf("redisstore: RequestsConfig.%s: %v is negative", name, d)
		}
	}
	if cfg.LockTTL == 0 {
		cfg.LockTTL = DefaultRequestLockTTL
	}
	if cfg.BindingTTL == 0 {
		cfg.BindingTTL = scheduler.DefaultBindingTTL
	}
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = scheduler.DefaultBindWait
	}
	if cfg.PollInterval == 0 {
		cfg.PollInterval = DefaultRequestPoll
	}
	if cfg.LockTTL < time.Millisecond || cfg.BindingTTL < time.Millisecond {
		return nil, errors.New("redisstore: RequestsConfig: LockTTL and BindingTTL must be at least 1ms")
	}
	if cfg.LockTTL > cfg.BindingTTL {
		return nil, fmt.Errorf("redisstore: RequestsConfig.LockTTL: %v exceeds BindingTTL %v", cfg.LockTTL, cfg.BindingTTL)
	}
	return &Requests{c: c, keys: NewKeys(cfg.Prefix), cfg: cfg}, nil
}

// binding reads the stored binding of requestID.
func (s *Requests) binding(ctx context.Context, requestID string) (scheduler.RequestBinding, bool, error) {
	start := time.Now()
	res := s.c.Do(ctx, s.c.B().Get().Key(s.keys.RequestBinding(requestID)).Build())
	return s.decodeBinding(requestID, start, res)
}

// decodeBinding decodes the reply to GET of requestID's binding.
func (s *Requests) decodeBinding(requestID string, start time.Time, res rueidis.RedisResult) (scheduler.RequestBinding, bool, error) {
	data, err := res.AsBytes()
	s.cfg.OpHook.observe("request_binding_get", start, err)
	switch {
	case isNil(err):
		return scheduler.RequestBinding{}, false, nil
	case err != nil:
		return scheduler.RequestBinding{}, false, fmt.Errorf("redisstore: get binding of request %q: %w", requestID, err)
	}
	b, err := scheduler.DecodeRequestBinding(data)
	if err != nil {
		return scheduler.RequestBinding{}, false, &CorruptError{Key: s.keys.RequestBinding(requestID), Value: string(data), Err: err}
	}
	return b, true, nil
}

// Bind implements [scheduler.RequestStore].
func (s *Requests) Bind(ctx context.Context, requestID string, create func(ctx context.Context) (scheduler.RequestBinding, error)) (scheduler.RequestBinding, bool, error) {
	if err := scheduler.CheckBind(requestID, create); err != nil {
		return scheduler.RequestBinding{}, false, err
	}
	var timer *time.Timer
	deadline := time.Now().Add(s.cfg.WaitTimeout)
	pause := s.cfg.PollInterval
	bindingKey, lockKey := s.keys.RequestBinding(requestID), s.keys.RequestLock(requestID)
	lockMS := s.cfg.LockTTL.Milliseconds()
	// waitErr reports the end of ctx while waiting as ErrBindWait.
	waited := false
	waitErr := func(err error) error {
		if waited && ctx.Err() != nil {
			return fmt.Errorf("request %q: %w: %w", requestID, scheduler.ErrBindWait, ctx.Err())
		}
		return err
	}
	for {
		// Read the binding and try the lock in one round trip (two
		// commands; in a cluster they go to their two slots' masters at
		// once). A binding, when there is one, wins: create is not
		// called, and a lock taken beside it (the creator's lock expired)
		// is given back at once, so that it cannot outlive the binding.
		token := newToken()
		start := time.Now()
		res := s.c.DoMulti(ctx,
			s.c.B().Get().Key(bindingKey).Build(),
			s.c.B().Set().Key(lockKey).Value(token).Nx().PxMilliseconds(lockMS).Build())
		b, ok, berr := s.decodeBinding(requestID, start, res[0])
		lerr := res[1].Error()
		s.cfg.OpHook.observe("request_lock", start, lerr)
		switch {
		case berr != nil || ok:
			if lerr == nil {
				// The binding stands even if this fails (the hook sees
				// it): the lock then expires after LockTTL.
				s.unlock(ctx, lockKey, token)
			}
			return b, false, waitErr(berr)
		case lerr == nil:
			return s.create(ctx, requestID, token, create)
		case !isNil(lerr):
			return scheduler.RequestBinding{}, false, waitErr(fmt.Errorf("redisstore: lock request %q: %w", requestID, lerr))
		}
		waited = true
		// Another caller holds the lock: wait for its binding.
		left := time.Until(deadline)
		if left <= 0 {
			return scheduler.RequestBinding{}, false, fmt.Errorf("request %q: %w after %v", requestID, scheduler.ErrBindWait, s.cfg.WaitTimeout)
		}
		if timer == nil {
			timer = time.NewTimer(min(pause, left))
			defer timer.Stop()
		} else {
			timer.Reset(min(pause, left))
		}
		select {
		case <-ctx.Done():
			return scheduler.RequestBinding{}, false, fmt.Errorf("request %q: %w: %w", requestID, scheduler.ErrBindWait, ctx.Err())
		case <-timer.C:
		}
		pause = min(2*pause, 8*s.cfg.PollInterval)
	}
}

// unlock deletes requestID's lock if it still holds token.
func (s *Requests) unlock(ctx context.Context, lockKey, token string) error {
	start := time.Now()
	err := unlockScript.Exec(context.WithoutCancel(ctx), s.c, []string{lockKey}, []string{token}).Error()
	s.cfg.OpHook.observe("request_unlock", start, err)
	return err
}

func (s *Requests) create(ctx context.Context, requestID, token string, create func(ctx context.Context) (scheduler.RequestBinding, error)) (scheduler.RequestBinding, bool, error) {
	b, err := create(ctx)
	var data []byte
	if err == nil {
		data, err = scheduler.EncodeRequestBinding(b)
	}
	if err != nil {
		// Let a waiting duplicate take over at once.
		uerr := s.unlock(ctx, s.keys.RequestLock(requestID), token)
		return scheduler.RequestBinding{}, false, errors.Join(fmt.Errorf("request %q: create: %w", requestID, err), uerr)
	}
	// The lock then lives as long as the binding: a later duplicate's
	// SET NX fails at once instead of taking a lock it must give back, so
	// a duplicate costs one round trip.
	start := time.Now()
	bttl := s.cfg.BindingTTL.Milliseconds()
	rs := s.c.DoMulti(ctx,
		s.c.B().Set().Key(s.keys.RequestBinding(requestID)).Value(string(data)).Nx().PxMilliseconds(bttl).Build(),
		s.c.B().Pexpire().Key(s.keys.RequestLock(requestID)).Milliseconds(bttl).Build())
	err = rs[0].Error()
	s.cfg.OpHook.observe("request_binding_set", start, err)
	switch {
	case err == nil:
		// Decode what was stored, so the caller sees what duplicates see.
		stored, derr := scheduler.DecodeRequestBinding(data)
		return stored, true, derr
	case isNil(err):
		// Someone stored a binding first (this caller outlasted the lock):
		// everybody gets that one.
		stored, ok, gerr := s.binding(ctx, requestID)
		if gerr == nil && !ok {
			gerr = fmt.Errorf("redisstore: binding of request %q vanished", requestID)
		}
		return stored, false, gerr
	default:
		return scheduler.RequestBinding{}, false, fmt.Errorf("redisstore: store binding of request %q: %w", requestID, err)
	}
}

// tokenPrefix and tokenSeq make lock tokens: a random prefix per process
// and a counter, unique without asking the system for randomness on
// every attempt.
var (
	tokenPrefix = func() string {
		var b [12]byte
		rand.Read(b[:])
		return hex.EncodeToString(b[:]) + "-"
	}()
	tokenSeq atomic.Uint64
)

func newToken() string {
	return tokenPrefix + strconv.FormatUint(tokenSeq.Add(1), 36)
}
