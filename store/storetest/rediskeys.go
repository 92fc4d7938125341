package storetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/rueidis"
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
