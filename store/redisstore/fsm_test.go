package redisstore

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

func newJobs(t testing.TB, c rueidis.Client, cfg JobsConfig) *Jobs {
	t.Helper()
	cfg.Prefix = testPrefix(t)
	if cfg.TTL == 0 {
		cfg.TTL = 10 * time.Minute // tests never flush: let their keys go
	}
	s, err := NewJobs(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// setJob writes a job's hash directly, as a test fixture.
func setJob(t *testing.T, c rueidis.Client, key string, fields ...string) {
	t.Helper()
	if err := writeJob(c, key, fields...); err != nil {
		t.Fatal(err)
	}
}

// writeJob is setJob for goroutines other than the test's own: it returns
// the error instead of ending the test.
func writeJob(c rueidis.Client, key string, fields ...string) error {
	ctx := context.Background()
	if err := c.Do(ctx, c.B().Del().Key(key).Build()).Error(); err != nil {
		return err
	}
	cmd := c.B().Hset().Key(key).FieldValue()
	for i := 0; i+1 < len(fields); i += 2 {
		cmd = cmd.FieldValue(fields[i], fields[i+1])
	}
	if err := c.Do(ctx, cmd.Build()).Error(); err != nil {
		return err
	}
	// Tests never flush: the fixture goes by itself.
	return c.Do(ctx, c.B().Pexpire().Key(key).Milliseconds(time.Hour.Milliseconds()).Build()).Error()
}

func hgetall(t *testing.T, c rueidis.Client, key string) map[string]string {
	t.Helper()
	m, err := c.Do(context.Background(), c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestFSMEquivalence writes every (state, job attempt) straight into the
// hash, including combinations no walk reaches, applies every event (and
// unknown ones) with every attempt around the job's, and requires the
// script's outcome and error to be exactly fsm.Apply's, on the standalone
// server and on the cluster.
func TestFSMEquivalence(t *testing.T) {
	ctx := context.Background()
	const max = 3
	m := fsm.Machine{MaxAttempts: max}
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			s := newJobs(t, srv.client, JobsConfig{MaxAttempts: max})
			n := 0
			var wg sync.WaitGroup
			sem := make(chan struct{}, 16)
			for _, st := range fsm.States() {
				for ja := 1; ja <= max+1; ja++ {
					for _, ev := range append(fsm.Events(), "job_cancel", "") {
						for a := -1; a <= max+2; a++ {
							n++
							id := fmt.Sprintf("eq-%d", n)
							wg.Add(1)
							sem <- struct{}{}
							go func() {
								defer func() { <-sem; wg.Done() }()
								equivalent(t, ctx, srv.client, s, m, id, fsm.Job{State: st, Attempt: ja}, ev, a)
							}()
						}
					}
				}
			}
			wg.Wait()
			if want := 7 * (max + 1) * (len(fsm.Events()) + 2) * (max + 4); n != want {
				t.Fatalf("ran %d combinations, want %d", n, want)
			}
		})
	}
}

// equivalent runs in a goroutine of its own: it reports with t.Errorf
// and returns, never t.Fatal.
func equivalent(t *testing.T, ctx context.Context, c rueidis.Client, s *Jobs, m fsm.Machine, id string, job fsm.Job, ev fsm.Event, attempt int) {
	key := s.keys.JobFSM(id)
	name := fmt.Sprintf("%+v %q attempt %d", job, ev, attempt)
	if err := writeJob(c, key, "state", string(job.State), "attempt", strconv.Itoa(job.Attempt), "node_id", "node-old", "created_at_ms", "1000", "updated_at_ms", "2000"); err != nil {
		t.Errorf("%s: write the fixture: %v", name, err)
		return
	}
	out, werr := m.Apply(job, ev, attempt)
	node := "" // the node check has its own suite test
	if ev == fsm.Dispatch {
		node = "node-new"
	}
	tr, gerr := s.ApplyJob(ctx, id, ev, attempt, node)
	type result struct {
		Job       fsm.Job
		Duplicate bool
		Free      bool
		Err       string
	}
	// A duplicate of a freeing event names the node again.
	want := result{Job: out.Job, Duplicate: out.Duplicate, Free: out.FreeReservation || (out.Duplicate && ev.Frees())}
	if werr != nil {
		want.Err = werr.Error()
	}
	got := result{Job: tr.Job.Job, Duplicate: tr.Duplicate, Free: tr.FreeNode != ""}
	if gerr != nil {
		got.Err = gerr.Error()
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s: Redis differs from fsm.Apply (-fsm +redis):\n%s", name, diff)
	}
	stored, err := c.Do(ctx, c.B().Hgetall().Key(key).Build()).AsStrMap()
	if err != nil {
		t.Errorf("%s: read the hash: %v", name, err)
		return
	}
	wantStored := map[string]string{"state": string(out.Job.State), "attempt": strconv.Itoa(out.Job.Attempt),
		"node_id": "node-old", "created_at_ms": "1000", "updated_at_ms": "2000"}
	if werr == nil && !out.Duplicate {
		wantStored["updated_at_ms"] = stored["updated_at_ms"] // the server's clock
		ms, _ := strconv.ParseInt(stored["updated_at_ms"], 10, 64)
		if time.Since(time.UnixMilli(ms)).Abs() > time.Hour {
			t.Errorf("%s: updated_at_ms %s is not the server's now", name, stored["updated_at_ms"])
		}
		// The fixture has no expiry: the step sets one, TTL and a
		// sixteenth after its time.
		ttl, _ := strconv.ParseInt(s.ttlMS, 10, 64)
		wantStored["expires_at_ms"] = strconv.FormatInt(ms+ttl+ttl/16, 10)
		switch {
		case ev == fsm.Dispatch:
			wantStored["node_id"] = "node-new"
			wantStored["tried"] = "node-new" // a dispatch records its node and time
			wantStored["dispatched_at_ms"] = stored["updated_at_ms"]
		case out.Job.State == fsm.Created:
			wantStored["node_id"] = ""
			if ev != fsm.Undelivered {
				// A new attempt begins to wait for a node; an undelivered
				// one waits on.
				wantStored["queued_at_ms"] = stored["updated_at_ms"]
			}
		}
	}
	if diff := cmp.Diff(wantStored, stored); diff != "" {
		t.Errorf("%s: stored hash (-want +got):\n%s", name, diff)
	}
}

// TestFSMCorrupt: a hash that does not decode is refused with
// ErrJobCorrupt naming the field, and left exactly as it was.
func TestFSMCorrupt(t *testing.T) {
	ctx := context.Background()
	good := []string{"state", "RUNNING", "attempt", "1", "node_id", "n", "created_at_ms", "1000", "updated_at_ms", "2000"}
	with := func(field, value string) []string {
		f := append([]string(nil), good...)
		for i := 0; i < len(f); i += 2 {
			if f[i] == field {
				f[i+1] = value
				return f
			}
		}
		return append(f, field, value)
	}
	without := func(field string) []string {
		var f []string
		for i := 0; i < len(good); i += 2 {
			if good[i] != field {
				f = append(f, good[i], good[i+1])
			}
		}
		return f
	}
	tests := []struct {
		name   string
		fields []string
		field  string
	}{
		{"unknown state", with("state", "LOST"), "state"},
		{"lower-case state", with("state", "running"), "state"},
		{"no state", without("state"), "state"},
		{"attempt not a number", with("attempt", "two"), "attempt"},
		{"attempt 0", with("attempt", "0"), "attempt"},
		{"fractional attempt", with("attempt", "1.5"), "attempt"},
		{"no attempt", without("attempt"), "attempt"},
		{"bad created_at_ms", with("created_at_ms", "yesterday"), "created_at_ms"},
		{"no updated_at_ms", without("updated_at_ms"), "updated_at_ms"},
		{"only junk", []string{"junk", "1"}, "state"},
	}
	for _, srv := range testServers(t) {
		s := newJobs(t, srv.client, JobsConfig{})
		for i, tt := range tests {
			id := fmt.Sprintf("bad-%d", i)
			key := s.keys.JobFSM(id)
			setJob(t, srv.client, key, tt.fields...)
			before := hgetall(t, srv.client, key)
			_, err := s.ApplyJob(ctx, id, fsm.Result, 1, "")
			var ce *CorruptError
			if !errors.Is(err, scheduler.ErrJobCorrupt) || !errors.As(err, &ce) || ce.Field != tt.field {
				t.Errorf("%s %s: ApplyJob error = %v, want ErrJobCorrupt naming %s", srv.name, tt.name, err, tt.field)
			}
			if _, err := s.Job(ctx, id); !errors.Is(err, scheduler.ErrJobCorrupt) {
				t.Errorf("%s %s: Job error = %v, want ErrJobCorrupt", srv.name, tt.name, err)
			}
			if diff := cmp.Diff(before, hgetall(t, srv.client, key)); diff != "" {
				t.Errorf("%s %s: the hash changed (-before +after):\n%s", srv.name, tt.name, diff)
			}
		}
	}
}

func TestFSMKeyAndTTL(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		s := newJobs(t, srv.client, JobsConfig{TTL: time.Hour})
		if _, _, err := openJob(ctx, s, "j"); err != nil {
			t.Fatal(err)
		}
		key := s.keys.Prefix() + ":v1:jobs:{due:13}:{job:j}:fsm"
		pttl, err := srv.client.Do(ctx, srv.client.B().Pttl().Key(key).Build()).AsInt64()
		if want := (time.Hour + time.Hour/16).Milliseconds(); err != nil || pttl <= time.Hour.Milliseconds() || pttl > want {
			t.Errorf("%s: PTTL %s = %d, %v; want over 1h, within %dms", srv.name, key, pttl, err, want)
		}
	}
}

func TestGeneratedLuaFollowsTable(t *testing.T) {
	src := GenerateFSMLua()
	if src != GenerateFSMLua() {
		t.Fatal("GenerateFSMLua is not deterministic")
	}
	for _, tr := range fsm.Table() {
		move := fmt.Sprintf("[%q] = {%q, %t, %t}", tr.Event, tr.To, tr.Retry, tr.FreeReservation)
		line := ""
		moves, _, _ := strings.Cut(src[strings.Index(src, "local MOVES"):], "\n}\n")
		for _, l := range strings.Split(moves, "\n") {
			if strings.HasPrefix(l, fmt.Sprintf("  [%q] = {", tr.From)) {
				line = l
			}
		}
		if !strings.Contains(line, move) {
			t.Errorf("script lacks the move %s --%s--> %s: %q in %q", tr.From, tr.Event, tr.To, move, line)
		}
	}
	if strings.Contains(src, "KEYS[2]") {
		t.Error("script touches a second key")
	}
}

var update = flag.Bool("update", false, "rewrite the golden files in testdata/")

// TestFSMLuaGolden keeps the whole transition scripts, as they run, in
// testdata/: a change of package fsm's table or of the static Lua shows
// in review as a change of these files. go test -run TestFSMLuaGolden
// -update rewrites them.
func TestFSMLuaGolden(t *testing.T) {
	for _, g := range []struct{ file, src string }{
		{"testdata/fsm_apply.lua", fsmApplyLua},
		{"testdata/fsm_batch.lua", fsmBatchLua},
	} {
		if *update {
			if err := os.WriteFile(g.file, []byte(g.src), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(g.file)
		if err != nil {
			t.Fatalf("%v (go test -run TestFSMLuaGolden -update writes it)", err)
		}
		if diff := cmp.Diff(string(want), g.src); diff != "" {
			t.Errorf("%s is not the script that runs (-golden +script; -update refreshes it):\n%s", g.file, diff)
		}
	}
}

func TestJobsOpHook(t *testing.T) {
	ctx := context.Background()
	var mu sync.Mutex
	var got []string
	hook := func(op, result string, d time.Duration) {
		mu.Lock()
		got = append(got, op+"/"+result)
		mu.Unlock()
	}
	s := newJobs(t, testServers(t)[0].client, JobsConfig{OpHook: hook})
	openJob(ctx, s, "j")
	s.ApplyJob(ctx, "j", fsm.Dispatch, 1, "n")
	s.Job(ctx, "j")
	s.Job(ctx, "none")
	s.ApplyJob(ctx, "", fsm.Dispatch, 1, "n") // refused before Redis: no op
	want := []string{"job_open/ok", "fsm_apply/ok", "fsm_get/ok", "fsm_get/miss"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("hook calls (-want +got):\n%s", diff)
	}
}

// FuzzDecodeJob: any stored fields either decode to a valid record or give
// ErrJobCorrupt naming one of the fields.
func FuzzDecodeJob(f *testing.F) {
	f.Add("RUNNING", "2", "node", "1000", "2000")
	f.Add("running", "0", "", "x", "")
	f.Add("FAILED", "-1", "n", "9223372036854775807", "1")
	f.Fuzz(func(t *testing.T, state, attempt, node, created, updated string) {
		rec, err := decodeJob("j", "k", []string{state, attempt, node, created, updated})
		if err != nil {
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, scheduler.ErrJobCorrupt) {
				t.Fatalf("error %v is not a CorruptError wrapping ErrJobCorrupt", err)
			}
			switch ce.Field {
			case "state", "attempt", "created_at_ms", "updated_at_ms":
			default:
				t.Fatalf("error names field %q", ce.Field)
			}
			return
		}
		if !rec.State.Valid() || rec.Attempt < 1 || rec.NodeID != node {
			t.Fatalf("decoded %+v from %q %q %q", rec, state, attempt, node)
		}
	})
}

// TestDecodeApply decodes each form of the transition step's reply,
// including node pairs no transition of today's table produces.
func TestDecodeApply(t *testing.T) {
	rec := func(st fsm.State, attempt int, node string) scheduler.JobRecord {
		return scheduler.JobRecord{ID: "j", Job: fsm.Job{State: st, Attempt: attempt}, NodeID: node,
			CreatedAt: time.UnixMilli(1000), UpdatedAt: time.UnixMilli(2000)}
	}
	r := func(f ...string) []string { return f }
	tests := []struct {
		reply   []string
		want    scheduler.JobTransition
		wantErr error // matched with errors.Is; nil for none
		malform bool  // the error is a malformed reply
	}{
		{reply: r("ok", "DISPATCHED", "1", "n 1", "", "1000", "2000", ""), want: scheduler.JobTransition{Job: rec(fsm.Dispatched, 1, "n 1")}},
		{reply: r("ok", "RUNNING", "1", "n", "", "1000", "2000", "1500"), want: scheduler.JobTransition{Job: func() scheduler.JobRecord {
			r := rec(fsm.Running, 1, "n")
			r.DispatchedAt = time.UnixMilli(1500)
			return r
		}()}},
		{reply: r("ok", "RUNNING", "1", "n", "", "1000", "2000", "x"), wantErr: scheduler.ErrJobCorrupt},
		{reply: r("ok", "FINISHED", "1", "n", "n", "1000", "2000", ""), want: scheduler.JobTransition{Job: rec(fsm.Finished, 1, "n"), FreeNode: "n"}},
		{reply: r("ok", "CREATED", "2", "", "n", "1000", "2000", ""), want: scheduler.JobTransition{Job: rec(fsm.Created, 2, ""), FreeNode: "n"}},
		{reply: r("ok", "RUNNING", "2", "new", " old", "1000", "2000", ""), want: scheduler.JobTransition{Job: rec(fsm.Running, 2, "new"), FreeNode: " old"}},
		{reply: r("dup", "RUNNING", "1", "n", "", "1000", "2000", ""), want: scheduler.JobTransition{Job: rec(fsm.Running, 1, "n"), Duplicate: true}},
		{reply: r("stale_attempt", "RUNNING", "3", "n", "", "1000", "2000", ""), want: scheduler.JobTransition{Job: rec(fsm.Running, 3, "n")}, wantErr: fsm.ErrStaleAttempt},
		{reply: r("invalid_transition", "CREATED", "1", "", "", "1000", "2000", ""), want: scheduler.JobTransition{Job: rec(fsm.Created, 1, "")}, wantErr: fsm.ErrInvalidTransition},
		{reply: r("wrong_node", "RUNNING", "1", "n", "", "1000", "2000", ""), want: scheduler.JobTransition{Job: rec(fsm.Running, 1, "n")}, wantErr: scheduler.ErrWrongNode},
		{reply: r("not_found"), wantErr: scheduler.ErrJobNotFound},
		{reply: r("corrupt", "attempt", "two"), wantErr: scheduler.ErrJobCorrupt},
		{reply: r("ok", "RUNNING", "x", "n", "", "1000", "2000", ""), wantErr: scheduler.ErrJobCorrupt},
		{reply: r("ok", "RUNNING", "1", "n", "", "1000", "2000"), malform: true},
		{reply: r("ok", "RUNNING", "1", "n", "", "1000", "2000", "", ""), malform: true},
		{reply: r(), malform: true},
		{reply: r("corrupt"), malform: true},
		{reply: r("not_found", "x"), malform: true},
		{reply: r("what", "RUNNING", "1", "n", "", "1000", "2000", ""), malform: true},
	}
	for _, tt := range tests {
		got, err := decodeApply("j", "k", fsm.Dispatch, 1, tt.reply)
		switch {
		case tt.malform:
			if err == nil || !strings.Contains(err.Error(), "malformed reply") {
				t.Errorf("decodeApply(%q) error = %v, want a malformed reply", tt.reply, err)
			}
			continue
		case tt.wantErr == nil && err != nil, tt.wantErr != nil && !errors.Is(err, tt.wantErr):
			t.Errorf("decodeApply(%q) error = %v, want %v", tt.reply, err, tt.wantErr)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("decodeApply(%q) (-want +got):\n%s", tt.reply, diff)
		}
	}
}

// FuzzDecodeApply: any reply (its elements separated by "|" here) decodes
// to a transition or gives an error; a decoded one carries a valid state
// and attempt, and its nodes are the reply's.
func FuzzDecodeApply(f *testing.F) {
	f.Add("ok|CREATED|2||n|1000|2000|")
	f.Add("ok|RUNNING|2|new|old|1000|2000|1500")
	f.Add("dup|RUNNING|1|n|n|1000|2000|")
	f.Add("corrupt|state|x")
	f.Add("ok|RUNNING|-1|n||1000|2000|")
	f.Fuzz(func(t *testing.T, reply string) {
		fields := strings.Split(reply, "|")
		got, err := decodeApply("j", "k", fsm.Timeout, 1, fields)
		if err != nil {
			return
		}
		if !got.Job.State.Valid() || got.Job.Attempt < 1 {
			t.Fatalf("decodeApply(%q) = %+v", fields, got)
		}
		if got.Job.NodeID != fields[3] || got.FreeNode != fields[4] {
			t.Fatalf("decodeApply(%q) = nodes %q, %q, not the reply's", fields, got.Job.NodeID, got.FreeNode)
		}
	})
}

// TestFSMServerTime: created_at_ms and updated_at_ms are the server's
// clock in milliseconds (the test runs beside the server, so its own clock
// is close), as the reply reports and as stored.
func TestFSMServerTime(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		s := newJobs(t, srv.client, JobsConfig{})
		before := time.Now()
		created, _, err := openJob(ctx, s, "j")
		if err != nil {
			t.Fatal(err)
		}
		tr, err := s.ApplyJob(ctx, "j", fsm.Dispatch, 1, "n")
		if err != nil {
			t.Fatal(err)
		}
		stored, err := s.Job(ctx, "j")
		if err != nil {
			t.Fatal(err)
		}
		after := time.Now()
		for _, c := range []struct {
			name string
			got  time.Time
		}{
			{"created_at_ms on create", created.CreatedAt},
			{"updated_at_ms on create", created.UpdatedAt},
			{"updated_at_ms on dispatch", tr.Job.UpdatedAt},
			{"stored updated_at_ms", stored.UpdatedAt},
		} {
			if c.got.Before(before.Add(-10*time.Second)) || c.got.After(after.Add(10*time.Second)) {
				t.Errorf("%s: %s = %v, want between %v and %v", srv.name, c.name, c.got, before, after)
			}
		}
		if !tr.Job.UpdatedAt.Equal(stored.UpdatedAt) || tr.Job.UpdatedAt.Before(created.UpdatedAt) {
			t.Errorf("%s: updated_at_ms reply %v, stored %v, created %v: want reply = stored >= created", srv.name, tr.Job.UpdatedAt, stored.UpdatedAt, created.UpdatedAt)
		}
	}
}

// openJob opens jobID in s with a spec of its own: whether it created the
// job, and the record.
func openJob(ctx context.Context, s *Jobs, jobID string) (scheduler.JobRecord, bool, error) {
	rec, _, created, err := s.Open(ctx, jobID, scheduler.JobSpec{RequestID: "r-" + jobID, SessionID: "s-" + jobID}, "", time.Now().Add(time.Hour))
	return rec, created, err
}
