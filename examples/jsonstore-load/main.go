package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

func main() {
	bin := flag.String("bin", "", "the ksana binary (required)")
	jobs := flag.Int("jobs", 100_000, "every-jobs to synthesize")
	rate := flag.Int("rate", 1000, "firings per second (sets each job's interval: jobs/rate seconds)")
	duration := flag.Duration("duration", 60*time.Second, "how long to measure")
	warmup := flag.Duration("warmup", 10*time.Second, "how long to run before measuring")
	dir := flag.String("dir", "", "data directory (default: a fresh temporary one)")
	restarts := flag.Bool("restarts", true, "time restarts after SIGTERM and SIGKILL at the end")
	timeline := flag.Bool("timeline", false, "print each second's worst firing lag and API latency, and the rewrites of jobs.json")
	runs := flag.Int("runs", 0, "runs to write into runs.jsonl before the first start (the jobs' in turn), for the timing of the first history query")
	flag.Parse()
	if *bin == "" {
		fmt.Fprintln(os.Stderr, "jsonstore-load: -bin is required (go build -o /tmp/ksana ./cmd/ksana)")
		os.Exit(2)
	}
	if err := run(*bin, *dir, *jobs, *runs, *rate, *duration, *warmup, *restarts, *timeline); err != nil {
		fmt.Fprintln(os.Stderr, "jsonstore-load:", err)
		os.Exit(1)
	}
}

// lags collects the firing lags seen by the callback endpoint.
type lags struct {
	mu        sync.Mutex
	on        bool
	d         []time.Duration
	secMax    time.Duration // the worst lag since the last timeline line
	callbacks atomic.Int64
}

func (l *lags) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	io.Copy(io.Discard, r.Body)
	l.callbacks.Add(1)
	if at, err := time.Parse(time.RFC3339Nano, r.Header.Get(cron.HeaderScheduledAt)); err == nil {
		l.mu.Lock()
		if l.on {
			l.d = append(l.d, now.Sub(at))
			l.secMax = max(l.secMax, now.Sub(at))
		}
		l.mu.Unlock()
	}
	w.WriteHeader(http.StatusOK)
}

func run(bin, dir string, n, runs, rate int, duration, warmup time.Duration, restarts, timeline bool) error {
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "jsonstore-load-"); err != nil {
			return err
		}
		defer os.RemoveAll(dir)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	lg := &lags{}
	go http.Serve(ln, lg)
	cbURL := "http://" + ln.Addr().String() + "/hook"

	every := time.Duration(float64(n) / float64(rate) * float64(time.Second))
	t0 := time.Now()
	if err := writeJobs(dir, n, every, cbURL, t0.Add(5*time.Second)); err != nil {
		return err
	}
	st, _ := os.Stat(filepath.Join(dir, "jobs.json"))
	fmt.Printf("jobs: %d every %s (%d/s), jobs.json %.1f MB, written in %s\n", n, every, rate, float64(st.Size())/1e6, time.Since(t0).Round(time.Millisecond))
	if runs > 0 {
		t := time.Now()
		if err := writeRuns(dir, n, runs, t0.Add(-24*time.Hour)); err != nil {
			return err
		}
		st, _ := os.Stat(filepath.Join(dir, "runs.jsonl"))
		fmt.Printf("runs: %d, runs.jsonl %.1f MB, written in %s\n", runs, float64(st.Size())/1e6, time.Since(t).Round(time.Millisecond))
	}

	c, startDur, err := start(bin, dir)
	if err != nil {
		return err
	}
	defer func() { c.cmd.Process.Kill(); c.cmd.Wait() }()
	fmt.Printf("first start to /health: %s\n", startDur.Round(time.Millisecond))
	if err := firstQuery(c.url); err != nil {
		return err
	}

	time.Sleep(warmup)
	lg.mu.Lock()
	lg.on = true
	lg.mu.Unlock()

	// API probes: a GET and a PATCH of a random job, 10 times a second each.
	var apiMu sync.Mutex
	var getMax, patchMax, apiWorst time.Duration
	var gets, patches int
	var patchLat []time.Duration
	stopProbe := make(chan struct{})
	var pw sync.WaitGroup
	client := &http.Client{Timeout: 30 * time.Second}
	pw.Go(func() {
		tk := time.NewTicker(100 * time.Millisecond)
		defer tk.Stop()
		for i := 0; ; i++ {
			select {
			case <-stopProbe:
				return
			case <-tk.C:
			}
			id := jobID(rand.IntN(n))
			t := time.Now()
			resp, err := client.Get(c.url + "/jobs/" + id)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			g := time.Since(t)
			req, _ := http.NewRequest("PATCH", c.url+"/jobs/"+jobID(rand.IntN(n)), strings.NewReader(fmt.Sprintf(`{"name":"patched %d"}`, i)))
			req.Header.Set("Content-Type", "application/json")
			t = time.Now()
			resp, err = client.Do(req)
			if err == nil {
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode >= 300 {
					fmt.Println("PATCH:", resp.Status)
				}
			}
			p := time.Since(t)
			apiMu.Lock()
			getMax, patchMax = max(getMax, g), max(patchMax, p)
			apiWorst = max(apiWorst, g, p)
			gets++
			patches++
			patchLat = append(patchLat, p)
			apiMu.Unlock()
		}
	})

	pid := c.cmd.Process.Pid
	w0, _ := procWriteBytes(pid)
	cpu0, _ := procCPU(pid)
	appended := int64(0)
	last := fileSizes(dir)
	var rssMax int64
	cb0 := lg.callbacks.Load()
	began := time.Now()
	for time.Since(began) < duration {
		time.Sleep(time.Second)
		rss, _ := procRSS(pid)
		rssMax = max(rssMax, rss)
		now := fileSizes(dir)
		if timeline {
			lg.mu.Lock()
			worst := lg.secMax
			lg.secMax = 0
			lg.mu.Unlock()
			apiMu.Lock()
			api := apiWorst
			apiWorst = 0
			apiMu.Unlock()
			st, _ := os.Stat(filepath.Join(dir, "jobs.json"))
			mark := ""
			if st != nil && st.ModTime().After(time.Now().Add(-time.Second)) {
				mark = "  jobs.json rewritten"
			}
			fmt.Printf("%4.0fs lag max %8s  api max %8s  journal %6.1f MB%s\n", time.Since(began).Seconds(), worst.Round(time.Millisecond), api.Round(time.Millisecond), float64(now["jobs.journal"])/1e6, mark)
		}
		for k, v := range now {
			if d := v - last[k]; d > 0 {
				appended += d
			}
		}
		last = now
	}
	elapsed := time.Since(began)
	w1, _ := procWriteBytes(pid)
	cpu1, _ := procCPU(pid)
	close(stopProbe)
	pw.Wait()
	lg.mu.Lock()
	lg.on = false
	d := slices.Clone(lg.d)
	lg.mu.Unlock()
	slices.Sort(d)
	pct := func(p float64) time.Duration {
		if len(d) == 0 {
			return 0
		}
		return d[min(len(d)-1, int(p*float64(len(d))))]
	}
	fired := lg.callbacks.Load() - cb0
	sec := elapsed.Seconds()
	fmt.Printf("measured %.0fs: %d callbacks (%.0f/s)\n", sec, fired, float64(fired)/sec)
	fmt.Printf("disk written (/proc write_bytes): %.2f MB/s; store appends (journal + runs.jsonl growth): %.2f MB/s; ratio %.1f\n",
		float64(w1-w0)/sec/1e6, float64(appended)/sec/1e6, float64(w1-w0)/max(float64(appended), 1))
	fmt.Printf("firing lag: p50 %s p99 %s max %s (%d samples)\n", pct(0.5).Round(10*time.Microsecond), pct(0.99).Round(10*time.Microsecond), pct(1).Round(10*time.Microsecond), len(d))
	apiMu.Lock()
	slices.Sort(patchLat)
	var patch99 time.Duration
	if len(patchLat) > 0 {
		patch99 = patchLat[int(0.99*float64(len(patchLat)-1))]
	}
	apiMu.Unlock()
	fmt.Printf("API: GET /jobs/{id} max %s (%d), PATCH p99 %s max %s (%d)\n", getMax.Round(10*time.Microsecond), gets, patch99.Round(10*time.Microsecond), patchMax.Round(10*time.Microsecond), patches)
	fmt.Printf("CPU of ksana: %.1f s in %.0f s (%.0f%% of one core)\n", (cpu1 - cpu0).Seconds(), sec, 100*(cpu1-cpu0).Seconds()/sec)
	rss, _ := procRSS(pid)
	fmt.Printf("RSS: %.1f MB now, %.1f MB max: %.0f B a job (max)\n", float64(rss)/1e6, float64(rssMax)/1e6, float64(rssMax)/float64(n))
	if !restarts {
		return nil
	}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t := time.Now()
		c.cmd.Process.Signal(sig)
		c.cmd.Wait()
		stopped := time.Since(t)
		var sd time.Duration
		c, sd, err = start(bin, dir)
		if err != nil {
			return err
		}
		fmt.Printf("restart after %s: stop %s + start to /health %s = %s\n", sig, stopped.Round(time.Millisecond), sd.Round(time.Millisecond), time.Since(t).Round(time.Millisecond))
		if err := firstQuery(c.url); err != nil {
			return err
		}
	}
	return nil
}

// fileSizes returns the sizes of the files the store appends to.
func fileSizes(dir string) map[string]int64 {
	out := map[string]int64{}
	for _, name := range []string{"jobs.journal", "runs.jsonl"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err == nil {
			out[name] = st.Size()
		}
	}
	return out
}

// firstQuery times the first history query across jobs (GET /runs, the
// newest page), asked as soon as /health answers, and a second one.
func firstQuery(url string) error {
	var d [2]time.Duration
	for i := range d {
		t := time.Now()
		resp, err := http.Get(url + "/runs")
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("GET /runs: %s", resp.Status)
		}
		d[i] = time.Since(t)
	}
	fmt.Printf("history query (GET /runs) right after start: first %s, second %s\n", d[0].Round(10*time.Microsecond), d[1].Round(10*time.Microsecond))
	return nil
}

// writeRuns writes runs.jsonl with runs successful runs of the n jobs in
// turn, a second apart from first, each line linked to its job's previous
// one as the store links them.
func writeRuns(dir string, n, runs int, first time.Time) error {
	f, err := os.Create(filepath.Join(dir, "runs.jsonl"))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	prev := make([]int64, n) // 1 + offset of each job's last line; 0: none
	var off int64
	var b []byte
	first = first.UTC().Truncate(time.Millisecond)
	for i := range runs {
		at := first.Add(time.Duration(i) * time.Second)
		r := cron.Run{ID: fmt.Sprintf("%032x", uint64(i+1)*2654435761), JobID: jobID(i % n), ScheduledAt: at,
			TriggeredAt: at.Add(time.Millisecond), FinishedAt: at.Add(50 * time.Millisecond), Status: cron.StatusSuccess,
			Attempts: 1, HTTPStatus: 200, Latency: cron.Duration(49 * time.Millisecond)}
		enc, err := json.Marshal(&r)
		if err != nil {
			return err
		}
		b = append(b[:0], `{"prev":`...)
		b = strconv.AppendInt(b, prev[i%n], 10)
		b = append(b, ',')
		b = append(b, enc[1:]...)
		b = append(b, '\n')
		w.Write(b)
		prev[i%n] = off + 1
		off += int64(len(b))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	return f.Close()
}

func jobID(i int) string { return fmt.Sprintf("job-%08d", i) }

// writeJobs writes n every-jobs whose first runs spread evenly over one
// interval from first.
func writeJobs(dir string, n int, every time.Duration, url string, first time.Time) error {
	f, err := os.Create(filepath.Join(dir, "jobs.json"))
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	w.WriteString("{\n  \"version\": 1,\n  \"updated_at\": \"\",\n  \"jobs\": [\n")
	step := every / time.Duration(n)
	first = first.UTC().Truncate(time.Millisecond)
	for i := range n {
		at := first.Add(time.Duration(i) * step)
		j := cron.Job{ID: jobID(i), Name: "job " + strconv.Itoa(i), Type: "http",
			HTTP:     cron.HTTPConfig{Method: "POST", URL: url, Body: `{"n":1}`},
			Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(every), StartAt: at},
			Timeout:  cron.Duration(10 * time.Second), RetryBackoff: cron.Duration(time.Second),
			NextRunAt: at}
		enc, err := json.Marshal(j)
		if err != nil {
			return err
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
		return err
	}
	return f.Close()
}

type child struct {
	cmd *exec.Cmd
	url string
}

// start runs the binary on dir and returns once /health answers.
func start(bin, dir string) (*child, time.Duration, error) {
	// A free port, so that the child can log at warn level only (a
	// restart logs every missed slot at info).
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, 0, err
	}
	port := pl.Addr().(*net.TCPAddr).Port
	pl.Close()
	t := time.Now()
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "KSANA_DATA="+dir, "PORT="+strconv.Itoa(port), "LISTEN_ADDR=127.0.0.1", "LOG_FORMAT=json", "LOG_LEVEL=warn",
		"WORKERS=64", "MIN_INTERVAL=10ms", "MAX_RETRIES=0")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, 0, err
	}
	if err := cmd.Start(); err != nil {
		return nil, 0, err
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			if line := sc.Bytes(); bytes.Contains(line, []byte(`"level":"ERROR"`)) {
				fmt.Fprintf(os.Stderr, "ksana: %s\n", bytes.TrimSpace(line))
			}
		}
	}()
	url := "http://127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(5 * time.Minute)
	for {
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			return nil, 0, errors.New("ksana did not answer /health")
		}
		time.Sleep(2 * time.Millisecond)
	}
	return &child{cmd: cmd, url: url}, time.Since(t), nil
}

// procWriteBytes returns write_bytes of /proc/pid/io: bytes the process
// caused to be sent to the storage layer.
func procWriteBytes(pid int) (int64, error) {
	return procField(fmt.Sprintf("/proc/%d/io", pid), "write_bytes:", 1)
}

// procCPU returns the processor time pid has used, user and system, from
// /proc/pid/stat (in clock ticks of 10 ms, as on Linux's usual builds).
func procCPU(pid int) (time.Duration, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command, which is in parentheses and may hold
	// spaces: state is the first, utime the 12th and stime the 13th.
	i := bytes.LastIndexByte(data, ')')
	f := strings.Fields(string(data[i+1:]))
	if i < 0 || len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * 10 * time.Millisecond, nil
}

// procRSS returns VmRSS of /proc/pid/status in bytes.
func procRSS(pid int) (int64, error) {
	return procField(fmt.Sprintf("/proc/%d/status", pid), "VmRSS:", 1024)
}

func procField(path, key string, unit int64) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, key); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			n, err := strconv.ParseInt(f[0], 10, 64)
			return n * unit, err
		}
	}
	return 0, fmt.Errorf("%s: no %s", path, key)
}
