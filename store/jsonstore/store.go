package jsonstore

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// Defaults of [Config].
const (
	DefaultFlushInterval = 50 * time.Millisecond
	DefaultRunHistory    = 50
	DefaultDir           = "./data"
)

// ErrClosed is returned by every method of a [Store] after Close.
var ErrClosed = errors.New("jsonstore: store is closed")

// FlushInfo describes one rewrite of jobs.json, for [Config.OnFlush].
type FlushInfo struct {
	Jobs     int           // jobs in the file
	Bytes    int           // size of the file
	Runs     int           // run records appended to runs.jsonl in the same flush
	Duration time.Duration // encode, write, sync and rename
	Err      error         // nil when the rewrite reached the disk
}

// Config tunes a [Store]. The zero value is ready to use.
type Config struct {
	// FlushInterval is the least time between the starts of two rewrites,
	// so also the longest a change waits for its rewrite to start (when no
	// rewrite is running); a change made after an idle interval is written
	// at once. Every change made before a rewrite starts is in it.
	// Default 50ms.
	FlushInterval time.Duration
	// RunHistory is how many runs are kept per job (the newest). Default 50;
	// a negative value keeps none.
	RunHistory int
	// OnFlush, when set, is called after each rewrite of jobs.json (the
	// store flush latency of /metrics). It runs on the flushing goroutine
	// and must be fast. Default nil.
	OnFlush func(FlushInfo)
	// Journal, when set, makes Save and Delete durable through an
	// append-only journal beside jobs.json (jobs.journal): they return once
	// their record is appended and synced, and jobs.json follows with the
	// next rewrite, after which the journal is truncated. A durable write
	// then costs one small append instead of a rewrite of the whole file,
	// which matters with many jobs. At start, a journal left by a crash is
	// replayed into jobs.json. Default false: Save and Delete wait for the
	// rewrite.
	Journal bool
	// Logger receives the recovery messages (backups made, entries
	// skipped) and flush failures. Default nil: discard.
	Logger *slog.Logger
}

// DirFromEnv returns the data directory the service uses: $KSANA_DATA,
// else $DATA_DIR, else [DefaultDir]. getenv nil means os.Getenv.
func DirFromEnv(getenv func(string) string) string {
	if getenv == nil {
		getenv = os.Getenv
	}
	if d := getenv("KSANA_DATA"); d != "" {
		return d
	}
	if d := getenv("DATA_DIR"); d != "" {
		return d
	}
	return DefaultDir
}

// Compile-time proof of the interfaces the Store implements.
var (
	_ cron.Store    = (*Store)(nil)
	_ cron.RunStore = (*Store)(nil)
	_ cron.Flusher  = (*Store)(nil)
)

type entry struct {
	job     cron.Job // guarded by Store.mu
	stale   bool     // enc does not hold job; guarded by Store.mu
	deleted bool     // guarded by Store.mu
	enc     []byte   // the job's JSON; read and written by the flusher only
}

type waiter struct {
	gen uint64
	ch  chan error
}

// Store is the one-JSON-file job store. It keeps every job in memory and
// rewrites jobs.json with group commit (see the package documentation).
// It is safe for concurrent use.
type Store struct {
	dir  string
	cfg  Config
	log  *slog.Logger
	lock *os.File // jobs.lock, locked from New until Close

	mu        sync.Mutex
	order     []*entry // creation order, with deleted entries until compaction
	tombs     int
	index     map[string]*entry
	runs      map[string]*runRing
	newRuns   []cron.Run // runs not yet appended to runs.jsonl
	runLines  int        // lines in runs.jsonl
	gen       uint64     // changes made
	durable   uint64     // changes on disk
	scheduled bool       // a flush is due; dirtySince is its start
	dirtyAt   time.Time
	waiters   []waiter
	closed    bool
	jseq      uint64 // sequence of the last journal record

	jmu       sync.Mutex // guards the journal fields below
	jcond     sync.Cond  // on jmu: a journal write ended
	jf        *os.File   // jobs.journal, open for appending (Journal mode)
	jlines    []jline    // records not yet known to be in jobs.json
	jsize     int64
	jreplayed bool          // a journal file was found at start
	jopen     *journalBatch // records waiting for the next journal write
	jbusy     bool          // a journal write is under way, outside jmu
	jheld     uint64        // jobs.json holds every record up to this seq
	jsyncs    int           // journal writes made (each one sync)

	recovery *Recovery // what New set aside; nil when jobs.json read clean

	kick  chan struct{}
	force chan chan error
	stop  chan struct{}
	done  chan struct{}
	once  sync.Once

	// Owned by the flushing goroutine, like every entry's enc.
	lastStart time.Time // of the last rewrite
	buf       []byte
	refs      [][]byte
	live      []*entry
	pending   []pendingEnc
}

type pendingEnc struct {
	e   *entry
	job cron.Job
}

// encodePending re-encodes the jobs that changed since the last rewrite,
// on two goroutines when there are many (after a start-up, every job).
func (s *Store) encodePending() {
	p := s.pending
	encode := func(part []pendingEnc) {
		for i := range part {
			e := part[i].e
			if cap(e.enc) == 0 {
				e.enc = make([]byte, 0, 512)
			}
			e.enc = appendJob(e.enc[:0], &part[i].job)
		}
	}
	if len(p) < 4096 {
		encode(p)
		return
	}
	half := len(p) / 2
	var wg sync.WaitGroup
	wg.Go(func() { encode(p[:half]) })
	encode(p[half:])
	wg.Wait()
}

// New opens the store in dir, creating the directory (0700) when missing,
// and loads jobs.json and runs.jsonl. It recovers from a bad file as the
// package documentation describes; only an I/O error fails it. Close the
// store to stop its flushing goroutine, write the last changes and release
// the directory.
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
	if dir == "" {
		return nil, errors.New("jsonstore: empty data directory")
	}
	s := &Store{
		dir: dir, cfg: cfg, log: cfg.Logger,
		index: make(map[string]*entry),
		runs:  make(map[string]*runRing),
		kick:  make(chan struct{}, 1),
		force: make(chan chan error),
		stop:  make(chan struct{}),
		done:  make(chan struct{}),
	}
	s.jcond.L = &s.jmu
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
			s.unlock()
		}
	}()
	_ = os.Remove(filepath.Join(dir, JobsFile+".tmp"))
	_ = os.Remove(filepath.Join(dir, RunsFile+".tmp"))
	rewrite, err := s.loadJobs()
	if err != nil {
		return nil, err
	}
	replayed, err := s.replayJournal()
	if err != nil {
		return nil, err
	}
	rewrite = rewrite || replayed
	if cfg.Journal {
		jpath := filepath.Join(dir, JournalFile)
		f, err := os.OpenFile(jpath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
		if err != nil {
			return nil, fmt.Errorf("jsonstore: open %s: %w", jpath, err)
		}
		if st, err := f.Stat(); err == nil {
			s.jsize = st.Size()
		}
		s.jf = f
	}
	if err := s.loadRuns(); err != nil {
		return nil, err
	}
	if rewrite {
		s.gen++
		if err := s.flushOnce(); err != nil {
			return nil, err
		}
	}
	go s.loop()
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
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("jsonstore: read %s: %w", path, err)
	}
	now := time.Now()
	jobs, bad, err := decodeFile(data)
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
			s.log.Error("jsonstore: invalid job skipped", "job_id", e.ID, "index", e.Index,
				"field", e.Field, "error", e.Err, "backup", backup)
		}
		s.recovery = &Recovery{Skipped: bad, Backup: backup}
	}
	s.order = make([]*entry, 0, len(jobs))
	for i := range jobs {
		e := &entry{job: jobs[i], stale: true}
		s.order = append(s.order, e)
		s.index[e.job.ID] = e
	}
	return len(bad) > 0, nil
}

// Load returns every job, in creation order.
func (s *Store) Load(ctx context.Context) ([]cron.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	jobs := make([]cron.Job, 0, len(s.index))
	for _, e := range s.order {
		if !e.deleted {
			jobs = append(jobs, cloneJob(&e.job))
		}
	}
	return jobs, nil
}

// Get returns the stored job with id, or cron.ErrNotFound.
func (s *Store) Get(id string) (cron.Job, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.index[id]
	if !ok {
		return cron.Job{}, cron.ErrNotFound
	}
	return cloneJob(&e.job), nil
}

// Len returns the number of jobs.
func (s *Store) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.index)
}

// Save creates or replaces the job with j.ID and returns once a rewrite of
// jobs.json holding the change is on disk (or ctx ends: the change then
// still reaches the disk with a later rewrite). A new job goes last in
// creation order; a replaced one keeps its place.
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
	if e, ok := s.index[j.ID]; ok {
		e.job = j
		e.stale = true
	} else {
		e := &entry{job: j, stale: true}
		s.order = append(s.order, e)
		s.index[j.ID] = e
		if r := s.runs[j.ID]; r == nil && s.cfg.RunHistory > 0 {
			s.runs[j.ID] = newRunRing(s.cfg.RunHistory)
		}
	}
	if s.cfg.Journal {
		s.jseq++
		seq := s.jseq
		s.changedLocked(false)
		s.mu.Unlock()
		return s.journalAppend(seq, appendJournalSave(make([]byte, 0, 512), seq, &j))
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
	e, ok := s.index[id]
	if !ok {
		s.mu.Unlock()
		return cron.ErrNotFound
	}
	e.deleted = true
	delete(s.index, id)
	delete(s.runs, id)
	s.tombs++
	if s.cfg.Journal {
		s.jseq++
		seq := s.jseq
		s.changedLocked(false)
		s.mu.Unlock()
		return s.journalAppend(seq, appendJournalDelete(nil, seq, id))
	}
	ch := s.changedLocked(true)
	s.mu.Unlock()
	return wait(ctx, ch)
}

// Record stores the bookkeeping of job id. It returns at once: the change
// reaches the disk with the next rewrite. An unknown id is cron.ErrNotFound.
func (s *Store) Record(ctx context.Context, id string, b cron.Bookkeeping) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	e, ok := s.index[id]
	if !ok {
		return cron.ErrNotFound
	}
	b.Apply(&e.job)
	e.stale = true
	s.changedLocked(false)
	return nil
}

// Flush writes every change made so far and returns when it is on disk.
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

// Close writes the last changes, stops the flushing goroutine, releases the
// lock on the data directory ([LockFile]) and returns the error of the
// final rewrite, if any. Later calls return nil.
func (s *Store) Close() error {
	var err error
	s.once.Do(func() {
		// No change is taken from here on, so the final rewrite carries
		// every change a caller was told of (a change taken after it
		// would sit in the journal and count as not written).
		s.mu.Lock()
		s.closed = true
		s.mu.Unlock()
		close(s.stop)
		<-s.done
		s.closeJournal()
		s.mu.Lock()
		if s.gen != s.durable {
			err = errors.New("jsonstore: close: the last changes could not be written")
		}
		for _, w := range s.waiters {
			w.ch <- ErrClosed
		}
		s.waiters = nil
		s.mu.Unlock()
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
	if !s.scheduled {
		s.scheduled = true
		s.dirtyAt = time.Now()
		select {
		case s.kick <- struct{}{}:
		default:
		}
	}
	if !durable {
		return nil
	}
	ch := make(chan error, 1)
	s.waiters = append(s.waiters, waiter{gen: s.gen, ch: ch})
	return ch
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
// interval pass from the first one, and rewrites.
func (s *Store) loop() {
	defer close(s.done)
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	armed := false
	for {
		select {
		case <-s.kick:
			// Start at once, unless a rewrite started less than an
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
			s.flushLogged()
		case ch := <-s.force:
			if armed {
				timer.Stop()
				armed = false
			}
			ch <- s.flushOnce()
		case <-s.stop:
			timer.Stop()
			s.flushLogged()
			return
		}
	}
}

func (s *Store) flushLogged() {
	if err := s.flushOnce(); err != nil {
		s.log.Error("jsonstore: rewrite failed; retrying", "file", filepath.Join(s.dir, JobsFile), "error", err)
	}
}

// flushOnce rewrites jobs.json (and appends new runs) when anything changed.
func (s *Store) flushOnce() error {
	s.mu.Lock()
	s.scheduled = false
	if s.gen == s.durable && len(s.newRuns) == 0 {
		s.mu.Unlock()
		return nil
	}
	gen := s.gen
	jseq := s.jseq
	jobsChanged := gen != s.durable
	if s.tombs > 0 && s.tombs >= len(s.order)/4 {
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
	s.live = s.live[:0]
	s.pending = s.pending[:0]
	if jobsChanged {
		for _, e := range s.order {
			if e.deleted {
				continue
			}
			if e.stale {
				// Encoded below, outside the lock, from a copy: a Save
				// replaces e.job (and its headers map) whole, so the copy
				// stays consistent.
				s.pending = append(s.pending, pendingEnc{e: e, job: e.job})
				e.stale = false
			}
			s.live = append(s.live, e)
		}
	}
	runs := s.newRuns
	s.newRuns = nil
	compact := s.runsNeedCompactionLocked(len(runs))
	var keep []cron.Run
	if compact {
		keep = s.allRunsLocked()
	}
	s.mu.Unlock()

	start := time.Now()
	s.lastStart = start
	s.encodePending()
	s.refs = s.refs[:0]
	for _, e := range s.live {
		s.refs = append(s.refs, e.enc)
	}
	var err error
	switch {
	case compact:
		err = s.rewriteRuns(keep)
	case len(runs) > 0:
		err = s.appendRuns(runs)
	}
	if err != nil {
		err = fmt.Errorf("jsonstore: write %s: %w", RunsFile, err)
	}
	size := 0
	if err == nil && jobsChanged {
		need := 256
		for _, r := range s.refs {
			need += len(r) + 6
		}
		if cap(s.buf) < need {
			s.buf = make([]byte, 0, need+need/8)
		}
		s.buf = appendDocument(s.buf[:0], start, s.refs)
		size = len(s.buf)
		if werr := writeFileAtomic(s.dir, JobsFile, s.buf); werr != nil {
			err = fmt.Errorf("jsonstore: write %s: %w", JobsFile, werr)
		}
		if cap(s.buf) > 4*len(s.buf)+1<<20 {
			s.buf = nil
		}
	}
	if err == nil && jobsChanged {
		if jerr := s.compactJournal(jseq); jerr != nil {
			// The records stay and are replayed (again) after a crash:
			// harmless, as each one holds a whole job.
			s.log.Warn("jsonstore: journal not compacted", "error", jerr)
		}
	}
	nJobs := len(s.refs)
	clear(s.refs)
	clear(s.live)
	clear(s.pending)
	elapsed := time.Since(start)

	s.mu.Lock()
	if err == nil {
		s.durable = gen
		if compact {
			s.runLines = len(keep)
		} else {
			s.runLines += len(runs)
		}
	} else {
		if !compact {
			s.newRuns = append(runs, s.newRuns...)
		}
		if !s.scheduled {
			s.scheduled = true
			s.dirtyAt = time.Now()
			select {
			case s.kick <- struct{}{}:
			default:
			}
		}
	}
	n := 0
	for _, w := range s.waiters {
		if w.gen <= gen {
			w.ch <- err
			continue
		}
		s.waiters[n] = w
		n++
	}
	clear(s.waiters[n:])
	s.waiters = s.waiters[:n]
	s.mu.Unlock()
	if jobsChanged && s.cfg.OnFlush != nil {
		s.cfg.OnFlush(FlushInfo{Jobs: nJobs, Bytes: size, Runs: len(runs), Duration: elapsed, Err: err})
	}
	return err
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
