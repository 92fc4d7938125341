package redisstore

import (
	"context"
	"runtime"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// benchClient connects to the standalone test server.
func benchClient(b *testing.B) rueidis.Client {
	return newTestClient(b, []string{testenv.Addr(testenv.RedisURL(b))}, false)
}

// BenchmarkXADDRaw is the reference: the server's raw XADD rate through the
// same client, one command at a time (seq) and from 8 goroutines that
// rueidis pipelines (par8), the latter comparable with redis-benchmark's
// parallel clients.
func BenchmarkXADDRaw(b *testing.B) {
	c := benchClient(b)
	key := NewKeys(testPrefix(b)).Inbox("bench")
	defer c.Do(context.Background(), c.B().Del().Key(key).Build())
	cmd := func() rueidis.Completed {
		return c.B().Xadd().Key(key).Maxlen().Almost().Threshold("100000").Id("*").FieldValue().FieldValue("seq", "1").Build()
	}
	b.Run("seq", func(b *testing.B) {
		for b.Loop() {
			if err := c.Do(context.Background(), cmd()).Error(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
	b.Run("par8", func(b *testing.B) {
		b.SetParallelism(8 / max(1, runtimeProcs()))
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := c.Do(context.Background(), cmd()).Error(); err != nil {
					b.Error(err)
					return
				}
			}
		})
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
	})
}

// ackRecorder wraps an Inbox and records, at each Ack, the latency from
// the send time carried in the message to handled-and-acked.
type ackRecorder struct {
	scheduler.Inbox
	mu    sync.Mutex
	sent  map[string]int64 // id -> send time (ns), filled by the handler
	lat   []time.Duration
	acked atomic.Int64
	done  chan struct{}
	want  int64
}

func (r *ackRecorder) handler(ctx context.Context, m scheduler.Message) error {
	ns, err := strconv.ParseInt(m.Fields.Get("ts"), 10, 64)
	if err != nil {
		return scheduler.ErrMalformed
	}
	r.mu.Lock()
	r.sent[m.ID] = ns
	r.mu.Unlock()
	return nil
}

func (r *ackRecorder) Ack(ctx context.Context, ids ...string) error {
	err := r.Inbox.Ack(ctx, ids...)
	now := time.Now().UnixNano()
	r.mu.Lock()
	for _, id := range ids {
		if ns, ok := r.sent[id]; ok {
			r.lat = append(r.lat, time.Duration(now-ns))
			delete(r.sent, id)
		}
	}
	r.mu.Unlock()
	if r.acked.Add(int64(len(ids))) >= r.want {
		select {
		case <-r.done:
		default:
			close(r.done)
		}
	}
	return err
}

func (r *ackRecorder) percentile(p float64) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.lat) == 0 {
		return 0
	}
	sort.Slice(r.lat, func(i, j int) bool { return r.lat[i] < r.lat[j] })
	return r.lat[min(len(r.lat)-1, int(p*float64(len(r.lat))))]
}

// runDelivery sends n messages to one inbox from 8 producers (paced to
// rate messages/s in total when rate > 0) and consumes them with one
// Deliverer; it returns the recorder when the last message is acked.
func runDelivery(b *testing.B, c rueidis.Client, n int, rate float64) *ackRecorder {
	st, err := NewStreams(c, StreamsConfig{Prefix: testPrefix(b), MaxLen: 1 << 20})
	if err != nil {
		b.Fatal(err)
	}
	in := st.Inbox("bench", "g")
	defer c.Do(context.Background(), c.B().Del().Key(NewKeys(st.keys.Prefix()).Inbox("bench")).Build())
	rec := &ackRecorder{Inbox: in, sent: map[string]int64{}, done: make(chan struct{}), want: int64(n)}
	cfg := scheduler.Config{Inbox: scheduler.InboxConfig{Block: 100 * time.Millisecond, Count: 256}}
	d, err := scheduler.NewDeliverer(rec, "c1", rec.handler, cfg)
	if err != nil {
		b.Fatal(err)
	}
	if err := in.EnsureGroup(context.Background()); err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { d.Run(ctx); close(runDone) }()
	defer func() { cancel(); <-runDone }()

	const producers = 8
	start := time.Now()
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := p; i < n; i += producers {
				if rate > 0 {
					if wait := time.Until(start.Add(time.Duration(float64(i) / rate * float64(time.Second)))); wait > 0 {
						time.Sleep(wait)
					}
				}
				ts := strconv.FormatInt(time.Now().UnixNano(), 10)
				if _, err := st.Send(ctx, "bench", scheduler.Fields{{Name: "ts", Value: ts}, {Name: "seq", Value: strconv.Itoa(i)}}); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	select {
	case <-rec.done:
	case <-time.After(60 * time.Second):
		b.Fatalf("only %d of %d messages acked after 60s", rec.acked.Load(), n)
	}
	return rec
}

// BenchmarkDelivery measures cross-instance delivery: from XADD to the
// handler having run and the entry being acked (XACK + XDEL).
//
//   - throughput: 8 producers send as fast as they can, one Deliverer
//     consumes; msgs/s over the whole run.
//   - paced10k: producers send 10,000 messages/s; p50 and p99 latency.
//
// Compare msgs/s with BenchmarkXADDRaw from the same run.
func BenchmarkDelivery(b *testing.B) {
	c := benchClient(b)
	b.Run("throughput", func(b *testing.B) {
		b.ResetTimer()
		rec := runDelivery(b, c, b.N, 0)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(float64(rec.percentile(0.5).Microseconds()), "p50-µs")
		b.ReportMetric(float64(rec.percentile(0.99).Microseconds()), "p99-µs")
	})
	b.Run("paced10k", func(b *testing.B) {
		b.ResetTimer()
		rec := runDelivery(b, c, b.N, 10000)
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		b.ReportMetric(float64(rec.percentile(0.5).Microseconds()), "p50-µs")
		b.ReportMetric(float64(rec.percentile(0.99).Microseconds()), "p99-µs")
	})
}

func runtimeProcs() int { return runtime.GOMAXPROCS(0) }
