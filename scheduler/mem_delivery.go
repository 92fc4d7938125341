package scheduler

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"sync"
	"time"
)

// MemStreams is the in-memory reference implementation of [Sender] and, per
// instance and group through [MemStreams.Inbox], of [Inbox]. It follows the
// Redis Streams semantics the Redis adapter relies on (consumer groups,
// pending entries with delivery counts, idle times, exact trimming where
// Redis trims approximately) and is safe for concurrent use. Time comes
// from time.Now, so it runs under testing/synctest.
type MemStreams struct {
	mu        sync.Mutex
	maxLen    int
	dlqMaxLen int
	streams   map[string]*memStream
}

// NewMemStreams returns empty streams whose inboxes keep at most maxLen
// entries and dead-letter queues dlqMaxLen (0 means [MemInboxMaxLen]).
func NewMemStreams(maxLen, dlqMaxLen int) *MemStreams {
	if maxLen <= 0 {
		maxLen = MemInboxMaxLen
	}
	if dlqMaxLen <= 0 {
		dlqMaxLen = MemInboxMaxLen
	}
	return &MemStreams{maxLen: maxLen, dlqMaxLen: dlqMaxLen, streams: map[string]*memStream{}}
}

type memEntry struct {
	seq    uint64
	id     string
	fields Fields
}

type memPending struct {
	id         string
	consumer   string
	delivered  time.Time
	deliveries int64
}

type memGroup struct {
	last    uint64
	pending map[uint64]*memPending
}

type memStream struct {
	seq     uint64
	lastMS  int64
	order   []uint64 // ascending; may hold deleted seqs
	entries map[uint64]*memEntry
	groups  map[string]*memGroup
	dlq     []DeadLetter
	dlqSeq  uint64
	wake    chan struct{}
}

func (s *MemStreams) stream(instanceID string) *memStream {
	st := s.streams[instanceID]
	if st == nil {
		st = &memStream{entries: map[uint64]*memEntry{}, groups: map[string]*memGroup{}, wake: make(chan struct{})}
		s.streams[instanceID] = st
	}
	return st
}

// Send implements [Sender].
func (s *MemStreams) Send(ctx context.Context, instanceID string, fields Fields) (string, error) {
	if len(fields) == 0 {
		return "", errors.New("scheduler: send: a message needs at least one field")
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stream(instanceID)
	if len(st.entries) >= s.maxLen {
		return "", fmt.Errorf("scheduler: send to %s: %d entries: %w", instanceID, len(st.entries), ErrInboxFull)
	}
	st.seq++
	ms := max(time.Now().UnixMilli(), st.lastMS)
	st.lastMS = ms
	e := &memEntry{seq: st.seq, id: strconv.FormatInt(ms, 10) + "-" + strconv.FormatUint(st.seq, 10), fields: copyFields(fields)}
	st.entries[e.seq] = e
	st.order = append(st.order, e.seq)
	close(st.wake)
	st.wake = make(chan struct{})
	return e.id, nil
}

func copyFields(f Fields) Fields { return slices.Clone(f) }

func (st *memStream) del(seq uint64) { delete(st.entries, seq) }

// compact drops deleted seqs from the front, and from everywhere when more
// than half are deleted.
func (st *memStream) compact() {
	i := 0
	for i < len(st.order) && st.entries[st.order[i]] == nil {
		i++
	}
	st.order = st.order[i:]
	if len(st.order) > 64 && len(st.entries) < len(st.order)/2 {
		o := st.order[:0]
		for _, q := range st.order {
			if st.entries[q] != nil {
				o = append(o, q)
			}
		}
		st.order = o
	}
}

func parseSeq(id string) (uint64, bool) {
	for i := 0; i < len(id); i++ {
		if id[i] == '-' {
			n, err := strconv.ParseUint(id[i+1:], 10, 64)
			return n, err == nil
		}
	}
	return 0, false
}

// Inbox returns the [Inbox] of instanceID read by group.
func (s *MemStreams) Inbox(instanceID, group string) *MemInbox {
	return &MemInbox{s: s, instance: instanceID, group: group}
}

// MemInbox is one instance's inbox for one group in a [MemStreams].
type MemInbox struct {
	s        *MemStreams
	instance string
	group    string
}

var _ Inbox = (*MemInbox)(nil)
var _ Sender = (*MemStreams)(nil)

// EnsureGroup implements [Inbox].
func (in *MemInbox) EnsureGroup(ctx context.Context) error {
	in.s.mu.Lock()
	defer in.s.mu.Unlock()
	st := in.s.stream(in.instance)
	if st.groups[in.group] == nil {
		st.groups[in.group] = &memGroup{pending: map[uint64]*memPending{}}
	}
	return nil
}

func (in *MemInbox) lockGroup() (*memStream, *memGroup, error) {
	in.s.mu.Lock()
	st := in.s.streams[in.instance]
	if st == nil || st.groups[in.group] == nil {
		in.s.mu.Unlock()
		return nil, nil, fmt.Errorf("inbox %s group %s: %w", in.instance, in.group, ErrNoGroup)
	}
	return st, st.groups[in.group], nil
}

// Read implements [Inbox].
func (in *MemInbox) Read(ctx context.Context, consumer string, count int, block time.Duration) ([]Message, error) {
	var timer *time.Timer
	for {
		st, g, err := in.lockGroup()
		if err != nil {
			return nil, err
		}
		var out []Message
		i := sort.Search(len(st.order), func(i int) bool { return st.order[i] > g.last })
		now := time.Now()
		for ; i < len(st.order) && len(out) < count; i++ {
			e := st.entries[st.order[i]]
			if e == nil {
				continue
			}
			g.last = e.seq
			g.pending[e.seq] = &memPending{id: e.id, consumer: consumer, delivered: now, deliveries: 1}
			out = append(out, Message{ID: e.id, Fields: copyFields(e.fields)})
		}
		wake := st.wake
		in.s.mu.Unlock()
		if len(out) > 0 || block <= 0 {
			return out, nil
		}
		if timer == nil {
			timer = time.NewTimer(block)
			defer timer.Stop()
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-timer.C:
			return nil, nil
		case <-wake:
		}
	}
}

// Ack implements [Inbox].
func (in *MemInbox) Ack(ctx context.Context, ids ...string) error {
	st, g, err := in.lockGroup()
	if err != nil {
		return err
	}
	defer in.s.mu.Unlock()
	for _, id := range ids {
		if seq, ok := parseSeq(id); ok {
			delete(g.pending, seq)
			st.del(seq)
		}
	}
	st.compact()
	return nil
}

func (g *memGroup) sortedPending() []uint64 {
	seqs := make([]uint64, 0, len(g.pending))
	for q := range g.pending {
		seqs = append(seqs, q)
	}
	sort.Slice(seqs, func(i, j int) bool { return seqs[i] < seqs[j] })
	return seqs
}

// Reclaim implements [Inbox].
func (in *MemInbox) Reclaim(ctx context.Context, consumer string, minIdle time.Duration, count int) ([]Message, []string, error) {
	st, g, err := in.lockGroup()
	if err != nil {
		return nil, nil, err
	}
	defer in.s.mu.Unlock()
	now := time.Now()
	var out []Message
	var deleted []string
	for _, q := range g.sortedPending() {
		if len(out) >= count {
			break
		}
		p := g.pending[q]
		if now.Sub(p.delivered) < minIdle {
			continue
		}
		e := st.entries[q]
		if e == nil {
			deleted = append(deleted, p.id)
			delete(g.pending, q)
			continue
		}
		p.consumer, p.delivered = consumer, now
		p.deliveries++
		out = append(out, Message{ID: e.id, Fields: copyFields(e.fields)})
	}
	return out, deleted, nil
}

// Pending implements [Inbox].
func (in *MemInbox) Pending(ctx context.Context) (int64, error) {
	_, g, err := in.lockGroup()
	if err != nil {
		return 0, err
	}
	defer in.s.mu.Unlock()
	return int64(len(g.pending)), nil
}

// PendingIdle implements [Inbox].
func (in *MemInbox) PendingIdle(ctx context.Context, minIdle time.Duration, count int) ([]PendingEntry, error) {
	_, g, err := in.lockGroup()
	if err != nil {
		return nil, err
	}
	defer in.s.mu.Unlock()
	now := time.Now()
	var out []PendingEntry
	for _, q := range g.sortedPending() {
		if len(out) >= count {
			break
		}
		p := g.pending[q]
		if idle := now.Sub(p.delivered); idle >= minIdle {
			out = append(out, PendingEntry{ID: p.id, Consumer: p.consumer, Idle: idle, Deliveries: p.deliveries})
		}
	}
	return out, nil
}

// DeadLetter implements [Inbox].
func (in *MemInbox) DeadLetter(ctx context.Context, consumer, id string, minIdle time.Duration, reason string) (DeadLetter, bool, error) {
	st, g, err := in.lockGroup()
	if err != nil {
		return DeadLetter{}, false, err
	}
	defer in.s.mu.Unlock()
	seq, ok := parseSeq(id)
	if !ok {
		return DeadLetter{}, false, fmt.Errorf("scheduler: dead-letter: bad entry id %q", id)
	}
	p := g.pending[seq]
	if p == nil || time.Since(p.delivered) < minIdle {
		return DeadLetter{}, false, nil
	}
	delete(g.pending, seq)
	e := st.entries[seq]
	if e == nil {
		return DeadLetter{}, false, nil
	}
	st.del(seq)
	st.compact()
	st.dlqSeq++
	dl := DeadLetter{
		ID:         strconv.FormatInt(time.Now().UnixMilli(), 10) + "-" + strconv.FormatUint(st.dlqSeq, 10),
		SourceID:   e.id,
		Deliveries: p.deliveries,
		Reason:     reason,
		Fields:     copyFields(e.fields),
	}
	st.dlq = append(st.dlq, dl)
	if over := len(st.dlq) - in.s.dlqMaxLen; over > 0 {
		st.dlq = append([]DeadLetter(nil), st.dlq[over:]...)
	}
	return dl, true, nil
}

// DeadLetters implements [Inbox].
func (in *MemInbox) DeadLetters(ctx context.Context, count int) ([]DeadLetter, error) {
	in.s.mu.Lock()
	defer in.s.mu.Unlock()
	st := in.s.streams[in.instance]
	if st == nil {
		return nil, nil
	}
	n := min(count, len(st.dlq))
	out := make([]DeadLetter, n)
	for i := range n {
		out[i] = st.dlq[i]
		out[i].Fields = copyFields(st.dlq[i].Fields)
	}
	return out, nil
}

// Len implements [Inbox].
func (in *MemInbox) Len(ctx context.Context) (int64, error) {
	in.s.mu.Lock()
	defer in.s.mu.Unlock()
	if st := in.s.streams[in.instance]; st != nil {
		return int64(len(st.entries)), nil
	}
	return 0, nil
}

var _ DeadLetterAdmin = (*MemInbox)(nil)

// dlqIndex returns the index of the dead letter id, or -1. The caller
// holds the streams' lock.
func (st *memStream) dlqIndex(id string) int {
	for i, dl := range st.dlq {
		if dl.ID == id {
			return i
		}
	}
	return -1
}

// RequeueDeadLetter implements [DeadLetterAdmin].
func (in *MemInbox) RequeueDeadLetter(ctx context.Context, id string) (string, bool, error) {
	if err := ctx.Err(); err != nil {
		return "", false, err
	}
	in.s.mu.Lock()
	defer in.s.mu.Unlock()
	st := in.s.streams[in.instance]
	if st == nil {
		return "", false, nil
	}
	i := st.dlqIndex(id)
	if i < 0 {
		return "", false, nil
	}
	if len(st.entries) >= in.s.maxLen {
		return "", false, fmt.Errorf("scheduler: requeue to %s: %d entries: %w", in.instance, len(st.entries), ErrInboxFull)
	}
	fields := st.dlq[i].Fields
	if len(fields) == 0 {
		fields = Fields{{Name: DLQFieldSourceID, Value: st.dlq[i].SourceID}}
	}
	st.seq++
	ms := max(time.Now().UnixMilli(), st.lastMS)
	st.lastMS = ms
	e := &memEntry{seq: st.seq, id: strconv.FormatInt(ms, 10) + "-" + strconv.FormatUint(st.seq, 10), fields: copyFields(fields)}
	st.entries[e.seq] = e
	st.order = append(st.order, e.seq)
	st.dlq = slices.Delete(st.dlq, i, i+1)
	close(st.wake)
	st.wake = make(chan struct{})
	return e.id, true, nil
}

// DeleteDeadLetter implements [DeadLetterAdmin].
func (in *MemInbox) DeleteDeadLetter(ctx context.Context, id string) (bool, error) {
	in.s.mu.Lock()
	defer in.s.mu.Unlock()
	st := in.s.streams[in.instance]
	if st == nil {
		return false, nil
	}
	i := st.dlqIndex(id)
	if i < 0 {
		return false, nil
	}
	st.dlq = slices.Delete(st.dlq, i, i+1)
	return true, nil
}

// DeadLetterLen implements [DeadLetterAdmin].
func (in *MemInbox) DeadLetterLen(ctx context.Context) (int64, error) {
	in.s.mu.Lock()
	defer in.s.mu.Unlock()
	if st := in.s.streams[in.instance]; st != nil {
		return int64(len(st.dlq)), nil
	}
	return 0, nil
}
