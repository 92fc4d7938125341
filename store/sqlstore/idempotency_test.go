package sqlstore

import (
	"context"
	"crypto/sha256"
	"fmt"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestIdempotencySweep: the first reservation of a Jobs, and every 100th
// after it, deletes up to 1000 rows past the window, oldest first, and
// leaves the rows within it; two Jobs on one database (two processes)
// see each other's keys.
func TestIdempotencySweep(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			db := b.open(t)
			ctx := context.Background()
			now := time.Now()
			old := nanos(now.Add(-cron.IdempotencyWindow - time.Hour))
			sum := sha256.Sum256(nil)
			hexSum := fmt.Sprintf("%x", sum)
			insertOld := func(from int) {
				t.Helper()
				tx, err := db.x.BeginTxx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				for i := from; i < from+1500; i++ {
					if _, err := tx.ExecContext(ctx, db.d.sql("INSERT INTO ksana_idempotency (job_id, key, body_sum, run_id, at) VALUES (?, ?, ?, 'r', ?)"),
						"j", fmt.Sprint("old-", i), hexSum, old+int64(i)); err != nil {
						t.Fatal(err)
					}
				}
				if err := tx.Commit(); err != nil {
					t.Fatal(err)
				}
			}
			insertOld(0)
			count := func(where string) int {
				t.Helper()
				var n int
				if err := db.x.GetContext(ctx, &n, "SELECT COUNT(*) FROM ksana_idempotency WHERE "+where); err != nil {
					t.Fatal(err)
				}
				return n
			}
			a, b := mustJobs(t, db, JobsConfig{}), mustJobs(t, db, JobsConfig{})
			reserve := func(j *Jobs, key string) bool {
				t.Helper()
				_, first, err := j.ReserveIdempotencyKey(ctx, "j", key, cron.IdempotencyEntry{Sum: sum, At: now})
				if err != nil {
					t.Fatal(err)
				}
				return first
			}
			if !reserve(a, "new-0") {
				t.Fatal("first reservation of new-0 on a: not first")
			}
			if n := count("key LIKE 'old-%'"); n != 500 {
				t.Errorf("old rows after the first reservation: %d, want 500 (1000 deleted)", n)
			}
			if n := count("key LIKE 'old-%' AND at < " + fmt.Sprint(old+1000)); n != 0 {
				t.Errorf("%d of the 1000 oldest rows are left; the sweep deletes the oldest first", n)
			}
			if reserve(b, "new-0") {
				t.Error("new-0 on b: first, want the reservation made on a")
			}
			if n := count("key LIKE 'old-%'"); n != 0 {
				t.Errorf("old rows after the first reservation of b: %d, want 0", n)
			}
			insertOld(1500)
			for i := 1; i < 100; i++ {
				reserve(a, fmt.Sprint("new-", i))
			}
			if n := count("key LIKE 'old-%'"); n != 1500 {
				t.Errorf("old rows before the 101st reservation of a: %d, want 1500", n)
			}
			reserve(a, "new-100")
			if n, m := count("key LIKE 'old-%'"), count("key LIKE 'new-%'"); n != 500 || m != 101 {
				t.Errorf("after the 101st reservation of a: %d old rows, %d new; want 500 and 101", n, m)
			}
		})
	}
}
