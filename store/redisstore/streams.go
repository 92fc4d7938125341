package redisstore

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// DefaultInboxMaxLen bounds an inbox and a dead-letter stream when no bound
// is configured.
const DefaultInboxMaxLen = 10000

// StreamsConfig configures [Streams].
type StreamsConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// MaxLen bounds each inbox: a message to an inbox
	// holding MaxLen entries is refused with [scheduler.ErrInboxFull].
	// A sender reads an inbox's length with the messages it appends
	// (XLEN and XADD in one script) whenever its last reading is older
	// than 100 ms or showed the inbox a quarter full; between readings it
	// appends with a bare XADD. An inbox can therefore exceed MaxLen by
	// what senders append within 100 ms while it is under a quarter
	// full, and is never trimmed: entries not yet handled are kept.
	// Default (0): [DefaultInboxMaxLen].
	MaxLen int64
	// DLQMaxLen trims each dead-letter stream with MAXLEN ~.
	// Default (0): [DefaultInboxMaxLen].
	DLQMaxLen int64
	// OpHook observes every Redis operation ("xadd", "xgroup_create",
	// "xreadgroup", "xack_xdel", "xautoclaim", "xpending",
	// "xpending_idle", "dlq_move", "dlq_read", "xlen", and for an
	// operator "dlq_requeue", "dlq_delete", "dlq_len"). Default (nil): none.
	OpHook OpHook
}

// Streams is the Redis [scheduler.Sender]; [Streams.Inbox] gives the
// [scheduler.Inbox] of one instance and group. An instance's inbox is the
// stream {prefix}:streams:{instance:<instance_id>}:inbox and its
// dead-letter queue {prefix}:streams:{instance:<instance_id>}:dlq; the
// shared hash tag puts both in one cluster slot, so the dead-letter move is
// one Lua script over the two keys.
type Streams struct {
	c      rueidis.Client
	keys   Keys
	maxLen string
	maxN   int64 // MaxLen
	// lenEvery is how old a sender's reading of its inbox's length may
	// be for it to append with a bare XADD (see [StreamsConfig.MaxLen]).
	lenEvery time.Duration
	dlqMax   string
	hook     OpHook
	// senders maps each instance this process sent to lately to the
	// sender of its inbox. The map is copied on write (instances are
	// few), so a lookup takes no lock and, unlike a sync.Map keyed by
	// string, allocates nothing; a sender unused for senderIdle is
	// dropped when the next one is made, so the map does not keep every
	// instance ever sent to (instance ids made afresh at each start).
	senders   atomic.Pointer[map[string]*sender]
	sendersMu sync.Mutex
}

var _ scheduler.Sender = (*Streams)(nil)

// NewStreams returns the streams on c.
func NewStreams(c rueidis.Client, cfg StreamsConfig) (*Streams, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewStreams: nil client")
	}
	if cfg.MaxLen < 0 {
		return nil, fmt.Errorf("redisstore: StreamsConfig.MaxLen: %d is negative", cfg.MaxLen)
	}
	if cfg.DLQMaxLen < 0 {
		return nil, fmt.Errorf("redisstore: StreamsConfig.DLQMaxLen: %d is negative", cfg.DLQMaxLen)
	}
	if cfg.MaxLen == 0 {
		cfg.MaxLen = DefaultInboxMaxLen
	}
	if cfg.DLQMaxLen == 0 {
		cfg.DLQMaxLen = DefaultInboxMaxLen
	}
	return &Streams{
		c: c, keys: NewKeys(cfg.Prefix), hook: cfg.OpHook,
		maxLen: strconv.FormatInt(cfg.MaxLen, 10), maxN: cfg.MaxLen, lenEvery: 100 * time.Millisecond, dlqMax: strconv.FormatInt(cfg.DLQMaxLen, 10),
	}, nil
}

// sendScript appends messages to the inbox KEYS[1], each unless the inbox
// holds ARGV[1] entries by then. ARGV[2:] are the messages, each as its
// count of field-value arguments followed by them. It returns one reply per
// message (the new id, or false when the inbox was full), then the
// inbox's length.
var sendScript = rueidis.NewLuaScript(`
local n, max, out, i = redis.call('XLEN', KEYS[1]), tonumber(ARGV[1]), {}, 2
while i <= #ARGV do
  local c = tonumber(ARGV[i])
  if n >= max then
    out[#out + 1] = false
  else
    out[#out + 1] = redis.call('XADD', KEYS[1], '*', unpack(ARGV, i + 1, i + c))
    n = n + 1
  end
  i = i + 1 + c
end
out[#out + 1] = n
return out`)

// maxSendBatch bounds the messages one call of the send script appends.
const maxSendBatch = 64

// sender gathers the messages sent to one inbox while a call of the send
// script for that inbox is under way, and sends them in the next call:
// messages sent one at a time go at once, concurrent ones together.
type sender struct {
	keys  []string     // the inbox, as the script's KEYS
	used  atomic.Int64 // when a Send last began, Unix nanoseconds
	mu    sync.Mutex
	busy  bool
	queue []*sendReq
	// args is the buffer of the script's arguments, used by the caller
	// that set busy until it clears it; so are the three below.
	args []string
	// The inbox's length as the send script last read it (after its
	// appends), when (Unix nanoseconds), and the messages appended
	// since with a bare XADD.
	seen, seenAt, since int64
}

// sendReq is one message waiting for its turn.
type sendReq struct {
	fields scheduler.Fields
	id     string
	err    error
	batch  []*sendReq // set on the request that sends the next batch
	// done gets one signal when id and err are set, or batch is: a
	// request is in exactly one batch, so it is signalled once, and
	// goes back to sendReqs for another Send.
	done chan struct{}
}

// sendReqs recycles the requests (and their channels) of Send.
var sendReqs = sync.Pool{New: func() any { return &sendReq{done: make(chan struct{}, 1)} }}

// Send implements [scheduler.Sender]: XLEN and XADD in one script, so an
// inbox holding MaxLen entries refuses the message with
// [scheduler.ErrInboxFull] instead of trimming entries not yet handled;
// while the sender's last reading of the length is fresh and low, a bare
// XADD (see [StreamsConfig.MaxLen]). Messages sent to one inbox
// concurrently share one call.
// The fields are written in their order.
func (s *Streams) Send(ctx context.Context, instanceID string, fields scheduler.Fields) (string, error) {
	if len(fields) == 0 {
		return "", errors.New("redisstore: send: a message needs at least one field")
	}
	q := s.sender(instanceID)
	q.used.Store(time.Now().UnixNano())
	r := sendReqs.Get().(*sendReq)
	r.fields = fields
	defer func() {
		*r = sendReq{done: r.done}
		sendReqs.Put(r)
	}()
	var solo [1]*sendReq
	solo[0] = r
	batch := solo[:]
	q.mu.Lock()
	if q.busy {
		q.queue = append(q.queue, r)
		q.mu.Unlock()
		<-r.done
		if r.batch == nil {
			return r.id, r.err
		}
		batch = r.batch
		// The batch's own callers may have gone: its messages are sent
		// regardless, as a single Send would have sent them.
		ctx = context.WithoutCancel(ctx)
	} else {
		q.busy = true
		q.mu.Unlock()
	}
	s.sendBatch(ctx, instanceID, q, batch)
	// The requests queued meanwhile go next, led by the first of them.
	q.mu.Lock()
	if len(q.queue) == 0 {
		q.busy = false
	} else {
		n := min(len(q.queue), maxSendBatch)
		next := q.queue[:n:n]
		q.queue = q.queue[n:]
		next[0].batch = next
		next[0].done <- struct{}{}
	}
	q.mu.Unlock()
	for _, o := range batch[1:] {
		o.done <- struct{}{}
	}
	return r.id, r.err
}

// sender returns the sender of instanceID's inbox, made on first use.
func (s *Streams) sender(instanceID string) *sender {
	if m := s.senders.Load(); m != nil {
		if q := (*m)[instanceID]; q != nil {
			return q
		}
	}
	s.sendersMu.Lock()
	defer s.sendersMu.Unlock()
	old := s.senders.Load()
	if old != nil {
		if q := (*old)[instanceID]; q != nil {
			return q
		}
	}
	m := make(map[string]*sender, 1)
	if old != nil {
		maps.Copy(m, *old)
	}
	idle := time.Now().Add(-senderIdle).UnixNano()
	for id, q := range m {
		q.mu.Lock()
		unused := !q.busy && len(q.queue) == 0 && q.used.Load() < idle
		q.mu.Unlock()
		if unused {
			// A Send that found it before goes on with it alone; the next
			// one makes a new sender.
			delete(m, id)
		}
	}
	q := &sender{keys: []string{s.keys.Inbox(instanceID)}}
	q.used.Store(time.Now().UnixNano())
	m[instanceID] = q
	s.senders.Store(&m)
	return q
}

// sendBatch appends the messages of batch to the inbox of q (instanceID's)
// in one call of the send script, and sets each one's id or error. The
// caller holds q.busy, and with it q.args.
func (s *Streams) sendBatch(ctx context.Context, instanceID string, q *sender, batch []*sendReq) {
	now := time.Now().UnixNano()
	if now-q.seenAt < int64(s.lenEvery) && 4*(q.seen+q.since+int64(len(batch))) <= s.maxN {
		s.sendBare(ctx, instanceID, q, batch)
		return
	}
	args := append(q.args[:0], s.maxLen)
	for _, r := range batch {
		args = append(args, strconv.Itoa(2*len(r.fields)))
		for _, f := range r.fields {
			args = append(args, f.Name, f.Value)
		}
		r.fields = nil // the caller's, which it may reuse once Send returns
	}
	start := time.Now()
	ids, err := sendScript.Exec(ctx, s.c, q.keys, args).ToArray()
	// The command holds its own copy of the arguments: the buffer is
	// kept for the next batch, without the strings it points to.
	clear(args)
	if cap(args) <= maxSendArgs {
		q.args = args[:0]
	}
	if err == nil && len(ids) != len(batch)+1 {
		err = fmt.Errorf("%d replies for %d messages", len(ids), len(batch))
	}
	if err == nil {
		if n, lerr := ids[len(batch)].AsInt64(); lerr == nil {
			q.seen, q.seenAt, q.since = n, now, 0
		}
	}
	s.hook.observe("xadd", start, err)
	for i, r := range batch {
		if err != nil {
			r.err = fmt.Errorf("redisstore: send to %s: %w", instanceID, err)
			continue
		}
		r.id, r.err = ids[i].ToString()
		switch {
		case isNil(r.err):
			r.err = fmt.Errorf("redisstore: send to %s: %w", instanceID, scheduler.ErrInboxFull)
		case r.err != nil:
			r.err = fmt.Errorf("redisstore: send to %s: %w", instanceID, r.err)
		}
	}
}

// sendBare appends the messages of batch to the inbox of q with one XADD
// each, in one round trip, and sets each one's id or error. The caller
// holds q.busy.
func (s *Streams) sendBare(ctx context.Context, instanceID string, q *sender, batch []*sendReq) {
	cmds := make(rueidis.Commands, len(batch))
	for i, r := range batch {
		b := s.c.B().Xadd().Key(q.keys[0]).Id("*").FieldValue()
		for _, f := range r.fields {
			b = b.FieldValue(f.Name, f.Value)
		}
		cmds[i] = b.Build()
		r.fields = nil
	}
	start := time.Now()
	res := s.c.DoMulti(ctx, cmds...)
	var first error
	for i, r := range batch {
		r.id, r.err = res[i].ToString()
		if r.err != nil {
			first = cmp.Or(first, r.err)
			r.err = fmt.Errorf("redisstore: send to %s: %w", instanceID, r.err)
		} else {
			q.since++
		}
	}
	s.hook.observe("xadd", start, first)
}

// senderIdle is how long a sender unused is kept.
const senderIdle = 10 * time.Minute

// maxSendArgs bounds the argument buffer a sender keeps between batches
// (a batch of large messages uses a new one).
const maxSendArgs = 4096

// Inbox returns the inbox of instanceID as read by group.
func (s *Streams) Inbox(instanceID, group string) *Inbox {
	return &Inbox{s: s, key: s.keys.Inbox(instanceID), dlq: s.keys.DLQ(instanceID), group: group}
}

// Inbox is the Redis [scheduler.Inbox] of one instance and group. Read
// uses XREADGROUP with BLOCK, which rueidis sends on a dedicated connection
// of its blocking pool, so a waiting consumer never stalls the pipelined
// commands of the others; keep the block shorter than any context deadline
// passed to Read.
type Inbox struct {
	s     *Streams
	key   string
	dlq   string
	group string
}

var _ scheduler.Inbox = (*Inbox)(nil)

// streamErr translates NOGROUP into [scheduler.ErrNoGroup].
func streamErr(what string, err error) error {
	if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "NOGROUP") {
		return fmt.Errorf("redisstore: %s: %w", what, scheduler.ErrNoGroup)
	}
	return fmt.Errorf("redisstore: %s: %w", what, err)
}

// EnsureGroup implements [scheduler.Inbox]: XGROUP CREATE ... 0 MKSTREAM,
// so entries sent before the group existed are delivered too.
func (in *Inbox) EnsureGroup(ctx context.Context) error {
	start := time.Now()
	err := in.s.c.Do(ctx, in.s.c.B().XgroupCreate().Key(in.key).Group(in.group).Id("0").Mkstream().Build()).Error()
	if re, ok := rueidis.IsRedisErr(err); ok && re.IsBusyGroup() {
		err = nil
	}
	in.s.hook.observe("xgroup_create", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: create group %s on %s: %w", in.group, in.key, err)
	}
	return nil
}

// Read implements [scheduler.Inbox] with XREADGROUP ... COUNT ... BLOCK ... STREAMS key >.
func (in *Inbox) Read(ctx context.Context, consumer string, count int, block time.Duration) ([]scheduler.Message, error) {
	b := in.s.c.B().Xreadgroup().Group(in.group, consumer).Count(int64(max(count, 1)))
	var cmd rueidis.Completed
	if block > 0 {
		cmd = b.Block(max(block.Milliseconds(), 1)).Streams().Key(in.key).Id(">").Build()
	} else {
		cmd = b.Streams().Key(in.key).Id(">").Build()
	}
	start := time.Now()
	res, err := in.s.c.Do(ctx, cmd).ToMessage()
	var msgs []scheduler.Message
	if err == nil {
		msgs, err = readReply(res, in.key)
	}
	in.s.hook.observe("xreadgroup", start, err)
	if isNil(err) {
		return nil, nil
	}
	if err != nil {
		return nil, streamErr("read "+in.key, err)
	}
	return msgs, nil
}

// readReply takes the entries of key out of an XREADGROUP reply (a map
// of stream to entries in RESP3, a list of pairs in RESP2) straight into
// messages, skipping entries deleted meanwhile.
func readReply(res rueidis.RedisMessage, key string) ([]scheduler.Message, error) {
	var entries rueidis.RedisMessage
	found := false
	if res.IsMap() {
		kv, err := res.AsMap()
		if err != nil {
			return nil, err
		}
		entries, found = kv[key]
	} else {
		streams, err := res.ToArray()
		if err != nil {
			return nil, err
		}
		for _, st := range streams {
			pair, err := st.ToArray()
			if err != nil {
				return nil, err
			}
			if len(pair) != 2 {
				return nil, fmt.Errorf("unexpected XREADGROUP stream of %d elements", len(pair))
			}
			if name, err := pair[0].ToString(); err == nil && name == key {
				entries, found = pair[1], true
			}
		}
	}
	if !found {
		return nil, nil
	}
	arr, err := entries.ToArray()
	if err != nil {
		return nil, err
	}
	out := make([]scheduler.Message, 0, len(arr))
	for i := range arr {
		e, err := arr[i].ToArray()
		if err != nil {
			return nil, err
		}
		if len(e) != 2 {
			return nil, fmt.Errorf("unexpected stream entry of %d elements", len(e))
		}
		id, err := e[0].ToString()
		if err != nil {
			return nil, err
		}
		fv, err := e[1].ToArray()
		if rueidis.IsRedisNil(err) {
			continue // deleted meanwhile
		}
		if err != nil {
			return nil, err
		}
		f := make(scheduler.Fields, len(fv)/2)
		for j := range f {
			if f[j].Name, err = fv[2*j].ToString(); err != nil {
				return nil, err
			}
			if f[j].Value, err = fv[2*j+1].ToString(); err != nil {
				return nil, err
			}
		}
		out = append(out, scheduler.Message{ID: id, Fields: f})
	}
	return out, nil
}

func toMessages(entries []rueidis.XRangeSlice) []scheduler.Message {
	out := make([]scheduler.Message, 0, len(entries))
	for _, e := range entries {
		if e.FieldValues == nil {
			continue // deleted meanwhile
		}
		out = append(out, scheduler.Message{ID: e.ID, Fields: toFields(e.FieldValues)})
	}
	return out
}

// toFields converts an entry's field-value pairs, keeping their order.
func toFields(fv []rueidis.XRangeFieldValue) scheduler.Fields {
	f := make(scheduler.Fields, len(fv))
	for i, p := range fv {
		f[i] = scheduler.Field{Name: p.Field, Value: p.Value}
	}
	return f
}

// Ack implements [scheduler.Inbox]: XACK and XDEL in one pipeline.
func (in *Inbox) Ack(ctx context.Context, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	start := time.Now()
	err := firstError(in.s.c.DoMulti(ctx,
		in.s.c.B().Xack().Key(in.key).Group(in.group).Id(ids...).Build(),
		in.s.c.B().Xdel().Key(in.key).Id(ids...).Build()))
	in.s.hook.observe("xack_xdel", start, err)
	if err != nil {
		return streamErr("ack "+in.key, err)
	}
	return nil
}

// Reclaim implements [scheduler.Inbox] with XAUTOCLAIM from the start of the
// pending list, following its cursor until count entries are claimed or
// the list is done.
func (in *Inbox) Reclaim(ctx context.Context, consumer string, minIdle time.Duration, count int) ([]scheduler.Message, []string, error) {
	idle := strconv.FormatInt(minIdle.Milliseconds(), 10)
	cursor := "0-0"
	var out []scheduler.Message
	var deleted []string
	for len(out) < count {
		start := time.Now()
		arr, err := in.s.c.Do(ctx, in.s.c.B().Xautoclaim().Key(in.key).Group(in.group).Consumer(consumer).
			MinIdleTime(idle).Start(cursor).Count(int64(count-len(out))).Build()).ToArray()
		var entries []rueidis.XRangeSlice
		if err == nil {
			if len(arr) < 2 {
				err = fmt.Errorf("unexpected XAUTOCLAIM reply of %d elements", len(arr))
			} else if cursor, err = arr[0].ToString(); err == nil {
				entries, err = arr[1].AsXRangeSlices()
			}
			if err == nil && len(arr) > 2 {
				// Redis 7 lists the pending ids it found deleted.
				var ids []string
				if ids, err = arr[2].AsStrSlice(); err == nil {
					deleted = append(deleted, ids...)
				}
			}
		}
		in.s.hook.observe("xautoclaim", start, err)
		if err != nil {
			return out, deleted, streamErr("reclaim "+in.key, err)
		}
		out = append(out, toMessages(entries)...)
		for _, e := range entries {
			if e.FieldValues == nil { // before Redis 7: a deleted entry comes as nil
				deleted = append(deleted, e.ID)
			}
		}
		if cursor == "0-0" {
			break
		}
	}
	return out, deleted, nil
}

// Pending implements [scheduler.Inbox] with the XPENDING summary: the
// source of the scheduler_phase2_inbox_pending gauge.
func (in *Inbox) Pending(ctx context.Context) (int64, error) {
	start := time.Now()
	arr, err := in.s.c.Do(ctx, in.s.c.B().Xpending().Key(in.key).Group(in.group).Build()).ToArray()
	var n int64
	if err == nil {
		if len(arr) == 0 {
			err = errors.New("empty XPENDING reply")
		} else {
			n, err = arr[0].AsInt64()
		}
	}
	in.s.hook.observe("xpending", start, err)
	if err != nil {
		return 0, streamErr("pending of "+in.key, err)
	}
	return n, nil
}

// PendingIdle implements [scheduler.Inbox] with the extended XPENDING form
// (IDLE min - + count).
func (in *Inbox) PendingIdle(ctx context.Context, minIdle time.Duration, count int) ([]scheduler.PendingEntry, error) {
	start := time.Now()
	arr, err := in.s.c.Do(ctx, in.s.c.B().Xpending().Key(in.key).Group(in.group).Idle(minIdle.Milliseconds()).
		Start("-").End("+").Count(int64(max(count, 1))).Build()).ToArray()
	var out []scheduler.PendingEntry
	for i := 0; err == nil && i < len(arr); i++ {
		var row []rueidis.RedisMessage
		if row, err = arr[i].ToArray(); err != nil {
			break
		}
		if len(row) != 4 {
			err = fmt.Errorf("unexpected XPENDING row of %d elements", len(row))
			break
		}
		var e scheduler.PendingEntry
		var idleMS int64
		if e.ID, err = row[0].ToString(); err != nil {
			break
		}
		if e.Consumer, err = row[1].ToString(); err != nil {
			break
		}
		if idleMS, err = row[2].AsInt64(); err != nil {
			break
		}
		if e.Deliveries, err = row[3].AsInt64(); err != nil {
			break
		}
		e.Idle = time.Duration(idleMS) * time.Millisecond
		out = append(out, e)
	}
	in.s.hook.observe("xpending_idle", start, err)
	if err != nil {
		return nil, streamErr("pending entries of "+in.key, err)
	}
	return out, nil
}

// dlqMoveScript moves one pending entry from the inbox KEYS[1] to the
// dead-letter stream KEYS[2] (one slot: both carry {instance:<id>}).
// ARGV: group, consumer, id, min idle ms, reason, dlq maxlen. It returns
// nil when the entry is no longer pending or not idle long enough, else
// {dlq id, delivery count}. Being one script, concurrent scans of several
// consumers move an entry exactly once.
var dlqMoveScript = rueidis.NewLuaScript(`
local p = redis.call('XPENDING', KEYS[1], ARGV[1], 'IDLE', tonumber(ARGV[4]), ARGV[3], ARGV[3], 1)
if #p == 0 then return false end
local deliveries = p[1][4]
local c = redis.call('XCLAIM', KEYS[1], ARGV[1], ARGV[2], tonumber(ARGV[4]), ARGV[3])
if #c == 0 or not c[1] or type(c[1][2]) ~= 'table' then
  redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
  return false
end
local args = {KEYS[2], 'MAXLEN', '~', ARGV[6], '*'}
for _, v in ipairs(c[1][2]) do args[#args + 1] = v end
args[#args + 1] = '` + scheduler.DLQFieldSourceID + `'
args[#args + 1] = ARGV[3]
args[#args + 1] = '` + scheduler.DLQFieldDeliveries + `'
args[#args + 1] = tostring(deliveries)
args[#args + 1] = '` + scheduler.DLQFieldReason + `'
args[#args + 1] = ARGV[5]
local dlqid = redis.call('XADD', unpack(args))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[3])
redis.call('XDEL', KEYS[1], ARGV[3])
return {dlqid, deliveries}`)

// DeadLetter implements [scheduler.Inbox] with one script: XPENDING of the
// entry, XCLAIM with the idle minimum, XADD to the DLQ with MAXLEN ~, XACK
// and XDEL. Each move is reported to the OpHook as "dlq_move" (the source of
// scheduler_phase2_dlq_moved_total is [scheduler.Hooks].DLQMoved).
func (in *Inbox) DeadLetter(ctx context.Context, consumer, id string, minIdle time.Duration, reason string) (scheduler.DeadLetter, bool, error) {
	start := time.Now()
	arr, err := dlqMoveScript.Exec(ctx, in.s.c, []string{in.key, in.dlq},
		[]string{in.group, consumer, id, strconv.FormatInt(minIdle.Milliseconds(), 10), reason, in.s.dlqMax}).ToArray()
	in.s.hook.observe("dlq_move", start, err)
	if isNil(err) {
		return scheduler.DeadLetter{}, false, nil
	}
	if err != nil {
		return scheduler.DeadLetter{}, false, streamErr("dead-letter "+id+" of "+in.key, err)
	}
	if len(arr) != 2 {
		return scheduler.DeadLetter{}, false, fmt.Errorf("redisstore: dead-letter %s: unexpected reply of %d elements", id, len(arr))
	}
	dlqID, err := arr[0].ToString()
	if err != nil {
		return scheduler.DeadLetter{}, false, fmt.Errorf("redisstore: dead-letter %s: %w", id, err)
	}
	deliveries, err := arr[1].AsInt64()
	if err != nil {
		return scheduler.DeadLetter{}, false, fmt.Errorf("redisstore: dead-letter %s: %w", id, err)
	}
	// The fields are read back from the DLQ, which holds the only copy now.
	dl := scheduler.DeadLetter{ID: dlqID, SourceID: id, Deliveries: deliveries, Reason: reason}
	if got, rerr := in.readDLQ(ctx, dlqID, dlqID, 1); rerr == nil && len(got) == 1 {
		dl = got[0]
	}
	return dl, true, nil
}

// DeadLetters implements [scheduler.Inbox] with XRANGE on the DLQ.
func (in *Inbox) DeadLetters(ctx context.Context, count int) ([]scheduler.DeadLetter, error) {
	return in.readDLQ(ctx, "-", "+", count)
}

func (in *Inbox) readDLQ(ctx context.Context, from, to string, count int) ([]scheduler.DeadLetter, error) {
	start := time.Now()
	entries, err := in.s.c.Do(ctx, in.s.c.B().Xrange().Key(in.dlq).Start(from).End(to).Count(int64(max(count, 1))).Build()).AsXRangeSlices()
	in.s.hook.observe("dlq_read", start, err)
	if err != nil {
		return nil, fmt.Errorf("redisstore: read %s: %w", in.dlq, err)
	}
	out := make([]scheduler.DeadLetter, 0, len(entries))
	for _, e := range entries {
		out = append(out, decodeDeadLetter(e))
	}
	return out, nil
}

// decodeDeadLetter splits a DLQ entry: the script appends the three dlq_
// fields last, so they are taken from the end and every field before them
// is an original one, even one that happens to share their names.
func decodeDeadLetter(e rueidis.XRangeSlice) scheduler.DeadLetter {
	dl := scheduler.DeadLetter{ID: e.ID}
	fv := e.FieldValues
	n := len(fv)
	if n >= 3 && fv[n-3].Field == scheduler.DLQFieldSourceID && fv[n-2].Field == scheduler.DLQFieldDeliveries && fv[n-1].Field == scheduler.DLQFieldReason {
		dl.SourceID = fv[n-3].Value
		dl.Deliveries, _ = strconv.ParseInt(fv[n-2].Value, 10, 64)
		dl.Reason = fv[n-1].Value
		fv = fv[:n-3]
	}
	dl.Fields = toFields(fv)
	return dl
}

// Len implements [scheduler.Inbox] with XLEN.
func (in *Inbox) Len(ctx context.Context) (int64, error) {
	start := time.Now()
	n, err := in.s.c.Do(ctx, in.s.c.B().Xlen().Key(in.key).Build()).AsInt64()
	in.s.hook.observe("xlen", start, err)
	if err != nil {
		return 0, fmt.Errorf("redisstore: length of %s: %w", in.key, err)
	}
	return n, nil
}

var _ scheduler.DeadLetterAdmin = (*Inbox)(nil)

// dlqRequeueScript puts the dead letter ARGV[1] of the DLQ KEYS[2] back
// into the inbox KEYS[1] with its original fields (those before the three
// dlq_ fields the move appended) and deletes it, unless the inbox holds
// ARGV[2] entries. It returns the new id, false when there is no such dead
// letter, or the error "FULL".
var dlqRequeueScript = rueidis.NewLuaScript(`
local e = redis.call('XRANGE', KEYS[2], ARGV[1], ARGV[1])
if #e == 0 then return false end
if redis.call('XLEN', KEYS[1]) >= tonumber(ARGV[2]) then return redis.error_reply('FULL inbox') end
local fv = e[1][2]
local n = #fv
if n >= 6 and fv[n-5] == '` + scheduler.DLQFieldSourceID + `' and fv[n-3] == '` + scheduler.DLQFieldDeliveries + `' and fv[n-1] == '` + scheduler.DLQFieldReason + `' then
  n = n - 6
end
if n == 0 then
  fv = {'` + scheduler.DLQFieldSourceID + `', ARGV[1]}
  n = 2
end
local id = redis.call('XADD', KEYS[1], '*', unpack(fv, 1, n))
redis.call('XDEL', KEYS[2], ARGV[1])
return id`)

// RequeueDeadLetter implements [scheduler.DeadLetterAdmin] with one
// script over the inbox and its DLQ (one cluster slot): XRANGE of the
// dead letter, XLEN against the inbox's bound, XADD of its original
// fields, XDEL. Reported to the OpHook as "dlq_requeue".
func (in *Inbox) RequeueDeadLetter(ctx context.Context, id string) (string, bool, error) {
	start := time.Now()
	newID, err := dlqRequeueScript.Exec(ctx, in.s.c, []string{in.key, in.dlq}, []string{id, in.s.maxLen}).ToString()
	in.s.hook.observe("dlq_requeue", start, err)
	if isNil(err) {
		return "", false, nil
	}
	if re, ok := rueidis.IsRedisErr(err); ok && strings.HasPrefix(re.Error(), "FULL") {
		return "", false, fmt.Errorf("redisstore: requeue %s to %s: %w", id, in.key, scheduler.ErrInboxFull)
	}
	if err != nil {
		return "", false, fmt.Errorf("redisstore: requeue %s of %s: %w", id, in.dlq, err)
	}
	return newID, true, nil
}

// DeleteDeadLetter implements [scheduler.DeadLetterAdmin] with XDEL on
// the DLQ ("dlq_delete" to the OpHook).
func (in *Inbox) DeleteDeadLetter(ctx context.Context, id string) (bool, error) {
	start := time.Now()
	n, err := in.s.c.Do(ctx, in.s.c.B().Xdel().Key(in.dlq).Id(id).Build()).AsInt64()
	in.s.hook.observe("dlq_delete", start, err)
	if err != nil {
		return false, fmt.Errorf("redisstore: delete %s of %s: %w", id, in.dlq, err)
	}
	return n > 0, nil
}

// DeadLetterLen implements [scheduler.DeadLetterAdmin] with XLEN on the
// DLQ ("dlq_len" to the OpHook).
func (in *Inbox) DeadLetterLen(ctx context.Context) (int64, error) {
	start := time.Now()
	n, err := in.s.c.Do(ctx, in.s.c.B().Xlen().Key(in.dlq).Build()).AsInt64()
	in.s.hook.observe("dlq_len", start, err)
	if err != nil {
		return 0, fmt.Errorf("redisstore: length of %s: %w", in.dlq, err)
	}
	return n, nil
}
