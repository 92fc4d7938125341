package redisstore

import (
	"context"
	"errors"
	"fmt"
	"sort"
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
// announcement time in Unix milliseconds; the id joins
// {prefix}:schedulers:all in the same round trip.
func (p *Presence) Announce(ctx context.Context, instanceID string, ttl time.Duration) error {
	start := time.Now()
	cmd := p.c.B().Set().Key(p.keys.SchedulerPresence(instanceID)).Value(fmt.Sprint(start.UnixMilli())).Px(time.Duration(pxMS(ttl)) * time.Millisecond).Build()
	err := firstError(p.c.DoMulti(ctx, cmd, p.c.B().Sadd().Key(p.keys.SchedulersAll()).Member(instanceID).Build()))
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

// Instances implements [scheduler.Presence] with SMEMBERS.
func (p *Presence) Instances(ctx context.Context) ([]string, error) {
	start := time.Now()
	ids, err := p.c.Do(ctx, p.c.B().Smembers().Key(p.keys.SchedulersAll()).Build()).AsStrSlice()
	p.hook.observe("presence_instances", start, err)
	if err != nil {
		return nil, fmt.Errorf("redisstore: list instances: %w", err)
	}
	sort.Strings(ids)
	return ids, nil
}

// Adopt implements [scheduler.Presence] with SET NX PX.
func (p *Presence) Adopt(ctx context.Context, deadID, byID string, ttl time.Duration) (bool, error) {
	start := time.Now()
	err := p.c.Do(ctx, p.c.B().Set().Key(p.keys.SchedulerAdopt(deadID)).Value(byID).Nx().Px(time.Duration(pxMS(ttl))*time.Millisecond).Build()).Error()
	p.hook.observe("presence_adopt", start, err)
	if isNil(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("redisstore: adopt %s: %w", deadID, err)
	}
	return true, nil
}

// Forget implements [scheduler.Presence] with SREM.
func (p *Presence) Forget(ctx context.Context, instanceID string) error {
	start := time.Now()
	err := p.c.Do(ctx, p.c.B().Srem().Key(p.keys.SchedulersAll()).Member(instanceID).Build()).Error()
	p.hook.observe("presence_forget", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: forget %s: %w", instanceID, err)
	}
	return nil
}
