//go:build unix

package main

import (
	"context"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// TestSharedLoad runs three built ksana processes on one PostgreSQL schema
// (made for the test, dropped at its end) with 300 jobs firing every
// second against a callback server of the test, which records each call
// by job and scheduled time with the time it arrived. Once the members
// hold their shares and the leases have settled (the warm-up), a loaded
// phase keeps the machine busy (four busy loops, each a shell process,
// and two writers that each write 256 MiB to a file of the test's
// temporary directory and fsync it, over and over), then a quiet phase
// follows with the load stopped. It runs at each TTL of loadTTLs (the
// short TTL of the timing tests and the default) side by side, each on a
// schema and three processes of its own, in step: each waits for the
// others at the end of its warm-up, so that one load makes the loaded
// phase of all and the quiet phase is quiet for all.
//
// No instance dies and none is stopped, so from the end of the warm-up to
// the end of the quiet phase, at each TTL:
//   - no slot is called twice (the whole run, warm-up included);
//   - no slot is lost: with every instance alive, every slot of every job
//     scheduled in that time is called. A slot not called is lost whether
//     or not a final row says why (missed: "no holder", "holder died",
//     "holder stopped", "downtime": a live holder lost the partition or its
//     claim). The report counts the lost slots by phase and by the row
//     that says why, or "no row" (such a row may also stand for several
//     slots: its slots field). A slot skipped "overlap" is counted and
//     reported apart, not as lost: the callback answers at once, so the
//     previous call of the job was still queued on its live holder only
//     because that instance fell a second behind on a starved machine
//     (the firing lag the report gives), which the no-overlap rule answers
//     by design;
//   - no partition changes owner (the owners of ksana_lease, read every
//     250ms; a lease that lapses and is freed or taken counts);
//   - every ksana_run row claimed before the end has a status within the
//     TTL, two renewal periods and 5s.
//
// It reports the calls, the duplicates, the lost slots, the owner changes
// and the firing lag (the arrival of a call less its scheduled time), p50,
// p99 and max, of the loaded and of the quiet phase.
//
// Each phase lasts 10s by default (five of the short TTL); -ksana.load sets it, and -ksana.loadttl
// runs one TTL instead of loadTTLs (any value KSANA_LEASE_TTL accepts). It needs
// KSANA_TEST_POSTGRES_URL (test.sh sets it) and keeps both cores busy:
// test.sh runs it alone, after everything else. The flags go after the
// package. The short run, the long one, and one at another TTL:
//
//	go test -run 'TestSharedLoad$' -v ./cmd/ksana/
//	go test -run 'TestSharedLoad$' -v ./cmd/ksana/ -ksana.load=60s -timeout 30m
//	go test -run 'TestSharedLoad$' -v ./cmd/ksana/ -ksana.loadttl=3s -ksana.load=10s
//
// or with test.sh's servers (it passes its arguments on to go test):
//
//	./test.sh -run 'TestSharedLoad$' ./cmd/ksana/ -ksana.load=60s
func TestSharedLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("processes on PostgreSQL, under load")
	}
	runAs(t, timingTest)
	bin := buildKsana(t)
	ttls := loadTTLs
	if *loadTTLFlag > 0 {
		ttls = []time.Duration{*loadTTLFlag}
	}
	step := newLockstep(len(ttls))
	for _, ttl := range ttls {
		t.Run("ttl="+ttl.String(), func(t *testing.T) {
			t.Parallel()
			defer step.leave()
			testSharedLoad(t, bin, postgresSchemaURL(t, "ksana_load_test"), ttl, *loadPhase, step)
		})
	}
}

// lockstep keeps TestSharedLoad's subtests in step: meet returns once
// every subtest still running has called it, and load starts the load
// at the first call of a phase and stops it at the last stop.
type lockstep struct {
	mu       sync.Mutex
	members  int // the subtests still running
	arrived  int
	release  chan struct{}
	loads    int
	stopLoad func()
}

func newLockstep(n int) *lockstep {
	return &lockstep{members: n, release: make(chan struct{})}
}

// meet returns once every member still running has called it.
func (l *lockstep) meet() {
	l.mu.Lock()
	l.arrived++
	ch := l.release
	l.openLocked()
	l.mu.Unlock()
	<-ch
}

// leave takes an ended subtest (passed, or failed anywhere) out of the
// count, so that the others do not wait for it.
func (l *lockstep) leave() {
	l.mu.Lock()
	l.members--
	l.openLocked()
	l.mu.Unlock()
}

func (l *lockstep) openLocked() {
	if l.arrived > 0 && l.arrived >= l.members {
		close(l.release)
		l.release = make(chan struct{})
		l.arrived = 0
	}
}

// load starts the load unless a member already has, and returns the
// member's stop: the load stops at the last member's.
func (l *lockstep) load(t *testing.T) (stop func()) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.loads == 0 {
		l.stopLoad = startLoad(t)
	}
	l.loads++
	var once sync.Once
	return func() {
		once.Do(func() {
			l.mu.Lock()
			defer l.mu.Unlock()
			if l.loads--; l.loads == 0 {
				l.stopLoad()
			}
		})
	}
}

// loadTTLs are the lease TTLs TestSharedLoad runs at: the smallest
// KSANA_LEASE_TTL accepts, which this test's load justifies, and the
// default.
var loadTTLs = []time.Duration{sqlstore.MinLeaseTTL, sqlstore.DefaultLeaseTTL}

var (
	loadPhase   = flag.Duration("ksana.load", 10*time.Second, "how long each phase of TestSharedLoad (loaded, quiet) lasts")
	loadTTLFlag = flag.Duration("ksana.loadttl", 0, "the one lease TTL TestSharedLoad runs at (0: each of loadTTLs)")
)

func testSharedLoad(t *testing.T, bin, dbURL string, ttl, phase time.Duration, step *lockstep) {
	const jobs = 300
	cb := newArrivals(t)
	db, err := sqlstore.Open(context.Background(), dbURL)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	env := []string{"DATABASE_URL=" + dbURL, "KSANA_LEASE_TTL=" + ttl.String()}
	ms := []*member{startMember(t, bin, "a", env...), startMember(t, bin, "b", env...), startMember(t, bin, "c", env...)}
	for i := range jobs {
		body := fmt.Sprintf(`{"id":"load-%03d","schedule":{"kind":"every","every":"1s"},"http":{"method":"POST","url":%q},"timeout":"2s"}`, i, cb.URL)
		if code := call(t, "POST", ms[i%len(ms)].url+"/jobs", body, nil); code != 201 {
			t.Fatalf("create load-%03d: %d", i, code)
		}
	}

	// Warm-up: the three hold their shares, and no lease has changed
	// owner for a TTL and a second.
	waitFor(t, "three members holding partitions", func() bool {
		for _, m := range ms {
			if h := m.health(t); h["partitions_held"] == float64(0) || h["members"] != float64(3) {
				return false
			}
		}
		return true
	})
	w := startLoadWatch(t, db)
	defer w.stop()
	settle := time.Now().Add(60 * time.Second)
	for time.Since(w.lastChange()) < ttl+time.Second {
		if time.Now().After(settle) {
			t.Errorf("the leases still changed owners 60s after the three held partitions (%d changes)", len(w.changesIn(time.Time{}, time.Now())))
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The other TTLs' warm-ups end too: the phases start together.
	step.meet()
	start := time.Now()

	// Loaded phase.
	stopLoad := step.load(t)
	defer stopLoad()
	time.Sleep(phase)
	stopLoad()
	loadEnd := time.Now()
	stillAlive(t, ms)

	// Quiet phase.
	time.Sleep(phase)
	end := time.Now()
	stillAlive(t, ms)

	// Every run row of a slot before the end finishes: with every holder
	// alive there is no reason for one to stay open; the bound is that of
	// a holder that died (the TTL, then two renewal periods), with slack.
	// The slots due just before the end are claimed and called within it
	// too.
	bound := ttl + 2*ttl/3 + 5*time.Second
	deadline := end.Add(bound)
	time.Sleep(3 * time.Second)
	var open int
	for {
		if err := db.SQL().QueryRow("SELECT count(*) FROM ksana_run WHERE status = '' AND scheduled_at < $1", end.UnixNano()).Scan(&open); err != nil {
			t.Fatal(err)
		}
		if open == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if open > 0 {
		t.Errorf("%d run rows of slots before the end still without a status %v after it", open, bound)
	}
	// The calls of the slots before the end have arrived by now: the
	// rows above are written once a call has ended, and the slots due
	// just before the end had 3s to be claimed.
	w.stop()

	dups := cb.duplicates()
	if len(dups) > 0 {
		t.Errorf("%d slots called more than once: %v", len(dups), firstN(dups, 20))
	}
	changes := w.changesIn(start, end)
	var loadedChanges int
	for _, c := range changes {
		if c.at.Before(loadEnd) {
			loadedChanges++
		}
	}
	if len(changes) > 0 {
		var s []string
		for _, c := range firstN(changes, 10) {
			s = append(s, fmt.Sprintf("%s partition %d %q -> %q", c.at.Format("15:04:05.000"), c.part, c.from, c.to))
		}
		t.Errorf("%d partition owner changes with every member alive (%d in the loaded phase), such as %v", len(changes), loadedChanges, s)
	}
	if w.samples() == 0 {
		t.Errorf("ksana_lease was never read: %v", w.lastErr())
	} else if err := w.lastErr(); err != nil {
		t.Logf("a read of ksana_lease or ksana_run failed (of %d reads of the leases): %v", w.samples(), err)
	}

	// Lost slots: the slots of [start, end) not called. A job's slots are
	// one second apart on a grid that any of its calls shows.
	rows := w.notCalledRows().byJob()
	calls, lost := 0, 0
	var lostRow, lostSilent, lostLoaded, overlap int
	var lagLoaded, lagQuiet []time.Duration
	reasons := map[string]int{}
	var examples []string
	cb.mu.Lock()
	for i := range jobs {
		id := fmt.Sprintf("load-%03d", i)
		arr := cb.calls[id]
		if len(arr) == 0 {
			n := int(end.Sub(start) / time.Second)
			lost += n
			lostSilent += n
			t.Errorf("%s was never called", id)
			continue
		}
		var anchor time.Time
		for at := range arr {
			anchor = time.Unix(0, at)
			break
		}
		s := anchor.Add(start.Sub(anchor).Truncate(time.Second))
		for s.Before(start) {
			s = s.Add(time.Second)
		}
		for ; s.Before(end); s = s.Add(time.Second) {
			if c, ok := arr[s.UnixNano()]; ok {
				calls++
				if s.Before(loadEnd) {
					lagLoaded = append(lagLoaded, c.Sub(s))
				} else {
					lagQuiet = append(lagQuiet, c.Sub(s))
				}
				continue
			}
			lost++
			if s.Before(loadEnd) {
				lostLoaded++
			}
			why := "no row"
			if r, ok := covering(rows[id], s); ok {
				if r.Reason == cron.ReasonOverlap {
					// Not a lease's doing: the previous slot's call was
					// still queued on its live holder, which fell a
					// second behind. Counted and reported apart.
					lost--
					if s.Before(loadEnd) {
						lostLoaded--
					}
					overlap++
					continue
				}
				lostRow++
				why = fmt.Sprintf("%s %q by %s", r.Status, r.Reason, r.Instance)
			} else {
				lostSilent++
			}
			reasons[why]++
			if len(examples) < 10 {
				examples = append(examples, fmt.Sprintf("%s %s (%s)", id, s.Format("15:04:05.000"), why))
			}
		}
	}
	cb.mu.Unlock()
	if lost > 0 {
		t.Errorf("%d slots not called with every instance alive (%d in the loaded phase; %d with a row saying why, %d with none): %v; such as %v",
			lost, lostLoaded, lostRow, lostSilent, reasons, examples)
	}
	t.Logf("TTL %v, phases of %v, %d jobs every 1s on 3 instances", ttl, phase, jobs)
	t.Logf("calls %d, duplicates %d, lost %d (loaded %d, quiet %d; with a row %d, without %d), skipped behind a late call %d, owner changes %d (loaded %d, quiet %d), run rows open %d",
		calls, len(dups), lost, lostLoaded, lost-lostLoaded, lostRow, lostSilent, overlap, len(changes), loadedChanges, len(changes)-loadedChanges, open)
	t.Logf("firing lag loaded: p50 %v p99 %v max %v (%d calls); quiet: p50 %v p99 %v max %v (%d calls)",
		quantile(lagLoaded, 0.5), quantile(lagLoaded, 0.99), quantile(lagLoaded, 1), len(lagLoaded),
		quantile(lagQuiet, 0.5), quantile(lagQuiet, 0.99), quantile(lagQuiet, 1), len(lagQuiet))
}

// arrivals is the callback server of TestSharedLoad: it records the first
// arrival of each (job, scheduled time) and counts the calls of each slot
// and of each run id.
type arrivals struct {
	*httptest.Server
	mu    sync.Mutex
	calls map[string]map[int64]time.Time // job id -> scheduled at (Unix ns) -> first arrival
	slots map[string]int                 // job id + " " + scheduled at -> calls
	runs  map[string]int                 // run id -> calls
}

func newArrivals(t *testing.T) *arrivals {
	a := &arrivals{calls: map[string]map[int64]time.Time{}, slots: map[string]int{}, runs: map[string]int{}}
	a.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		job, at, run := r.Header.Get("X-Ksana-Job-Id"), r.Header.Get("X-Ksana-Scheduled-At"), r.Header.Get("X-Ksana-Run-Id")
		ts, err := time.Parse(time.RFC3339Nano, at)
		a.mu.Lock()
		defer a.mu.Unlock()
		a.slots[job+" "+at]++
		a.runs[run]++
		if err != nil {
			return
		}
		m := a.calls[job]
		if m == nil {
			m = map[int64]time.Time{}
			a.calls[job] = m
		}
		if _, ok := m[ts.UnixNano()]; !ok {
			m[ts.UnixNano()] = now
		}
	}))
	t.Cleanup(a.Close)
	return a
}

// duplicates lists the slots and the run ids called more than once.
func (a *arrivals) duplicates() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var dups []string
	for k, n := range a.slots {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("%s x%d", k, n))
		}
	}
	for k, n := range a.runs {
		if n > 1 {
			dups = append(dups, fmt.Sprintf("run %s x%d", k, n))
		}
	}
	sort.Strings(dups)
	return dups
}

// startLoad starts the load of the loaded phase: four busy loops (shell
// processes) and two writers that write 256 MiB to a file and fsync it,
// over and over. The function it returns stops them and removes the
// files; it runs at cleanup too, when the test ends earlier.
func startLoad(t *testing.T) (stop func()) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var procs []*exec.Cmd
	var wg sync.WaitGroup
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			for _, p := range procs {
				p.Process.Kill()
				p.Wait()
			}
			wg.Wait()
			os.RemoveAll(dir)
		})
	}
	t.Cleanup(stop)
	for range 4 {
		// A loop that ends with the test process, should it die
		// without its cleanup.
		p := exec.Command("sh", "-c", `while kill -0 "$PPID" 2>/dev/null; do i=0; while [ "$i" -lt 10000 ]; do i=$((i + 1)); done; done`)
		if err := startProcess(p); err != nil {
			stop()
			t.Fatalf("busy loop: %v", err)
		}
		procs = append(procs, p)
	}
	for i := range 2 {
		name := filepath.Join(dir, fmt.Sprintf("fsync-%d", i))
		wg.Go(func() {
			buf := make([]byte, 1<<20)
			for j := range buf {
				buf[j] = byte(j * 31)
			}
			for ctx.Err() == nil {
				if err := writeSynced(ctx, name, buf, 256); err != nil && ctx.Err() == nil {
					t.Errorf("fsync writer: %v", err)
					return
				}
			}
		})
	}
	return stop
}

// writeSynced writes n copies of buf to the file name (truncated) and
// fsyncs it, unless ctx ends first.
func writeSynced(ctx context.Context, name string, buf []byte, n int) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer f.Close()
	for range n {
		if ctx.Err() != nil {
			return nil
		}
		if _, err := f.Write(buf); err != nil {
			return err
		}
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Close()
}

// stillAlive fails the test when a member does not answer /health: the
// test's assertions hold while every instance lives.
func stillAlive(t *testing.T, ms []*member) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	for _, m := range ms {
		resp, err := c.Get(m.url + "/health")
		if err != nil {
			t.Fatalf("%s does not answer /health: %v", m.name, err)
		}
		resp.Body.Close()
	}
}

// loadWatch reads, while the test runs, the owners of ksana_lease every
// 250ms (noting each change of a partition's owner) and, every second,
// the finished run rows that are not a success (the history keeps only
// the last runs of each job: a row read now may be trimmed by the end).
type loadWatch struct {
	db     *sqlstore.DB
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once

	mu      sync.Mutex
	owners  map[int]string
	changes []ownerChange
	last    time.Time // of the last change, or of the first read
	n       int       // reads of ksana_lease
	err     error     // the last read's error
	rows    notCalledRows
}

type ownerChange struct {
	at       time.Time
	part     int
	from, to string
}

// notCalledRow is a final ksana_run row that is not a success.
type notCalledRow struct {
	Job, Status, Reason, Instance string
	At                            time.Time
	Slots                         int
}

// notCalledRows are the rows by run id.
type notCalledRows map[string]notCalledRow

// byJob returns the rows of each job.
func (rs notCalledRows) byJob() map[string][]notCalledRow {
	out := map[string][]notCalledRow{}
	for _, r := range rs {
		out[r.Job] = append(out[r.Job], r)
	}
	return out
}

// covering returns the row of rs whose slots include at.
func covering(rs []notCalledRow, at time.Time) (notCalledRow, bool) {
	for _, r := range rs {
		last := r.At.Add(time.Duration(max(r.Slots, 1)-1) * time.Second)
		if !at.Before(r.At) && !at.After(last) {
			return r, true
		}
	}
	return notCalledRow{}, false
}

func startLoadWatch(t *testing.T, db *sqlstore.DB) *loadWatch {
	ctx, cancel := context.WithCancel(context.Background())
	w := &loadWatch{db: db, cancel: cancel, rows: notCalledRows{}}
	w.readOwners(ctx)
	w.last = time.Now()
	w.wg.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for i := 1; ; i++ {
			select {
			case <-ctx.Done():
				w.readRows(context.Background())
				return
			case <-tick.C:
			}
			w.readOwners(ctx)
			if i%4 == 0 {
				w.readRows(ctx)
			}
		}
	})
	t.Cleanup(w.stop)
	return w
}

// stop ends the reads, after a last read of the run rows.
func (w *loadWatch) stop() {
	w.once.Do(func() {
		w.cancel()
		w.wg.Wait()
	})
}

func (w *loadWatch) readOwners(ctx context.Context) {
	rows, err := w.db.SQL().QueryContext(ctx, "SELECT part, owner FROM ksana_lease")
	if err != nil {
		w.noteErr(ctx, err)
		return
	}
	defer rows.Close()
	owners := map[int]string{}
	for rows.Next() {
		var p int
		var o string
		if err := rows.Scan(&p, &o); err != nil {
			w.noteErr(ctx, err)
			return
		}
		owners[p] = o
	}
	if err := rows.Err(); err != nil {
		w.noteErr(ctx, err)
		return
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.n++
	if w.owners != nil {
		for p, o := range owners {
			if prev := w.owners[p]; prev != o {
				w.changes = append(w.changes, ownerChange{now, p, prev, o})
				w.last = now
			}
		}
	}
	w.owners = owners
}

func (w *loadWatch) readRows(ctx context.Context) {
	rows, err := w.db.SQL().QueryContext(ctx, `SELECT id, job_id, scheduled_at, status, COALESCE(reason, ''), COALESCE(slots, 0), COALESCE(instance, '')
		FROM ksana_run WHERE status NOT IN ('', 'success')`)
	if err != nil {
		w.noteErr(ctx, err)
		return
	}
	defer rows.Close()
	got := notCalledRows{}
	for rows.Next() {
		var id string
		var at int64
		var r notCalledRow
		if err := rows.Scan(&id, &r.Job, &at, &r.Status, &r.Reason, &r.Slots, &r.Instance); err != nil {
			w.noteErr(ctx, err)
			return
		}
		r.At = time.Unix(0, at)
		got[id] = r
	}
	if err := rows.Err(); err != nil {
		w.noteErr(ctx, err)
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for k, r := range got {
		w.rows[k] = r
	}
}

func (w *loadWatch) noteErr(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.err = err
}

func (w *loadWatch) lastChange() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.last
}

// changesIn returns the owner changes seen in [from, to).
func (w *loadWatch) changesIn(from, to time.Time) []ownerChange {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []ownerChange
	for _, c := range w.changes {
		if !c.at.Before(from) && c.at.Before(to) {
			out = append(out, c)
		}
	}
	return out
}

func (w *loadWatch) samples() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.n
}

func (w *loadWatch) lastErr() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

func (w *loadWatch) notCalledRows() notCalledRows {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := notCalledRows{}
	for k, r := range w.rows {
		out[k] = r
	}
	return out
}

// quantile returns the q-quantile of ds (sorted in place), 0 for none.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[int(q*float64(len(ds)-1))].Round(time.Millisecond)
}

// firstN returns at most the first n of s.
func firstN[T any](s []T, n int) []T {
	return s[:min(len(s), n)]
}
