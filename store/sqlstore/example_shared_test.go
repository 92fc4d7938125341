package sqlstore_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/store/sqlstore"
)

// Two processes share the cron jobs of one database (here an SQLite
// file; a PostgreSQL URL works the same): each opens the database, makes
// its shared store with a name of its own, and runs a runner over it.
// A job added through either is stored once and fired by the process
// that holds its partition.
func ExampleDB_Shared() {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "sqlstore-shared")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	url := "sqlite:" + filepath.Join(dir, "ksana.db")

	type process struct {
		st   *sqlstore.Shared
		r    *cron.Runner
		stop func()
	}
	var ps []process
	for _, name := range []string{"worker-1", "worker-2"} {
		db, err := sqlstore.Open(ctx, url)
		if err != nil {
			log.Fatal(err)
		}
		defer db.Close()
		st, err := db.Shared(ctx, sqlstore.SharedConfig{Instance: name})
		if err != nil {
			log.Fatal(err)
		}
		r, err := cron.New(st, cron.NewHTTPExecutor(cron.HTTPExecutorConfig{}), cron.Config{})
		if err != nil {
			log.Fatal(err)
		}
		// Start before Run: it loads the runner and follows the leases
		// and the other process's changes.
		if err := st.Start(ctx, r); err != nil {
			log.Fatal(err)
		}
		runCtx, cancel := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- r.Run(runCtx) }()
		ps = append(ps, process{st: st, r: r, stop: func() {
			cancel()
			if err := <-done; err != nil {
				log.Print(err)
			}
			// Stop after Run returned: the leases go to the others.
			if err := st.Stop(); err != nil {
				log.Print(err)
			}
		}})
	}
	defer func() {
		for _, p := range ps {
			p.stop()
		}
	}()

	job := cron.Job{ID: "nightly-report", HTTP: cron.HTTPConfig{URL: "https://example.com/report"},
		Schedule: cron.Cron("0 2 * * *")}
	if _, err := ps[0].r.Add(ctx, job); err != nil {
		log.Fatal(err)
	}
	// Both list it (a read of the database); the one that holds the job's
	// partition fires it. Which one that is, and when, depends on the
	// leases' rounds: Shared.Leases().Owned() and Runner.Len() tell.
	for _, p := range ps {
		got, err := p.r.Get(ctx, "nightly-report")
		if err != nil {
			log.Fatal(err)
		}
		fmt.Printf("%s lists %s, schedule %s\n", p.st.Leases().Instance(), got.ID, got.Schedule.Cron)
	}
	// Output:
	// worker-1 lists nightly-report, schedule 0 2 * * *
	// worker-2 lists nightly-report, schedule 0 2 * * *
}
