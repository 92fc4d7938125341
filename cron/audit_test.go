package cron

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"
)

// refAudit is the plain ring of entries an AuditBuffer must answer as.
type refAudit struct {
	keep    int
	entries []AuditEntry
}

func (r *refAudit) put(e AuditEntry) {
	r.entries = append(r.entries, e)
	if len(r.entries) > r.keep {
		r.entries = r.entries[1:]
	}
}

func (r *refAudit) audit(q AuditQuery) ([]AuditEntry, bool) {
	out := []AuditEntry{}
	for i := range r.entries {
		e := &r.entries[i]
		if !q.Matches(e) {
			continue
		}
		if len(out) == q.limit() {
			return out, true
		}
		out = append(out, *e)
	}
	return out, false
}

// TestAuditBufferCompact appends and restores entries of every shape (jobs
// made from one template, updates, run-nows, nil and empty JSON, times in
// other zones, ids of every length, long fields) to buffers of several sizes, and checks that
// what each returns equals, field for field, what a plain ring of the
// entries returns.
func TestAuditBufferCompact(t *testing.T) {
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(3, 9))
	zone := time.FixedZone("X", 2*3600)
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	jobJSON := func(id string, at time.Time, body string) json.RawMessage {
		return json.RawMessage(fmt.Sprintf(`{"id":%q,"name":"bench","enabled":true,"type":"http","http":{"method":"GET","url":"http://127.0.0.1:9/hook","body":%q},"schedule":{"kind":"once","run_at":%q},"next_run_at":%q}`,
			id, body, at.Format(time.RFC3339Nano), at.Format(time.RFC3339Nano)))
	}
	for _, keep := range []int{1, 3, 64, 65, 200, 0} {
		t.Run(fmt.Sprint("keep=", keep), func(t *testing.T) {
			b := &AuditBuffer{Keep: keep}
			ref := &refAudit{keep: keep}
			if keep == 0 {
				ref.keep = DefaultAuditKeep
			}
			n, every := 3000, 97 // entries appended; Entries compared every so many
			if keep == 0 {
				// The whole buffer and some: each comparison reads every
				// entry kept, so fewer of them.
				n, every = DefaultAuditKeep+700, 1009
			}
			var id int64
			for i := range n {
				at := t0.Add(time.Duration(rng.Int64N(int64(time.Hour))))
				jid := fmt.Sprintf("%032x", rng.Uint64())
				e := AuditEntry{Time: t0.Add(time.Duration(i) * time.Millisecond), Who: "local", Role: "admin", Action: ActionCreate, JobID: jid}
				switch rng.IntN(10) {
				case 0:
					e.Action, e.Who, e.Role = ActionUpdate, "ann", ""
					e.Before = jobJSON(jid, at, "")
					e.After = jobJSON(jid, at.Add(time.Second), strings.Repeat("b", rng.IntN(3000)))
				case 1:
					e.Action, e.RunID, e.Replay = ActionRunNow, fmt.Sprintf("%032x", rng.Uint64()), rng.IntN(2) == 0
					e.Overrides = json.RawMessage(`{"force":true}`)
				case 2:
					e.Action, e.JobID = ActionPauseAll, ""
					e.Before, e.After = json.RawMessage{}, json.RawMessage(`{"paused":true}`)
				case 3:
					e.Time = e.Time.In(zone)
					e.After = jobJSON(jid, at, "")
				case 5:
					e.JobID = "nightly-" + jid[:rng.IntN(33)]
					e.After = jobJSON(e.JobID, at, "")
				case 4:
					e.Time = time.Time{}
					e.Action, e.Before = ActionDelete, jobJSON(jid, at, "")
				default:
					e.After = jobJSON(jid, at, "")
				}
				if rng.IntN(7) == 0 {
					// Restored, with a gap in the ids and its time as given.
					id += 1 + rng.Int64N(5)
					e.ID = id
					if err := b.Restore(e); err != nil {
						t.Fatal(err)
					}
				} else {
					id++
					got, err := b.AppendAudit(ctx, e)
					if err != nil || got.ID != id {
						t.Fatalf("AppendAudit: id %d, %v; want id %d", got.ID, err, id)
					}
					e.ID, e.Time = id, e.Time.UTC()
					if !reflect.DeepEqual(got, e) {
						t.Fatalf("AppendAudit returned %+v, want %+v", got, e)
					}
				}
				ref.put(e)
				if i%every == 0 || i == n-1 {
					if got := b.Entries(); !reflect.DeepEqual(got, ref.entries) {
						t.Fatalf("after %d entries: Entries differ (%d, want %d)", i+1, len(got), len(ref.entries))
					}
					if b.Len() != len(ref.entries) {
						t.Fatalf("Len %d, want %d", b.Len(), len(ref.entries))
					}
				}
			}
			first := ref.entries[0].ID
			for _, q := range []AuditQuery{
				{}, {Limit: 7}, {After: first + 3}, {After: id - 2}, {After: id},
				{Who: "ann"}, {Who: "ann", Limit: 2}, {JobID: ref.entries[len(ref.entries)/2].JobID},
				{Since: t0.Add(time.Duration(n/2) * time.Millisecond)}, {Limit: 1000},
			} {
				got, more, err := b.Audit(ctx, q)
				want, wantMore := ref.audit(q)
				if err != nil || !reflect.DeepEqual(got, want) || more != wantMore {
					t.Errorf("Audit(%+v): %d entries, more %v, %v; want %d, more %v", q, len(got), more, err, len(want), wantMore)
				}
			}
		})
	}
}

// TestAuditBufferSize: the entries of jobs made from one template take a
// small part of their JSON's size.
func TestAuditBufferSize(t *testing.T) {
	b := &AuditBuffer{}
	st := NewMemStore()
	r, _ := New(st, noopExec, Config{AuditLog: b})
	j := sharedJob()
	raw := 0
	for range 1000 {
		out, err := r.Add(context.Background(), j)
		if err != nil {
			t.Fatal(err)
		}
		raw += len(auditJSON(out))
	}
	kept := 0
	for _, blk := range b.blocks {
		kept += len(blk.data)
	}
	if b.Len() != 1000 || kept*4 > raw {
		t.Errorf("%d entries in %d bytes, their JSON %d bytes: want at most a quarter", b.Len(), kept, raw)
	}
	t.Logf("%d entries: %d bytes encoded, %d of JSON", b.Len(), kept, raw)
}
