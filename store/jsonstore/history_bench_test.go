package jsonstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// BenchmarkQueryRuns measures a page (50 runs) of the history across
// jobs over 1M runs in runs.jsonl: 10,000 jobs with 100 runs each, one a
// minute, every job at the same times (10,000 runs tie on each
// scheduled_at); a tenth failed, a tenth missed, the rest success. The
// baseline, in the same run, is the page of one job's newest runs
// through Runs (a walk of its chain in the file). Goal: every page under
// 50 ms.
//
//	go test -run XXX -bench QueryRuns -benchtime 50x ./store/jsonstore/
func BenchmarkQueryRuns(b *testing.B) {
	const jobs, per = 10_000, 100
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := New(seedDir(b, jobs), Config{RunHistory: per, FlushInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	ctx := context.Background()
	start := time.Now()
	if _, _, err := s.QueryRuns(ctx, cron.RunQuery{}); err != nil { // the index, empty
		b.Fatal(err)
	}
	for i := range jobs * per {
		r := cron.Run{ID: fmt.Sprintf("%032x", uint64(i)*2654435761), JobID: jobID(i % jobs),
			ScheduledAt: base.Add(time.Duration(i/jobs) * time.Minute), Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200,
			Latency: cron.Duration(49 * time.Millisecond)}
		r.TriggeredAt, r.FinishedAt = r.ScheduledAt.Add(time.Millisecond), r.ScheduledAt.Add(50*time.Millisecond)
		switch i % 10 {
		case 0:
			r.Status, r.HTTPStatus, r.Error = cron.StatusFailed, 503, "http 503"
		case 1:
			r.Status, r.HTTPStatus, r.Attempts, r.Reason, r.Slots = cron.StatusMissed, 0, 0, cron.ReasonDowntime, 4
		}
		if err := s.AppendRun(ctx, r); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Flush(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("seeded 1M runs in %v", time.Since(start).Round(time.Millisecond))
	// The index as the first query after a start builds it: one read of
	// runs.jsonl.
	s.mu.Lock()
	s.refs, s.refMax, s.longIDs, s.refsBuilt = nil, nil, nil, false
	s.mu.Unlock()
	start = time.Now()
	if _, _, err := s.QueryRuns(ctx, cron.RunQuery{}); err != nil {
		b.Fatal(err)
	}
	b.Logf("first query, building the index from runs.jsonl: %v", time.Since(start).Round(time.Millisecond))
	q := func(name string, rq cron.RunQuery) {
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				runs, _, err := s.QueryRuns(ctx, rq)
				if err != nil {
					b.Fatal(err)
				}
				if len(runs) == 0 {
					b.Fatal("an empty page")
				}
			}
		})
	}
	// The first query's wait: the build of the index from runs.jsonl,
	// against one read of the file, line by line, in the same run. Goal:
	// the build within 10 reads.
	b.Run("baseline_read_file", func(b *testing.B) {
		for b.Loop() {
			f, err := os.Open(filepath.Join(s.dir, RunsFile))
			if err != nil {
				b.Fatal(err)
			}
			r := bufio.NewReaderSize(f, 1<<20)
			for {
				if _, err := readLine(r); err != nil {
					break
				}
			}
			f.Close()
		}
	})
	b.Run("index_build", func(b *testing.B) {
		for b.Loop() {
			s.mu.Lock()
			s.refs, s.refMax, s.longIDs, s.refsBuilt = nil, nil, nil, false
			s.mu.Unlock()
			s.rmu.RLock()
			err := s.buildRefs(false)
			s.rmu.RUnlock()
			if err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("baseline_runs_of_one_job", func(b *testing.B) {
		for b.Loop() {
			if _, err := s.Runs(ctx, jobID(4242), 50); err != nil {
				b.Fatal(err)
			}
		}
	})
	q("newest", cron.RunQuery{})
	q("job", cron.RunQuery{JobIDs: []string{jobID(4242)}})
	q("jobs3", cron.RunQuery{JobIDs: []string{jobID(1), jobID(5000), jobID(9999)}})
	q("status", cron.RunQuery{Statuses: []cron.Status{cron.StatusFailed}})
	q("window", cron.RunQuery{Since: base.Add(40 * time.Minute), Until: base.Add(50 * time.Minute)})
	q("job+status+window", cron.RunQuery{JobIDs: []string{jobID(4240)}, Statuses: []cron.Status{cron.StatusFailed},
		Since: base.Add(10 * time.Minute), Until: base.Add(90 * time.Minute)})
	q("deep_page", cron.RunQuery{After: cron.RunCursor{ScheduledAt: base.Add(50 * time.Minute), RunID: "8"}})
}
