package jsonstore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"
)

// BenchmarkSaveDuringRewrite measures a Save (the API's update of a job)
// while jobs.json is rewritten over and over, with 300,000 jobs in the
// store, against a bare write and sync of the same journal line to a file
// of the same directory, with nothing else written, in the same run. The
// goal: a Save's p99 within a few bare syncs (p99/base), not the time a
// rewrite takes to reach the disk.
func BenchmarkSaveDuringRewrite(b *testing.B) {
	const n = 300_000
	s, err := New(seedDir(b, n), Config{Journal: true})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	q := func(lat []time.Duration, p float64) float64 {
		slices.Sort(lat)
		return float64(lat[int(p*float64(len(lat)-1))]) / 1e6
	}

	// The baseline: the bytes of one Save's journal record, written and
	// synced.
	f, err := os.OpenFile(filepath.Join(s.dir, "base.journal"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	j := testJob(jobID(1))
	line := appendJournalSave(nil, 1, &j)
	var base []time.Duration
	for range max(b.N, 50) {
		start := time.Now()
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		base = append(base, time.Since(start))
	}
	f.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	rewrites := 0
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := s.Compact(ctx); err != nil {
				b.Error(err)
				return
			}
			rewrites++
		}
	}()
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		j := testJob(jobID(i % n))
		j.Name = fmt.Sprint(i)
		start := time.Now()
		if err := s.Save(ctx, j); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
		time.Sleep(5 * time.Millisecond) // a PATCH now and then, not a flood
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	p99, b99 := q(lat, 0.99), q(base, 0.99)
	b.ReportMetric(p99, "p99-ms")
	b.ReportMetric(q(lat, 0.5), "p50-ms")
	b.ReportMetric(b99, "base-p99-ms")
	b.ReportMetric(p99/b99, "p99/base")
	b.ReportMetric(float64(rewrites), "rewrites")
}
