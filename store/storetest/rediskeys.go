package storetest

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/rueidis"

	"github.com/ksana-dev/ksana/internal/testenv"
)

// DeleteRedisKeys deletes every key under prefix (named prefix:...) on
// the servers of c, every master of a cluster: SCAN MATCH on each server,
// UNLINK of what it finds. It returns the number of keys deleted.
func DeleteRedisKeys(ctx context.Context, c rueidis.Client, prefix string) (int, error) {
	if prefix == "" {
		return 0, fmt.Errorf("storetest: DeleteRedisKeys: empty prefix")
	}
	pattern := globEscape(prefix) + ":*"
	n := 0
	for addr, node := range c.Nodes() {
		var cursor uint64
		for {
			e, err := node.Do(ctx, node.B().Scan().Cursor(cursor).Match(pattern).Count(1000).Build()).AsScanEntry()
			if err != nil {
				return n, fmt.Errorf("storetest: scan %s for %s: %w", addr, pattern, err)
			}
			if len(e.Elements) > 0 {
				cmds := make(rueidis.Commands, 0, len(e.Elements))
				for _, k := range e.Elements {
					cmds = append(cmds, c.B().Unlink().Key(k).Build())
				}
				for _, r := range c.DoMulti(ctx, cmds...) {
					if err := r.Error(); err != nil {
						return n, fmt.Errorf("storetest: unlink under %s: %w", prefix, err)
					}
				}
				n += len(e.Elements)
			}
			if cursor = e.Cursor; cursor == 0 {
				break
			}
		}
	}
	return n, nil
}

// CleanupRedisKeys deletes the keys under prefix on the servers of each
// client when t ends, whether it passed, failed or was skipped, so that a
// test leaves no key behind. Register it after the clients' own clean-up
// (clean-ups run last registered first), and after anything that may
// still write under the prefix has been told to stop in a clean-up
// registered later.
func CleanupRedisKeys(t testing.TB, prefix string, clients ...rueidis.Client) {
	t.Helper()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, c := range clients {
			if _, err := DeleteRedisKeys(ctx, c, prefix); err != nil {
				t.Errorf("delete the test's keys: %v", err)
			}
		}
	})
}

// globEscape escapes the characters SCAN's MATCH reads as a pattern.
func globEscape(s string) string {
	return strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(s)
}

// CommandStats are the calls of each command a Redis deployment has
// executed, as INFO commandstats counts them (cmdstat_<name>:calls=N),
// summed over every server of c (every master of a cluster). Redis counts
// the commands a script runs (redis.call) beside the script's own EVALSHA,
// so the totals are the server's work, not the client's round trips.
type CommandStats map[string]int64

// RedisCommandStats reads INFO commandstats of every server of c.
func RedisCommandStats(ctx context.Context, c rueidis.Client) (CommandStats, error) {
	out := CommandStats{}
	for addr, node := range c.Nodes() {
		info, err := node.Do(ctx, node.B().Info().Section("commandstats").Build()).ToString()
		if err != nil {
			return nil, fmt.Errorf("storetest: INFO commandstats of %s: %w", addr, err)
		}
		for _, line := range strings.Split(info, "\n") {
			name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
			if !ok || !strings.HasPrefix(name, "cmdstat_") {
				continue
			}
			calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
			n, err := strconv.ParseInt(calls, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("storetest: INFO commandstats of %s: %q", addr, line)
			}
			out[strings.TrimPrefix(name, "cmdstat_")] += n
		}
	}
	return out, nil
}

// Sub returns the calls made since before (s minus before), leaving out
// the INFO calls that read them.
func (s CommandStats) Sub(before CommandStats) CommandStats {
	d := CommandStats{}
	for k, v := range s {
		if k == "info" {
			continue
		}
		if n := v - before[k]; n != 0 {
			d[k] = n
		}
	}
	return d
}

// Total is the number of commands, scripts' commands included.
func (s CommandStats) Total() int64 {
	var n int64
	for _, v := range s {
		n += v
	}
	return n
}

// Scripts is the number of script calls (EVAL, EVALSHA, FCALL and their
// read-only forms).
func (s CommandStats) Scripts() int64 {
	return s["eval"] + s["evalsha"] + s["eval_ro"] + s["evalsha_ro"] + s["fcall"] + s["fcall_ro"]
}

// String lists the commands, most called first.
func (s CommandStats) String() string {
	keys := make([]string, 0, len(s))
	for k := range s {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if s[keys[i]] != s[keys[j]] {
			return s[keys[i]] > s[keys[j]]
		}
		return keys[i] < keys[j]
	})
	var b strings.Builder
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s=%d", k, s[k])
	}
	return b.String()
}

var (
	testClientsOnce sync.Once
	testClients     []rueidis.Client
)

// TestRedisClients returns clients of the test servers that the tests'
// key clean-ups ([CleanupRedisKeys]) share: the standalone server of
// KSANA_TEST_REDIS_URL (default the local one), and the cluster of
// KSANA_TEST_REDIS_CLUSTER_URLS when it is set. They are made once and
// kept until the process ends; a server that cannot be reached is left
// out (the test that needs it fails on its own).
func TestRedisClients() []rueidis.Client {
	testClientsOnce.Do(func() {
		standalone, seeds := testenv.RedisAddrs()
		if c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{standalone}, ForceSingleClient: true}); err == nil {
			testClients = append(testClients, c)
		}
		if len(seeds) > 0 {
			if c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: seeds}); err == nil {
				testClients = append(testClients, c)
			}
		}
	})
	return testClients
}
