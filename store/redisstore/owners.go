package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// OwnersConfig configures [Owners].
type OwnersConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// OpHook observes every Redis operation ("owner_bind", "owner_renew",
	// "owner_get", "owner_release"). Default (nil): none.
	OpHook OpHook
}

// Owners is the Redis [scheduler.Owners]: one string key per node,
// {prefix}:nodes:owner:{node:<node_id>}, and per session,
// {prefix}:sessions:owner:{session:<session_id>}, holding the owning
// instance id with a PX TTL. Renewal and release are Lua scripts whose one
// key is the owner key, so they are atomic and cluster-safe.
type Owners struct {
	c    rueidis.Client
	keys Keys
	hook OpHook
}

var _ scheduler.Owners = (*Owners)(nil)

// ownerReleaseScript deletes KEYS[1] only if it holds ARGV[1].
var ownerReleaseScript = rueidis.NewLuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0`)

// ownerRenewScript extends KEYS[1] to ARGV[2] ms if it holds ARGV[1], sets
// it again if it expired, and returns 0 if another instance holds it.
var ownerRenewScript = newLuaScript(`
local v = redis.call('GET', KEYS[1])
if v == false or v == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`)

// NewOwners returns the owner store on c.
func NewOwners(c rueidis.Client, cfg OwnersConfig) (*Owners, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewOwners: nil client")
	}
	return &Owners{c: c, keys: NewKeys(cfg.Prefix), hook: cfg.OpHook}, nil
}

func (o *Owners) key(kind scheduler.OwnerKind, id string) (string, error) {
	switch kind {
	case scheduler.OwnerNode:
		return o.keys.NodeOwner(id), nil
	case scheduler.OwnerSession:
		return o.keys.SessionOwner(id), nil
	}
	return "", fmt.Errorf("redisstore: unknown owner kind %q (node|session)", kind)
}

// Bind implements [scheduler.Owners] with SET PX.
func (o *Owners) Bind(ctx context.Context, kind scheduler.OwnerKind, id, instanceID string, ttl time.Duration) error {
	k, err := o.key(kind, id)
	if err != nil {
		return err
	}
	start := time.Now()
	err = o.c.Do(ctx, o.c.B().Set().Key(k).Value(instanceID).Px(time.Duration(pxMS(ttl))*time.Millisecond).Build()).Error()
	o.hook.observe("owner_bind", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: bind %s %s: %w", kind, id, err)
	}
	return nil
}

// Renew implements [scheduler.Owners]: one script per id, sent in one
// pipeline (on a cluster, one per node).
func (o *Owners) Renew(ctx context.Context, kind scheduler.OwnerKind, instanceID string, ttl time.Duration, ids ...string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	execs := make([]rueidis.LuaExec, len(ids))
	px := strconv.FormatInt(pxMS(ttl), 10)
	for i, id := range ids {
		k, err := o.key(kind, id)
		if err != nil {
			return nil, err
		}
		execs[i] = rueidis.LuaExec{Keys: []string{k}, Args: []string{instanceID, px}}
	}
	start := time.Now()
	var lost []string
	var firstErr error
	for i, r := range ownerRenewScript.execMulti(ctx, o.c, execs...) {
		n, err := r.AsInt64()
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			continue
		}
		if n == 0 {
			lost = append(lost, ids[i])
		}
	}
	o.hook.observe("owner_renew", start, firstErr)
	if firstErr != nil {
		return lost, fmt.Errorf("redisstore: renew %s bindings: %w", kind, firstErr)
	}
	return lost, nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// Owner implements [scheduler.Owners].
func (o *Owners) Owner(ctx context.Context, kind scheduler.OwnerKind, id string) (string, error) {
	k, err := o.key(kind, id)
	if err != nil {
		return "", err
	}
	start := time.Now()
	v, err := o.c.Do(ctx, o.c.B().Get().Key(k).Build()).ToString()
	o.hook.observe("owner_get", start, err)
	if isNil(err) {
		return "", scheduler.ErrNoOwner
	}
	if err != nil {
		return "", fmt.Errorf("redisstore: owner of %s %s: %w", kind, id, err)
	}
	return v, nil
}

// Release implements [scheduler.Owners] with a compare-and-delete script.
func (o *Owners) Release(ctx context.Context, kind scheduler.OwnerKind, id, instanceID string) (bool, error) {
	k, err := o.key(kind, id)
	if err != nil {
		return false, err
	}
	start := time.Now()
	n, err := ownerReleaseScript.Exec(ctx, o.c, []string{k}, []string{instanceID}).AsInt64()
	o.hook.observe("owner_release", start, err)
	if err != nil {
		return false, fmt.Errorf("redisstore: release %s %s: %w", kind, id, err)
	}
	return n == 1, nil
}
