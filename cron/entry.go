package cron

import (
	"hash/maphash"
	"maps"
	"sync"
	"sync/atomic"
	"time"
)

// entry is the runner's compact record of one job: its times as Unix
// nanoseconds, its bookkeeping, its scheduling state, and pointers to what
// it shares with other jobs. The Job value is rebuilt from it on demand
// (Get, List, each run). Entries live in fixed slabs of a [table] (no
// per-job allocation, no per-job object for the garbage collector), so a
// job costs 112 bytes here plus its id, its index slot, its heap item and
// its place in the creation order. What a job calls and how it retries
// (cfg: the callback, or a Go function's type and args), a cron expression and an every schedule's jitter (cad) are
// immutable values that jobs with the same ones share, as the jobs of a
// bulk add made from one template do; an every interval stays in the
// entry, so that the fire of a plain every job reads nothing else. Fields
// that most jobs leave empty live behind x.
type entry struct {
	// The fields a fire reads and writes come first, together, so that a
	// fire touches as few cache lines of the entry as it can.
	queuedAt int64  // at of the entry's live heap item, 0 = not in the heap
	next     int64  // next_run_at (Unix ns, 0 = none)
	start    int64  // once: run_at; every: start_at (Unix ns)
	interval int64  // every: interval (ns)
	gen      uint32 // bumped each time the slot is freed
	inflight uint8  // runs queued or executing
	kind     uint8
	status   uint8
	dirty    bool // bookkeeping waits for the recorder
	enabled  bool
	lapsed   bool     // waited for its owner (see awaitOwner)
	pos      int32    // index in Runner.order
	cad      *cadence // cron, and every with jitter; else nil
	last     int64    // last_run_at (Unix ns, 0 = never)
	id       string
	name     string
	cfg      *jobConfig // never nil in a compiled entry
	x        *entryExt  // misfire grace, last error, run history; nil when all are empty
}

// jobConfig is what a job calls and how it retries. It is immutable once
// built: entries share one when their jobs have the same (see
// [Runner.compile]), and a change of a job builds a new one.
type jobConfig struct {
	method  uint8
	retries uint16
	timeout int64 // ns
	backoff int64 // ns
	url     string
	body    string
	headers map[string]string
	fn      *fnJob       // a Go function job's type and args; nil for http
	alert   *AlertConfig // the job's own alert; nil for none
	keep    uint32       // keep_runs; 0 for the store's
}

// sameWith reports whether c and d hold the same values (header maps
// equal in content, and both nil or both not), with fn in place of d.fn.
func (c *jobConfig) sameWith(d *jobConfig, fn *fnJob) bool {
	return c.method == d.method && c.retries == d.retries && c.timeout == d.timeout && c.backoff == d.backoff &&
		c.url == d.url && c.body == d.body && (c.headers == nil) == (d.headers == nil) && maps.Equal(c.headers, d.headers) &&
		c.fn.same(fn) && c.alert.same(d.alert) && c.keep == d.keep
}

// configs keeps the jobConfigs built last, one per slot chosen by a hash
// of the URL and body, so that the jobs of a few templates share theirs
// however their adds interleave.
type configs struct {
	seed  maphash.Seed
	slots [configSlots]atomic.Pointer[jobConfig]
}

const configSlots = 64

func newConfigs() *configs { return &configs{seed: maphash.MakeSeed()} }

// slot returns the slot of a configuration with url and body.
func (cs *configs) slot(url, body string) *atomic.Pointer[jobConfig] {
	h := maphash.String(cs.seed, url) ^ maphash.String(cs.seed, body)*0x9e3779b97f4a7c15
	return &cs.slots[h%configSlots]
}

// cadence is the part of a job's schedule that jobs share: the jitter of
// an every schedule, or a cron expression. It is immutable, and shared by
// the entries of jobs with the same one (see [cadences]).
type cadence struct {
	jitter int64     // every: ns
	cron   *cronExpr // cron
}

// cronExpr is a parsed cron expression with its text and zone.
type cronExpr struct {
	spec, tz string
	s        *CronSchedule
	// memo holds the last answer of next: jobs that share the expression
	// and fire at the same time ask for the same next time.
	memo atomic.Pointer[nextMemo]
}

// nextMemo says that the first run time strictly after any time in
// [after, next) is next.
type nextMemo struct{ after, next int64 }

// next returns the first run time strictly after t (Unix ns), or 0.
func (c *cronExpr) next(t int64) int64 {
	if m := c.memo.Load(); m != nil && m.after <= t && t < m.next {
		return m.next
	}
	n := toNano(c.s.Next(time.Unix(0, t)))
	if n > t {
		c.memo.Store(&nextMemo{after: t, next: n})
	}
	return n
}

// cadences hands out one cadence per jitter, or per expression and zone, so that a cadence that many jobs have is held (and
// a cron expression parsed) once. It keeps up to maxCadences of them, then
// starts afresh (the entries keep theirs).
type cadences struct {
	last atomic.Pointer[cadence] // the last one handed out
	mu   sync.Mutex
	m    map[cadenceKey]*cadence
}

type cadenceKey struct {
	jitter   int64
	spec, tz string
}

const maxCadences = 4096

// get returns the cadence of k, or nil.
func (cs *cadences) get(k cadenceKey) *cadence {
	if c := cs.last.Load(); c != nil && c.key() == k {
		return c
	}
	cs.mu.Lock()
	c := cs.m[k]
	cs.mu.Unlock()
	if c != nil {
		cs.last.Store(c)
	}
	return c
}

// put returns the cadence of k, made with the parse cron (for a cron
// expression) unless one is held already.
func (cs *cadences) put(k cadenceKey, cron *CronSchedule) *cadence {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	c, ok := cs.m[k]
	if !ok {
		if cs.m == nil || len(cs.m) >= maxCadences {
			cs.m = make(map[cadenceKey]*cadence)
		}
		c = &cadence{jitter: k.jitter}
		if cron != nil {
			c.cron = &cronExpr{spec: k.spec, tz: k.tz, s: cron}
		}
		cs.m[k] = c
	}
	cs.last.Store(c)
	return c
}

func (c *cadence) key() cadenceKey {
	k := cadenceKey{jitter: c.jitter}
	if c.cron != nil {
		k.spec, k.tz = c.cron.spec, c.cron.tz
	}
	return k
}

// maxInflight bounds the runs of one job queued or running at once.
const maxInflight = 255

// slabBits sets the slab size of a table: 1024 entries (112 KiB).
const slabBits = 10

// table holds the entries in slabs that never move, so an *entry stays
// valid; freed slots are reused, with their gen bumped so that heap items
// and tasks of the old job can tell.
type table struct {
	slabs []*[1 << slabBits]entry
	n     int32 // slots handed out so far
	free  []int32
}

func (t *table) at(i int32) *entry { return &t.slabs[i>>slabBits][i&(1<<slabBits-1)] }

// alloc returns a free slot, empty but for its gen.
func (t *table) alloc() (int32, *entry) {
	if k := len(t.free); k > 0 {
		i := t.free[k-1]
		t.free = t.free[:k-1]
		return i, t.at(i)
	}
	if int(t.n) == len(t.slabs)<<slabBits {
		t.slabs = append(t.slabs, new([1 << slabBits]entry))
	}
	i := t.n
	t.n++
	return i, t.at(i)
}

// release empties slot i (dropping its strings and maps) for reuse.
func (t *table) release(i int32) {
	e := t.at(i)
	*e = entry{gen: e.gen + 1}
	t.free = append(t.free, i)
}

type entryExt struct {
	grace   int64
	until   int64 // paused_until (Unix ns), 0 = none
	lastErr string
	health  health // the failures in a row and the last transition alerted
	// hist is the run history of a runner without a store: up to the
	// job's keep_runs, or Config.RunLimit, runs.
	hist runRing
	// skip gathers the slots skipped while a run was in flight, recorded
	// as one run when it ends.
	skip *Run
	// pausedAt is the job's paused_at, when it was paused (Unix ns, 0:
	// not known): its resume records the slots passed since as one run.
	pausedAt int64
}

// fnJob is what a Go function job has in place of an HTTP callback.
type fnJob struct {
	typ  string
	args []byte // compact JSON, never modified
}

// same reports whether f and g run the same function with the same args
// (both nil: both HTTP jobs).
func (f *fnJob) same(g *fnJob) bool {
	if f == nil || g == nil {
		return f == g
	}
	return f.typ == g.typ && string(f.args) == string(g.args)
}

// fn returns the type and args of a Go function job, nil for an HTTP job.
func (e *entry) fn() *fnJob { return e.cfg.fn }

const (
	kindOnceID uint8 = iota
	kindEveryID
	kindCronID
)

var kindNames = [...]string{KindOnce, KindEvery, KindCron}

var methodNames = [...]string{"GET", "POST", "PUT", "PATCH", "DELETE"}

var statusNames = [...]Status{"", StatusSuccess, StatusFailed, StatusTimeout, StatusSkipped, StatusPaused, StatusMissed}

func statusID(s Status) uint8 {
	for i, n := range statusNames {
		if n == s {
			return uint8(i)
		}
	}
	return 0
}

func methodID(m string) uint8 {
	for i, n := range methodNames {
		if n == m {
			return uint8(i)
		}
	}
	return 0
}

// toNano converts t to Unix nanoseconds; the zero time (and anything past
// the range of int64 nanoseconds) is 0, "none".
func toNano(t time.Time) int64 {
	if t.IsZero() || !inNanoRange(t) {
		return 0
	}
	return t.UnixNano()
}

func fromNano(n int64) time.Time {
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// The times an int64 of Unix nanoseconds holds, kept to whole years.
var (
	minNanoTime = time.Date(1679, 1, 1, 0, 0, 0, 0, time.UTC)
	maxNanoTime = time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)
)

// inNanoRange reports whether t can be held as int64 Unix nanoseconds.
func inNanoRange(t time.Time) bool {
	return !t.Before(minNanoTime) && t.Before(maxNanoTime)
}

func (e *entry) ext() *entryExt {
	if e.x == nil {
		e.x = &entryExt{}
	}
	return e.x
}

func (e *entry) grace() int64 {
	if e.x == nil {
		return 0
	}
	return e.x.grace
}

// pausedUntil returns the entry's paused_until (Unix ns), 0 for none.
func (e *entry) pausedUntil() int64 {
	if e.x == nil {
		return 0
	}
	return e.x.until
}

// setPausedUntil sets the entry's paused_until (Unix ns, 0: none).
func (e *entry) setPausedUntil(t int64) {
	if t == 0 && e.x == nil {
		return
	}
	e.ext().until = t
}

// pausedAt returns the entry's paused_at (Unix ns), 0 for none.
func (e *entry) pausedAt() int64 {
	if e.x == nil {
		return 0
	}
	return e.x.pausedAt
}

// setPausedAt sets the entry's paused_at (Unix ns, 0: none).
func (e *entry) setPausedAt(t int64) {
	if t == 0 && e.x == nil {
		return
	}
	e.ext().pausedAt = t
}

func (e *entry) lastErr() string {
	if e.x == nil {
		return ""
	}
	return e.x.lastErr
}

func (e *entry) health() health {
	if e.x == nil {
		return health{}
	}
	return e.x.health
}

func (e *entry) setHealth(h health) {
	if h == (health{}) && e.x == nil {
		return
	}
	e.ext().health = h
}

func (e *entry) setLastErr(s string) {
	if s == "" && e.x == nil {
		return
	}
	e.ext().lastErr = s
}

// setConfig copies the configuration of c (built by compile) into e,
// keeping e's bookkeeping and scheduling state.
func (e *entry) setConfig(c *entry) {
	e.name, e.cfg, e.cad = c.name, c.cfg, c.cad
	e.start, e.interval = c.start, c.interval
	e.kind, e.enabled = c.kind, c.enabled
	lastErr, h := e.lastErr(), e.health()
	var hist runRing
	if e.x != nil {
		hist = e.x.hist
	}
	e.x = nil
	if c.x != nil {
		x := *c.x
		e.x = &x
	}
	e.setLastErr(lastErr)
	e.setHealth(h)
	if hist.buf != nil {
		e.ext().hist = hist
	}
}

// addRun adds run to the entry's history, dropping the oldest beyond
// the job's keep_runs, or limit when it has none.
func (e *entry) addRun(run Run, limit int) {
	if e.cfg.keep > 0 {
		limit = int(e.cfg.keep)
	}
	e.ext().hist.add(run, limit)
}

// runs returns up to limit of the entry's newest runs, newest first
// (limit <= 0: all).
func (e *entry) runs(limit int) []Run {
	if e.x == nil || len(e.x.hist.buf) == 0 {
		return []Run{}
	}
	return e.x.hist.newest(limit)
}

// sameSchedule reports whether e and c run at the same times.
func (e *entry) sameSchedule(c *entry) bool {
	if e.kind != c.kind || e.start != c.start || e.interval != c.interval {
		return false
	}
	return e.cad == c.cad || e.cad != nil && c.cad != nil && e.cad.key() == c.cad.key()
}

// schedule returns the entry's Schedule value (allocates; used off the hot
// path, by decideMisfire).
func (e *entry) schedule() Schedule {
	switch e.kind {
	case kindOnceID:
		return onceSchedule{At: fromNano(e.start)}
	case kindEveryID:
		return e.every()
	default:
		return e.cad.cron.s
	}
}

func (e *entry) every() everySchedule {
	ev := everySchedule{Interval: time.Duration(e.interval), Start: fromNano(e.start)}
	if e.cad != nil && e.cad.jitter > 0 {
		ev.Jitter = time.Duration(e.cad.jitter)
		ev.Seed = seedFor(e.id)
	}
	return ev
}

// nextAfter returns the first run time strictly after t (Unix ns), or 0.
func (e *entry) nextAfter(t int64) int64 {
	switch e.kind {
	case kindOnceID:
		if e.start > t {
			return e.start
		}
		return 0
	case kindEveryID:
		ev := e.every()
		return toNano(ev.Next(time.Unix(0, t)))
	default:
		return e.cad.cron.next(t)
	}
}

func (e *entry) bookkeeping() Bookkeeping {
	h := e.health()
	return Bookkeeping{LastRunAt: fromNano(e.last), NextRunAt: fromNano(e.next), LastStatus: statusNames[e.status], LastError: e.lastErr(),
		Failures: h.failures, LastAlert: h.last}
}

func (e *entry) setBookkeeping(b Bookkeeping) {
	e.last, e.next, e.status = toNano(b.LastRunAt), toNano(b.NextRunAt), statusID(b.LastStatus)
	e.setLastErr(b.LastError)
	e.setHealth(health{failures: max(b.Failures, 0), last: b.LastAlert})
}

// job rebuilds the Job. cloneHeaders copies the header map, for values that
// leave the runner.
func (e *entry) job(cloneHeaders bool) Job {
	var j Job
	e.fillJob(&j, cloneHeaders)
	return j
}

// fillJob sets *j to the job of e, as job does, in place.
func (e *entry) fillJob(j *Job, cloneHeaders bool) {
	c := e.cfg
	h := c.headers
	if cloneHeaders && h != nil {
		h = maps.Clone(h)
	}
	*j = Job{
		ID: e.id, Name: e.name, Paused: !e.enabled, Type: JobTypeHTTP,
		Timeout: Duration(c.timeout), MaxRetries: int(c.retries), RetryBackoff: Duration(c.backoff),
		LastRunAt: fromNano(e.last), NextRunAt: fromNano(e.next), LastStatus: statusNames[e.status],
	}
	if fn := e.fn(); fn == nil {
		j.HTTP = HTTPConfig{Method: methodNames[c.method], URL: c.url, Headers: h, Body: c.body}
	} else {
		j.Type, j.Args = fn.typ, fn.args
	}
	j.Schedule.Kind = kindNames[e.kind]
	switch e.kind {
	case kindOnceID:
		j.Schedule.RunAt = fromNano(e.start)
	case kindEveryID:
		j.Schedule.Every = Duration(e.interval)
		j.Schedule.StartAt = fromNano(e.start)
		if e.cad != nil {
			j.Schedule.Jitter = Duration(e.cad.jitter)
		}
	case kindCronID:
		j.Schedule.Cron, j.Schedule.TZ = e.cad.cron.spec, e.cad.cron.tz
	}
	if x := e.x; x != nil {
		j.MisfireGrace = Duration(x.grace)
		j.LastError = x.lastErr
		j.Failures, j.LastAlert = x.health.failures, x.health.last
		j.PausedUntil = fromNano(x.until)
		j.PausedAt = fromNano(x.pausedAt)
	}
	if c.alert != nil {
		a := *c.alert
		j.Alert = &a
	}
	j.KeepRuns = int(c.keep)
}
