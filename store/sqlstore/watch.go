package sqlstore

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ksana-dev/ksana/cron"
)

// Holder is what a [Watcher] keeps in step with the ksana_job table: a
// *cron.Runner.
type Holder interface {
	// Hold adds or replaces a job as stored at version (see
	// [cron.SharedStore]), without writing it back.
	Hold(j cron.Job, version int64) error
	// Drop forgets a job removed from the store, or of a partition no
	// longer leased.
	Drop(id string) bool
	// IDs returns the ids of the jobs held.
	IDs() []string
}

// WatchConfig tunes [Jobs.Watcher]. The zero value is ready to use.
type WatchConfig struct {
	// Poll is how often an SQLite watcher reads the change feed, and how
	// long a PostgreSQL watcher waits before it connects again after
	// losing its connection. Default 250ms.
	Poll time.Duration
	// Logger receives reconnections and the jobs that cannot be held.
	// Default nil: discard.
	Logger *slog.Logger
}

// Watcher follows the changes of the jobs' configuration made by every
// process on the database (through any instance's API, or by hand) and
// applies them to a [Holder]: LISTEN on the channel ksana_jobs:<schema>
// on PostgreSQL, where a trigger notifies each change with the job's id;
// on SQLite, a poll of the ksana_job_change feed that triggers fill. Each
// change reads the job's row as it is now, so that two changes of one job
// made at the same time leave every process with the row that won.
// Bookkeeping is not followed: a process reads it with [Jobs.Job].
type Watcher struct {
	s    *Jobs
	cfg  WatchConfig
	log  *slog.Logger
	conn *pgx.Conn // PostgreSQL: the listening connection, nil once lost
	seq  int64     // SQLite: the last change read

	// mu serializes the changes applied and the partitions loaded or
	// dropped, so that a change of a job never lands after its partition
	// was dropped.
	mu sync.Mutex
	// held are the partitions whose jobs the Holder holds, nil when the
	// store has no Leases (the Holder holds every job).
	held []bool
}

// Watcher starts following changes: on PostgreSQL it connects and
// listens, on SQLite it notes the newest change. Changes made after it
// returns reach [Watcher.Run], so a caller creates the watcher, then loads
// the jobs (cron's Runner.Load), then runs the watcher.
func (s *Jobs) Watcher(ctx context.Context, cfg WatchConfig) (*Watcher, error) {
	if cfg.Poll < 0 {
		return nil, fmt.Errorf("sqlstore: watcher: WatchConfig.Poll must not be negative, got %v", cfg.Poll)
	}
	if cfg.Poll == 0 {
		cfg.Poll = 250 * time.Millisecond
	}
	w := &Watcher{s: s, cfg: cfg, log: cfg.Logger}
	if s.cfg.Leases != nil {
		w.held = make([]bool, s.partitions())
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	if s.db.d == postgresDialect {
		if err := w.listen(ctx); err != nil {
			return nil, err
		}
		return w, nil
	}
	if err := s.db.x.GetContext(ctx, &w.seq, "SELECT COALESCE(MAX(seq), 0) FROM ksana_job_change"); err != nil {
		return nil, fmt.Errorf("sqlstore: watcher: read ksana_job_change: %w", err)
	}
	return w, nil
}

func (w *Watcher) channel(ctx context.Context) (string, error) {
	schema, err := w.s.db.Schema(ctx)
	if err != nil {
		return "", err
	}
	return "ksana_jobs:" + schema, nil
}

func (w *Watcher) listen(ctx context.Context) error {
	ch, err := w.channel(ctx)
	if err != nil {
		return fmt.Errorf("sqlstore: watcher: %w", err)
	}
	conn, err := pgx.ConnectConfig(ctx, w.s.db.pg.Copy())
	if err != nil {
		return fmt.Errorf("sqlstore: watcher: connect: %w", err)
	}
	if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
		conn.Close(context.WithoutCancel(ctx))
		return fmt.Errorf("sqlstore: watcher: listen on %s: %w", ch, err)
	}
	w.conn = conn
	return nil
}

// Run applies the changes to h until ctx ends. After a lost connection
// (PostgreSQL) it connects again and reads every job held once, since
// notifications sent meanwhile are lost: jobs changed meanwhile are held
// again and jobs deleted meanwhile are dropped. It returns nil when ctx
// ends.
//
// When the store has [JobsConfig.Leases], h holds only the jobs of the
// partitions leased: Run loads the jobs of each partition gained (one
// query per batch of partitions, through the index on the partition
// column) and drops those of each partition lost, at each change of the
// leases and every TTL/12 (a lease that runs out by the local clock);
// a change of a job of a partition not held is ignored, and drops a
// stale copy.
func (w *Watcher) Run(ctx context.Context, h Holder) error {
	var wg sync.WaitGroup
	if w.held != nil {
		wg.Go(func() { w.follow(ctx, h) })
	}
	if w.s.db.d == postgresDialect {
		w.runListen(ctx, h)
	} else {
		w.runPoll(ctx, h)
	}
	wg.Wait()
	if w.conn != nil {
		w.conn.Close(context.WithoutCancel(ctx))
	}
	return nil
}

func (w *Watcher) runListen(ctx context.Context, h Holder) {
	var ids []string
	for ctx.Err() == nil {
		if w.conn == nil {
			if err := w.listen(ctx); err != nil {
				if ctx.Err() == nil {
					w.log.Warn("sqlstore: watcher: cannot listen; trying again", "error", err)
				}
				sleep(ctx, w.cfg.Poll)
				continue
			}
			w.log.Info("sqlstore: watcher: listening again; reading every job")
			if err := w.resync(ctx, h); err != nil {
				w.log.Warn("sqlstore: watcher: resync failed", "error", err)
				w.conn.Close(context.WithoutCancel(ctx))
				w.conn = nil
				continue
			}
		}
		n, err := w.conn.WaitForNotification(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("sqlstore: watcher: connection lost", "error", err)
			w.conn.Close(context.WithoutCancel(ctx))
			w.conn = nil
			continue
		}
		ids = append(ids[:0], n.Payload)
		// Take the notifications already received with it.
		for {
			pctx, cancel := context.WithTimeout(ctx, time.Millisecond)
			n, err := w.conn.WaitForNotification(pctx)
			cancel()
			if err != nil {
				break
			}
			ids = append(ids, n.Payload)
		}
		if err := w.apply(ctx, h, ids); err != nil && ctx.Err() == nil {
			w.log.Warn("sqlstore: watcher: read changed jobs; reading every job", "error", err)
			// The connection may be fine, but the change is not applied.
			if w.conn != nil && !w.conn.IsClosed() {
				if err := w.resync(ctx, h); err != nil {
					w.conn.Close(context.WithoutCancel(ctx))
					w.conn = nil
				}
			}
		}
		if w.conn != nil && w.conn.IsClosed() {
			w.conn = nil
		}
	}
}

func (w *Watcher) runPoll(ctx context.Context, h Holder) {
	t := time.NewTicker(w.cfg.Poll)
	defer t.Stop()
	lastPrune := time.Now()
	type change struct {
		Seq   int64  `db:"seq"`
		JobID string `db:"job_id"`
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		var cs []change
		if err := w.s.db.x.SelectContext(ctx, &cs, w.s.db.d.sql("SELECT seq, job_id FROM ksana_job_change WHERE seq > ? ORDER BY seq LIMIT 10000"), w.seq); err != nil {
			if ctx.Err() == nil {
				w.log.Warn("sqlstore: watcher: read ksana_job_change", "error", err)
			}
			continue
		}
		if len(cs) > 0 {
			ids := make([]string, len(cs))
			for i, c := range cs {
				ids[i] = c.JobID
			}
			if err := w.apply(ctx, h, ids); err != nil {
				if ctx.Err() == nil {
					w.log.Warn("sqlstore: watcher: read changed jobs", "error", err)
				}
				continue
			}
			w.seq = cs[len(cs)-1].Seq
		}
		if time.Since(lastPrune) > time.Minute {
			lastPrune = time.Now()
			if _, err := w.s.db.x.ExecContext(ctx, w.s.db.d.sql("DELETE FROM ksana_job_change WHERE at < {since}"), w.s.db.d.sinceArg(10*time.Minute)); err != nil {
				w.log.Warn("sqlstore: watcher: prune ksana_job_change", "error", err)
			}
		}
	}
}

// follow keeps the partitions held in step with the leases until ctx
// ends.
func (w *Watcher) follow(ctx context.Context, h Holder) {
	l := w.s.cfg.Leases
	t := time.NewTicker(max(l.TTL()/12, 10*time.Millisecond))
	defer t.Stop()
	for {
		if err := w.syncPartitions(ctx, h); err != nil && ctx.Err() == nil {
			w.log.Warn("sqlstore: watcher: load the jobs of the partitions gained; trying again", "error", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-l.Changed():
		case <-t.C:
		}
	}
}

// syncPartitions drops the jobs of the partitions no longer leased and
// holds those of the partitions newly leased.
func (w *Watcher) syncPartitions(ctx context.Context, h Holder) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := len(w.held)
	want := make([]bool, n)
	for _, p := range w.s.cfg.Leases.Owned() {
		want[p] = true
	}
	var gained []int
	lost := false
	for p := range n {
		switch {
		case want[p] && !w.held[p]:
			gained = append(gained, p)
		case !want[p] && w.held[p]:
			lost = true
		}
	}
	if lost {
		dropped := 0
		for _, id := range h.IDs() {
			if p := Partition(id, n); w.held[p] && !want[p] {
				h.Drop(id)
				dropped++
			}
		}
		for p := range n {
			w.held[p] = w.held[p] && want[p]
		}
		w.log.Info("sqlstore: watcher: dropped the jobs of the partitions lost", "jobs", dropped)
	}
	if len(gained) == 0 {
		return nil
	}
	start := time.Now()
	jobs, vers, err := w.s.loadPartitions(ctx, gained)
	if err != nil {
		return err
	}
	bad := 0
	for i, j := range jobs {
		if err := h.Hold(j, vers[i]); err != nil {
			bad++
			w.log.Warn("sqlstore: watcher: cannot hold a job", "job_id", j.ID, "error", err)
		}
	}
	for _, p := range gained {
		w.held[p] = true
	}
	w.log.Info("sqlstore: watcher: loaded the jobs of the partitions gained", "partitions", len(gained), "jobs", len(jobs),
		"invalid", bad, "ms", time.Since(start).Milliseconds())
	return nil
}

// holds reports whether h holds the jobs of id's partition. w.mu is held.
func (w *Watcher) holds(id string) bool {
	return w.held == nil || w.held[Partition(id, len(w.held))]
}

// apply reads the rows of ids and holds or drops each.
func (w *Watcher) apply(ctx context.Context, h Holder, ids []string) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	slices.Sort(ids)
	ids = slices.Compact(ids)
	if w.held != nil {
		kept := ids[:0]
		for _, id := range ids {
			if w.holds(id) {
				kept = append(kept, id)
			} else {
				h.Drop(id) // a stale copy, if any
			}
		}
		ids = kept
	}
	for start := 0; start < len(ids); start += 500 {
		batch := ids[start:min(start+500, len(ids))]
		q, args, err := w.s.db.d.in("SELECT "+jobColumns+" FROM ksana_job WHERE id IN (?)", batch)
		if err != nil {
			return err
		}
		var rows []jobRow
		if err := w.s.db.x.SelectContext(ctx, &rows, q, args...); err != nil {
			return err
		}
		found := make(map[string]bool, len(rows))
		for i := range rows {
			found[rows[i].ID] = true
			j, err := rows[i].job()
			if err == nil {
				err = h.Hold(j, rows[i].Version)
			}
			if err != nil {
				w.log.Warn("sqlstore: watcher: cannot hold a changed job", "job_id", rows[i].ID, "error", err)
			}
		}
		for _, id := range batch {
			if !found[id] {
				h.Drop(id)
			}
		}
	}
	return nil
}

// resync holds every stored job of the partitions held and drops the
// held jobs no longer stored.
func (w *Watcher) resync(ctx context.Context, h Holder) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	var jobs []cron.Job
	var vers []int64
	var err error
	if w.held == nil {
		jobs, vers, err = w.s.LoadHeld(ctx)
	} else {
		var parts []int
		for p, ok := range w.held {
			if ok {
				parts = append(parts, p)
			}
		}
		jobs, vers, err = w.s.loadPartitions(ctx, parts)
	}
	if err != nil {
		return err
	}
	stored := make(map[string]bool, len(jobs))
	var errs []error
	for i, j := range jobs {
		stored[j.ID] = true
		if err := h.Hold(j, vers[i]); err != nil {
			errs = append(errs, err)
		}
	}
	for _, id := range h.IDs() {
		if !stored[id] {
			h.Drop(id)
		}
	}
	if len(errs) > 0 {
		w.log.Warn("sqlstore: watcher: jobs that cannot be held", "count", len(errs), "first", errs[0])
	}
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}
