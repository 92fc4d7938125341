package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
)

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// buildDispatcher builds cmd/dispatcher of the ksana module this module
// replaces into dir and returns the binary's path.
func buildDispatcher(ctx context.Context, dir string) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", "github.com/ksana-dev/ksana").Output()
	if err != nil {
		return "", fmt.Errorf("find the ksana module: %w", err)
	}
	root := strings.TrimSpace(string(out))
	bin := filepath.Join(dir, "dispatcher")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/dispatcher")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/dispatcher in %s: %w\n%s", root, err, b)
	}
	return bin, nil
}

// redisServer is a redis-server this program started.
type redisServer struct {
	cmd *exec.Cmd
	url string
}

// startRedis starts redis-server on a free port of 127.0.0.1, without
// persistence.
func startRedis(ctx context.Context) (*redisServer, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--maxclients", "10000")
	cmd.SysProcAttr = ownGroup()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start redis-server (install it, or pass -redis): %w", err)
	}
	r := &redisServer{cmd: cmd, url: fmt.Sprintf("redis://127.0.0.1:%d", port)}
	c := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port)})
	defer c.Close()
	for deadline := time.Now().Add(10 * time.Second); ; {
		if c.Ping(ctx).Err() == nil {
			return r, nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			r.stop()
			return nil, fmt.Errorf("redis-server on port %d did not answer within 10s", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *redisServer) stop() {
	r.cmd.Process.Kill()
	r.cmd.Wait()
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// instance is one dispatcher process.
type instance struct {
	id     string
	cmd    *exec.Cmd
	addr   string // host:port it listens on
	logf   string // its stderr
	exited chan struct{}
}

// startInstance writes the instance's config into dir and starts it on a
// port of its own (listen port 0; the address is read from its first line
// of output).
func startInstance(ctx context.Context, bin, dir, id, redisURL, prefix string) (*instance, error) {
	conf := fmt.Sprintf(`[scheduler.phase2]
enabled = true
instance_id = %q

[scheduler.phase2.redis]
mode = "single"
url = %q
key_prefix = %q

[dispatcher]
listen = "127.0.0.1:0"
log_level = "warn"
`, id, redisURL, prefix)
	path := filepath.Join(dir, id+".toml")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		return nil, err
	}
	logf := filepath.Join(dir, id+".log")
	errOut, err := os.Create(logf)
	if err != nil {
		return nil, err
	}
	defer errOut.Close()
	cmd := exec.Command(bin, "-config", path)
	cmd.SysProcAttr = ownGroup()
	cmd.Stderr = errOut
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	in := &instance{id: id, cmd: cmd, logf: logf, exited: make(chan struct{})}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		io.Copy(io.Discard, stdout)
	}()
	go func() { cmd.Wait(); close(in.exited) }()
	select {
	case line, ok := <-lines:
		// "dispatcher ID listening on ADDR"
		_, addr, found := strings.Cut(line, " listening on ")
		if !ok || !found {
			in.kill()
			return nil, fmt.Errorf("instance %s did not start: %s", id, in.tail())
		}
		in.addr = addr
	case <-time.After(30 * time.Second):
		in.kill()
		return nil, fmt.Errorf("instance %s did not start within 30s: %s", id, in.tail())
	case <-ctx.Done():
		in.kill()
		return nil, ctx.Err()
	}
	return in, nil
}

// kill sends SIGKILL and waits for the process.
func (in *instance) kill() {
	in.cmd.Process.Signal(syscall.SIGKILL)
	<-in.exited
}

// tail is the end of the instance's log, for error messages.
func (in *instance) tail() string {
	b, _ := os.ReadFile(in.logf)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}

// health is the instance's /health.
type health struct {
	Status      string `json:"status"`
	Nodes       int    `json:"nodes"`
	Sessions    int    `json:"sessions"`
	FleetOnline int    `json:"fleet_online"`
}

var httpClient = &http.Client{Timeout: 5 * time.Second}

func (in *instance) health(ctx context.Context) (health, error) {
	var h health
	req, err := http.NewRequestWithContext(ctx, "GET", "http://"+in.addr+"/health", nil)
	if err != nil {
		return h, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return h, err
	}
	defer resp.Body.Close()
	err = json.NewDecoder(resp.Body).Decode(&h)
	return h, err
}

// rssKiB is the process's resident set (VmRSS of /proc/PID/status).
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) == 0 {
				break
			}
			return strconv.ParseInt(f[0], 10, 64)
		}
	}
	return 0, fmt.Errorf("/proc/%d/status: no VmRSS", pid)
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat times (100 on Linux).
const clockTicks = 100

// cpuSeconds is the process's user plus system time (utime + stime of
// /proc/PID/stat).
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: unexpected format", pid)
	}
	f := strings.Fields(s[i+1:])
	// After the command: state is field 3, utime 14, stime 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: too few fields", pid)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(u+st) / clockTicks, nil
}

// commandStats reads INFO commandstats: calls by command name.
func commandStats(ctx context.Context, c *redis.Client) (map[string]int64, error) {
	s, err := c.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, err
	}
	m := map[string]int64{}
	for line := range strings.Lines(s) {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(kv, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				m[name] = n
			}
		}
	}
	return m, nil
}

// deleteKeys removes every key that starts with prefix and returns how
// many there were.
func deleteKeys(ctx context.Context, c *redis.Client, prefix string) (int, error) {
	n := 0
	iter := c.Scan(ctx, 0, prefix+"[:{]*", 1000).Iterator()
	var batch []string
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := c.Unlink(ctx, batch...).Err()
		n += len(batch)
		batch = batch[:0]
		return err
	}
	for iter.Next(ctx) {
		batch = append(batch, iter.Val())
		if len(batch) == 500 {
			if err := flush(); err != nil {
				return n, err
			}
		}
	}
	if err := iter.Err(); err != nil {
		return n, err
	}
	return n, flush()
}

// ownGroup puts a child in a process group of its own: a Ctrl-C in the
// terminal reaches this program only, which then stops its children in
// order (clients, instances, keys, Redis).
func ownGroup() *syscall.SysProcAttr { return &syscall.SysProcAttr{Setpgid: true} }
