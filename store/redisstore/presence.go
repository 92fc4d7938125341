package redisstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// PresenceConfig configures [Presence].
type PresenceConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// OpHook observes every Redis operation ("presence_announce",
	// "presence_alive", "presence_withdraw"). Default (nil): none.
	OpHook OpHook
}

// Presence is the Redis [scheduler.Presence]: one string key per instance,
// {prefix}:schedulers:presence:<instance_id>, written with SET PX.
type Presence struct {
	c    rueidis.Client
	keys Keys
	hook OpHook
}

var _ scheduler.Presence = (*Presence)(nil)

// NewPresence returns the presence store on c.
func NewPresence(c rueidis.Client, cfg PresenceConfig) (*Presence, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewPresence: nil client")
	}
	return &Presence{c: c, keys: NewKeys(cfg.Prefix), hook: cfg.OpHook}, nil
}

// pxMS converts a TTL to whole milliseconds, at least 1.
func pxMS(ttl time.Duration) int64 { return max(ttl.Milliseconds(), 1) }

// Announce implements [scheduler.Presence]. The key's value is the
// announcement time in Unix milliseconds.
func (p *Presence) Announce(ctx context.Context, instanceID string, ttl time.Duration) error {
	start := time.Now()
	cmd := p.c.B().Set().Key(p.keys.SchedulerPresence(instanceID)).Value(fmt.Sprint(start.UnixMilli())).Px(time.Duration(pxMS(ttl)) * time.Millisecond).Build()
	err := p.c.Do(ctx, cmd).Error()
	p.hook.observe("presence_announce", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: announce %s: %w", instanceID, err)
	}
	return nil
}

// Alive implements [scheduler.Presence].
func (p *Presence) Alive(ctx context.Context, instanceID string) (bool, error) {
	start := time.Now()
	n, err := p.c.Do(ctx, p.c.B().Exists().Key(p.keys.SchedulerPresence(instanceID)).Build()).AsInt64()
	p.hook.observe("presence_alive", start, err)
	if err != nil {
		return false, fmt.Errorf("redisstore: presence of %s: %w", instanceID, err)
	}
	return n == 1, nil
}

// Withdraw implements [scheduler.Presence].
func (p *Presence) Withdraw(ctx context.Context, instanceID string) error {
	start := time.Now()
	err := p.c.Do(ctx, p.c.B().Del().Key(p.keys.SchedulerPresence(instanceID)).Build()).Error()
	p.hook.observe("presence_withdraw", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: withdraw %s: %w", instanceID, err)
	}
	return nil
}
