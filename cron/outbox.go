package cron

import (
	"context"
	"slices"
	"sync"
	"time"
)

// AlertDelivery is an alert waiting in an [AlertOutbox]: the alert, where
// it goes, and how its delivery stands.
type AlertDelivery struct {
	// ID names the delivery: every attempt carries it in the
	// [AlertDeliveryHeader], so that a receiver that got it already can
	// tell a repeat.
	ID string `json:"id"`
	// Alert is the alert, sent as the body.
	Alert Alert `json:"alert"`
	// URL is the webhook.
	URL string `json:"url"`
	// Secret keys the signature; it is kept by the store but never shown
	// (no JSON).
	Secret string `json:"-"`
	// Attempts is the attempts made so far.
	Attempts int `json:"attempts"`
	// CreatedAt is when the alert was raised.
	CreatedAt time.Time `json:"created_at"`
	// NextAt is when the next attempt is due (zero for a dead alert).
	NextAt time.Time `json:"next_at,omitzero"`
	// LastError is why the last attempt failed ("" before any).
	LastError string `json:"last_error,omitempty"`
	// Dead marks an alert given up: its horizon ([Config.AlertHorizon])
	// passed, or its webhook refused it for good (a 4xx answer but 429, a
	// host not allowed). A dead alert is kept, to be seen, until
	// [MaxDeadAlerts] younger ones push it out.
	Dead bool `json:"dead,omitempty"`
}

// AlertOutbox is an optional capability of a [Store]: the alerts waiting
// for delivery, kept with the runs that raised them so that they survive
// a restart and a webhook outage. A runner over a store that has it
// writes each alert in the recorder's pass that records its run, and
// delivers it from there; on a database shared by several runners
// (store/sqlstore) each delivery is taken by exactly one of them at a
// time, under a lease. A runner over a store without it keeps its alerts
// in memory, with the same retries, and loses them when it stops.
// [MemStore], store/jsonstore and store/sqlstore have it; every adapter
// passes the AlertOutbox case of store/storetest.TestCronStore.
type AlertOutbox interface {
	// EnqueueAlerts adds deliveries, each due at its NextAt. An ID
	// already there is left as it is.
	EnqueueAlerts(ctx context.Context, ds []AlertDelivery) error
	// TakeAlerts returns up to max deliveries not dead, due at now
	// (NextAt not after it) and not taken by another call whose lease
	// runs after now, oldest due first, and takes them until until: of
	// concurrent calls, by any number of processes on the store, one
	// only gets each.
	TakeAlerts(ctx context.Context, now, until time.Time, max int) ([]AlertDelivery, error)
	// SettleAlert records the end of an attempt at the delivery d.ID and
	// releases it: delivered removes it; otherwise its Attempts,
	// LastError, NextAt and Dead become d's (pending again, or dead; the
	// oldest dead beyond [MaxDeadAlerts] are dropped). An ID no longer
	// there is no error.
	SettleAlert(ctx context.Context, d AlertDelivery, delivered bool) error
	// ListAlerts returns up to limit of the pending deliveries (dead
	// false) or the dead ones (dead true), oldest raised first, and how
	// many of that kind there are in all.
	ListAlerts(ctx context.Context, dead bool, limit int) ([]AlertDelivery, int, error)
}

// alertMemory is an [AlertOutbox] in the memory of one process, lost
// with it: the outbox of [MemStore] and of a runner whose store has
// none. It is safe for concurrent use; the zero value is ready.
type alertMemory struct {
	mu    sync.Mutex
	m     map[string]*memAlert
	nDead int
}

type memAlert struct {
	d     AlertDelivery
	lease time.Time
}

var _ AlertOutbox = (*alertMemory)(nil)

func (o *alertMemory) EnqueueAlerts(_ context.Context, ds []AlertDelivery) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.m == nil {
		o.m = make(map[string]*memAlert)
	}
	for _, d := range ds {
		if _, ok := o.m[d.ID]; !ok {
			o.m[d.ID] = &memAlert{d: d}
			if d.Dead {
				o.nDead++
			}
		}
	}
	o.pruneDead()
	return nil
}

func (o *alertMemory) TakeAlerts(_ context.Context, now, until time.Time, max int) ([]AlertDelivery, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var due []*memAlert
	for _, a := range o.m {
		if !a.d.Dead && !a.d.NextAt.After(now) && !a.lease.After(now) {
			due = append(due, a)
		}
	}
	slices.SortFunc(due, func(a, b *memAlert) int {
		if c := a.d.NextAt.Compare(b.d.NextAt); c != 0 {
			return c
		}
		return a.d.CreatedAt.Compare(b.d.CreatedAt)
	})
	if len(due) > max {
		due = due[:max]
	}
	out := make([]AlertDelivery, len(due))
	for i, a := range due {
		a.lease = until
		out[i] = a.d
	}
	return out, nil
}

func (o *alertMemory) SettleAlert(_ context.Context, d AlertDelivery, delivered bool) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	a, ok := o.m[d.ID]
	if !ok {
		return nil
	}
	if a.d.Dead {
		o.nDead--
	}
	if delivered {
		delete(o.m, d.ID)
		return nil
	}
	a.d.Attempts, a.d.LastError, a.d.NextAt, a.d.Dead = d.Attempts, d.LastError, d.NextAt, d.Dead
	a.lease = time.Time{}
	if a.d.Dead {
		o.nDead++
		o.pruneDead()
	}
	return nil
}

// pruneDead drops the oldest dead alerts beyond MaxDeadAlerts. mu is held.
func (o *alertMemory) pruneDead() {
	if o.nDead <= MaxDeadAlerts {
		return
	}
	var dead []*memAlert
	for _, a := range o.m {
		if a.d.Dead {
			dead = append(dead, a)
		}
	}
	sortAlerts(dead)
	for _, a := range dead[:len(dead)-MaxDeadAlerts] {
		delete(o.m, a.d.ID)
	}
	o.nDead = MaxDeadAlerts
}

func (o *alertMemory) ListAlerts(_ context.Context, dead bool, limit int) ([]AlertDelivery, int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	var l []*memAlert
	for _, a := range o.m {
		if a.d.Dead == dead {
			l = append(l, a)
		}
	}
	sortAlerts(l)
	n := len(l)
	if limit >= 0 && len(l) > limit {
		l = l[:limit]
	}
	out := make([]AlertDelivery, len(l))
	for i, a := range l {
		out[i] = a.d
	}
	return out, n, nil
}

// sortAlerts sorts l oldest raised first.
func sortAlerts(l []*memAlert) {
	slices.SortFunc(l, func(a, b *memAlert) int {
		if c := a.d.CreatedAt.Compare(b.d.CreatedAt); c != 0 {
			return c
		}
		if a.d.ID < b.d.ID {
			return -1
		}
		if a.d.ID > b.d.ID {
			return 1
		}
		return 0
	})
}
