package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"
)

// Field is one field of an inbox entry: a name and its value.
type Field struct {
	Name  string
	Value string
}

// Fields are the fields of an inbox entry in the order they are stored,
// as a Redis stream entry keeps them. A message is written and read as a
// list, not a map, so that sending and receiving one builds no map.
type Fields []Field

// Get returns the value of the last field named name (a later field
// overrides an earlier one of the same name, as in [Fields.Map]), or ""
// when there is none.
func (f Fields) Get(name string) string {
	for i := len(f) - 1; i >= 0; i-- {
		if f[i].Name == name {
			return f[i].Value
		}
	}
	return ""
}

// Map returns the fields as a map; of fields sharing a name, the last
// one wins.
func (f Fields) Map() map[string]string {
	m := make(map[string]string, len(f))
	for _, fv := range f {
		m[fv.Name] = fv.Value
	}
	return m
}

// Message is one inbox entry: its stream id and its fields.
type Message struct {
	ID     string // the stream entry id, such as "1700000000000-0"
	Fields Fields // the entry's fields, in their stored order
	// Redelivered is set on an entry taken over from another consumer
	// ([Inbox.Reclaim]) or from a dead instance's inbox: it may have
	// waited long, and what it says may be out of date.
	Redelivered bool
}

// DeadLetter is one entry of the dead-letter queue
// {prefix}:streams:{instance:<instance_id>}:dlq: the original fields of an
// inbox entry plus where it came from, how often it was delivered and why it
// was given up on.
type DeadLetter struct {
	ID         string // id in the dead-letter stream
	SourceID   string // id it had in the inbox
	Deliveries int64  // delivery count when it was moved
	Reason     string // why it was moved
	Fields     Fields // the original fields, in their order
}

// Field names that a dead-letter entry adds after the original fields.
const (
	DLQFieldSourceID   = "dlq_source_id"
	DLQFieldDeliveries = "dlq_delivery_count"
	DLQFieldReason     = "dlq_reason"
)

// Reasons recorded in [DeadLetter.Reason] by the [Deliverer].
const (
	ReasonMaxDeliveries = "max_deliveries_exceeded" // delivered more than Inbox.MaxDeliveries times
	ReasonMalformed     = "malformed"               // prefix: the handler returned ErrMalformed
	ReasonPanic         = "panic"                   // prefix: the handler panicked
)

// PendingEntry is an entry delivered and not yet acknowledged.
type PendingEntry struct {
	ID         string        // the entry id
	Consumer   string        // the consumer holding it
	Idle       time.Duration // time since it was last delivered
	Deliveries int64         // how often it was delivered
}

// ErrNoGroup is returned by [Inbox] methods when the consumer group (or the
// stream) does not exist, as after a server restart; the [Deliverer]
// answers with [Inbox.EnsureGroup].
var ErrNoGroup = errors.New("consumer group does not exist")

// ErrMalformed marks a message that can never be handled. A [Handler]
// returns an error wrapping it, and the [Deliverer] moves the message to the
// dead-letter queue at once, with the error as the reason, instead of
// delivering it again.
var ErrMalformed = errors.New("malformed message")

// ErrInboxFull: the inbox holds its bound of entries already. Entries
// stay in an inbox until they are handled (or dead-lettered), so a full
// inbox belongs to an instance that is down or far behind; the message is
// refused rather than an unhandled one trimmed away.
var ErrInboxFull = errors.New("inbox full")

// Sender appends messages to an instance's inbox: the one way instances
// talk to each other. A message sent is kept until the instance's consumers
// handle it (or dead-letter it).
type Sender interface {
	// Send appends fields (at least one), in their order, to instanceID's
	// inbox and returns the new entry's id. An inbox holding its bound of
	// entries refuses it with [ErrInboxFull]: nothing sent is ever trimmed
	// unhandled. Send keeps no reference to fields once it returns, so the
	// caller may reuse them.
	Send(ctx context.Context, instanceID string, fields Fields) (string, error)
}

// Inbox is the consumer side of one instance's inbox for one consumer
// group: at-least-once delivery. An entry read by a consumer stays pending
// with it until acknowledged; an entry left pending by a consumer that
// died is taken over by another one; an entry that keeps failing moves to
// the inbox's dead-letter queue exactly once.
type Inbox interface {
	// EnsureGroup creates the group (and the stream) if missing.
	EnsureGroup(ctx context.Context) error
	// Read returns up to count new entries for consumer, pending with it
	// from now on, waiting at most block for one. It returns no entries and
	// no error when none arrived.
	Read(ctx context.Context, consumer string, count int, block time.Duration) ([]Message, error)
	// Ack acknowledges handled entries: they leave the inbox.
	Ack(ctx context.Context, ids ...string) error
	// Reclaim hands consumer up to count entries pending with any consumer
	// for at least minIdle (the consumer is taken for dead). Entries that were pending but are
	// deleted from the stream are dropped from the pending list and their
	// ids returned in deleted, so that the loss is reported, not silent.
	Reclaim(ctx context.Context, consumer string, minIdle time.Duration, count int) (msgs []Message, deleted []string, err error)
	// Pending returns the number of entries delivered and not yet acked.
	Pending(ctx context.Context) (int64, error)
	// PendingIdle lists up to count pending entries idle at least minIdle,
	// oldest first, with their delivery counts.
	PendingIdle(ctx context.Context, minIdle time.Duration, count int) ([]PendingEntry, error)
	// DeadLetter moves entry id to the dead-letter queue if it is still
	// pending and idle at least minIdle: it claims it for consumer, appends
	// its fields, source id, delivery count and reason to the dead-letter
	// queue (which keeps about its bound of the newest) and acks it, all at
	// once. It
	// returns the new dead letter and true, or false when the entry was not
	// pending (already moved or acked), so a message is moved exactly once.
	DeadLetter(ctx context.Context, consumer, id string, minIdle time.Duration, reason string) (DeadLetter, bool, error)
	// Len returns the number of entries in the inbox, handled or not.
	Len(ctx context.Context) (int64, error)
	// DeadLetters returns up to count entries of the DLQ, oldest first.
	DeadLetters(ctx context.Context, count int) ([]DeadLetter, error)
}

// Handler handles one inbox message. Returning nil acks it; an error leaves
// it pending, to be delivered again after Inbox.ClaimMinIdle, or to
// the dead-letter queue once delivered more than Inbox.MaxDeliveries times;
// an error wrapping [ErrMalformed] (or a panic) sends it to the dead-letter
// queue at once, or, when Inbox.NoDeadLetters is set, drops it with an error log.
type Handler func(ctx context.Context, m Message) error

// Deliverer consumes one inbox: it reads new entries with the blocking
// [Inbox.Read], runs the handler, acks what succeeded (gathered for up to
// 100 ms, or a quarter of Inbox.ClaimMinIdle when that is shorter, or
// until Inbox.Count entries are handled, then one call),
// takes over entries idle with dead consumers with [Inbox.Reclaim], and
// every Inbox.ScanInterval moves entries delivered too often to the
// dead-letter queue and reports the pending count. Delivery is at least
// once: a handler must tolerate seeing a message again.
//
// An entry is dead-lettered once it was delivered more than
// Inbox.MaxDeliveries times and has been idle for Inbox.DeadMinIdle (found by
// the periodic scan) or for Inbox.ClaimMinIdle (checked just before
// idle entries are taken over, so that a poison message is not handed to a
// handler again when the claim idle time is the shorter one).
type Deliverer struct {
	in       Inbox
	h        Handler
	consumer string
	count    int
	block    time.Duration
	claimIdl time.Duration
	dlqOn    bool
	dlqMax   int64
	dlqIdle  time.Duration
	dlqEvery time.Duration
	dlqCount int
	hooks    Hooks
	log      *slog.Logger
}

// NewDeliverer returns a deliverer of in that names itself consumer in the
// group (use one name per process, such as the instance id and a counter;
// a restarted process with the same name takes its pending entries back).
func NewDeliverer(in Inbox, consumer string, h Handler, cfg Config) (*Deliverer, error) {
	if in == nil || h == nil {
		return nil, errors.New("scheduler: NewDeliverer: nil Inbox or Handler")
	}
	if consumer == "" {
		return nil, errors.New("scheduler: NewDeliverer: empty consumer name")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	in2 := cfg.Inbox
	return &Deliverer{
		in: in, h: h, consumer: consumer,
		count: in2.Count, block: in2.Block, claimIdl: in2.ClaimMinIdle,
		dlqOn: !in2.NoDeadLetters, dlqMax: in2.MaxDeliveries, dlqIdle: in2.DeadMinIdle,
		dlqEvery: in2.ScanInterval, dlqCount: in2.ScanCount,
		hooks: cfg.Hooks, log: logger(cfg.Logger),
	}, nil
}

// Run consumes until ctx ends and returns nil; it returns within
// Inbox.Block of ctx ending. Errors of the store are logged and retried
// with a growing pause (up to 2 s); a missing group is created again, so a
// restarted server needs no restart of the deliverer. Run may run in
// several goroutines or processes with different consumer names.
func (d *Deliverer) Run(ctx context.Context) error {
	pause := time.Duration(0)
	wait := func(err error, what string) bool {
		if ctx.Err() != nil {
			return false
		}
		if errors.Is(err, ErrNoGroup) {
			if gerr := d.in.EnsureGroup(ctx); gerr == nil {
				return true
			}
		}
		pause = min(max(2*pause, 50*time.Millisecond), 2*time.Second)
		d.log.Warn("scheduler: inbox "+what, "consumer", d.consumer, "err", err, "retry_in", pause)
		t := time.NewTimer(pause)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
			return true
		}
	}
	for {
		if err := d.in.EnsureGroup(ctx); err == nil {
			break
		} else if !wait(err, "create group") {
			return nil
		}
	}
	now := time.Now()
	nextClaim := now.Add(d.claimIdl / 2)
	nextScan := now.Add(d.dlqEvery)
	acks := &acker{d: d}
	// What was handled is acknowledged also when Run returns.
	defer acks.flush(context.WithoutCancel(ctx))
	for ctx.Err() == nil {
		if now = time.Now(); !now.Before(nextClaim) {
			nextClaim = now.Add(max(d.claimIdl/2, time.Millisecond))
			// The entries handled are acknowledged first, so that none
			// of them is taken over again.
			acks.flush(ctx)
			// Entries delivered too often go to the dead-letter queue
			// rather than back to a handler.
			if d.dlqOn {
				if err := d.deadLetterOver(ctx, d.claimIdl); err != nil {
					wait(err, "dead-letter")
				}
			}
			for {
				msgs, deleted, err := d.in.Reclaim(ctx, d.consumer, d.claimIdl, d.count)
				d.lost(deleted)
				if err != nil {
					wait(err, "reclaim")
					break
				}
				if len(msgs) == 0 {
					break
				}
				for i := range msgs {
					msgs[i].Redelivered = true
				}
				d.handle(ctx, msgs, acks)
				if len(msgs) < d.count {
					break
				}
			}
		}
		if now = time.Now(); !now.Before(nextScan) {
			nextScan = now.Add(d.dlqEvery)
			if err := d.Scan(ctx); err != nil {
				wait(err, "dead-letter scan")
			}
		}
		if acks.due(time.Now()) {
			acks.flush(ctx)
		}
		block := min(d.block, max(time.Until(nextClaim), time.Millisecond), max(time.Until(nextScan), time.Millisecond))
		if len(acks.ids) > 0 {
			block = min(block, max(time.Until(acks.by), time.Millisecond))
		}
		msgs, err := d.in.Read(ctx, d.consumer, d.count, block)
		if err != nil {
			if !wait(err, "read") {
				return nil
			}
			continue
		}
		pause = 0
		d.handle(ctx, msgs, acks)
	}
	return nil
}

// ackDelay is how long the ids of handled entries wait to be acknowledged
// together (a quarter of Inbox.ClaimMinIdle when that is shorter): an
// inbox that receives a steady stream of messages costs one XACK and one
// XDEL per ackDelay rather than per message.
const ackDelay = 100 * time.Millisecond

// acker gathers the ids of the entries one Run handled until they are
// acknowledged in one call: when Inbox.Count of them are gathered, when
// the first of them has waited ackDelay, before idle entries are taken
// over, and when Run returns.
type acker struct {
	d   *Deliverer
	ids []string
	by  time.Time // when the gathered ids are due
}

// add gathers id, and acknowledges what is gathered when it is enough.
func (a *acker) add(ctx context.Context, id string) {
	if len(a.ids) == 0 {
		a.by = time.Now().Add(min(ackDelay, a.d.claimIdl/4))
	}
	a.ids = append(a.ids, id)
	if len(a.ids) >= a.d.count {
		a.flush(ctx)
	}
}

// due reports whether the gathered ids are due at now.
func (a *acker) due(now time.Time) bool { return len(a.ids) > 0 && !now.Before(a.by) }

// flush acknowledges the gathered ids. On an error they are dropped, with
// a warning: the entries stay pending and are delivered again after
// Inbox.ClaimMinIdle, as a handler's failure would leave them. An error
// makes no pause of its own: the store's errors pause the reads, and an
// ack that waited as well would double the pause after an outage.
func (a *acker) flush(ctx context.Context) {
	if len(a.ids) == 0 {
		return
	}
	if err := a.d.in.Ack(context.WithoutCancel(ctx), a.ids...); err != nil && ctx.Err() == nil {
		a.d.log.Warn("scheduler: inbox ack", "consumer", a.d.consumer, "entries", len(a.ids), "err", err)
	}
	clear(a.ids)
	a.ids = a.ids[:0]
}

// handle runs the handler on each message and gathers the successes in
// acks.
func (d *Deliverer) handle(ctx context.Context, msgs []Message, acks *acker) {
	for _, m := range msgs {
		start := time.Now()
		err := d.call(ctx, m)
		if d.hooks.DeliveryHandled != nil {
			d.hooks.DeliveryHandled(m, err, time.Since(start))
		}
		switch {
		case err == nil:
			acks.add(ctx, m.ID)
		case (errors.Is(err, ErrMalformed) || errors.Is(err, errPanic)) && !d.dlqOn:
			d.log.Error("scheduler: dropping a message that cannot be handled (dead letters are off)", "id", m.ID, "err", err)
			acks.add(ctx, m.ID)
		case errors.Is(err, ErrMalformed), errors.Is(err, errPanic):
			if _, derr := d.deadLetter(ctx, m.ID, 0, err.Error()); derr != nil && ctx.Err() == nil {
				d.log.Warn("scheduler: dead-letter", "id", m.ID, "err", derr)
			}
		default:
			d.log.Debug("scheduler: handler failed; the entry stays pending", "id", m.ID, "err", err)
		}
	}
}

var errPanic = errors.New(ReasonPanic)

// lost reports pending entries found deleted.
func (d *Deliverer) lost(ids []string) {
	if len(ids) == 0 {
		return
	}
	d.log.Error("scheduler: pending inbox entries were deleted before they were handled", "count", len(ids), "ids", ids)
	if d.hooks.Lost != nil {
		d.hooks.Lost(ids)
	}
}

func (d *Deliverer) call(ctx context.Context, m Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%w: %v", errPanic, r)
		}
	}()
	return d.h(ctx, m)
}

// Scan runs one dead-letter round (unless Inbox.NoDeadLetters) and reports the
// pending count to Hooks.InboxPending (when set). Run calls it every
// Inbox.ScanInterval.
func (d *Deliverer) Scan(ctx context.Context) error {
	if d.dlqOn {
		if err := d.deadLetterOver(ctx, d.dlqIdle); err != nil {
			return err
		}
	}
	if d.hooks.InboxPending != nil {
		n, err := d.in.Pending(ctx)
		if err != nil {
			return err
		}
		d.hooks.InboxPending(n)
	}
	return nil
}

// deadLetterOver moves the pending entries idle at least minIdle and
// delivered more than Inbox.MaxDeliveries times (one page of
// Inbox.ScanCount) to the dead-letter queue.
func (d *Deliverer) deadLetterOver(ctx context.Context, minIdle time.Duration) error {
	entries, err := d.in.PendingIdle(ctx, minIdle, d.dlqCount)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Deliveries <= d.dlqMax {
			continue
		}
		if _, err := d.deadLetter(ctx, e.ID, minIdle, ReasonMaxDeliveries); err != nil {
			return err
		}
	}
	return nil
}

func (d *Deliverer) deadLetter(ctx context.Context, id string, minIdle time.Duration, reason string) (bool, error) {
	dl, ok, err := d.in.DeadLetter(ctx, d.consumer, id, minIdle, reason)
	if err != nil {
		return false, err
	}
	if ok {
		d.log.Warn("scheduler: moved to the dead-letter queue", "id", id, "reason", reason, "deliveries", dl.Deliveries)
		if d.hooks.DLQMoved != nil {
			d.hooks.DLQMoved(dl)
		}
	}
	return ok, nil
}
