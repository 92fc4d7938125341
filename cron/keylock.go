package cron

import "sync"

// keyLocks is a mutex per key, created on first use and dropped when its
// last holder or waiter lets go.
type keyLocks struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	mu   sync.Mutex
	refs int // holders and waiters; guarded by keyLocks.mu
}

// lock locks key and returns the function that unlocks it.
func (k *keyLocks) lock(key string) (unlock func()) {
	k.mu.Lock()
	l := k.m[key]
	if l == nil {
		if k.m == nil {
			k.m = make(map[string]*keyLock)
		}
		l = &keyLock{}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	l.mu.Lock()
	return func() {
		l.mu.Unlock()
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
}
