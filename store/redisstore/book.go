package redisstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// BookConfig configures [Book].
type BookConfig struct {
	// Prefix is the key prefix. Default (""): [DefaultPrefix].
	Prefix string
	// OpHook observes every Redis operation ("book_open", "book_entry",
	// "book_tried", "book_watch", "book_finish"). Default (nil): none.
	OpHook OpHook
}

// Book is the Redis [scheduler.JobBook]: one hash per job,
// {prefix}:v1:jobs:{job:<job_id>}:book, with the fields spec (JSON),
// tried and waiters (ids separated by newlines, which ids never hold) and
// outcome (JSON). Each method is one script on that key, so it is atomic
// and lies in the slot of the job's lifecycle hash.
type Book struct {
	c    rueidis.Client
	keys Keys
	hook OpHook
}

var _ scheduler.JobBook = (*Book)(nil)

// NewBook returns the job book on c.
func NewBook(c rueidis.Client, cfg BookConfig) (*Book, error) {
	if c == nil {
		return nil, errors.New("redisstore: NewBook: nil client")
	}
	return &Book{c: c, keys: NewKeys(cfg.Prefix), hook: cfg.OpHook}, nil
}

var (
	bookOpenScript = rueidis.NewLuaScript(`
local h = redis.call('HMGET', KEYS[1], 'spec', 'tried', 'waiters', 'outcome')
if h[1] then return {0, h[1], h[2] or '', h[3] or '', h[4] or ''} end
redis.call('HSET', KEYS[1], 'spec', ARGV[1], 'waiters', ARGV[2])
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return {1, ARGV[1], '', ARGV[2], ''}`)
	bookTriedScript = rueidis.NewLuaScript(`
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
local t = redis.call('HGET', KEYS[1], 'tried') or ''
for n in string.gmatch(t, '[^\n]+') do if n == ARGV[1] then return 0 end end
if t == '' then t = ARGV[1] else t = t .. '\n' .. ARGV[1] end
redis.call('HSET', KEYS[1], 'tried', t)
return 1`)
	bookWatchScript = rueidis.NewLuaScript(`
local h = redis.call('HMGET', KEYS[1], 'spec', 'waiters', 'outcome')
if not h[1] then return {-1} end
if h[3] then return {1, h[3]} end
local w = h[2] or ''
for n in string.gmatch(w, '[^\n]+') do if n == ARGV[1] then return {0} end end
if w == '' then w = ARGV[1] else w = w .. '\n' .. ARGV[1] end
redis.call('HSET', KEYS[1], 'waiters', w)
return {0}`)
	bookFinishScript = rueidis.NewLuaScript(`
local h = redis.call('HMGET', KEYS[1], 'spec', 'tried', 'waiters', 'outcome')
if not h[1] then return {-1} end
local o = h[4]
if not o then o = ARGV[1]; redis.call('HSET', KEYS[1], 'outcome', o) end
return {1, h[1], h[2] or '', h[3] or '', o}`)
)

func splitIDs(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func (b *Book) notFound(jobID string) error {
	return fmt.Errorf("job %q: %w", jobID, scheduler.ErrJobNotFound)
}

func (b *Book) corrupt(jobID, field, v string) error {
	return &CorruptError{Key: b.keys.JobBook(jobID), Field: field, Value: v, Err: scheduler.ErrBookCorrupt}
}

func (b *Book) entry(jobID string, spec, tried, waiters, outcome string) (scheduler.BookEntry, error) {
	var e scheduler.BookEntry
	if err := json.Unmarshal([]byte(spec), &e.Spec); err != nil {
		return e, b.corrupt(jobID, "spec", spec)
	}
	e.Tried, e.Waiters = splitIDs(tried), splitIDs(waiters)
	if outcome != "" {
		var o scheduler.Outcome
		if err := json.Unmarshal([]byte(outcome), &o); err != nil {
			return e, b.corrupt(jobID, "outcome", outcome)
		}
		e.Outcome = &o
	}
	return e, nil
}

// Open implements [scheduler.JobBook].
func (b *Book) Open(ctx context.Context, jobID string, spec scheduler.JobSpec, ttl time.Duration) (scheduler.BookEntry, bool, error) {
	if err := scheduler.CheckSpec(jobID, spec); err != nil {
		return scheduler.BookEntry{}, false, err
	}
	if err := scheduler.CheckID("session_id", spec.SessionID); err != nil {
		return scheduler.BookEntry{}, false, err
	}
	if ttl < time.Millisecond {
		return scheduler.BookEntry{}, false, &scheduler.ArgumentError{Name: "ttl", Reason: fmt.Sprintf("%v is below 1ms", ttl)}
	}
	data, err := json.Marshal(spec)
	if err != nil {
		return scheduler.BookEntry{}, false, err
	}
	start := time.Now()
	vals, err := bookOpenScript.Exec(ctx, b.c, []string{b.keys.JobBook(jobID)},
		[]string{string(data), spec.SessionID, strconv.FormatInt(ttl.Milliseconds(), 10)}).ToArray()
	b.hook.observe("book_open", start, err)
	if err != nil {
		return scheduler.BookEntry{}, false, fmt.Errorf("redisstore: open job %q: %w", jobID, err)
	}
	if len(vals) != 5 {
		return scheduler.BookEntry{}, false, fmt.Errorf("redisstore: open job %q: reply of %d elements", jobID, len(vals))
	}
	created, _ := vals[0].AsInt64()
	f := make([]string, 4)
	for i := range f {
		f[i], _ = vals[i+1].ToString()
	}
	e, err := b.entry(jobID, f[0], f[1], f[2], f[3])
	return e, created == 1, err
}

// Entry implements [scheduler.JobBook] with HMGET.
func (b *Book) Entry(ctx context.Context, jobID string) (scheduler.BookEntry, error) {
	if jobID == "" {
		return scheduler.BookEntry{}, &scheduler.ArgumentError{Name: "job_id", Reason: "empty"}
	}
	start := time.Now()
	vals, err := b.c.Do(ctx, b.c.B().Hmget().Key(b.keys.JobBook(jobID)).Field("spec", "tried", "waiters", "outcome").Build()).ToArray()
	b.hook.observe("book_entry", start, err)
	if err != nil {
		return scheduler.BookEntry{}, fmt.Errorf("redisstore: book of job %q: %w", jobID, err)
	}
	f := make([]string, 4)
	for i := range f {
		if i < len(vals) {
			f[i], _ = vals[i].ToString()
		}
	}
	if f[0] == "" {
		return scheduler.BookEntry{}, b.notFound(jobID)
	}
	return b.entry(jobID, f[0], f[1], f[2], f[3])
}

// AddTried implements [scheduler.JobBook].
func (b *Book) AddTried(ctx context.Context, jobID, nodeID string) error {
	if jobID == "" {
		return &scheduler.ArgumentError{Name: "job_id", Reason: "empty"}
	}
	if err := scheduler.CheckID("node_id", nodeID); err != nil {
		return err
	}
	start := time.Now()
	n, err := bookTriedScript.Exec(ctx, b.c, []string{b.keys.JobBook(jobID)}, []string{nodeID}).AsInt64()
	b.hook.observe("book_tried", start, err)
	if err != nil {
		return fmt.Errorf("redisstore: add tried node to job %q: %w", jobID, err)
	}
	if n < 0 {
		return b.notFound(jobID)
	}
	return nil
}

// Watch implements [scheduler.JobBook].
func (b *Book) Watch(ctx context.Context, jobID, sessionID string) (scheduler.Outcome, bool, error) {
	if jobID == "" {
		return scheduler.Outcome{}, false, &scheduler.ArgumentError{Name: "job_id", Reason: "empty"}
	}
	if err := scheduler.CheckID("session_id", sessionID); err != nil {
		return scheduler.Outcome{}, false, err
	}
	start := time.Now()
	vals, err := bookWatchScript.Exec(ctx, b.c, []string{b.keys.JobBook(jobID)}, []string{sessionID}).ToArray()
	b.hook.observe("book_watch", start, err)
	if err != nil {
		return scheduler.Outcome{}, false, fmt.Errorf("redisstore: watch job %q: %w", jobID, err)
	}
	if len(vals) == 0 {
		return scheduler.Outcome{}, false, fmt.Errorf("redisstore: watch job %q: empty reply", jobID)
	}
	switch st, _ := vals[0].AsInt64(); {
	case st < 0:
		return scheduler.Outcome{}, false, b.notFound(jobID)
	case st == 0:
		return scheduler.Outcome{}, false, nil
	}
	s, _ := vals[1].ToString()
	var o scheduler.Outcome
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		return o, false, b.corrupt(jobID, "outcome", s)
	}
	return o, true, nil
}

// Finish implements [scheduler.JobBook].
func (b *Book) Finish(ctx context.Context, jobID string, out scheduler.Outcome) (scheduler.BookEntry, error) {
	if jobID == "" {
		return scheduler.BookEntry{}, &scheduler.ArgumentError{Name: "job_id", Reason: "empty"}
	}
	if out.Status != scheduler.OutcomeResult && out.Status != scheduler.OutcomeFailed {
		return scheduler.BookEntry{}, &scheduler.ArgumentError{Name: "status", Reason: fmt.Sprintf("%q (result|failed)", out.Status)}
	}
	data, err := json.Marshal(out)
	if err != nil {
		return scheduler.BookEntry{}, err
	}
	start := time.Now()
	vals, err := bookFinishScript.Exec(ctx, b.c, []string{b.keys.JobBook(jobID)}, []string{string(data)}).ToArray()
	b.hook.observe("book_finish", start, err)
	if err != nil {
		return scheduler.BookEntry{}, fmt.Errorf("redisstore: finish job %q: %w", jobID, err)
	}
	if len(vals) == 0 {
		return scheduler.BookEntry{}, fmt.Errorf("redisstore: finish job %q: empty reply", jobID)
	}
	if st, _ := vals[0].AsInt64(); st < 0 || len(vals) != 5 {
		return scheduler.BookEntry{}, b.notFound(jobID)
	}
	f := make([]string, 4)
	for i := range f {
		f[i], _ = vals[i+1].ToString()
	}
	return b.entry(jobID, f[0], f[1], f[2], f[3])
}
