package jsonstore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/cron"
)

var t0 = time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)

func testJob(id string) cron.Job {
	j := cron.Job{
		ID: id, Name: "job " + id,
		HTTP:     cron.HTTPConfig{Method: "POST", URL: "http://127.0.0.1:9/hook", Headers: map[string]string{"X-Token": "abc"}, Body: `{"a":1}`},
		Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(time.Minute), StartAt: t0},
	}
	j.MaxRetries = 3
	if _, err := j.Prepare(t0, cron.Rules{}); err != nil {
		panic(err)
	}
	j.NextRunAt = t0.Add(time.Minute)
	return j
}

func open(t *testing.T, dir string, cfg Config) *Store {
	t.Helper()
	s, err := New(dir, cfg)
	if err != nil {
		t.Fatalf("New(%q): %v", dir, err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func load(t *testing.T, s *Store) []cron.Job {
	t.Helper()
	jobs, err := s.Load(context.Background())
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return jobs
}

// readFileJobs decodes jobs.json as a user would, with encoding/json and
// cron.Job's own UnmarshalJSON.
func readFileJobs(t *testing.T, dir string) []cron.Job {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, JobsFile))
	if err != nil {
		t.Fatalf("read jobs.json: %v", err)
	}
	var doc struct {
		Version   int        `json:"version"`
		UpdatedAt string     `json:"updated_at"`
		Jobs      []cron.Job `json:"jobs"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		t.Fatalf("jobs.json does not parse: %v\n%s", err, data)
	}
	if doc.Version != 1 {
		t.Errorf("jobs.json version = %d, want 1", doc.Version)
	}
	if _, err := time.Parse(time.RFC3339, doc.UpdatedAt); err != nil {
		t.Errorf("jobs.json updated_at = %q: %v", doc.UpdatedAt, err)
	}
	return doc.Jobs
}

func TestEncodeMatchesMarshalJSON(t *testing.T) {
	t.Parallel()
	once := testJob("once")
	once.Schedule = cron.ScheduleSpec{Kind: cron.KindOnce, RunAt: t0.Add(time.Hour)}
	once.HTTP.Headers = nil
	cr := testJob("cron")
	cr.Schedule = cron.ScheduleSpec{Kind: cron.KindCron, Cron: "*/5 * * * *", TZ: "Europe/Paris"}
	odd := testJob("odd")
	odd.Name = "quote\" backslash\\ nl\n tab\t ctl\x01 <html>&amp; \u2028 \u2029 é 日本 bad\xff end"
	odd.HTTP.Headers = map[string]string{"b": "2", "a": "1", "C\"x": "\x00"}
	odd.Schedule.Jitter = cron.Duration(1500 * time.Millisecond)
	odd.MisfireGrace = cron.Duration(time.Second)
	odd.LastRunAt = time.Date(2026, 5, 1, 12, 0, 0, 123456789, time.UTC)
	odd.LastStatus = cron.StatusFailed
	odd.LastError = "boom"
	empty := testJob("empty")
	empty.Schedule.StartAt = time.Time{}
	empty.NextRunAt = time.Time{}
	paused := testJob("paused")
	paused.Paused, paused.LastStatus, paused.NextRunAt = true, cron.StatusPaused, time.Time{}
	paused.PausedUntil = t0.Add(2 * time.Hour)
	paused.PausedAt = time.Date(2026, 5, 1, 11, 59, 58, 5, time.UTC)
	for _, j := range []cron.Job{testJob("every"), once, cr, odd, empty, paused} {
		t.Run(j.ID, func(t *testing.T) {
			want, err := json.Marshal(j)
			if err != nil {
				t.Fatal(err)
			}
			got := appendJob(nil, &j)
			if !json.Valid(got) {
				t.Fatalf("appendJob wrote invalid JSON: %s", got)
			}
			var gotV, wantV any
			if err := json.Unmarshal(got, &gotV); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(want, &wantV); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(wantV, gotV); diff != "" {
				t.Errorf("appendJob differs from MarshalJSON (-want +got):\n%s", diff)
			}
			if !strings.Contains(string(j.Name), "\xff") && !bytes.Equal(got, bytes.ReplaceAll(want, []byte(`\u003c`), []byte("<"))) {
				// Same bytes as encoding/json but for its HTML escaping.
				w := strings.NewReplacer(`\u003c`, "<", `\u003e`, ">", `\u0026`, "&").Replace(string(want))
				if w != string(got) {
					t.Errorf("appendJob bytes:\n got %s\nwant %s", got, w)
				}
			}
		})
	}
}

func FuzzAppendJob(f *testing.F) {
	f.Add("name", "http://h/x", "X-K", "v", "body", "err")
	f.Add("\"\\\n\x00\u2028\xff", "https://a.b/c?d=e", "", "\t", "{\"json\":true}", "\x7f")
	f.Fuzz(func(t *testing.T, name, url, hk, hv, body, lastErr string) {
		j := testJob("fuzz")
		j.Name, j.HTTP.URL, j.HTTP.Body, j.LastError = name, url, body, lastErr
		j.HTTP.Headers = map[string]string{hk: hv}
		got := appendJob(nil, &j)
		want, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		var gotV, wantV any
		if err := json.Unmarshal(got, &gotV); err != nil {
			t.Fatalf("appendJob wrote invalid JSON: %v\n%s", err, got)
		}
		if err := json.Unmarshal(want, &wantV); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(wantV, gotV); diff != "" {
			t.Errorf("appendJob differs from MarshalJSON (-want +got):\n%s", diff)
		}
	})
}

// FuzzDecodeFile feeds arbitrary jobs.json contents to the decoder: it must
// not panic, and whatever it accepts must survive a rewrite unchanged.
func FuzzDecodeFile(f *testing.F) {
	good := appendDocument(nil, t0, [][]byte{appendJob(nil, ptr(testJob("a"))), appendJob(nil, ptr(testJob("b")))})
	f.Add(good)
	f.Add([]byte(`{"version":1,"updated_at":"","jobs":[]}`))
	f.Add([]byte(`{"version":2,"jobs":[]}`))
	f.Add([]byte(`{"version":1,"jobs":[{"id":"x","timeout":"zz"},{"id":"y","bogus":1}]}`))
	f.Add([]byte(`{"version":1,"jobs":[`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		jobs, _, err := decodeFile(data)
		if err != nil {
			return
		}
		var refs [][]byte
		for i := range jobs {
			refs = append(refs, appendJob(nil, &jobs[i]))
		}
		again, bad, err := decodeFile(appendDocument(nil, t0, refs))
		if err != nil || len(bad) > 0 {
			t.Fatalf("rewritten file does not load: err=%v bad=%v", err, bad)
		}
		if diff := cmp.Diff(jobs, again); diff != "" {
			t.Errorf("jobs changed by a rewrite (-first +second):\n%s", diff)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func TestReopenKeepsEverything(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Config{})
	var want []cron.Job
	for i := range 5 {
		j := testJob(fmt.Sprintf("j%d", i))
		if err := s.Save(ctx, j); err != nil {
			t.Fatalf("Save: %v", err)
		}
		want = append(want, j)
	}
	if err := s.Delete(ctx, "j1"); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	want = slices.Delete(want, 1, 2)
	want[0].Name = "renamed"
	if err := s.Save(ctx, want[0]); err != nil {
		t.Fatalf("Save: %v", err)
	}
	b := cron.Bookkeeping{LastRunAt: t0.Add(time.Minute), NextRunAt: t0.Add(2 * time.Minute), LastStatus: cron.StatusTimeout, LastError: "deadline"}
	if err := s.Record(ctx, "j2", b); err != nil {
		t.Fatalf("Record: %v", err)
	}
	b.Apply(&want[1])
	var runs []cron.Run
	for i := range 3 {
		r := cron.Run{ID: fmt.Sprintf("r%d", i), JobID: "j2", ScheduledAt: t0, TriggeredAt: t0.Add(time.Second),
			FinishedAt: t0.Add(2 * time.Second), Status: cron.StatusSuccess, Attempts: 1, HTTPStatus: 200, Latency: cron.Duration(time.Second)}
		if err := s.AppendRun(ctx, r); err != nil {
			t.Fatalf("AppendRun: %v", err)
		}
		runs = append([]cron.Run{r}, runs...)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	s2 := open(t, dir, Config{})
	if diff := cmp.Diff(want, load(t, s2)); diff != "" {
		t.Errorf("jobs after reopen (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, readFileJobs(t, dir)); diff != "" {
		t.Errorf("jobs.json as a user reads it (-want +got):\n%s", diff)
	}
	got, err := s2.Runs(ctx, "j2", 0)
	if err != nil {
		t.Fatalf("Runs: %v", err)
	}
	if diff := cmp.Diff(runs, got); diff != "" {
		t.Errorf("runs after reopen (-want +got):\n%s", diff)
	}
}

func TestSaveIsDurableRecordIsNot(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Config{FlushInterval: time.Hour})
	// A durable Save does not wait an hour: it waits for the rewrite that
	// a long interval delays, so give it a Flush from the side.
	j := testJob("a")
	done := make(chan error, 1)
	go func() { done <- s.Save(ctx, j) }()
	// Save must not return before the job is on disk.
	select {
	case err := <-done:
		t.Fatalf("Save returned (%v) before any rewrite", err)
	case <-time.After(50 * time.Millisecond):
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Save: %v", err)
	}
	if got := readFileJobs(t, dir); len(got) != 1 || got[0].ID != "a" {
		t.Fatalf("jobs.json after Save = %v, want job a", got)
	}
	b := cron.Bookkeeping{LastRunAt: t0, NextRunAt: t0.Add(time.Hour), LastStatus: cron.StatusSuccess}
	if err := s.Record(ctx, "a", b); err != nil {
		t.Fatalf("Record: %v", err)
	}
	if got := readFileJobs(t, dir)[0].LastStatus; got != "" {
		t.Errorf("last_status on disk right after Record = %q, want it unwritten until the next flush", got)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush: %v", err)
	}
	if got := readFileJobs(t, dir)[0].LastStatus; got != cron.StatusSuccess {
		t.Errorf("last_status on disk after Flush = %q, want success", got)
	}
}

func TestNotFound(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir(), Config{})
	ctx := context.Background()
	for name, err := range map[string]error{
		"Delete":    s.Delete(ctx, "nope"),
		"Record":    s.Record(ctx, "nope", cron.Bookkeeping{}),
		"AppendRun": s.AppendRun(ctx, cron.Run{JobID: "nope"}),
	} {
		if !errors.Is(err, cron.ErrNotFound) {
			t.Errorf("%s(unknown) = %v, want cron.ErrNotFound", name, err)
		}
	}
	if _, err := s.Runs(ctx, "nope", 1); !errors.Is(err, cron.ErrNotFound) {
		t.Errorf("Runs(unknown) = %v, want cron.ErrNotFound", err)
	}
	s.Close()
	if err := s.Save(ctx, testJob("x")); !errors.Is(err, ErrClosed) {
		t.Errorf("Save after Close = %v, want ErrClosed", err)
	}
}

func TestRunHistoryLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Config{RunHistory: 3})
	if err := s.Save(ctx, testJob("a")); err != nil {
		t.Fatal(err)
	}
	for i := range 7 {
		if err := s.AppendRun(ctx, cron.Run{ID: fmt.Sprint(i), JobID: "a", Status: cron.StatusSuccess}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func(rs []cron.Run) []string {
		var out []string
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	tests := []struct {
		limit int
		want  []string
	}{{0, []string{"6", "5", "4"}}, {2, []string{"6", "5"}}, {10, []string{"6", "5", "4"}}}
	for _, tt := range tests {
		got, err := s.Runs(ctx, "a", tt.limit)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
			t.Errorf("Runs(limit %d) (-want +got):\n%s", tt.limit, diff)
		}
	}
	s.Close()
	// A line cut short by a crash is dropped, the rest kept.
	f, err := os.OpenFile(filepath.Join(dir, RunsFile), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"run_id":"7","job_id":"a","sta`)
	f.Close()
	s2 := open(t, dir, Config{RunHistory: 3})
	got, err := s2.Runs(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"6", "5", "4"}, ids(got)); diff != "" {
		t.Errorf("runs after a torn line (-want +got):\n%s", diff)
	}
	if err := s2.AppendRun(ctx, cron.Run{ID: "8", JobID: "a"}); err != nil {
		t.Fatal(err)
	}
	s2.Close()
	s3 := open(t, dir, Config{RunHistory: 3})
	got, _ = s3.Runs(ctx, "a", 0)
	if diff := cmp.Diff([]string{"8", "6", "5"}, ids(got)); diff != "" {
		t.Errorf("runs after append past a torn line (-want +got):\n%s", diff)
	}
}

func TestPermissions(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("POSIX modes")
	}
	dir := filepath.Join(t.TempDir(), "a", "data")
	s := open(t, dir, Config{})
	if err := s.Save(context.Background(), testJob("a")); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendRun(context.Background(), cron.Run{ID: "r", JobID: "a"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, tt := range []struct {
		path string
		want os.FileMode
	}{{dir, 0o700 | os.ModeDir}, {filepath.Join(dir, JobsFile), 0o600}, {filepath.Join(dir, RunsFile), 0o600}} {
		st, err := os.Stat(tt.path)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.Mode() & (os.ModePerm | os.ModeDir); got != tt.want {
			t.Errorf("mode of %s = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// logBuffer is a slog handler target the tests read back.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.buf.Write(p)
}

func (l *logBuffer) records(t *testing.T) []map[string]any {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(l.buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		delete(m, "time")
		if b, ok := m["backup"].(string); ok {
			m["backup"] = "<" + strings.SplitN(filepath.Base(b), "-", 2)[0] + ">"
		}
		out = append(out, m)
	}
	return out
}

func badFiles(t *testing.T, dir string) map[string]string {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "jobs.bad*"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		data, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		base := filepath.Base(n)
		if base != BadFile {
			base = "jobs.bad-<ts>.json"
			if _, dup := out[base]; dup {
				base += "+"
			}
		}
		out[base] = string(data)
	}
	return out
}

func TestRecovery(t *testing.T) {
	t.Parallel()
	good := string(appendDocument(nil, t0, [][]byte{appendJob(nil, ptr(testJob("a")))}))
	mixed := `{"version":1,"updated_at":"","jobs":[` +
		string(appendJob(nil, ptr(testJob("a")))) + `,` +
		`{"id":"b","type":"http","http":{"method":"GET","url":"http://h/"},"schedule":{"kind":"every","every":"soon"}},` +
		`{"id":"c","http":{"method":"GET","url":"http://h/"},"schedule":{"kind":"every","every":"1m"},"max_retries":-1},` +
		`{"id":"d","colour":"red"},` +
		`{"id":"a","http":{"method":"GET","url":"http://h/"},"schedule":{"kind":"once","run_at":"2026-01-01T00:00:00Z"}},` +
		string(appendJob(nil, ptr(testJob("e")))) + `]}`
	tests := []struct {
		name     string
		files    map[string]string // before New
		wantIDs  []string
		wantBad  map[string]string // jobs.bad* files after New
		wantLogs []map[string]any
	}{
		{
			name:    "no file",
			wantBad: map[string]string{},
		},
		{
			name:    "good file",
			files:   map[string]string{JobsFile: good},
			wantIDs: []string{"a"},
			wantBad: map[string]string{},
		},
		{
			// A schedule field its kind does not use, accepted (and
			// ignored) before the rule that refuses it, does not set the
			// job aside.
			name: "field of another kind",
			files: map[string]string{JobsFile: `{"version":1,"updated_at":"2026-01-01T00:00:00Z","jobs":[` +
				`{"id":"t","type":"http","http":{"method":"GET","url":"http://h/"},"schedule":{"kind":"every","every":"1m","start_at":"2026-01-01T00:00:00Z","tz":"Mars/Olympus"},"timeout":"1s"}]}`},
			wantIDs: []string{"t"},
			wantBad: map[string]string{},
		},
		{
			name:    "does not parse",
			files:   map[string]string{JobsFile: `{"version":1,"jobs":[{"id":`},
			wantBad: map[string]string{BadFile: `{"version":1,"jobs":[{"id":`},
			wantLogs: []map[string]any{{"level": "ERROR", "msg": "jsonstore: jobs file cannot be read; moved aside, starting empty",
				"file": "<dir>/jobs.json", "backup": "<jobs.bad.json>", "error": "jsonstore: jobs.json does not parse: jobs[0]: unexpected EOF"}},
		},
		{
			name:    "unknown version",
			files:   map[string]string{JobsFile: `{"version":7,"jobs":[]}`},
			wantBad: map[string]string{BadFile: `{"version":7,"jobs":[]}`},
			wantLogs: []map[string]any{{"level": "ERROR", "msg": "jsonstore: jobs file cannot be read; moved aside, starting empty",
				"file": "<dir>/jobs.json", "backup": "<jobs.bad.json>", "error": "jsonstore: unknown version 7 (want 1)"}},
		},
		{
			name:    "earlier backup kept",
			files:   map[string]string{JobsFile: `nonsense`, BadFile: "earlier"},
			wantBad: map[string]string{BadFile: "earlier", "jobs.bad-<ts>.json": "nonsense"},
			wantLogs: []map[string]any{{"level": "ERROR", "msg": "jsonstore: jobs file cannot be read; moved aside, starting empty",
				"file": "<dir>/jobs.json", "backup": "<jobs.bad>", "error": "jsonstore: jobs.json does not parse: invalid character 'o' in literal null (expecting 'u')"}},
		},
		{
			name:    "invalid entries skipped",
			files:   map[string]string{JobsFile: mixed, BadFile: "earlier"},
			wantIDs: []string{"a", "e"},
			wantBad: map[string]string{BadFile: "earlier", "jobs.bad-<ts>.json": mixed},
			wantLogs: []map[string]any{
				{"level": "ERROR", "msg": "jsonstore: invalid job skipped", "backup": "<jobs.bad>", "job_id": "b", "index": 1.0, "field": "schedule.every", "error": `must be a duration such as "5s", got "soon"`},
				{"level": "ERROR", "msg": "jsonstore: invalid job skipped", "backup": "<jobs.bad>", "job_id": "c", "index": 2.0, "field": "max_retries", "error": "must be >= 0, got -1"},
				{"level": "ERROR", "msg": "jsonstore: invalid job skipped", "backup": "<jobs.bad>", "job_id": "d", "index": 3.0, "field": "colour", "error": `json: unknown field "colour"`},
				{"level": "ERROR", "msg": "jsonstore: invalid job skipped", "backup": "<jobs.bad>", "job_id": "a", "index": 4.0, "field": "id", "error": "appears twice; the first entry is kept"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			var logs logBuffer
			s := open(t, dir, Config{Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
			var ids []string
			for _, j := range load(t, s) {
				ids = append(ids, j.ID)
			}
			if diff := cmp.Diff(tt.wantIDs, ids); diff != "" {
				t.Errorf("loaded ids (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantBad, badFiles(t, dir)); diff != "" {
				t.Errorf("backups (-want +got):\n%s", diff)
			}
			got := logs.records(t)
			for _, m := range got {
				if f, ok := m["file"].(string); ok {
					m["file"] = strings.Replace(f, dir, "<dir>", 1)
				}
			}
			if diff := cmp.Diff(tt.wantLogs, got); diff != "" {
				t.Errorf("logs (-want +got):\n%s", diff)
			}
			// Recovered tells the caller what the logs tell the operator.
			type summary struct {
				Unreadable  bool
				Skipped     int
				BackupInDir bool
			}
			var want *summary
			for _, m := range tt.wantLogs {
				if want == nil {
					want = &summary{BackupInDir: true}
				}
				switch m["msg"] {
				case "jsonstore: jobs file cannot be read; moved aside, starting empty":
					want.Unreadable = true
				case "jsonstore: invalid job skipped":
					want.Skipped++
				}
			}
			var gotSum *summary
			if rec := s.Recovered(); rec != nil {
				_, err := os.Stat(rec.Backup)
				gotSum = &summary{rec.Unreadable, len(rec.Skipped), err == nil && filepath.Dir(rec.Backup) == dir}
			}
			if diff := cmp.Diff(want, gotSum); diff != "" {
				t.Errorf("Recovered() (-want +got):\n%s", diff)
			}
			// jobs.json is rewritten at once and holds what was loaded.
			var fileIDs []string
			for _, j := range readFileJobs(t, dir) {
				fileIDs = append(fileIDs, j.ID)
			}
			if diff := cmp.Diff(tt.wantIDs, fileIDs); diff != "" {
				t.Errorf("ids in jobs.json (-want +got):\n%s", diff)
			}
		})
	}
}

// TestGroupCommit counts rewrites under bursts of changes, on a fake clock.
func TestGroupCommit(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name          string
		writers       int
		perWriter     int
		gap           time.Duration // between one writer's changes
		wantMax       int           // rewrites
		wantMin       int
		durableWrites bool
	}{
		{name: "simultaneous durable saves share one rewrite", writers: 200, perWriter: 1, wantMin: 1, wantMax: 1, durableWrites: true},
		{name: "burst of bookkeeping", writers: 4, perWriter: 5000, wantMin: 1, wantMax: 1},
		// 1 s of changes every 1 ms from 8 writers: about 1s/50ms rewrites.
		{name: "sustained bookkeeping", writers: 8, perWriter: 1000, gap: time.Millisecond, wantMin: 15, wantMax: 22},
		// 100 writers each waiting for 10 saves in a row: one rewrite per round.
		{name: "rounds of durable saves", writers: 100, perWriter: 10, wantMin: 10, wantMax: 11, durableWrites: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				var mu sync.Mutex
				var flushes []FlushInfo
				s, err := New(t.TempDir(), Config{OnFlush: func(fi FlushInfo) {
					mu.Lock()
					flushes = append(flushes, fi)
					mu.Unlock()
				}})
				if err != nil {
					t.Fatal(err)
				}
				defer s.Close()
				ctx := context.Background()
				for w := range tt.writers {
					if err := s.Save(ctx, testJob(fmt.Sprint(w))); err != nil {
						t.Fatal(err)
					}
				}
				synctest.Wait()
				mu.Lock()
				flushes = nil
				mu.Unlock()
				var wg sync.WaitGroup
				for w := range tt.writers {
					wg.Go(func() {
						id := fmt.Sprint(w)
						for i := range tt.perWriter {
							var err error
							if tt.durableWrites {
								j := testJob(id)
								j.Name = fmt.Sprint(i)
								err = s.Save(ctx, j)
							} else {
								err = s.Record(ctx, id, cron.Bookkeeping{LastRunAt: t0.Add(time.Duration(i))})
							}
							if err != nil {
								t.Error(err)
							}
							if tt.gap > 0 {
								time.Sleep(tt.gap)
							}
						}
					})
				}
				wg.Wait()
				time.Sleep(time.Second) // let the last flush happen
				synctest.Wait()
				mu.Lock()
				n := len(flushes)
				mu.Unlock()
				if n < tt.wantMin || n > tt.wantMax {
					t.Errorf("%d changes made %d rewrites, want %d..%d", tt.writers*tt.perWriter, n, tt.wantMin, tt.wantMax)
				}
				// The last change of each writer is on disk.
				for _, j := range readFileJobs(t, s.Dir()) {
					if tt.durableWrites && j.Name != fmt.Sprint(tt.perWriter-1) {
						t.Errorf("job %s on disk has name %q, want the last write %d", j.ID, j.Name, tt.perWriter-1)
					}
					if !tt.durableWrites && !j.LastRunAt.Equal(t0.Add(time.Duration(tt.perWriter-1))) {
						t.Errorf("job %s on disk has last_run_at %v, want the last record", j.ID, j.LastRunAt)
					}
				}
			})
		})
	}
}

// TestRewriteFailure: when the directory cannot be written, a durable Save
// reports the error; once it can again, the change reaches the disk.
func TestRewriteFailure(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := context.Background()
	s := open(t, dir, Config{FlushInterval: time.Millisecond})
	// A directory where the temporary file goes: it cannot be created,
	// whatever the permissions (root included).
	tmp := filepath.Join(dir, JobsFile+".tmp")
	if err := os.MkdirAll(filepath.Join(tmp, "in-the-way"), 0o700); err != nil {
		t.Fatal(err)
	}
	err := s.Save(ctx, testJob("a"))
	if err == nil {
		t.Fatal("Save succeeded while jobs.json could not be rewritten")
	}
	if !strings.Contains(err.Error(), JobsFile) {
		t.Errorf("Save error = %v, want it to name %s", err, JobsFile)
	}
	if _, err := os.Stat(filepath.Join(dir, JobsFile)); err == nil {
		if got := readFileJobs(t, dir); len(got) != 0 {
			t.Errorf("jobs on disk after the failed rewrite = %d, want 0", len(got))
		}
	}
	if err := os.RemoveAll(tmp); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(ctx); err != nil {
		t.Fatalf("Flush once the way is clear: %v", err)
	}
	if got := readFileJobs(t, dir); len(got) != 1 {
		t.Errorf("jobs on disk = %d, want 1", len(got))
	}
}

// TestLoneChangeWrittenAtOnce: after a quiet interval a durable Save does
// not wait for the flush interval.
func TestLoneChangeWrittenAtOnce(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		s, err := New(t.TempDir(), Config{FlushInterval: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx := context.Background()
		tests := []struct {
			idle time.Duration
			want time.Duration
		}{
			{2 * time.Second, 0}, // quiet: at once
			{0, time.Second},     // right after a rewrite: one interval later
			{300 * time.Millisecond, 700 * time.Millisecond}, // the rest of the interval
		}
		for i, tt := range tests {
			time.Sleep(tt.idle)
			start := time.Now()
			if err := s.Save(ctx, testJob(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
			if got := time.Since(start); got != tt.want {
				t.Errorf("Save %d after %v idle waited %v, want %v", i, tt.idle, got, tt.want)
			}
		}
	})
}

// FuzzFastDecode: whenever the fast decoder accepts a file, the general
// decoder gives the same jobs and errors.
func FuzzFastDecode(f *testing.F) {
	odd := testJob("odd")
	odd.Name = "q\" b\\ n\n t\t / é"
	odd.HTTP.Headers = map[string]string{}
	f.Add(appendDocument(nil, t0, [][]byte{appendJob(nil, ptr(testJob("a"))), appendJob(nil, &odd)}))
	f.Add([]byte(`{"version":1,"jobs":[{"id":"x","http":{"url":"http://h/","headers":{"a":"1"}},"schedule":{"kind":"every","every":"1m"},"max_retries":-0}]}`))
	f.Add([]byte(`{"version":1,"jobs":[{"id":"x","http":{"url":"http://h/"},"http":{"method":"POST"},"schedule":{"kind":"once","run_at":"2026-01-01T00:00:00Z"}}]}`))
	f.Add([]byte(`{"version":1,"jobs":[{"id":"x","timeout":"zz"},{"id":"x"}]}`))
	f.Add([]byte(`{"version":2,"updated_at":"","jobs":[]}`))
	for _, args := range []string{`{"a":[1,"x\"y]"],"b":{}}`, `"s}"`, `-1.5e3`, `null`, `[ ]`, `{"a":1 `, `1 2`, `tru`} {
		f.Add([]byte(`{"version":1,"jobs":[{"id":"x","type":"report","args":` + args + `,"schedule":{"kind":"every","every":"1m"}}]}`))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		version, fjs, ok := fastDecode(data)
		if !ok {
			return
		}
		sv, raws, err := splitFile(data)
		if err != nil {
			t.Fatalf("fast decoder accepted what the general one refuses: %v", err)
		}
		if sv != version || len(raws) != len(fjs) {
			t.Fatalf("version/entries: fast %d/%d, general %d/%d", version, len(fjs), sv, len(raws))
		}
		for i := range raws {
			fj, fe := convertJob(i, &fjs[i])
			gj, ge := decodeEntry(i, raws[i])
			if diff := cmp.Diff(gj, fj); diff != "" {
				t.Errorf("entry %d (-general +fast):\n%s", i, diff)
			}
			if (fe == nil) != (ge == nil) || (fe != nil && fe.Error() != ge.Error()) {
				t.Errorf("entry %d errors: fast %v, general %v", i, fe, ge)
			}
		}
	})
}

// TestPausedAtRoundTrip: a paused job's paused_at (and paused_until) come
// back from jobs.json through the fast decoder, the general decoder and a
// reopen of the store, and a paused_at that is no time is refused naming
// the field.
func TestPausedAtRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	j := testJob("p")
	j.Paused, j.LastStatus, j.NextRunAt = true, cron.StatusPaused, time.Time{}
	j.PausedUntil = t0.Add(3 * time.Hour)
	j.PausedAt = t0.Add(-90*time.Minute + 7)
	raw := appendJob(nil, &j)
	if !bytes.Contains(raw, []byte(`"paused_at":"`+j.PausedAt.Format(time.RFC3339Nano)+`"`)) {
		t.Fatalf("appendJob wrote no paused_at: %s", raw)
	}
	doc := appendDocument(nil, t0, [][]byte{raw})
	_, fjs, ok := fastDecode(doc)
	if !ok {
		t.Fatalf("the fast decoder refused %s", doc)
	}
	fast, field, err := fjs[0].job()
	if err != nil {
		t.Fatalf("fast decoder: field %s: %v", field, err)
	}
	fj, err := strictFileJob(raw)
	if err != nil {
		t.Fatalf("general decoder: %v", err)
	}
	slow, field, err := fj.job()
	if err != nil {
		t.Fatalf("general decoder: field %s: %v", field, err)
	}
	for name, got := range map[string]cron.Job{"fast decoder": fast, "general decoder": slow} {
		if !got.PausedAt.Equal(j.PausedAt) || !got.PausedUntil.Equal(j.PausedUntil) {
			t.Errorf("%s: paused_at %v paused_until %v, want %v %v", name, got.PausedAt, got.PausedUntil, j.PausedAt, j.PausedUntil)
		}
	}

	dir := t.TempDir()
	s := open(t, dir, Config{})
	if err := s.Save(ctx, j); err != nil {
		t.Fatalf("Save: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	got := load(t, open(t, dir, Config{}))
	if len(got) != 1 || !got[0].PausedAt.Equal(j.PausedAt) {
		t.Fatalf("after reopen: %+v, want paused_at %v", got, j.PausedAt)
	}

	bad := bytes.Replace(doc, []byte(j.PausedAt.Format(time.RFC3339Nano)), []byte("yesterday"), 1)
	jobs, errs, err := decodeFile(bad)
	if err != nil {
		t.Fatalf("decodeFile: %v", err)
	}
	if len(jobs) != 0 || len(errs) != 1 || !strings.Contains(errs[0].Error(), "paused_at") {
		t.Errorf("a bad paused_at: jobs %d, errors %v; want the job refused naming paused_at", len(jobs), errs)
	}
}
