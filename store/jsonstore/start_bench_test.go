package jsonstore

import (
	"bufio"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// writeLoadJobs writes a jobs.json of n HTTP every-jobs shaped like those
// of examples/jsonstore-load (the 1,000,000-job measurements).
func writeLoadJobs(b testing.TB, dir string, n int) {
	b.Helper()
	f, err := os.Create(filepath.Join(dir, JobsFile))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("{\n  \"version\": 1,\n  \"updated_at\": \"\",\n  \"jobs\": [\n")
	every := time.Duration(n) * time.Millisecond
	first := time.Now().UTC().Truncate(time.Millisecond).Add(time.Minute)
	for i := range n {
		at := first.Add(time.Duration(i) * time.Millisecond)
		j := cron.Job{ID: jobID(i), Name: "job " + strconv.Itoa(i), Type: "http",
			HTTP:     cron.HTTPConfig{Method: "POST", URL: "http://127.0.0.1:9/hook", Body: `{"n":1}`},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(every), StartAt: at},
			Timeout:  cron.Duration(10 * time.Second), RetryBackoff: cron.Duration(time.Second),
			NextRunAt: at}
		enc, err := json.Marshal(j)
		if err != nil {
			b.Fatal(err)
		}
		w.WriteString("    ")
		w.Write(enc)
		if i < n-1 {
			w.WriteByte(',')
		}
		w.WriteByte('\n')
	}
	w.WriteString("  ]\n}\n")
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
}

// heapAfterGC returns the live heap after a full collection.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkStart measures what a start of cmd/ksana on a JSON file costs
// per job with 200,000 jobs: opening the store (journal mode) and loading
// a runner from it, against decoding the same jobs.json with encoding/json
// into a slice of jobs, in the same run. It reports the time ratio
// (start/decode) and the live heap per job of the store and runner
// together, and its ratio to the decoded slice's.
func BenchmarkStart(b *testing.B) {
	const n = 200_000
	dir := b.TempDir()
	writeLoadJobs(b, dir, n)
	ctx := context.Background()
	noop := cron.ExecutorFunc(func(context.Context, *cron.Job, cron.RunInfo) cron.Result {
		return cron.Result{Status: cron.StatusSuccess, Attempts: 1}
	})
	var tStart, tDecode time.Duration
	var bStart, bDecode float64
	for b.Loop() {
		base := heapAfterGC()
		t := time.Now()
		s, err := New(dir, Config{Journal: true})
		if err != nil {
			b.Fatal(err)
		}
		r, err := cron.New(s, noop, cron.Config{})
		if err != nil {
			b.Fatal(err)
		}
		if err := r.Load(ctx); err != nil {
			b.Fatal(err)
		}
		tStart += time.Since(t)
		if r.Len() != n {
			b.Fatalf("loaded %d jobs, want %d", r.Len(), n)
		}
		bStart += float64(heapAfterGC()-base) / n
		runtime.KeepAlive(r)
		s.Close()

		base = heapAfterGC()
		t = time.Now()
		data, err := os.ReadFile(filepath.Join(dir, JobsFile))
		if err != nil {
			b.Fatal(err)
		}
		var doc struct{ Jobs []cron.Job }
		if err := json.Unmarshal(data, &doc); err != nil {
			b.Fatal(err)
		}
		data = nil
		tDecode += time.Since(t)
		bDecode += float64(heapAfterGC()-base) / n
		if len(doc.Jobs) != n {
			b.Fatalf("decoded %d jobs", len(doc.Jobs))
		}
		runtime.KeepAlive(doc.Jobs)
	}
	k := float64(b.N)
	b.ReportMetric(float64(tStart.Nanoseconds())/k/n, "start-ns/job")
	b.ReportMetric(float64(tDecode.Nanoseconds())/k/n, "decode-ns/job")
	b.ReportMetric(float64(tStart)/float64(tDecode), "start/decode")
	b.ReportMetric(bStart/k, "start-B/job")
	b.ReportMetric(bDecode/k, "decode-B/job")
	b.ReportMetric(bStart/bDecode, "B-start/decode")
}
