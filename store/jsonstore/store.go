package jsonstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// Defaults of [Config].
const (
	DefaultFlushInterval = 50 * time.Millisecond
	DefaultRunHistory    = 50
	DefaultCompactRatio  = 0.5
	DefaultCompactMin    = 4 << 20
)

// ErrClosed is returned by every method of a [Store] after Close.
var ErrClosed = errors.New("jsonstore: store is closed")

// FlushInfo describes one rewrite of jobs.json, for [Config.OnFlush].
type FlushInfo struct {
	Jobs     int           // jobs in the file
	Bytes    int           // size of the file
	Duration time.Duration // encode, write, sync and rename
	Err      error         // nil when the rewrite reached the disk
}

// Config tunes a [Store]. The zero value is ready to use.
type Config struct {
	// FlushInterval is the least time between the starts of two flushes
	// (a write of the queued journal records and runs, or without Journal a
	// rewrite of jobs.json), so also the longest a change waits for its
	// flush to start (when none is running); a change made after an idle
	// interval is flushed at once. Default 50ms.
	FlushInterval time.Duration
	// RunHistory is how many runs are kept per job (the newest). Default 50;
	// a negative value keeps none.
	RunHistory int
	// OnFlush, when set, is called after each rewrite of jobs.json (the
	// store flush latency of /metrics), not after appends to the journal. It runs on the flushing goroutine
	// and must be fast. Default nil.
	OnFlush func(FlushInfo)
	// Journal, when set, sends every change to an append-only journal
	// beside jobs.json (jobs.journal): Save and Delete return once their
	// record is appended and synced, Record's records are written within
	// FlushInterval, and jobs.json is rewritten only when the journal has
	// grown past CompactRatio and CompactMin, or at Close. A change then
	// costs one small append instead of a rewrite of the whole file, which
	// matters with many jobs. At start, the journal is replayed. Default
	// false: Save and Delete wait for a rewrite of jobs.json, and every
	// change (bookkeeping included) makes one, coalesced per FlushInterval.
	Journal bool
	// CompactRatio and CompactMin set when jobs.json is rewritten in
	// journal mode: once the journal files hold at least CompactRatio times
	// the size of jobs.json and at least CompactMin bytes. Defaults 0.5 and
	// 4 MiB. Without the journal every flush rewrites jobs.json.
	CompactRatio float64
	CompactMin   int64
	// AuditKeep is how many entries of the audit log ([Store.AppendAudit],
	// kept in audit.jsonl) are kept: the newest. Default (0) 10,000
	// ([cron.DefaultAuditKeep]).
	AuditKeep int
	// Logger receives the recovery messages (backups made, entries
	// skipped) and flush failures. Default nil: discard.
	Logger *slog.Logger

	// noPrebuild leaves the history index to the first query that needs
	// it (tests of what a query reads without it).
	noPrebuild bool
}

// Compile-time proof of the interfaces the Store implements.
var (
	_ cron.Store    = (*Store)(nil)
	_ cron.RunStore = (*Store)(nil)
)

type waiter struct {
	gen uint64
	ch  chan error
}

// Store is the one-JSON-file job store. It keeps every job in memory,
// journals changes and rewrites jobs.json in the background (see the
// package documentation). It is safe for concurrent use.
type Store struct {
	dir  string
	cfg  Config
	log  *slog.Logger
	lock *os.File // jobs.lock, locked from New until Close

	extras extras // the service pause and the audit log (extras.go)

	mu        sync.Mutex
	order     []*entry // creation order, with deleted entries until compaction
	tombs     int
	iterating int       // LoadEach calls under way: s.order keeps its deleted entries
	runsIdx   bool      // runs.idx, read at the start, is still there (see dropRunsIndex)
	loadEnded sync.Cond // on mu: iterating fell to 0, or the store closed
	index     jobIndex
	slab      []entry    // where new entries are allocated
	shapes    shapes     // the shapes of the jobs saved (see entry)
	newRuns   []cron.Run // runs not yet taken by the flusher
	writing   []cron.Run // runs the flusher is appending to runs.jsonl
	gen       uint64     // changes made
	durable   uint64     // changes in jobs.json (without the journal: on disk)
	scheduled bool       // a flush is due; dirtyAt is its start
	dirtyAt   time.Time
	waiters   []waiter
	closed    bool
	jobsSize  int64 // size of jobs.json
	rewrites  int   // rewrites of jobs.json made since New
	compact   bool  // Compact asks for a rewrite at the next flush

	// The journal (Journal mode). jseq and jpend are guarded by mu, so that
	// records are numbered and queued in the order of the changes.
	jseq  uint64 // sequence of the last journal record
	jpend []byte // records not yet written, in sequence order

	jmu     sync.Mutex // guards the journal fields below
	jcond   sync.Cond  // on jmu: a journal write ended
	jf      *os.File   // jobs.journal, open for appending (Journal mode)
	jbusy   bool       // a journal write is under way, outside jmu
	jsynced uint64     // every record up to this seq is written and synced
	jfailed uint64     // records up to this seq (and after jsynced) failed: jerr
	jerr    error
	jsize   int64    // bytes of the journal files (current and rotated)
	jold    []string // rotated journal files that jobs.json may not hold yet
	jsyncs  int      // journal writes made (each one sync)

	// runs.jsonl: rf is swapped by a compaction under rmu (held before mu).
	rmu      sync.RWMutex
	rf       *os.File // open for reading and appending; nil when RunHistory < 0
	rsize    int64    // size of runs.jsonl; owned by the flusher
	runLines int      // lines in runs.jsonl; guarded by mu
	runKept  int      // lines that a compaction would keep; guarded by mu

	// The history index (history.go), guarded by mu: a ref per line of
	// runs.jsonl, in file order, once refsBuilt; a compaction drops it.
	refs      []runRef
	refMax    []int64 // [b]: the latest scheduled_at of refs[:(b+1)*refBlock]
	refsBuilt bool
	bmu       sync.Mutex // one build of refs at a time (held before mu)
	swapping  counter    // compactions waiting for rmu: a background build gives way
	longIDs   []string   // the run ids that are not 32 hex digits
	instances []string   // the instance names of runs
	instIdx   map[string]uint16

	recovery *Recovery // what New set aside; nil when jobs.json read clean
	crashed  bool      // tests: Close writes nothing, as if the process died

	kick  chan struct{}
	force chan chan error
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	// Owned by the flushing goroutine.
	lastStart time.Time // of the last flush
	buf       []byte
	alerts    alerts // the alert outbox (alerts.go)
}

// newEntryLocked allocates an entry for j (from a slab: no object per job
// for the garbage collector) and appends it to the creation order.
func (s *Store) newEntryLocked(j cron.Job) *entry {
	if len(s.slab) == cap(s.slab) {
		s.slab = make([]entry, 0, 1024)
	}
	s.slab = append(s.slab, entry{})
	e := &s.slab[len(s.slab)-1]
	e.set(&j, &s.shapes)
	s.order = append(s.order, e)
	s.index.put(e)
	return e
}

// New opens the store in dir, creating the directory (0700) when missing,
// loads jobs.json, replays the journal and opens runs.jsonl. It recovers
// from a bad file as the package documentation describes; only an I/O
// error fails it. Close the store to stop its flushing goroutine, write the
// last changes and release the directory.
//
// Before it reads or changes anything else in dir (it only creates dir and
// jobs.lock when missing), New takes an exclusive advisory lock on
// dir/jobs.lock ([LockFile]) without waiting; the lock is held until
// [Store.Close]. When another process, or another open Store of this
// process, holds it, New fails at once with an error that names dir and
// wraps [ErrLocked], having changed nothing in dir (no journal replay, no
// rewrite, no cleanup). See "Locking" in the package documentation.
func New(dir string, cfg Config) (_ *Store, err error) {
	if cfg.FlushInterval < 0 {
		return nil, fmt.Errorf("jsonstore: Config.FlushInterval must be >= 0, got %s", cfg.FlushInterval)
	}
	if cfg.FlushInterval == 0 {
		cfg.FlushInterval = DefaultFlushInterval
	}
	if cfg.RunHistory == 0 {
		cfg.RunHistory = DefaultRunHistory
	}
	if cfg.CompactRatio < 0 {
		return nil, fmt.Errorf("jsonstore: Config.CompactRatio must be >= 0, got %v", cfg.CompactRatio)
	}
	if cfg.CompactRatio == 0 {
		cfg.CompactRatio = DefaultCompactRatio
	}
	if cfg.CompactMin < 0 {
		return nil, fmt.Errorf("jsonstore: Config.CompactMin must be >= 0, got %d", cfg.CompactMin)
	}
	if cfg.CompactMin == 0 {
		cfg.CompactMin = DefaultCompactMin
	}
	if cfg.AuditKeep < 0 {
		return nil, fmt.Errorf("jsonstore: Config.AuditKeep must be >= 0, got %d", cfg.AuditKeep)
	}
	if cfg.AuditKeep == 0 {
		cfg.AuditKeep = cron.DefaultAuditKeep
	}
	if dir == "" {
		return nil, errors.New("jsonstore: empty data directory")
	}
	s := &Store{
		dir: dir, cfg: cfg, log: cfg.Logger,
		index: newJobIndex(0),
		kick:  make(chan struct{}, 1),
		force: make(chan chan error),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	s.jcond.L = &s.jmu
	s.loadEnded.L = &s.mu
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("jsonstore: create data directory: %w", err)
	}
	if s.lock, err = lockDir(dir); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			s.closeJournal()
			s.closeRuns()
			s.closeExtras()
			s.unlock()
		}
	}()
	_ = os.Remove(filepath.Join(dir, JobsFile+".tmp"))
	_ = os.Remove(filepath.Join(dir, RunsFile+".tmp"))
	rewrite, err := s.loadJobs()
	if err != nil {
		return nil, err
	}
	if err := s.replayJournal(); err != nil {
		return nil, err
	}
	if !cfg.Journal && len(s.jold) > 0 {
		rewrite = true // a journal left by journal mode: into jobs.json, then removed
	}
	if cfg.Journal {
		jpath := filepath.Join(dir, JournalFile)
		f, err := os.OpenFile(jpath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("jsonstore: open %s: %w", jpath, err)
		}
		s.jf = f
		// The replayed current journal goes on: it counts as a rotated
		// one no more.
		if n := len(s.jold); n > 0 && s.jold[n-1] == jpath {
			s.jold = s.jold[:n-1]
		}
	}
	if err := s.loadRuns(); err != nil {
		return nil, err
	}
	if err := s.loadExtras(); err != nil {
		return nil, err
	}
	if rewrite {
		s.gen++
		if err := s.rewriteJobs(); err != nil {
			return nil, err
		}
	}
	go s.loop()
	if !cfg.noPrebuild {
		go s.prebuildRefs()
	}
	return s, nil
}

// Dir returns the data directory.
func (s *Store) Dir() string { return s.dir }

// Recovery describes what [New] set aside because jobs.json could not be
// read whole: the file itself (Unreadable: the store started empty) or
// some of its entries (Skipped). The jobs are not lost: Backup holds the
// file as it was.
type Recovery struct {
	// Unreadable is set when jobs.json did not parse at all: it was moved
	// to Backup and the store started with no jobs.
	Unreadable bool
	// Skipped lists the entries that were dropped, each naming its id,
	// index and field.
	Skipped []*EntryError
	// Backup is the path of the copy of jobs.json as it was.
	Backup string
	// Err is why the file could not be read, when Unreadable.
	Err error
}

// Recovered reports what New set aside from jobs.json, or nil when the
// file was read whole (or did not exist). It does not change until the
// store is opened again. A caller should make it visible where an
// operator looks: a store that starts empty because its file was bad
// silently stops every job.
func (s *Store) Recovered() *Recovery { return s.recovery }

// loadJobs reads jobs.json into memory. It reports whether the file must be
// written at once (it was missing, moved aside or had entries skipped).
func (s *Store) loadJobs() (bool, error) {
	path := filepath.Join(s.dir, JobsFile)
	data, release, err := mapFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("jsonstore: read %s: %w", path, err)
	}
	// Nothing decoded points into data (the decoder copies what it keeps),
	// and the errors of bad entries are copied below.
	defer release()
	now := time.Now()
	// The entries are decoded in place, in slabs of 1024 per part of the
	// file (no copy, no object per job, no one huge object for the
	// collector); the two parts are filled concurrently.
	var slabs [2][][]entry
	var shared [2]shapes // each part's own: the parts are decoded side by side
	at := func(part, k int) *entry { return &slabs[part][k>>10][k&1023] }
	good, bad, err := decodeFileTo(data, func(part, k int, j cron.Job, ok bool) string {
		if k>>10 == len(slabs[part]) {
			slabs[part] = append(slabs[part], make([]entry, 1024))
		}
		e := at(part, k)
		if !ok {
			*e = entry{}
			return ""
		}
		e.set(&j, &shared[part])
		return e.id
	}, func(n int) firstSet {
		// The index of the jobs kept is the set of ids seen.
		s.index = newJobIndex(n)
		return indexSet{&s.index, at}
	})
	if err != nil {
		backup, merr := moveAside(s.dir, now)
		if merr != nil {
			return false, fmt.Errorf("jsonstore: %s cannot be read (%v) nor moved aside: %w", path, err, merr)
		}
		s.log.Error("jsonstore: jobs file cannot be read; moved aside, starting empty",
			"file", path, "backup", backup, "error", err)
		s.recovery = &Recovery{Unreadable: true, Backup: backup, Err: err}
		return true, nil
	}
	if len(bad) > 0 {
		backup, cerr := copyAside(s.dir, now, data)
		if cerr != nil {
			return false, fmt.Errorf("jsonstore: copy %s aside before dropping bad entries: %w", path, cerr)
		}
		for _, e := range bad {
			// Their text only, in memory of their own (Recovered keeps them).
			e.ID, e.Err = strings.Clone(e.ID), errors.New(e.Err.Error())
			s.log.Error("jsonstore: invalid job skipped", "job_id", e.ID, "index", e.Index,
				"field", e.Field, "error", e.Err, "backup", backup)
		}
		s.recovery = &Recovery{Skipped: bad, Backup: backup}
	}
	// The entries stay where they were decoded (the bad ones' slots stay
	// empty): no copy, no object per job.
	s.order = make([]*entry, 0, len(good))
	for _, g := range good {
		s.order = append(s.order, at(g.part, g.k))
	}
	s.jobsSize = int64(len(data))
	return len(bad) > 0, nil
}

// Load returns every job, in creation order.
func (s *Store) Load(ctx context.Context) ([]cron.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	jobs := make([]cron.Job, 0, s.index.len())
	for _, e := range s.order {
		if !e.deleted {
			j := e.job()
			jobs = append(jobs, cloneJob(&j))
		}
	}
	return jobs, nil
}

// LoadEach calls fn with every job, in creation order, as [Store.Load]
// returns them but without building the slice of them all: a runner
// loading a million jobs uses it. fn may keep the job's strings, maps and
// slices (they are its own copies) but not the pointer, and must not call
// the store, which is locked while fn runs. The lock is let go between
// chunks of jobs, so that writes go on meanwhile (the history index,
// built in the background after a start, waits for the end, so as not to
// slow the loading of a runner down): a job saved or deleted during the
// call is passed as it is when its turn comes, or not at all if it was
// deleted before. It returns ctx's error if ctx ends first.
func (s *Store) LoadEach(ctx context.Context, fn func(*cron.Job)) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.iterating++ // no rewrite drops the deleted entries from s.order meanwhile
	defer func() {
		if s.iterating--; s.iterating == 0 {
			s.loadEnded.Broadcast()
		}
	}()
	var j cron.Job // one copy for all: fn does not keep it
	for i := 0; i < len(s.order); i++ {
		if i%loadChunk == loadChunk-1 {
			s.mu.Unlock()
			s.mu.Lock()
			if s.closed {
				return ErrClosed
			}
			if err := ctx.Err(); err != nil {
				return err
			}
		}
		if e := s.order[i]; !e.deleted {
			j = e.job()
			j = cloneJob(&j)
			fn(&j)
		}
	}
	return nil
}

// loadChunk is the number of jobs LoadEach passes between two releases of
// the lock.
const loadChunk = 1024

// Get returns the stored job with id, or cron.ErrNotFound.
func (s *Store) Get(id string) (cron.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.index.get(id)
	if e == nil {
		return cron.Job{}, cron.ErrNotFound
	}
	j := e.job()
	return cloneJob(&j), nil
}

// Len returns the number of jobs.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.index.len()
}

// Save creates or replaces the job with j.ID, durably: with
// [Config.Journal] once its journal record is synced, else once a rewrite
// of jobs.json holding it is on disk (or ctx ends: the change then still
// reaches the disk later). A new job goes last in creation order; a
// replaced one keeps its place.
func (s *Store) Save(ctx context.Context, j cron.Job) error {
	if j.ID == "" {
		return errors.New("jsonstore: save: empty job id")
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	j = cloneJob(&j)
	if e := s.index.get(j.ID); e != nil {
		before := min(e.rcount, s.histOf(e))
		e.set(&j, &s.shapes)
		s.runKept += int(min(e.rcount, s.histOf(e))) - int(before)
	} else {
		s.newEntryLocked(j)
	}
	if s.cfg.Journal {
		s.jseq++
		seq := s.jseq
		s.jpend = appendJournalSave(s.jpend, seq, &j)
		s.changedLocked(false)
		s.mu.Unlock()
		return s.journalWait(seq)
	}
	ch := s.changedLocked(true)
	s.mu.Unlock()
	return wait(ctx, ch)
}

// Delete removes the job and its run history, durably like Save. An unknown
// id is cron.ErrNotFound.
func (s *Store) Delete(ctx context.Context, id string) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	e := s.index.get(id)
	if e == nil {
		s.mu.Unlock()
		return cron.ErrNotFound
	}
	if e.rcount > 0 {
		// runs.idx holds this job's lines: a job made again with this id
		// after a crash must not get them.
		s.dropRunsIndex()
	}
	e.deleted = true
	s.runKept -= int(min(e.rcount, uint32(max(s.cfg.RunHistory, 0))))
	s.newRuns = dropRuns(s.newRuns, id)
	s.writing = dropRuns(s.writing, id)
	s.index.del(id)
	s.tombs++
	if s.cfg.Journal {
		s.jseq++
		seq := s.jseq
		s.jpend = appendJournalDelete(s.jpend, seq, id)
		s.changedLocked(false)
		s.mu.Unlock()
		return s.journalWait(seq)
	}
	ch := s.changedLocked(true)
	s.mu.Unlock()
	return wait(ctx, ch)
}

// Record stores the bookkeeping of job id. It returns at once: with
// [Config.Journal] the change is appended to the journal within a flush
// interval, else it reaches jobs.json with the next rewrite. An unknown id
// is cron.ErrNotFound.
func (s *Store) Record(ctx context.Context, id string, b cron.Bookkeeping) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	e := s.index.get(id)
	if e == nil {
		return cron.ErrNotFound
	}
	e.apply(&b)
	if s.cfg.Journal {
		s.jseq++
		s.jpend = appendJournalRecord(s.jpend, s.jseq, id, &b)
	}
	s.changedLocked(false)
	return nil
}

// Flush writes every change made so far and returns when it is on disk:
// with [Config.Journal] in the journal (jobs.json follows at the next
// compaction), else in jobs.json.
func (s *Store) Flush(ctx context.Context) error {
	ch := make(chan error, 1)
	select {
	case s.force <- ch:
	case <-s.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Compact rewrites jobs.json at once with every change and drops the
// journal records it then holds. It returns when the rewrite is on disk.
// The store compacts on its own (see the package documentation); Compact is
// for tests and tools.
func (s *Store) Compact(ctx context.Context) error {
	s.mu.Lock()
	s.compact = true
	s.mu.Unlock()
	return s.Flush(ctx)
}

// Rewrites returns how many times jobs.json was rewritten since New (the
// rewrites New itself made included).
func (s *Store) Rewrites() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rewrites
}

// Close writes the last changes into jobs.json (emptying the journal),
// stops the flushing goroutine, releases the lock on the data directory
// ([LockFile]) and returns the error of the final rewrite, if any. Later
// calls return nil.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		// No change is taken from here on, so the final rewrite carries
		// every change a caller was told of.
		s.mu.Lock()
		s.closed = true
		s.loadEnded.Broadcast()
		s.mu.Unlock()
		close(s.stop)
		<-s.done
		s.mu.Lock()
		if s.gen != s.durable && !s.crashed {
			err = errors.New("jsonstore: close: the last changes could not be written into " + JobsFile)
		}
		for _, w := range s.waiters {
			w.ch <- ErrClosed
		}
		s.waiters = nil
		s.mu.Unlock()
		s.closeJournal()
		if s.crashed {
			// nothing more
		} else if rerr := s.writeRunsIndex(); rerr != nil {
			s.log.Warn("jsonstore: runs index not written; the next start reads runs.jsonl whole", "error", rerr)
		}
		s.closeRuns()
		s.closeExtras()
		// Last: nothing writes to the directory any more.
		s.unlock()
	})
	return err
}

// changedLocked counts a change and makes sure a flush is due. With durable
// it returns a channel that receives the result of the rewrite that carries
// the change.
func (s *Store) changedLocked(durable bool) chan error {
	s.gen++
	s.scheduleLocked()
	if !durable {
		return nil
	}
	ch := make(chan error, 1)
	s.waiters = append(s.waiters, waiter{gen: s.gen, ch: ch})
	return ch
}

// scheduleLocked makes sure a flush is due.
func (s *Store) scheduleLocked() {
	if !s.scheduled {
		s.scheduled = true
		s.dirtyAt = time.Now()
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
}

func wait(ctx context.Context, ch chan error) error {
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// loop is the flushing goroutine: it waits for a change, lets the flush
// interval pass from the first one, and flushes.
func (s *Store) loop() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	for {
		select {
		case <-s.kick:
			// Start at once, unless a flush started less than an
			// interval ago: then an interval after that one.
			s.mu.Lock()
			due := s.dirtyAt
			s.mu.Unlock()
			if next := s.lastStart.Add(s.cfg.FlushInterval); next.After(due) {
				due = next
			}
			timer.Reset(max(time.Until(due), 0))
			armed = true
		case <-timer.C:
			armed = false
			s.flushLogged(false)
		case ch := <-s.force:
			if armed {
				timer.Stop()
				armed = false
			}
			ch <- s.flush(false)
		case <-s.stop:
			timer.Stop()
			s.flushLogged(true)
			return
		}
	}
}

func (s *Store) flushLogged(final bool) {
	if err := s.flush(final); err != nil {
		s.log.Error("jsonstore: flush failed; retrying", "dir", s.dir, "error", err)
	}
}

// flush appends the new runs to runs.jsonl and, with the journal, writes
// the records waiting; it rewrites jobs.json when the journal has grown
// past the threshold (with the journal), when anything changed (without),
// or at the final flush of Close; and it compacts runs.jsonl when it has
// grown past twice what it keeps.
func (s *Store) flush(final bool) error {
	s.mu.Lock()
	if s.crashed {
		s.mu.Unlock()
		return nil
	}
	s.scheduled = false
	s.lastStart = time.Now()
	jobsChanged := s.gen != s.durable
	compact := s.compact
	s.compact = false
	s.mu.Unlock()

	var errs []error
	if err := s.appendRuns(); err != nil {
		errs = append(errs, fmt.Errorf("jsonstore: append to %s: %w", RunsFile, err))
	}
	if s.cfg.Journal {
		if err := s.journalCommit(); err != nil {
			errs = append(errs, err)
		}
	}
	rewrite := compact || jobsChanged && (!s.cfg.Journal || final || s.journalTooBig())
	s.jmu.Lock()
	rotated := len(s.jold) > 0
	s.jmu.Unlock()
	if rewrite || (final && rotated) {
		if err := s.rewriteJobs(); err != nil {
			errs = append(errs, err)
		}
	}
	if s.runsNeedCompaction() {
		if err := s.compactRuns(false); err != nil {
			errs = append(errs, fmt.Errorf("jsonstore: compact %s: %w", RunsFile, err))
		}
	}
	err := errors.Join(errs...)
	if err != nil {
		s.mu.Lock()
		s.scheduleLocked() // retry
		s.mu.Unlock()
	}
	return err
}

// rewriteJobs writes jobs.json from the jobs in memory and, with the
// journal, drops the journal records it holds. The jobs are encoded a
// chunk at a time under the lock, so the API and the timer are held for
// no more than a chunk; a change made during the rewrite may or may not be
// in the file, and is in the journal after the rotation that starts the
// rewrite (replaying a record over a state that holds it is harmless).
func (s *Store) rewriteJobs() error {
	start := time.Now()
	s.lastStart = start
	var upto, rotatedGen uint64
	if s.cfg.Journal {
		var err error
		if upto, rotatedGen, err = s.rotateJournal(); err != nil {
			return err
		}
	}
	s.mu.Lock()
	gen := s.gen
	if s.cfg.Journal {
		// A change between the rotation and here is in jobs.json and in
		// the new journal: count only what the rotation left behind, so
		// that the final rewrite at Close empties the new journal too.
		gen = rotatedGen
	}
	if s.tombs > 0 && s.iterating == 0 {
		live := s.order[:0]
		for _, e := range s.order {
			if !e.deleted {
				live = append(live, e)
			}
		}
		clear(s.order[len(live):])
		s.order = live
		s.tombs = 0
	}
	s.mu.Unlock()

	size, n, err := s.writeJobsFile(start)
	if err != nil {
		err = fmt.Errorf("jsonstore: write %s: %w", JobsFile, err)
	}
	if err == nil {
		if jerr := s.dropRotated(upto); jerr != nil {
			// The records stay and are replayed (again) after a crash:
			// harmless, as replaying a record over a state that holds it
			// changes nothing.
			s.log.Warn("jsonstore: rotated journal not removed", "error", jerr)
		}
	}
	elapsed := time.Since(start)

	s.mu.Lock()
	s.rewrites++
	if err == nil {
		s.durable = max(s.durable, gen)
		s.jobsSize = size
	}
	nw := 0
	for _, w := range s.waiters {
		if w.gen <= gen {
			w.ch <- err
			continue
		}
		s.waiters[nw] = w
		nw++
	}
	clear(s.waiters[nw:])
	s.waiters = s.waiters[:nw]
	s.mu.Unlock()
	if s.cfg.OnFlush != nil {
		s.cfg.OnFlush(FlushInfo{Jobs: n, Bytes: int(size), Duration: elapsed, Err: err})
	}
	return err
}

// rewriteChunk is how many jobs are encoded per hold of the lock.
const rewriteChunk = 1024

// writeJobsFile writes jobs.json atomically from memory, streaming: the
// file is never held whole in memory.
func (s *Store) writeJobsFile(now time.Time) (size int64, jobs int, err error) {
	tmp := filepath.Join(s.dir, JobsFile+".tmp")
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return 0, 0, err
	}
	defer func() {
		if err != nil {
			f.Close()
			_ = os.Remove(tmp)
		}
	}()
	sw := &syncingWriter{f: f}
	buf := appendHeader(s.buf[:0], now)
	for i := 0; ; i += rewriteChunk {
		s.mu.Lock()
		if i >= len(s.order) {
			s.mu.Unlock()
			break
		}
		for _, e := range s.order[i:min(i+rewriteChunk, len(s.order))] {
			if e.deleted {
				continue
			}
			if jobs == 0 {
				buf = append(buf, "[\n    "...)
			} else {
				buf = append(buf, ",\n    "...)
			}
			j := e.job()
			buf = appendJob(buf, &j)
			jobs++
		}
		s.mu.Unlock()
		if len(buf) >= 1<<20 {
			if _, err = sw.Write(buf); err != nil {
				return 0, 0, err
			}
			size += int64(len(buf))
			buf = buf[:0]
		}
	}
	buf = appendFooter(buf, jobs)
	if _, err = f.Write(buf); err != nil {
		return 0, 0, err
	}
	size += int64(len(buf))
	if cap(buf) <= 4<<20 {
		s.buf = buf[:0]
	}
	if err = f.Chmod(0o600); err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return 0, 0, err
	}
	if err = os.Rename(tmp, filepath.Join(s.dir, JobsFile)); err != nil {
		_ = os.Remove(tmp)
		return 0, 0, err
	}
	return size, jobs, syncDir(s.dir)
}

func (s *Store) closeJournal() {
	s.jmu.Lock()
	defer s.jmu.Unlock()
	s.waitJournalIdle()
	if s.jf != nil {
		s.jf.Close()
		s.jf = nil
	}
}

// unlock releases the lock on the data directory by closing the lock file.
func (s *Store) unlock() {
	if s.lock != nil {
		s.lock.Close()
		s.lock = nil
	}
}

// dropRuns returns runs without those of job id, in a new slice when any
// is dropped (the flusher may hold the old one).
func dropRuns(runs []cron.Run, id string) []cron.Run {
	for i := range runs {
		if runs[i].JobID == id {
			out := slices.Clone(runs[:i])
			for _, r := range runs[i+1:] {
				if r.JobID != id {
					out = append(out, r)
				}
			}
			return out
		}
	}
	return runs
}

// cloneJob copies j deeply enough that the caller's headers map is not shared.
func cloneJob(j *cron.Job) cron.Job {
	c := *j
	if j.HTTP.Headers != nil {
		c.HTTP.Headers = make(map[string]string, len(j.HTTP.Headers))
		for k, v := range j.HTTP.Headers {
			c.HTTP.Headers[k] = v
		}
	}
	return c
}
