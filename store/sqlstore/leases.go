package sqlstore

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Defaults of [LeasesConfig].
const (
	DefaultLeaseTTL   = 6 * time.Second
	DefaultPartitions = 1024
)

// MinLeaseTTL is the smallest LeasesConfig.TTL [DB.Leases] accepts. A
// lease is renewed every third of its TTL by one committed write; when
// commits slow down (the database host's disk busy with other writers'
// fsyncs, a loaded machine) a renewal that lands past the TTL hands the
// member's partitions to the others although it is alive, and the slots
// it had taken are recorded as missed. Three instances with 300 jobs every
// second beside four busy loops and two fsync-heavy writers on two cores
// lose no slot and move no partition at 2s; at 300ms they lost most of
// their slots to partitions moving back and forth.
const MinLeaseTTL = 2 * time.Second

// LeasesConfig tunes [DB.Leases]. Instance is required; every other zero
// value is a documented default.
type LeasesConfig struct {
	// Instance names this process among those sharing the database; it
	// must be unique among the live ones: [Leases.Register] refuses a
	// name that a live process uses (cmd/ksana's default is host name,
	// process id and random bits). Required.
	Instance string
	// TTL is how long a lease and a heartbeat last without renewal: the
	// leases of a process that stops renewing (killed, paused, cut off
	// from the database) are taken by the others within TTL plus one
	// renewal period (TTL/3). Default 6s ([DefaultLeaseTTL]); at least
	// 2s ([MinLeaseTTL]).
	TTL time.Duration
	// Partitions is the number of partitions the job ids are hashed into;
	// every process on one database must use the same number. Default 1024
	// ([DefaultPartitions]): with three processes, each share is within
	// about 10% of a third. From 1 to 65536.
	Partitions int
	// Logger receives the gains and losses of leases and the errors of
	// renewal. Default nil: discard.
	Logger *slog.Logger
}

// Leases shares the partitions of the job ids among the live processes of
// one database: one lease per partition in ksana_lease, one heartbeat per
// process in ksana_member. See the package documentation, "Sharing cron
// jobs". Run renews them; Owns answers from memory.
type Leases struct {
	db   *DB
	cfg  LeasesConfig
	log  *slog.Logger
	base time.Time      // the monotonic origin of exp
	exp  []atomic.Int64 // per partition: local lease expiry as ns since base, 0 = not held

	changed chan struct{} // signalled when a round gains or loses leases

	token string // this process among those that might use the instance name

	mu         sync.Mutex
	stats      LeaseStats
	members    []string
	pending    bool // the last round left partitions of the share to take
	registered bool
	// sweepUntil: the rounds until then finish the runs of dead members
	// (set when a member goes or partitions are gained).
	sweepUntil time.Time
}

// ErrInstanceInUse is returned by [Leases.Register] (and [Leases.Run])
// when a live process on the database goes by the same
// LeasesConfig.Instance.
var ErrInstanceInUse = errors.New("sqlstore: instance name in use by a live process")

// Leases returns the lease keeper of one process.
func (db *DB) Leases(cfg LeasesConfig) (*Leases, error) {
	return db.leases(cfg, MinLeaseTTL)
}

// leases is [DB.Leases] with minTTL as the smallest TTL: the package's
// tests of the lease rounds use shorter ones.
func (db *DB) leases(cfg LeasesConfig, minTTL time.Duration) (*Leases, error) {
	if cfg.Instance == "" {
		return nil, errors.New("sqlstore: leases: LeasesConfig.Instance is required")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultLeaseTTL
	}
	if cfg.TTL < minTTL {
		return nil, fmt.Errorf("sqlstore: leases: LeasesConfig.TTL must be at least %v, got %v", minTTL, cfg.TTL)
	}
	if cfg.Partitions == 0 {
		cfg.Partitions = DefaultPartitions
	}
	if cfg.Partitions < 1 || cfg.Partitions > 1<<16 {
		return nil, fmt.Errorf("sqlstore: leases: LeasesConfig.Partitions must be from 1 to 65536, got %d", cfg.Partitions)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var tok [16]byte
	_, _ = rand.Read(tok[:])
	return &Leases{db: db, cfg: cfg, log: log, base: time.Now(), exp: make([]atomic.Int64, cfg.Partitions), changed: make(chan struct{}, 1),
		token: hex.EncodeToString(tok[:])}, nil
}

// Partition returns the partition of job id among n: FNV-1a of the id,
// modulo n.
func Partition(id string, n int) int {
	h := fnv.New32a()
	h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// Owns reports whether this process holds the lease of job id's partition
// and, by its own monotonic clock, the lease has not expired: a process
// that was paused past its lease stops firing as soon as it wakes, before
// it talks to the database again.
func (l *Leases) Owns(id string) bool {
	return l.holds(Partition(id, l.cfg.Partitions))
}

func (l *Leases) holds(p int) bool {
	e := l.exp[p].Load()
	return e != 0 && int64(time.Since(l.base)) < e
}

// Owned returns the partitions this process holds now, in order.
func (l *Leases) Owned() []int {
	var out []int
	for p := range l.exp {
		if l.holds(p) {
			out = append(out, p)
		}
	}
	return out
}

// Members returns the live processes seen at the last renewal, in order.
func (l *Leases) Members() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.members)
}

// Changed returns a channel that receives a value after a round of
// [Leases.Renew] (or [Leases.Leave]) that gained or lost leases. A lease
// that runs out by the local clock sends nothing: a reader polls
// [Leases.Owned] as well.
func (l *Leases) Changed() <-chan struct{} { return l.changed }

func (l *Leases) signal() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// Partitions returns LeasesConfig.Partitions in effect.
func (l *Leases) Partitions() int { return l.cfg.Partitions }

// Instance returns LeasesConfig.Instance.
func (l *Leases) Instance() string { return l.cfg.Instance }

// TTL returns the lease TTL in effect.
func (l *Leases) TTL() time.Duration { return l.cfg.TTL }

// Run registers the instance when [Leases.Register] was not called, then
// renews the heartbeat and the leases every TTL/3 until ctx ends, and
// releases every lease and the heartbeat so that the others take over at
// once. A failed renewal is logged and tried again at the next period;
// meanwhile the leases run out by the local clock. Each round also
// finishes the runs that dead processes left unfinished in the partitions
// held (see the package documentation, "Sharing cron jobs"). Run returns
// an error only when the lease table disagrees with Partitions, or the
// instance name is in use ([ErrInstanceInUse]).
func (l *Leases) Run(ctx context.Context) error {
	if err := l.init(ctx); err != nil {
		return err
	}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			defer cancel()
			return l.Leave(rctx)
		case <-t.C:
		}
		if err := l.round(ctx); err != nil && ctx.Err() == nil {
			l.log.Warn("sqlstore: lease renewal failed; leases run out by the local clock", "instance", l.cfg.Instance, "error", err)
		}
		// Renew every TTL/3; while part of the share is still held by
		// another process (which releases it at its own next round) or
		// not yet expired, or partitions beyond the share are still
		// held (released a sixteenth a round), every TTL/12, so that a
		// partition handed over is without an owner for about TTL/12 at
		// most.
		wait := l.cfg.TTL / 3
		l.mu.Lock()
		if l.pending {
			wait = l.cfg.TTL / 12
		}
		l.mu.Unlock()
		t.Reset(wait)
	}
}

// Register claims the instance name for this process in ksana_member.
// While another process that goes by the name has a heartbeat within the
// TTL, Register waits (up to a TTL) to see whether that heartbeat is
// renewed: a live process renews it every TTL/3, and Register then
// fails with an error wrapping [ErrInstanceInUse] (two processes with
// one name would both hold every lease of that name); the heartbeat of a
// process that was killed is not renewed, and Register takes the name as
// soon as it lapses, so that a process restarted at once after a crash
// starts within a TTL instead of being refused. The name is free at once
// after a clean stop ([Leases.Leave]). Then the runs that an earlier
// process of the same name claimed and left unfinished (it was killed)
// are finished as missed, "holder died". [Leases.Run] registers first
// when Register was not called.
func (l *Leases) Register(ctx context.Context) error {
	d := l.db.d
	var first string
	deadline := time.Now().Add(l.cfg.TTL + l.cfg.TTL/3)
	for {
		taken, seen, err := l.claimName(ctx)
		if err != nil {
			return err
		}
		if !taken {
			break
		}
		switch {
		case first == "":
			first = seen
			l.log.Info("sqlstore: instance name held by a heartbeat; waiting to see whether it is renewed (a live process) or lapses (a process that was killed)",
				"instance", l.cfg.Instance, "last_heartbeat", seen, "ttl", l.cfg.TTL)
		case seen != first || time.Now().After(deadline):
			return fmt.Errorf("%w: another process on this database goes by %q (its heartbeat was renewed at %s, lease TTL %v); "+
				"give each instance its own name, or wait until the other one has stopped", ErrInstanceInUse, l.cfg.Instance, seen, l.cfg.TTL)
		}
		t := time.NewTimer(l.cfg.TTL / 8)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("sqlstore: register instance %q: %w", l.cfg.Instance, ctx.Err())
		case <-t.C:
		}
	}
	if _, err := l.db.x.ExecContext(ctx, d.sql(`UPDATE ksana_run SET status = 'missed', finished_at = ?,
		reason = 'holder died', error = 'holder died: instance ' || instance || ' stopped (it was started again) before this run ended; the run was not called, or the outcome of its call is unknown'
		WHERE instance = ? AND status = ''`), time.Now().UnixNano(), l.cfg.Instance); err != nil {
		return fmt.Errorf("sqlstore: finish the runs of the previous %q: %w", l.cfg.Instance, err)
	}
	l.mu.Lock()
	l.registered = true
	l.mu.Unlock()
	return nil
}

// claimName is one try of Register: taken reports that another process
// holds the name with a heartbeat within the TTL, whose time is seen.
func (l *Leases) claimName(ctx context.Context) (taken bool, seen string, err error) {
	d := l.db.d
	res, err := l.db.x.ExecContext(ctx, d.sql(`INSERT INTO ksana_member (instance, token) VALUES (?, ?)
		ON CONFLICT (instance) DO UPDATE SET token = excluded.token, started_at = {now}, last_seen = {now}
		WHERE ksana_member.token = excluded.token OR ksana_member.last_seen < {since}`), l.cfg.Instance, l.token, d.sinceArg(l.cfg.TTL))
	if err != nil {
		return false, "", fmt.Errorf("sqlstore: register instance %q: %w", l.cfg.Instance, err)
	}
	if n, err := res.RowsAffected(); err != nil || n > 0 {
		return false, "", nil
	}
	if err := l.db.x.GetContext(ctx, &seen, d.sql("SELECT CAST(last_seen AS TEXT) FROM ksana_member WHERE instance = ?"), l.cfg.Instance); err != nil && !errors.Is(err, sql.ErrNoRows) {
		return false, "", fmt.Errorf("sqlstore: register instance %q: %w", l.cfg.Instance, err)
	}
	return true, seen, nil
}

// init registers the instance and creates the lease rows of the
// partitions, waiting for the database while ctx allows.
func (l *Leases) init(ctx context.Context) error {
	for {
		err := l.initOnce(ctx)
		if err == nil || errors.Is(err, errPartitions) || errors.Is(err, ErrInstanceInUse) {
			return err
		}
		l.log.Warn("sqlstore: leases: cannot reach the database; trying again", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(l.cfg.TTL / 3):
		}
	}
}

var errPartitions = errors.New("sqlstore: leases: partition count differs from the database's")

func (l *Leases) initOnce(ctx context.Context) error {
	l.mu.Lock()
	registered := l.registered
	l.mu.Unlock()
	if !registered {
		if err := l.Register(ctx); err != nil {
			return err
		}
	}
	var have int
	if err := l.db.x.GetContext(ctx, &have, "SELECT COALESCE(MAX(part) + 1, 0) FROM ksana_lease"); err != nil {
		return fmt.Errorf("sqlstore: leases: read ksana_lease: %w", err)
	}
	if have != 0 && have != l.cfg.Partitions {
		return fmt.Errorf("%w: ksana_lease has %d partitions, LeasesConfig.Partitions is %d (every process on one database must use the same)",
			errPartitions, have, l.cfg.Partitions)
	}
	var b strings.Builder
	b.WriteString("INSERT INTO ksana_lease (part) VALUES ")
	for p := range l.cfg.Partitions {
		if p > 0 {
			b.WriteByte(',')
		}
		b.WriteString("(" + strconv.Itoa(p) + ")")
	}
	b.WriteString(" ON CONFLICT DO NOTHING")
	if _, err := l.db.x.ExecContext(ctx, b.String()); err != nil {
		return fmt.Errorf("sqlstore: leases: create ksana_lease rows: %w", err)
	}
	return nil
}

// until returns an SQL expression for the database clock plus the
// duration its one placeholder takes from untilArg.
func (l *Leases) until() string {
	if l.db.d == postgresDialect {
		return "(now() + (CAST(? AS BIGINT) * INTERVAL '1 millisecond'))"
	}
	return "strftime('%Y-%m-%d %H:%M:%f', 'now', ?)"
}

func (l *Leases) untilArg(d time.Duration) any {
	if l.db.d == postgresDialect {
		return d.Milliseconds()
	}
	return fmt.Sprintf("+%d.%03d seconds", d.Milliseconds()/1000, d.Milliseconds()%1000)
}

// Share returns the partitions of n that member holds among members by
// rendezvous hashing: each partition goes to the member of highest
// hash(member, partition). A member that joins or leaves moves only its
// own share.
func Share(member string, members []string, n int) []int {
	var out []int
	for p := range n {
		if owner(members, p) == member {
			out = append(out, p)
		}
	}
	return out
}

func owner(members []string, p int) string {
	var best string
	var bestScore uint64
	for _, m := range members {
		h := fnv.New64a()
		h.Write([]byte(m))
		h.Write([]byte{0, byte(p >> 8), byte(p)})
		s := mix(h.Sum64())
		if best == "" || s > bestScore || (s == bestScore && m < best) {
			best, bestScore = m, s
		}
	}
	return best
}

// mix is the finaliser of splitmix64: FNV's high bits alone are poorly
// spread for inputs that differ in the last bytes.
func mix(z uint64) uint64 {
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// LeaseStats are what a lease keeper's rounds (see [Leases.Run]) have
// done since it was made, for health pages and metrics. A healthy keeper
// renews every third of its TTL and each round takes milliseconds; a
// round that takes long, or a gap between renewals near the TTL, shows
// that commits are slow and its partitions are about to move although
// it is alive.
type LeaseStats struct {
	// Rounds and Failures count the rounds that renewed and those that
	// failed (their error is logged).
	Rounds, Failures int64
	// LastRenewed is when the last round that renewed started (zero:
	// none yet).
	LastRenewed time.Time
	// LastRound and MaxRound are how long the last round that renewed
	// took, and the longest one.
	LastRound, MaxRound time.Duration
	// MaxGap is the longest time between the starts of two rounds that
	// renewed: a third of the TTL while all is well, the TTL or more when
	// the leases ran out in between.
	MaxGap time.Duration
	// Gained and Lost count the partitions taken and given up (released
	// to a member that joined, or run out) in all.
	Gained, Lost int64
}

// Stats returns what the keeper's rounds have done so far.
func (l *Leases) Stats() LeaseStats {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// round is one renewal of Run, counted in the keeper's stats.
func (l *Leases) round(ctx context.Context) error {
	start := time.Now()
	err := l.Renew(ctx)
	took := time.Since(start)
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.stats.Failures++
		return err
	}
	if !l.stats.LastRenewed.IsZero() {
		l.stats.MaxGap = max(l.stats.MaxGap, start.Sub(l.stats.LastRenewed))
	}
	l.stats.Rounds++
	l.stats.LastRenewed, l.stats.LastRound, l.stats.MaxRound = start, took, max(l.stats.MaxRound, took)
	return nil
}

// Renew runs one round: the heartbeat, the list of live processes, then
// the leases of this process's fair share (rendezvous hashing over the
// live processes): it renews those it holds, takes those that are free or
// expired, and releases those beyond its share, a sixteenth of the
// partitions a round (renewing the rest of them meanwhile), so that a
// process that joined takes them at its next round. Run calls it every
// TTL/3, and every TTL/12 while part of the share is not yet taken or
// partitions beyond it are still held.
func (l *Leases) Renew(ctx context.Context) error {
	d := l.db.d
	res, err := l.db.x.ExecContext(ctx, d.sql(`INSERT INTO ksana_member (instance, token) VALUES (?, ?)
		ON CONFLICT (instance) DO UPDATE SET last_seen = {now} WHERE ksana_member.token = excluded.token`), l.cfg.Instance, l.token)
	if err != nil {
		return fmt.Errorf("sqlstore: heartbeat of %q: %w", l.cfg.Instance, err)
	}
	if n, err := res.RowsAffected(); err == nil && n == 0 {
		// Another process took the name while this one was held up past
		// the TTL: stop holding anything under it.
		l.dropAll()
		return fmt.Errorf("%w: %q was taken by another process while this one did not renew; this process holds no lease", ErrInstanceInUse, l.cfg.Instance)
	}
	var members []string
	if err := l.db.x.SelectContext(ctx, &members, d.sql("SELECT instance FROM ksana_member WHERE last_seen >= {since} ORDER BY instance"),
		d.sinceArg(l.cfg.TTL)); err != nil {
		return fmt.Errorf("sqlstore: live members: %w", err)
	}
	if !slices.Contains(members, l.cfg.Instance) {
		members = append(members, l.cfg.Instance)
		slices.Sort(members)
	}
	l.mu.Lock()
	// A member gone since the last round died or stopped: its unfinished
	// runs may wait for the holders of their partitions.
	for _, m := range l.members {
		if !slices.Contains(members, m) {
			l.sweepUntil = time.Now().Add(l.cfg.TTL)
			break
		}
	}
	l.members = members
	l.mu.Unlock()
	want := Share(l.cfg.Instance, members, l.cfg.Partitions)
	// The partitions held beyond the share go gradually, moveStep a
	// round; the rest of them are renewed meanwhile (keep).
	var keep []int
	if excess := slices.DeleteFunc(l.Owned(), func(p int) bool { _, in := slices.BinarySearch(want, p); return in }); len(excess) > l.moveStep() {
		keep = excess[l.moveStep():]
	}
	renew := want
	if len(keep) > 0 {
		renew = append(slices.Clone(want), keep...)
		slices.Sort(renew)
	}

	start := time.Since(l.base) // before the statement: the local expiry is never later than the database's
	var got []int
	if len(renew) > 0 {
		q, args, err := d.in("UPDATE ksana_lease SET owner = ?, expires_at = "+l.until()+
			" WHERE part IN (?) AND (owner = ? OR owner = '' OR expires_at < {now}) RETURNING part",
			l.cfg.Instance, l.untilArg(l.cfg.TTL), renew, l.cfg.Instance)
		if err != nil {
			return err
		}
		if err := l.db.x.SelectContext(ctx, &got, q, args...); err != nil {
			return fmt.Errorf("sqlstore: take leases: %w", err)
		}
	}
	q, args := "UPDATE ksana_lease SET owner = '', expires_at = {now} WHERE owner = ? RETURNING part", []any{l.cfg.Instance}
	if len(renew) > 0 {
		var err error
		q, args, err = d.in("UPDATE ksana_lease SET owner = '', expires_at = {now} WHERE owner = ? AND part NOT IN (?) RETURNING part", l.cfg.Instance, renew)
		if err != nil {
			return err
		}
	} else {
		q = d.sql(q)
	}
	// Stop firing what is released before the release is visible.
	held := make([]bool, l.cfg.Partitions)
	for _, p := range got {
		if p >= 0 && p < len(held) {
			held[p] = true
		}
	}
	var gained, lost, ranOut int
	exp := int64(start + l.cfg.TTL)
	for p := range l.exp {
		was := l.holds(p)
		if !was && l.exp[p].Load() != 0 {
			ranOut++ // held at the last round, run out by the local clock since
		}
		if held[p] {
			l.exp[p].Store(exp)
			if !was {
				gained++
			}
		} else {
			l.exp[p].Store(0)
			if was {
				lost++
			}
		}
	}
	l.mu.Lock()
	l.pending = len(got) < len(renew) || len(keep) > 0
	l.stats.Gained += int64(gained)
	l.stats.Lost += int64(lost + ranOut)
	l.mu.Unlock()
	if gained > 0 || lost > 0 {
		l.signal()
	}
	var released []int
	if err := l.db.x.SelectContext(ctx, &released, q, args...); err != nil {
		return fmt.Errorf("sqlstore: release leases: %w", err)
	}
	l.mu.Lock()
	if gained > 0 {
		l.sweepUntil = time.Now().Add(l.cfg.TTL)
	}
	sweep := time.Now().Before(l.sweepUntil)
	l.mu.Unlock()
	if len(got) > 0 && sweep {
		if err := l.finishOrphans(ctx, got); err != nil {
			return err
		}
	}
	if gained > 0 || lost > 0 {
		l.log.Info("sqlstore: leases changed", "instance", l.cfg.Instance, "members", len(members), "share", len(want),
			"held", len(got), "gained", gained, "lost", lost)
	}
	return nil
}

// moveStep is how many partitions beyond its share a keeper releases in
// one round: a sixteenth of them (at least one), so that a join, or a
// member that others saw gone for a moment, moves the partitions a few at
// a time, each without an owner only until the next round of the member
// whose share it is.
func (l *Leases) moveStep() int { return max(1, l.cfg.Partitions/16) }

// finishOrphans finishes, as missed with the reason "holder died", the
// runs of the partitions held (parts) that a process claimed and did not
// finish before its heartbeat ran out (it was killed, or is held up past
// the TTL): nobody else would ever finish them. One UPDATE, through the
// index of the unfinished runs. Renew calls it for a TTL after a member
// went from the live ones, or partitions were gained: only then can
// there be such runs. A process held up that wakes and finishes such a
// run itself overwrites the status with its own.
func (l *Leases) finishOrphans(ctx context.Context, parts []int) error {
	d := l.db.d
	q, args, err := d.in(`UPDATE ksana_run SET status = 'missed', finished_at = ?,
		reason = 'holder died', error = 'holder died: instance ' || instance || ' stopped renewing its lease before this run ended; the run was not called, or the outcome of its call is unknown'
		WHERE status = '' AND instance <> '' AND instance <> ?
		AND instance NOT IN (SELECT instance FROM ksana_member WHERE last_seen >= {since})
		AND job_id IN (SELECT id FROM ksana_job WHERE part IN (?))`, time.Now().UnixNano(), l.cfg.Instance, d.sinceArg(l.cfg.TTL), parts)
	if err != nil {
		return err
	}
	if _, err := l.db.async().ExecContext(ctx, q, args...); err != nil {
		return fmt.Errorf("sqlstore: finish the runs of dead instances: %w", err)
	}
	return nil
}

// dropAll stops holding every lease, by the local clock.
func (l *Leases) dropAll() {
	lost := 0
	for p := range l.exp {
		if l.exp[p].Swap(0) != 0 {
			lost++
		}
	}
	if lost > 0 {
		l.signal()
	}
}

// Leave releases every lease of this process and deletes its heartbeat,
// so that the others take its partitions at their next round.
func (l *Leases) Leave(ctx context.Context) error {
	for p := range l.exp {
		l.exp[p].Store(0)
	}
	l.signal()
	d := l.db.d
	_, err1 := l.db.x.ExecContext(ctx, d.sql("UPDATE ksana_lease SET owner = '', expires_at = {now} WHERE owner = ?"), l.cfg.Instance)
	_, err2 := l.db.x.ExecContext(ctx, d.sql("DELETE FROM ksana_member WHERE instance = ? AND token = ?"), l.cfg.Instance, l.token)
	if err := errors.Join(err1, err2); err != nil {
		return fmt.Errorf("sqlstore: leave %q: %w", l.cfg.Instance, err)
	}
	return nil
}
