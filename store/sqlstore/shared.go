package sqlstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// SharedConfig tunes [DB.Shared]. The zero value is ready to use.
type SharedConfig struct {
	// Instance names this process among those sharing the database; it
	// must be unique among the live ones ([ErrInstanceInUse] otherwise).
	// Default: the host name, the process id and random bits.
	Instance string
	// TTL is the lease and heartbeat TTL ([LeasesConfig.TTL]).
	TTL time.Duration
	// Partitions is the number of partitions ([LeasesConfig.Partitions]);
	// every process on one database must use the same.
	Partitions int
	// RunLimit is how many runs per job the history keeps
	// ([JobsConfig.RunLimit]).
	RunLimit int
	// AuditKeep is how many audit entries are kept
	// ([JobsConfig.AuditKeep]).
	AuditKeep int
	// Poll is how often an SQLite process reads the change feed
	// ([WatchConfig.Poll]).
	Poll time.Duration
	// Logger receives the leases' gains and losses and the watcher's
	// reconnections. Default nil: discard.
	Logger *slog.Logger
}

// Shared is cron's job store for one of several processes that share one
// database's jobs, with what shares them: pass it to cron.New as the
// store (it is a [cron.SharedStore], through its [Jobs]), then
// [Shared.Start] it with the runner before the runner's Run, and
// [Shared.Stop] it after Run returns. See the package documentation,
// "Sharing cron jobs".
type Shared struct {
	*Jobs
	leases  *Leases
	watcher *Watcher
	log     *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	wg     sync.WaitGroup
	errs   []error
}

// Shared returns the shared job store of this process on db: it
// registers the instance name (an error wrapping [ErrInstanceInUse] when
// a live process goes by it) and starts following the other processes'
// changes, so that a change made from now on reaches the runner.
func (db *DB) Shared(ctx context.Context, cfg SharedConfig) (*Shared, error) {
	if cfg.Instance == "" {
		cfg.Instance = InstanceName()
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	leases, err := db.Leases(LeasesConfig{Instance: cfg.Instance, TTL: cfg.TTL, Partitions: cfg.Partitions, Logger: log})
	if err != nil {
		return nil, err
	}
	if err := leases.Register(ctx); err != nil {
		return nil, err
	}
	jobs, err := db.Jobs(JobsConfig{Instance: cfg.Instance, Leases: leases, RunLimit: cfg.RunLimit, AuditKeep: cfg.AuditKeep})
	if err != nil {
		return nil, err
	}
	w, err := jobs.Watcher(ctx, WatchConfig{Poll: cfg.Poll, Logger: log})
	if err != nil {
		return nil, err
	}
	return &Shared{Jobs: jobs, leases: leases, watcher: w, log: log}, nil
}

// InstanceName returns a name unique among the processes of a database:
// the host name, the process id and 8 random hex digits.
func InstanceName() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return host + "-" + strconv.Itoa(os.Getpid()) + "-" + hex.EncodeToString(b[:])
}

// Leases returns the leases of this process: its instance name, the
// partitions it holds, the live members and the timing of its rounds.
func (s *Shared) Leases() *Leases { return s.leases }

// Start loads r (cron's Runner.Load: r must not have been loaded), then
// keeps this process's leases and applies the other processes' changes
// to r in the background until [Shared.Stop]. The runner starts with no
// job: it holds those of each partition as its lease is taken, within a
// lease round (a third of the TTL) of Start. A failed load is returned
// and starts nothing.
func (s *Shared) Start(ctx context.Context, r *cron.Runner) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return errors.New("sqlstore: shared: Start was already called")
	}
	if err := r.Load(ctx); err != nil {
		return err
	}
	bg, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.wg.Go(func() {
		if err := s.leases.Run(bg); err != nil {
			s.log.Error("sqlstore: leases stopped", "instance", s.leases.Instance(), "error", err)
			s.mu.Lock()
			s.errs = append(s.errs, err)
			s.mu.Unlock()
		}
	})
	s.wg.Go(func() {
		if err := s.watcher.Run(bg, r); err != nil {
			s.mu.Lock()
			s.errs = append(s.errs, err)
			s.mu.Unlock()
		}
	})
	return nil
}

// Stop ends what Start began and waits for it (or, without Start, closes
// the connection [DB.Shared] opened to follow the changes): the leases are released
// and the heartbeat deleted, so that the other processes take this one's
// partitions at their next round. Call it after the runner's Run has
// returned (Run calls the slots it claimed before it returns). It returns
// why the leases stopped early, if they did (the instance name taken by
// another process, or partitions that differ from the database's).
func (s *Shared) Stop() error {
	s.mu.Lock()
	cancel := s.cancel
	s.mu.Unlock()
	if cancel == nil {
		// Never started: only the watcher's connection is open.
		if c := s.watcher.conn; c != nil {
			c.Close(context.Background())
			s.watcher.conn = nil
		}
		return nil
	}
	cancel()
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := errors.Join(s.errs...); err != nil {
		return fmt.Errorf("sqlstore: shared: %w", err)
	}
	return nil
}
