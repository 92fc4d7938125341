package sqlstore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

// TestClaimSlots: two processes claim overlapping batches of slots at
// once, and each slot is won exactly once; a slot of a job that does not
// exist (deleted meanwhile) is not won and costs the batch nothing else.
func TestClaimSlots(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			u := b.url(t)
			s1, s2 := mustJobs(t, mustOpen(t, u), JobsConfig{Instance: "a"}), mustJobs(t, mustOpen(t, u), JobsConfig{Instance: "b"})
			for _, id := range []string{"x", "y"} {
				if err := s1.Save(ctx, testJob(id)); err != nil {
					t.Fatal(err)
				}
			}
			t0 := time.Unix(1800000000, 0).UTC()
			batch := func(who string, from, to int) []cron.Run {
				var runs []cron.Run
				for i := from; i < to; i++ {
					for _, job := range []string{"x", "y"} {
						at := t0.Add(time.Duration(i) * time.Second)
						runs = append(runs, cron.Run{ID: fmt.Sprintf("%s-%s-%d", who, job, i), JobID: job, ScheduledAt: at, TriggeredAt: at})
					}
				}
				return runs
			}
			r1, r2 := batch("a", 0, 30), batch("b", 10, 40)
			// A slot of a job that does not exist, in the middle of a batch.
			r2 = append(r2[:5], append([]cron.Run{{ID: "b-gone", JobID: "gone", ScheduledAt: t0, TriggeredAt: t0}}, r2[5:]...)...)
			var w1, w2 []bool
			var e1, e2 error
			var wg sync.WaitGroup
			wg.Go(func() { w1, e1 = s1.ClaimSlots(ctx, r1) })
			wg.Go(func() { w2, e2 = s2.ClaimSlots(ctx, r2) })
			wg.Wait()
			if e1 != nil || e2 != nil {
				t.Fatalf("ClaimSlots: %v, %v", e1, e2)
			}
			if len(w1) != len(r1) || len(w2) != len(r2) {
				t.Fatalf("ClaimSlots answered %d and %d, want %d and %d", len(w1), len(w2), len(r1), len(r2))
			}
			won := map[string]int{}
			for i, r := range r1 {
				if w1[i] {
					won[r.JobID+r.ScheduledAt.String()]++
				}
			}
			for i, r := range r2 {
				if w2[i] {
					if r.JobID == "gone" {
						t.Errorf("the slot of a job that does not exist was won")
					}
					won[r.JobID+r.ScheduledAt.String()]++
				}
			}
			if len(won) != 80 {
				t.Errorf("slots won: %d, want 80 (40 seconds of two jobs)", len(won))
			}
			for k, n := range won {
				if n != 1 {
					t.Errorf("slot %s won %d times", k, n)
				}
			}
			// The rows in the table are those won.
			var rows int
			if err := s1.db.x.Get(&rows, "SELECT count(*) FROM ksana_run"); err != nil {
				t.Fatal(err)
			}
			if rows != 80 {
				t.Errorf("ksana_run holds %d rows, want 80", rows)
			}
		})
	}
}

// TestBatchRecord: RecordBatch writes each job's bookkeeping and skips an
// unknown id; AppendRuns completes claimed runs, inserts the runs never
// claimed, drops a second record of a claimed slot and the runs of a job
// that does not exist, and trims each history to RunLimit, as AppendRun
// does one by one.
func TestBatchRecord(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			s := mustJobs(t, b.open(t), JobsConfig{RunLimit: 5, Instance: "i"})
			for _, id := range []string{"p", "q"} {
				if err := s.Save(ctx, testJob(id)); err != nil {
					t.Fatal(err)
				}
			}
			t0 := time.Unix(1800000000, 0).UTC()
			bk := func(i int) cron.Bookkeeping {
				return cron.Bookkeeping{LastRunAt: t0.Add(time.Duration(i) * time.Second), NextRunAt: t0.Add(time.Duration(i+1) * time.Second),
					LastStatus: cron.StatusFailed, LastError: fmt.Sprint("error ", i)}
			}
			_, vp, err := s.Read(ctx, "p")
			if err != nil {
				t.Fatal(err)
			}
			_, vq, err := s.Read(ctx, "q")
			if err != nil {
				t.Fatal(err)
			}
			if err := s.RecordBatch(ctx, []cron.Recorded{{ID: "p", Bookkeeping: bk(1), Version: vp}, {ID: "nope", Bookkeeping: bk(2)}, {ID: "q", Bookkeeping: bk(3), Version: vq}}); err != nil {
				t.Fatal(err)
			}
			for id, want := range map[string]cron.Bookkeeping{"p": bk(1), "q": bk(3)} {
				j, _, err := s.Read(ctx, id)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(want, j.Bookkeeping()); diff != "" {
					t.Errorf("job %s bookkeeping (-want +got):\n%s", id, diff)
				}
			}

			// Claimed runs of p (completed by the batch), a skipped slot of q
			// never claimed (inserted), a skipped record of p's claimed slot
			// (dropped), and a run of a job that does not exist.
			run := func(job string, i int, st cron.Status) cron.Run {
				at := t0.Add(time.Duration(i) * time.Second)
				return cron.Run{ID: fmt.Sprintf("%s-%d-%s", job, i, st), JobID: job, ScheduledAt: at, TriggeredAt: at, FinishedAt: at.Add(time.Millisecond),
					Status: st, Attempts: 1, HTTPStatus: 200, Latency: cron.Duration(time.Millisecond), Instance: "i"}
			}
			var claims []cron.Run
			for i := range 3 {
				claims = append(claims, run("p", i, cron.StatusSuccess))
			}
			if _, err := s.ClaimSlots(ctx, claims); err != nil {
				t.Fatal(err)
			}
			finished := append(claims, run("q", 0, cron.StatusSkipped), run("p", 1, cron.StatusSkipped), run("nope", 0, cron.StatusMissed))
			if err := s.AppendRuns(ctx, finished); err != nil {
				t.Fatal(err)
			}
			gotP, err := s.Runs(ctx, "p", 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]cron.Run{claims[2], claims[1], claims[0]}, gotP); diff != "" {
				t.Errorf("runs of p (-want +got):\n%s", diff)
			}
			gotQ, err := s.Runs(ctx, "q", 0)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff([]cron.Run{run("q", 0, cron.StatusSkipped)}, gotQ); diff != "" {
				t.Errorf("runs of q (-want +got):\n%s", diff)
			}

			// Many runs: each history is trimmed to about RunLimit.
			var many []cron.Run
			for i := 10; i < 60; i++ {
				many = append(many, run("p", i, cron.StatusMissed), run("q", i, cron.StatusMissed))
			}
			if err := s.AppendRuns(ctx, many); err != nil {
				t.Fatal(err)
			}
			for _, id := range []string{"p", "q"} {
				var rows int
				if err := s.db.x.Get(&rows, s.db.d.sql("SELECT count(*) FROM ksana_run WHERE job_id = ?"), id); err != nil {
					t.Fatal(err)
				}
				if rows != 5 {
					t.Errorf("job %s keeps %d runs, want RunLimit (5)", id, rows)
				}
				got, err := s.Runs(ctx, id, 0)
				if err != nil {
					t.Fatal(err)
				}
				if len(got) != 5 || !got[0].ScheduledAt.Equal(t0.Add(59*time.Second)) {
					t.Errorf("job %s: %d runs, newest at %v; want 5, the newest at 59s", id, len(got), got[0].ScheduledAt.Sub(t0))
				}
			}
		})
	}
}
