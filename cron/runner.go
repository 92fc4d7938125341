package cron

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config tunes a [Runner]. The zero value is ready to use: every field has a
// documented default.
type Config struct {
	// Workers is the number of runs executed at the same time.
	// Default 4 ([DefaultWorkers]); at most 65536.
	Workers int
	// DrainTimeout is how long in-flight runs may go on after the context
	// of Run ends; then their contexts are cancelled. Default 30s
	// ([DefaultDrainTimeout]).
	DrainTimeout time.Duration
	// DefaultTimeout is the per-attempt timeout given to jobs whose timeout
	// is 0. Default 10s.
	DefaultTimeout time.Duration
	// DefaultRetryBackoff is the wait between attempts given to jobs whose
	// retry_backoff is 0. Default 5s.
	DefaultRetryBackoff time.Duration
	// MisfireTolerance is how late a run may start and still count as on
	// time. A slot found later than this (after a suspend, an overload, or a
	// restart) goes through the misfire rules instead (see Misfires in the package doc): a
	// once job is missed, an every or cron job rolls on to its next slot,
	// and a job's misfire_grace may still let the slot run once.
	// Default 1s ([DefaultMisfireTolerance]).
	MisfireTolerance time.Duration
	// MinInterval is the shortest every interval (and @every of a cron
	// expression) that Add and Update accept. Default (0) 1s
	// ([DefaultMinInterval]); a negative value sets no minimum. A stored
	// job below it still loads and runs, with a warning; an Update of it
	// must raise its interval.
	MinInterval time.Duration
	// RunLimit is how many runs per job a runner without a store keeps for
	// [Runner.Runs] (a runner over a store leaves history to the store).
	// Default 50 ([DefaultRunLimit]).
	RunLimit int
	// ClaimAhead is how long before a slot the runner claims it, over a
	// [SharedStore] (a store shared by several runners): the timer
	// goroutine takes each slot that long before it is due and hands it to
	// the claiming goroutine, which claims every slot so taken at once
	// ([SharedStore.ClaimSlots]); each slot won is
	// handed to a worker at its time. The store's round trip is then off
	// the firing path: a slot fires as on time as over an unshared store,
	// as long as its claim takes less than ClaimAhead. A claim that takes
	// longer delays its run until the claim is done; a slot claimed by a
	// runner held up past MisfireTolerance before its time came (a stopped
	// process) is recorded as missed, not called late. The owner check
	// ([SharedStore.Owns]) happens ClaimAhead before the slot; the skip of a slot
	// whose previous run is still in flight, at the slot's time, as
	// without a claim. A runner that stops calls the slots it has taken,
	// at their time, before Run returns: stopping takes up to ClaimAhead
	// longer. Default (0) 250ms ([DefaultClaimAhead]);
	// negative: each run is claimed by its worker just before it is called.
	// Over a store that is no SharedStore it has no effect.
	ClaimAhead time.Duration
	// Handlers are the Go functions the runner runs, by job type: a job
	// whose Type names one is run by it (see [Handler]). More can be
	// registered with [Runner.Handle]. A name must pass validType and
	// not be "http". Default nil: HTTP jobs only.
	Handlers map[string]Handler
	// PauseRefresh is how often a runner over a [PauseStore] reads the
	// service-wide pause ([Runner.PauseAll]) from the store: over a
	// [SharedStore], a pause or resume made through another runner takes
	// effect here within this time. Default (0) 1s
	// ([DefaultPauseRefresh]).
	PauseRefresh time.Duration
	// Observer sees every run, skip and miss, once the run is in the
	// history. It is called from one goroutine, in the order the runs
	// finished. Default nil: none.
	Observer Observer
	// Logger receives the runner's log records (job_id, name, status,
	// latency_ms, error). Default nil: discard.
	Logger *slog.Logger
	// Alert is the alert webhook of the jobs that name none (see
	// [AlertConfig]); its URL and Secret also serve a job whose alert
	// has no URL. Its URL must be an absolute http or https URL. Default
	// (empty URL): only jobs with an alert URL of their own alert.
	Alert AlertConfig
	// AlertRetries, when positive, is the most times a failed alert
	// delivery (a network error, a 5xx or a 429 answer) is tried again
	// before the alert is dead, if its horizon has not come first.
	// Default (0): tried again until AlertHorizon; negative: never.
	AlertRetries int
	// AlertBackoff is the wait before the first retry of an alert
	// delivery, doubled for each next one up to [MaxAlertBackoff].
	// Default (0) [DefaultAlertBackoff].
	AlertBackoff time.Duration
	// AlertHorizon is how long after it was raised an alert is retried:
	// an attempt that fails after it makes the alert dead (kept, to be
	// seen, in the [AlertOutbox]). Each attempt is signed anew and
	// carries the same [AlertDeliveryHeader]. Default (0)
	// [DefaultAlertHorizon].
	AlertHorizon time.Duration
	// AlertClient posts the alerts. Default nil: an http.Client with no
	// timeout of its own (each attempt is bounded to 10s).
	AlertClient *http.Client
	// Authorizer decides who may make which change (see [Actor] and
	// [Action]): every change of a job or of the service asks it first,
	// for the actor of the call's context ([WithActor]). Default nil:
	// [RoleRules], by role.
	Authorizer Authorizer
	// AuditLog keeps the audit record of every change ([AuditEntry]).
	// Default nil: the store's log when the store is an [AuditLog]
	// ([MemStore], store/jsonstore, store/sqlstore). A runner with
	// neither (no store) keeps no audit log, at no cost per change: give
	// an [AuditBuffer] to keep the newest records in memory.
	AuditLog AuditLog
	// AuditSink, when set, is called with every audit record once it is
	// stored, for an embedding service that keeps or forwards them: in
	// order, one record at a time, before the next is stored. It must be
	// fast: the change's caller waits for it. Default nil.
	AuditSink func(ctx context.Context, e AuditEntry)
	// Idempotency keeps the idempotency keys of run-now
	// ([RunOptions.IdempotencyKey]). Default nil: the store's when the
	// store is an [IdempotencyStore] (store/sqlstore, shared by every
	// process on the database), else up to [DefaultIdempotencyKeys] in
	// the memory of this runner.
	Idempotency IdempotencyStore
	// AlertAllowHosts, when not empty, lists the hosts and addresses
	// alerts may be sent to, as [HTTPExecutorConfig.AllowHosts] does for
	// callbacks: an alert to another host fails without a request, a
	// redirect elsewhere is not followed, and the address dialed is
	// checked after DNS (see [HostAllowList.AllowsAddr]). cmd/ksana gives
	// it KSANA_CALLBACK_ALLOW. Default nil: any host and address.
	AlertAllowHosts HostAllowList
	// AlertAllowLoopback lets an alert to an allowed host name reach a
	// loopback address, as [HTTPExecutorConfig.AllowLoopback] does for
	// callbacks; without it, with AlertAllowHosts set, loopback is
	// reached only where a pattern names it. Default false.
	AlertAllowLoopback bool
}

// Runner runs timed jobs: one min-heap of jobs keyed by next_run_at (fed
// by a timing wheel that holds the jobs not due within about a second), one
// timer goroutine that wakes for the earliest, and a fixed pool of workers
// that execute the runs. All methods are safe for concurrent use. See the
// package documentation, section "The runner".
type Runner struct {
	store Store // nil: the jobs live in the runner alone
	// sh is the store as the runner works through it: the store itself
	// when it is a SharedStore, or the solo view of any other store (or of
	// none: solo.go). alone is true for the solo view: the store has no
	// other member, so slots are neither claimed ahead nor held.
	sh    SharedStore
	alone bool
	// batchEvery is the least time between two passes of the recorder:
	// BatchEvery over a shared store, 0 alone.
	batchEvery time.Duration
	fly        RunCounter // the store's count of runs in flight; nil when it has none
	authz      Authorizer // who may make which change (manage.go)
	idem       IdempotencyStore
	idemT      idemTimes // tests shorten the waits of idempotent run-nows
	auditor    auditor
	exec       Executor // runs the HTTP jobs
	cfg        Config
	log        *slog.Logger

	hmu      sync.RWMutex
	handlers map[string]Handler // the Go function jobs' handlers, by type

	// now is time.Now. The runner reads time from package time, and its
	// tests run under testing/synctest; the one test that needs the wall
	// clock to jump ahead of the bubble's (a machine waking from suspend,
	// TestLateWake) replaces it.
	now func() time.Time

	// The API's writes to one job are serialized by a lock on its id (ids),
	// so that the store sees them in the order they are applied in memory;
	// writes to different jobs wait for the store side by side, and a store
	// that commits in groups (store/jsonstore) makes them durable together.
	// Load holds lmu for writing, each API write for reading. Neither is
	// ever held by the timer goroutine or the workers.
	lmu    sync.RWMutex
	ids    keyLocks
	loaded bool // guarded by lmu

	mu    sync.Mutex
	tab   table   // the entries
	jobs  idIndex // id -> slot
	order []int32 // slots in creation order; -1 holes are removed jobs
	holes int
	typed map[string]int // the number of jobs held of each type but http
	heap  timeHeap
	queue []task // runs waiting for a worker; queue[qhead:] are pending
	qhead int
	work  sync.Cond // signalled when queue grows or state changes
	dirty []*entry  // entries whose bookkeeping waits for the recorder
	// Over a SharedStore (shared.go): the versions of the jobs held, the
	// entries run but no longer held, and the last-run bookkeeping of
	// their runs that waits for the recorder.
	vers     versions
	loose    map[*entry]loose
	lastRuns []Recorded
	rolled   rollLog // the slots missed and rolled on, not logged yet
	ended    []ended // run records that wait for the recorder
	state    runState
	// wakeAt is the deadline the timer goroutine sleeps toward (Unix ns):
	// a job scheduled before it wakes the goroutine. 0 while it fires.
	wakeAt int64

	cfgs *configs // the configurations compiled last (see compile)
	cads cadences // jitters and cron expressions (see compile)

	wake    chan struct{} // the earliest deadline moved
	recWake chan struct{} // dirty grew
	// Alerts (alert.go): the outbox they wait in, the alerts raised under
	// mu that wait for the recorder, the pauses that wait for the alert
	// loop, and its wake-up.
	outbox    AlertOutbox
	raised    []AlertDelivery
	pauses    []Alert
	missedAt  map[string]time.Time // job id -> its last missed alert
	alertWake chan struct{}

	// Claiming ahead (Config.ClaimAhead), guarded by mu.
	lead     int64  // ns before its time that a slot is taken; 0: claimed by the worker
	ahead    []task // slots taken, waiting for their claim
	claiming []task // the slots whose claim is on its way to the store
	// holds maps each entry with a slot taken but not yet claimed in
	// the store to the earliest such slot: the next_run_at the recorder
	// writes never passes it (see holdSlot).
	holds map[*entry]slotHold
	// resync are the ids of the jobs whose lease came back after a lapse,
	// for the claiming goroutine to read as stored (see resyncLapsed).
	resync []string
	// takeovers are the jobs taken over (Hold) whose next_run_at has
	// passed, for the claiming goroutine to place after the latest slot
	// the store has a row for (see takeOver).
	takeovers []takeover
	ready     readyHeap     // slots claimed, waiting for their time
	claimWake chan struct{} // ahead grew
	claimNow  chan struct{} // a slot due within half the lead was taken

	// Pauses (pause.go). untils (guarded by mu) are the paused_until of
	// the held jobs paused until a time, for the pause timer; svc is the
	// service-wide pause, set under pmu.
	untils    map[string]int64
	pauseWake chan struct{}
	pmu       sync.Mutex
	svc       atomic.Pointer[PauseState]
}

type runState uint8

const (
	stateIdle runState = iota
	stateRunning
	stateStopping
	stateClosed
)

// New returns a Runner over store that runs HTTP jobs with exec, and Go
// function jobs with the handlers of cfg (and those [Runner.Handle] adds).
// A nil exec is an [HTTPExecutor] with the default settings (and cfg's
// Logger). It validates cfg and does no I/O: call [Runner.Load] (or just
// [Runner.Run]) to read the store.
//
// A nil store is a runner without durable storage: its jobs live in the
// runner alone and are lost with the process, each at the runner's own
// cost in memory (no second copy), and the runner keeps the newest
// [Config.RunLimit] runs of each job for [Runner.Runs].
func New(store Store, exec Executor, cfg Config) (*Runner, error) {
	if exec == nil {
		exec = NewHTTPExecutor(HTTPExecutorConfig{Logger: cfg.Logger})
	}
	handlers, err := checkHandlers(cfg.Handlers)
	if err != nil {
		return nil, err
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	r := &Runner{
		store:     store,
		exec:      exec,
		handlers:  handlers,
		cfg:       cfg,
		log:       log,
		now:       time.Now,
		wake:      make(chan struct{}, 1),
		recWake:   make(chan struct{}, 1),
		pauseWake: make(chan struct{}, 1),
		wakeAt:    math.MaxInt64,
		cfgs:      newConfigs(),
		alertWake: make(chan struct{}, 1),
	}
	r.sh, _ = store.(SharedStore)
	if r.sh == nil {
		runs, _ := store.(RunStore)
		r.sh, r.alone = solo{st: store, runs: runs, r: r}, true
	} else {
		r.batchEvery = BatchEvery
	}
	r.authz = cfg.Authorizer
	if r.authz == nil {
		r.authz = RoleRules
	}
	r.auditor.sink = cfg.AuditSink
	r.auditor.log = cfg.AuditLog
	if r.auditor.log == nil {
		r.auditor.log, _ = store.(AuditLog)
	}
	r.idem = cfg.Idempotency
	if r.idem == nil {
		r.idem, _ = store.(IdempotencyStore)
	}
	if r.idem == nil {
		r.idem = &idempotencyMemory{}
	}
	r.fly, _ = store.(RunCounter)
	r.outbox, _ = store.(AlertOutbox)
	if r.outbox == nil {
		r.outbox = &alertMemory{}
	}
	r.loose = make(map[*entry]loose)
	r.holds = make(map[*entry]slotHold)
	if !r.alone && cfg.ClaimAhead > 0 {
		r.lead = int64(cfg.ClaimAhead)
		r.claimWake = make(chan struct{}, 1)
		r.claimNow = make(chan struct{}, 1)
	}
	r.work.L = &r.mu
	r.heap.tab = &r.tab
	r.heap.cur = toNano(r.now()) >> tickShift
	return r, nil
}

// validate checks cfg and names the bad field.
func (cfg *Config) validate() error {
	for _, f := range []struct {
		name string
		v    int64
	}{
		{"Workers", int64(cfg.Workers)},
		{"DrainTimeout", int64(cfg.DrainTimeout)},
		{"DefaultTimeout", int64(cfg.DefaultTimeout)},
		{"DefaultRetryBackoff", int64(cfg.DefaultRetryBackoff)},
		{"MisfireTolerance", int64(cfg.MisfireTolerance)},
		{"RunLimit", int64(cfg.RunLimit)},
		{"PauseRefresh", int64(cfg.PauseRefresh)},
		{"AlertBackoff", int64(cfg.AlertBackoff)},
		{"AlertHorizon", int64(cfg.AlertHorizon)},
	} {
		if f.v < 0 {
			return fmt.Errorf("cron: New: Config.%s must not be negative, got %d", f.name, f.v)
		}
	}
	if cfg.Workers > maxWorkers {
		return fmt.Errorf("cron: New: Config.Workers must be at most %d, got %d", maxWorkers, cfg.Workers)
	}
	if cfg.Alert != (AlertConfig{}) {
		if err := cfg.Alert.validate("alert", false); err != nil {
			var ve *ValidationError
			errors.As(err, &ve)
			return fmt.Errorf("cron: New: Config.Alert: %s: %s", ve.Field, ve.Reason)
		}
	}
	return nil
}

// maxWorkers bounds Config.Workers.
const maxWorkers = 1 << 16

// withDefaults returns cfg with every zero field set to its default.
func (cfg Config) withDefaults() Config {
	def := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	if cfg.Workers == 0 {
		cfg.Workers = DefaultWorkers
	}
	if cfg.RunLimit == 0 {
		cfg.RunLimit = DefaultRunLimit
	}
	def(&cfg.AlertBackoff, DefaultAlertBackoff)
	def(&cfg.AlertHorizon, DefaultAlertHorizon)
	def(&cfg.ClaimAhead, DefaultClaimAhead)
	def(&cfg.DrainTimeout, DefaultDrainTimeout)
	def(&cfg.DefaultTimeout, DefaultTimeout)
	def(&cfg.DefaultRetryBackoff, DefaultRetryBackoff)
	def(&cfg.MisfireTolerance, DefaultMisfireTolerance)
	def(&cfg.PauseRefresh, DefaultPauseRefresh)
	return cfg
}

// newID returns 128 random bits from crypto/rand as 32 hex characters.
// The bits are read in blocks of idBlock ids (one read of the system's
// generator instead of one per id), each byte handed out once.
func newID() string {
	src := idSources.Get().(*idSource)
	var out [32]byte
	src.take(out[:])
	idSources.Put(src)
	return string(out[:])
}

// newJobID is newID for the id of a new job. The ids are made idChunk at
// a time in one string, and each is a part of it: one allocation (and one
// object for the garbage collector to mark) instead of idChunk. A chunk
// stays in memory while one of its ids does.
func newJobID() string {
	src := idSources.Get().(*idSource)
	if src.next == len(src.ids) {
		var out [32 * idChunk]byte
		for i := range idChunk {
			src.take(out[32*i : 32*i+32])
		}
		src.ids, src.next = string(out[:]), 0
	}
	id := src.ids[src.next : src.next+32]
	src.next += 32
	idSources.Put(src)
	return id
}

const (
	idBlock = 64
	idChunk = 8
)

// idSource is a block of random bytes, buf[off:] not handed out yet, and
// a chunk of job ids, ids[next:] not handed out yet.
type idSource struct {
	buf  [16 * idBlock]byte
	off  int
	ids  string
	next int
}

// take writes the next 16 random bytes of the block to out in hex.
func (src *idSource) take(out []byte) {
	if src.off == len(src.buf) {
		_, _ = rand.Read(src.buf[:]) // never fails (crypto/rand)
		src.off = 0
	}
	hex.Encode(out, src.buf[src.off:src.off+16])
	clear(src.buf[src.off : src.off+16])
	src.off += 16
}

var idSources = sync.Pool{New: func() any { return &idSource{off: 16 * idBlock} }}

// compile makes j ready through [prepare] (defaults from the Config,
// every rule checked, a cron expression parsed once) and fills e with its
// configuration. now is the start_at of an every job that has none. A
// stored job (stored) is not held to MinInterval: it was accepted before.
//
// Jobs made from one template share their jobConfig: the last ones built
// are kept (see configs), and a job with the same values takes the one
// kept (and its URL and body are not checked again). A cron expression is
// parsed once per runner and shared, as is an every schedule's jitter (see
// cadences).
func (r *Runner) compile(j *Job, now time.Time, e *entry, stored bool) error {
	slot := r.cfgs.slot(j.HTTP.URL, j.HTTP.Body)
	last := slot.Load()
	isHTTP := j.IsHTTP()
	rules := r.rules()
	if stored {
		rules.MinInterval = -1
	}
	var cad *cadence
	var parsed *CronSchedule
	if j.Schedule.Kind == KindCron {
		if cad = r.cads.get(cadenceKey{spec: j.Schedule.Cron, tz: j.Schedule.TZ}); cad != nil {
			parsed = cad.cron.s
		}
	}
	if stored && j.Schedule.zoneConflict() != "" {
		// Stored before the conflict was refused: it ran in the zone of
		// its prefix, and still does.
		j.Schedule.TZ = ""
	}
	c, err := prepare(j, now, rules, last, parsed)
	if err != nil {
		return err
	}
	// Built on the stack and compared with the one kept: a job like the
	// last one allocates nothing here.
	built := jobConfig{
		method: methodID(j.HTTP.Method), retries: uint16(j.MaxRetries), timeout: int64(j.Timeout), backoff: int64(j.RetryBackoff),
		url: j.HTTP.URL, body: j.HTTP.Body, headers: j.HTTP.Headers, keep: uint32(j.KeepRuns),
	}
	var fn *fnJob
	if !isHTTP {
		fn = &fnJob{typ: j.Type, args: j.Args}
	}
	built.alert = j.Alert
	cfg := last
	if last == nil || !last.sameWith(&built, fn) {
		cfg = new(jobConfig)
		*cfg = built
		if fn != nil {
			cfg.fn = &fnJob{typ: fn.typ, args: fn.args}
		}
		if j.Alert != nil {
			a := *j.Alert
			cfg.alert = &a
		}
		slot.Store(cfg)
	}
	*e = entry{id: j.ID, name: j.Name, cfg: cfg, enabled: !j.Paused}
	switch j.Schedule.Kind {
	case KindOnce:
		e.kind, e.start = kindOnceID, toNano(j.Schedule.RunAt)
	case KindEvery:
		e.kind, e.start, e.interval = kindEveryID, toNano(j.Schedule.StartAt), int64(j.Schedule.Every)
		if j.Schedule.Jitter > 0 {
			k := cadenceKey{jitter: int64(j.Schedule.Jitter)}
			if e.cad = r.cads.get(k); e.cad == nil {
				e.cad = r.cads.put(k, nil)
			}
		}
	case KindCron:
		e.kind = kindCronID
		if cad == nil {
			cad = r.cads.put(cadenceKey{spec: j.Schedule.Cron, tz: j.Schedule.TZ}, c)
		}
		e.cad = cad
	}
	if j.MisfireGrace > 0 {
		e.ext().grace = int64(j.MisfireGrace)
	}
	if !j.PausedUntil.IsZero() {
		e.ext().until = toNano(j.PausedUntil)
	}
	if !j.PausedAt.IsZero() {
		e.ext().pausedAt = toNano(j.PausedAt)
	}
	return nil
}

// Load reads the store once and schedules its jobs. A job that fails
// validation is logged and skipped (it stays in the store untouched). The
// misfire rules apply to what is past due: a once job whose time has passed
// (by more than MisfireTolerance) is marked missed and never runs; an every
// or cron job rolls on to its next future slot with no catch-up; a job's
// misfire_grace lets a slot missed by less than the grace run once, at
// once. An every job stored without start_at gets start_at = now, saved
// durably by Load; the bookkeeping these rules change (last_status missed,
// next_run_at) is written by the recorder once [Runner.Run] starts.
//
// [Runner.Run] calls Load when it has not been called. A second call
// returns an error.
func (r *Runner) Load(ctx context.Context) error {
	r.lmu.Lock()
	defer r.lmu.Unlock()
	if r.loaded {
		return errors.New("cron: Load: the store was already loaded")
	}
	// A store that can hand its jobs one at a time (see loadEacher) spares
	// the slice of every job, which at a million jobs is most of the cost
	// of loading.
	var (
		jobs []Job
		vers []int64
		each loadEacher
	)
	if so, ok := r.sh.(solo); ok && so.st != nil {
		each, _ = so.st.(loadEacher)
	}
	if each == nil {
		var err error
		if jobs, vers, err = r.sh.LoadHeld(ctx); err != nil {
			return fmt.Errorf("cron: load jobs: %w", err)
		}
	}
	if err := r.loadPause(ctx); err != nil {
		// The pause timer reads it again within PauseRefresh.
		r.log.Warn("cron: reading the service pause failed; trying again", "error", err)
	}
	now := r.now()
	nowNs := toNano(now)
	var last map[string]Run
	if !r.alone {
		last = r.lastSlots(ctx, overdue(jobs, now, r.cfg.MisfireTolerance))
	}
	var toSave []int32 // slots of jobs to save
	r.mu.Lock()
	loaded := 0
	add := func(j *Job, ver int64) {
		loaded++
		if f := j.Schedule.ClearUnused(); len(f) > 0 {
			r.log.Warn("cron: stored job has schedule fields its kind does not use; ignoring them", "job_id", j.ID, "name", j.Name, "fields", f)
		}
		fixStart := j.Schedule.Kind == KindEvery && j.Schedule.StartAt.IsZero()
		var c entry
		if err := r.compile(j, now, &c, true); err != nil {
			r.log.Warn("cron: skipping invalid job", "job_id", j.ID, "name", j.Name, "error", err)
			return
		}
		if min := (Rules{MinInterval: r.cfg.MinInterval}).minInterval(); c.kind == kindEveryID && time.Duration(c.interval) < min {
			r.log.Warn("cron: stored job runs more often than MinInterval allows new jobs to", "job_id", j.ID, "name", j.Name,
				"every", time.Duration(c.interval), "min_interval", min)
		}
		if j.ID == "" {
			r.log.Warn("cron: skipping job without id", "name", j.Name)
			return
		}
		if _, dup := r.jobs.get(&r.tab, j.ID); dup {
			r.log.Warn("cron: skipping job: id already in use", "job_id", j.ID, "name", j.Name)
			return
		}
		if !j.IsHTTP() && r.handler(j.Type) == nil {
			r.log.Warn("cron: stored job has a type with no handler; it is kept, and its runs fail until one is registered",
				"job_id", j.ID, "name", j.Name, "type", j.Type)
		}
		idx, e := r.tab.alloc()
		c.gen = e.gen
		*e = c
		e.setBookkeeping(j.Bookkeeping())
		if vers != nil {
			r.vers.set(idx, ver)
		}
		before := e.bookkeeping()
		var slot int64
		if !e.enabled {
			e.next = 0
		} else {
			due := e.next
			if due == 0 {
				if e.kind == kindOnceID {
					if e.last == 0 && e.status == 0 {
						due = e.start
					}
				} else {
					due = e.nextAfter(nowNs)
				}
			}
			if l, ok := last[j.ID]; ok && nowNs-due > int64(r.cfg.MisfireTolerance) {
				due = afterSlots(e, due, l)
			}
			var ev *Run
			slot, ev = r.settle(idx, e, due, nowNs)
			if ev != nil {
				r.ended = append(r.ended, ended{run: ev})
			}
		}
		r.insert(idx, e)
		switch {
		case slot == 0:
		case r.servicePaused(slot):
			r.skipPaused(e, slot, nowNs)
		default:
			r.enqueue(e, task{scheduled: slot})
		}
		if fixStart {
			toSave = append(toSave, idx)
		} else if e.bookkeeping() != before {
			// The recorder writes it once Run starts.
			r.markDirty(e)
		}
	}
	if each != nil {
		if err := each.LoadEach(ctx, func(j *Job) { add(j, 0) }); err != nil {
			r.mu.Unlock()
			return fmt.Errorf("cron: load jobs: %w", err)
		}
	} else {
		for i := range jobs {
			var ver int64
			if vers != nil {
				ver = vers[i]
			}
			add(&jobs[i], ver)
		}
	}
	r.loaded = true
	r.jobs.place() // the ids added before the runner starts
	r.logRolled()
	saves := make([]Job, len(toSave))
	held := make([]int64, len(toSave))
	for i, idx := range toSave {
		saves[i] = r.tab.at(idx).job(false)
		held[i] = r.vers.get(idx)
	}
	r.mu.Unlock()

	var errs []error
	for i, j := range saves {
		ver, err := r.save(ctx, j, held[i])
		if errors.Is(err, ErrConflict) {
			continue // another runner wrote it since: the watcher brings that
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		r.mu.Lock()
		if e := r.tab.at(toSave[i]); e.id == j.ID {
			r.vers.set(toSave[i], ver)
		}
		r.mu.Unlock()
	}
	r.log.Info("cron: jobs loaded", "jobs", loaded, "scheduled", r.scheduled())
	return errors.Join(errs...)
}

// loadEacher is a [Store] that can hand its jobs to the runner one at a
// time, in creation order, instead of in one slice: fn may keep the job's
// strings, maps and slices but not j itself, and must not call the store.
type loadEacher interface {
	LoadEach(ctx context.Context, fn func(j *Job)) error
}

func (r *Runner) scheduled() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, idx := range r.order {
		if idx >= 0 && r.tab.at(idx).queuedAt != 0 {
			n++
		}
	}
	return n
}

// lookup returns the slot and entry of job id. mu is held.
func (r *Runner) lookup(id string) (int32, *entry, bool) {
	idx, ok := r.jobs.get(&r.tab, id)
	if !ok {
		return 0, nil, false
	}
	return idx, r.tab.at(idx), true
}

// insert adds the entry in slot idx to the index and the creation order.
// mu is held.
func (r *Runner) insert(idx int32, e *entry) {
	r.countType(e, 1)
	r.jobs.put(e.id, idx)
	e.pos = int32(len(r.order))
	r.order = append(r.order, idx)
	r.notePause(e)
}

// unlink removes the entry in slot idx from the index, the order and the
// heap, and frees the slot. mu is held.
func (r *Runner) unlink(idx int32, e *entry) {
	r.unindex(idx, e)
	r.tab.release(idx)
}

// unindex removes the entry in slot idx from the index, the order and
// the heap, leaving the slot to the caller. mu is held.
func (r *Runner) unindex(idx int32, e *entry) {
	r.countType(e, -1)
	r.jobs.del(e.id, idx)
	r.order[e.pos] = -1
	r.holes++
	r.unschedule(e)
	if r.holes > 64 && r.holes > len(r.order)/2 {
		kept := r.order[:0]
		for _, o := range r.order {
			if o >= 0 {
				r.tab.at(o).pos = int32(len(kept))
				kept = append(kept, o)
			}
		}
		r.order = kept
		r.holes = 0
	}
}

// Add creates a job. It fills defaults (type http, method GET for an HTTP
// job, timeout and retry_backoff from the Config), validates (a
// *[ValidationError] naming the field; a type with no handler is one),
// checks a given id (see [Job].ID), gives an empty id 128 random
// bits in hex, gives an every job
// without start_at the current time as start_at, computes next_run_at, and
// saves the job durably before it returns the stored job. The system fields
// of j are ignored. An id in use is [ErrExists].
//
// A once job whose run_at lies in the past by more than MisfireTolerance is
// stored as missed (or run at once within its misfire_grace).
//
// The runner keeps j.HTTP.Headers as given, or an equal map it was given
// before (it never modifies the map); the caller must not modify it
// afterwards either. Jobs made from one template (the same URL, headers,
// body, timeouts and retries; the same interval or cron expression) share
// those values in memory, and a URL, body or cron expression that passed
// is not parsed again, so adding many such jobs is cheap.
//
// The change is authorized for the actor of ctx ([WithActor]; without
// one the embedding program, [ActorLocal]) and audited ([ActionCreate]).
func (r *Runner) Add(ctx context.Context, j Job) (Job, error) {
	a, err := r.authorize(ctx, ActionCreate, j.ID)
	if err != nil {
		return Job{}, err
	}
	if err := r.add(ctx, &j); err != nil {
		return Job{}, err
	}
	if r.auditOn() {
		r.audit(ctx, change{actor: a, action: ActionCreate, jobID: j.ID, after: j})
	}
	return j, nil
}

// add creates job j and sets *j to the job stored. j is the caller's own
// copy: the job is large, and an add passes it on without copying it.
func (r *Runner) add(ctx context.Context, j *Job) error {
	now := r.now()
	var c entry
	e := &c
	if err := r.compile(j, now, e, false); err != nil {
		return err
	}
	if err := r.checkHandled(j); err != nil {
		return err
	}
	if e.x != nil {
		e.x.pausedAt = 0 // a system field: a new job was never paused
	}
	generated := e.id == ""
	if generated {
		e.id = newJobID() // 128 random bits: no check for a clash
	} else if err := validID(e.id); err != nil {
		return err
	}
	nowNs := toNano(now)

	if generated {
		r.lmu.RLock()
		defer r.lmu.RUnlock()
	} else {
		defer r.lockJob(e.id)()
		r.mu.Lock()
		_, exists := r.jobs.get(&r.tab, e.id)
		r.mu.Unlock()
		if exists {
			return fmt.Errorf("%w: %q", ErrExists, e.id)
		}
	}
	var due int64
	if e.enabled {
		due = e.nextAfter(nowNs)
		if e.kind == kindOnceID {
			due = e.start
		}
	}
	// Decide without touching the heap yet: the job enters it only once
	// it is stored.
	var slot int64
	var ev *Run
	if due != 0 && nowNs-due > int64(r.cfg.MisfireTolerance) {
		d := decideMisfire(e.schedule(), fromNano(due), now, time.Duration(e.grace()))
		e.next = toNano(d.Next)
		if d.Run {
			slot = due
		}
		if d.Status == StatusMissed {
			e.status = statusID(StatusMissed)
			ev = &Run{JobID: e.id, ScheduledAt: fromNano(due), TriggeredAt: now, FinishedAt: now, Status: StatusMissed, Reason: ReasonPastDue}
		}
	} else {
		e.next = due
	}
	e.fillJob(j, false)
	var ver int64
	if r.store != nil || !r.alone {
		// Without a store there is nothing to write (solo's Write of no
		// store does nothing).
		v, err := r.create(ctx, *j)
		if err != nil {
			return err
		}
		ver = v
	}
	r.mu.Lock()
	if ev != nil {
		r.finish(*ev, false)
	}
	if !r.mine(e.id) {
		// A shared store's runner holds only the jobs it fires: the one
		// that fires this one loads it from the store.
		r.mu.Unlock()
		return nil
	}
	idx, se := r.tab.alloc()
	c.gen = se.gen
	*se = c
	r.insert(idx, se)
	r.vers.set(idx, ver)
	if se.enabled {
		r.schedule(idx, se, se.next)
	}
	if slot != 0 && !r.servicePaused(slot) {
		r.enqueue(se, task{scheduled: slot})
	}
	r.mu.Unlock()
	return nil
}

// Update changes job id: under the job's lock, so that concurrent changes
// of one job never lose each other's writes, it passes change a copy of the
// job as it stands, then fills the defaults of the result, validates it as
// [Runner.Add] does and saves it durably. An error from change is returned
// as is and nothing changes; so does a *[ValidationError]. change must not
// change the id; the system fields it sets are ignored. When the schedule
// or enabled changes, next_run_at is recomputed from now (a job disabled
// this way is marked paused and gets its paused_at; one enabled this way
// has its pause recorded, as [Runner.Resume] does); otherwise the job
// keeps its slot. An unknown
// id is [ErrNotFound].
//
// Changes to different jobs run side by side, and wait for the store
// together. A job of a [SharedStore] that the runner does not hold is
// read from the store, changed and validated the same way, and saved;
// the runner that fires it takes the change from there.
//
// The change is authorized and audited ([ActionUpdate]) as [Runner.Add]'s.
func (r *Runner) Update(ctx context.Context, id string, change func(*Job) error) (Job, error) {
	a, err := r.authorize(ctx, ActionUpdate, id)
	if err != nil {
		return Job{}, err
	}
	var before Job
	out, err := r.update(ctx, id, func(j *Job) error {
		before = *j
		return change(j)
	})
	if err != nil {
		return Job{}, err
	}
	if r.auditOn() {
		r.audit(ctx, changeOf(a, ActionUpdate, id, before, out))
	}
	return out, nil
}

func (r *Runner) update(ctx context.Context, id string, change func(*Job) error) (Job, error) {
	defer r.lockJob(id)()
	r.mu.Lock()
	idx, cur, ok := r.lookup(id)
	if !ok {
		r.mu.Unlock()
		return r.updateStored(ctx, id, change, false)
	}
	j := cur.job(true)
	held := r.vers.get(idx)
	r.mu.Unlock()
	typ := j.Type
	if err := change(&j); err != nil {
		return Job{}, err
	}
	if j.ID != id {
		return Job{}, invalid("id", "cannot be changed (the job is %q, got %q)", id, j.ID)
	}
	now := r.now()
	c := &entry{}
	if err := r.compile(&j, now, c, false); err != nil {
		return Job{}, err
	}
	if err := r.checkRetyped(&j, typ); err != nil {
		return Job{}, err
	}
	nowNs := toNano(now)

	r.mu.Lock()
	// The lock on the id keeps the job in its slot: only Remove frees it.
	idx, e, _ := r.lookup(id)
	was := e.enabled
	reschedule := !e.sameSchedule(c) || was != c.enabled
	c.setBookkeeping(e.bookkeeping())
	from := e.pausedAt()
	c.setPausedAt(r.pauseStart(e, nextPausedAt(e, c, nowNs), nowNs))
	r.mu.Unlock()

	if reschedule {
		r.reschedulePlan(c, was, nowNs)
		if !was && c.enabled {
			resumedStatus(c, false, r.statusBeforePause(ctx, id))
		}
	}
	ver, err := r.save(ctx, c.job(false), held)
	if errors.Is(err, ErrConflict) {
		// Another runner wrote the job since this one read it: the change
		// applies to that write (the watcher brings it here).
		return r.updateStored(ctx, id, change, false)
	}
	if err != nil {
		return Job{}, err
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.countType(e, -1)
	r.vers.set(idx, ver)
	e.setConfig(c)
	r.countType(e, 1)
	r.notePause(e)
	if reschedule {
		e.next, e.status = c.next, c.status
		e.setLastErr(c.lastErr())
		if e.enabled {
			r.schedule(idx, e, e.next)
		} else {
			r.unschedule(e)
		}
	}
	if !was && e.enabled {
		r.endPause(e, from, nowNs, nowNs)
	}
	r.markDirty(e)
	return e.job(true), nil
}

// reschedulePlan sets the bookkeeping of c for a new schedule or enabled
// flag (was: the old enabled), seen at now.
func (r *Runner) reschedulePlan(c *entry, was bool, now int64) {
	if !c.enabled {
		c.next = 0
		if was {
			c.status = statusID(StatusPaused)
		}
		return
	}
	c.next = c.nextAfter(now)
	if c.next == 0 && c.kind == kindOnceID && c.last == 0 && statusNames[c.status] != StatusMissed {
		// A once job whose time passed while it was disabled.
		c.status = statusID(StatusMissed)
	}
}

// save writes j to the store durably, when there is one, and returns
// its version in a [SharedStore] (0 otherwise): there only while the
// stored job is at version ver (see [SharedStore.Write]; 0 or negative:
// at any version).
func (r *Runner) save(ctx context.Context, j Job, ver int64) (int64, error) {
	if ver == 0 {
		ver = -1 // no version known: not a create
	}
	out, err := r.sh.Write(ctx, j, ver)
	if err != nil {
		return 0, fmt.Errorf("cron: save job %q: %w", j.ID, err)
	}
	return out, nil
}

// Remove deletes job id from the runner and the store. A run in flight
// finishes, but its bookkeeping is dropped. An unknown id is [ErrNotFound].
// The change is authorized and audited ([ActionDelete]) as [Runner.Add]'s.
func (r *Runner) Remove(ctx context.Context, id string) error {
	a, err := r.authorize(ctx, ActionDelete, id)
	if err != nil {
		return err
	}
	if !r.auditOn() {
		return r.remove(ctx, id)
	}
	before, berr := r.Get(ctx, id)
	if err := r.remove(ctx, id); err != nil {
		return err
	}
	c := change{actor: a, action: ActionDelete, jobID: id}
	if berr == nil {
		c.before = before
	}
	r.audit(ctx, c)
	return nil
}

func (r *Runner) remove(ctx context.Context, id string) error {
	defer r.lockJob(id)()
	r.mu.Lock()
	idx, e, ok := r.lookup(id)
	r.mu.Unlock()
	err := r.sh.Delete(ctx, id)
	switch {
	case !ok && errors.Is(err, ErrNotFound):
		return fmt.Errorf("%w: %q", ErrNotFound, id)
	case err != nil && !errors.Is(err, ErrNotFound):
		return fmt.Errorf("cron: delete job %q: %w", id, err)
	case !ok:
		return nil // a job another runner holds
	}
	r.mu.Lock()
	r.unlink(idx, e)
	r.mu.Unlock()
	return nil
}

// Get returns job id. An unknown id is [ErrNotFound]. Over a
// [SharedStore], the job is read from the store with ctx (for the
// bookkeeping another runner writes, and for the jobs this runner does
// not hold); a job this runner fires shows its own next_run_at, and the
// later of its own last run and the stored one. When that read fails, a
// job the runner holds is returned as it holds it; another job is an
// error wrapping [ErrUnavailable].
func (r *Runner) Get(ctx context.Context, id string) (Job, error) {
	r.mu.Lock()
	_, e, held := r.lookup(id)
	var j Job
	if held {
		j = e.job(true)
	}
	r.mu.Unlock()
	s, _, err := r.readStored(ctx, id)
	switch {
	case err != nil && held:
		return j, nil // the held copy answers
	case err != nil:
		return Job{}, err
	case held && r.mine(id):
		newerRun(j.Bookkeeping(), s.Bookkeeping()).Apply(&j)
		return j, nil
	default:
		return s, nil
	}
}

// lockJob takes the locks of an API write to job id (see Runner.lmu) and
// returns the function that releases them.
func (r *Runner) lockJob(id string) (unlock func()) {
	r.lmu.RLock()
	unlockID := r.ids.lock(id)
	return func() {
		unlockID()
		r.lmu.RUnlock()
	}
}

// JobQuery selects the jobs of a [Runner.List] page. The zero JobQuery
// lists every job.
type JobQuery struct {
	// After is where the page starts: the jobs that come after the job
	// with this id in the order of the list. "" starts at the first job.
	// An id that names no job is [ErrNotFound] (the job that ended the
	// previous page was removed since).
	After string
	// Limit is the most jobs the page holds; 0 (or less) means no limit:
	// every job after After that is kept.
	Limit int
	// Text keeps the jobs whose id or name contains it, ignoring case; ""
	// keeps every job. Over a runner's own jobs the text is tested before
	// a Job is built, with no allocation, so a search over many jobs costs
	// little more than the scan.
	Text string
	// Keep, when not nil, keeps the jobs it returns true for, of those that
	// match Text. It sees each of them once, and must be fast: without a
	// [SharedStore], the runner is locked meanwhile.
	Keep func(*Job) bool
}

// List returns a page of the jobs that q keeps, in creation order (the
// order in which they were added; jobs whose Add calls ran at the same
// time may come in either order): up to q.Limit jobs after the job
// q.After, and whether more jobs follow the last one returned (kept by
// q or not). Pass the ID of the last job of a page as the After of the
// next. Without a store shared by several runners, the jobs are those
// the runner holds, and ctx is not used.
//
// Over a [SharedStore] (where each runner holds only the jobs it fires),
// List pages through every stored job, read from the store with ctx, in
// the store's creation order; a job this runner fires shows the
// bookkeeping it holds, as [Runner.Get] does. A failed read of the store
// wraps [ErrUnavailable]. [Runner.IDs] lists the jobs the runner holds.
func (r *Runner) List(ctx context.Context, q JobQuery) (jobs []Job, more bool, err error) {
	return r.pageStored(ctx, q)
}

// pageHeld is [Runner.List] of the jobs the runner holds.
func (r *Runner) pageHeld(q JobQuery) (jobs []Job, more bool, err error) {
	after, limit, text, keep := q.After, q.Limit, q.Text, q.Keep
	r.mu.Lock()
	defer r.mu.Unlock()
	from := 0
	if after != "" {
		_, e, ok := r.lookup(after)
		if !ok {
			return nil, false, ErrNotFound
		}
		from = int(e.pos) + 1
	}
	for i := from; i < len(r.order); i++ {
		idx := r.order[i]
		if idx < 0 {
			continue
		}
		if limit > 0 && len(jobs) == limit {
			return jobs, true, nil
		}
		e := r.tab.at(idx)
		if text != "" && !containsFold(e.id, text) && !containsFold(e.name, text) {
			continue
		}
		j := e.job(false)
		if keep != nil && !keep(&j) {
			continue
		}
		if j.HTTP.Headers != nil {
			j.HTTP.Headers = maps.Clone(j.HTTP.Headers)
		}
		jobs = append(jobs, j)
	}
	return jobs, false, nil
}

// Len returns the number of jobs the runner holds: every job, but over a
// [SharedStore], whose runners each hold the jobs they fire, only those. [Runner.Count] counts every stored job.
func (r *Runner) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.jobs.len()
}

// Count returns the number of jobs enabled and paused: of the jobs held,
// or, over a [SharedStore], of every stored job (then a failed read of
// the store wraps [ErrUnavailable]).
func (r *Runner) Count(ctx context.Context) (enabled, paused int, err error) {
	enabled, paused, err = r.sh.CountJobs(ctx)
	if err != nil {
		return 0, 0, unavailable("count jobs", err)
	}
	return enabled, paused, nil
}

// countHeld counts the jobs the runner holds, enabled and paused.
func (r *Runner) countHeld() (enabled, paused int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, idx := range r.order {
		if idx < 0 {
			continue
		}
		if r.tab.at(idx).enabled {
			enabled++
		} else {
			paused++
		}
	}
	return enabled, paused
}

// Runs returns up to limit of the newest runs of job id, newest first
// (limit <= 0: all that are kept), from the store's [RunStore], or from
// the runner itself when it has no store. An unknown id is [ErrNotFound];
// a store without history gives an error wrapping [ErrUnsupported].
func (r *Runner) Runs(ctx context.Context, id string, limit int) ([]Run, error) {
	runs, err := r.sh.Runs(ctx, id, limit)
	if errors.Is(err, ErrNotFound) {
		return nil, fmt.Errorf("%w: %q", ErrNotFound, id)
	}
	if err != nil && !errors.Is(err, ErrUnsupported) {
		return nil, unavailable(fmt.Sprintf("runs of job %q", id), err)
	}
	return runs, err
}

// Run fires jobs until ctx ends. It calls [Runner.Load] first when that has
// not been done. When ctx ends, nothing new is dispatched (runs still
// queued for a worker are dropped, but the slots already claimed ahead
// in a shared store, which are called at their time: see
// [Config.ClaimAhead]), runs in flight get DrainTimeout to
// finish and are then cancelled, the pending bookkeeping is written, the
// alerts of the last runs get up to DrainTimeout more to be delivered, and
// the store is flushed. Run returns nil after a clean
// shutdown, or the errors of loading or of the final writes. It may be
// called once; a second call returns [ErrClosed].
func (r *Runner) Run(ctx context.Context) error {
	r.mu.Lock()
	if r.state != stateIdle {
		r.mu.Unlock()
		return ErrClosed
	}
	r.state = stateRunning
	r.mu.Unlock()

	r.lmu.RLock()
	loaded := r.loaded
	r.lmu.RUnlock()
	if !loaded {
		if err := r.Load(ctx); err != nil {
			r.mu.Lock()
			r.state = stateClosed
			r.mu.Unlock()
			return err
		}
	}
	svc := r.startServices(ctx)
	r.loop(ctx)
	err := svc.stop()
	r.mu.Lock()
	r.state = stateClosed
	r.mu.Unlock()
	return err
}

// containsFold reports whether sub is within s, ignoring case: ASCII
// letters byte by byte, other text as [strings.EqualFold] compares. It
// allocates nothing.
func containsFold(s, sub string) bool {
	n := len(sub)
	if n == 0 {
		return true
	}
	first := lowerASCII(sub[0])
	for i := 0; i+n <= len(s); i++ {
		if c := s[i]; c < 0x80 && sub[0] < 0x80 && lowerASCII(c) != first {
			continue
		}
		if strings.EqualFold(s[i:i+n], sub) {
			return true
		}
	}
	return false
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
