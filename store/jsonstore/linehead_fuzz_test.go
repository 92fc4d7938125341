package jsonstore

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestLineHeadReadsStoreLines: the lines the store writes are read by
// lineHead, the start's fast path, unless an id holds a character JSON
// escapes.
func TestLineHeadReadsStoreLines(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, c := range []struct {
		run  cron.Run
		prev int64
		fast bool
	}{
		{cron.Run{ID: "0123456789abcdef0123456789abcdef", JobID: "nightly-report", ScheduledAt: at, Status: cron.StatusSuccess, Instance: "a"}, 0, true},
		{cron.Run{ID: "r", JobID: "j", ScheduledAt: at, Error: `boom "quoted"`, AttemptLog: []cron.Attempt{{Error: "x"}}}, 123456789012, true},
		{cron.Run{ID: "r", JobID: "ü-ok"}, 1, true},
		{cron.Run{ID: "r", JobID: `q"uote`}, 1, false},
		{cron.Run{ID: "r", JobID: "a<b"}, 1, false},
		{cron.Run{ID: `r\`, JobID: "j"}, 1, false},
	} {
		line, err := appendRunLine(nil, c.prev, &c.run)
		if err != nil {
			t.Fatal(err)
		}
		body := line[:len(line)-1]
		prev, id, ok := lineHead(body)
		if ok != c.fast {
			t.Errorf("lineHead(%s): ok %v, want %v", body, ok, c.fast)
			continue
		}
		if ok && (prev != c.prev || string(id) != c.run.JobID) {
			t.Errorf("lineHead(%s) = %d %q, want %d %q", body, prev, id, c.prev, c.run.JobID)
		}
	}
}

// FuzzLineHead: where lineHead reads a line that is valid JSON, a decoding
// of the line finds the same "prev" and "job_id" (a line that repeats one
// of the two keys, which the store never writes, is left out: a decoding
// keeps the last one, lineHead the first).
func FuzzLineHead(f *testing.F) {
	for _, s := range []string{
		`{"prev":12,"run_id":"a","job_id":"b"}`,
		`{"prev":0,"run_id":"","job_id":"","status":"success"}`,
		`{"prev":1e3,"run_id":"a","job_id":"b"}`,
		`{"prev":007,"run_id":"a","job_id":"b"}`,
		`{"prev":99999999999999999999,"run_id":"a","job_id":"b"}`,
		`{"prev":1,"run_id":"a","job_id":"b\"c"}`,
		`{"prev":1,"run_id":"a","job_id":"b"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		prev, id, ok := lineHead(b)
		if !ok || !json.Valid(b) {
			return
		}
		var keys map[string]json.RawMessage
		if json.Unmarshal(b, &keys) != nil {
			t.Fatalf("valid JSON does not decode: %s", b)
		}
		seen := map[string]int{}
		dec := json.NewDecoder(strings.NewReader(string(b)))
		dec.Token() // {
		for dec.More() {
			k, err := dec.Token()
			if err != nil {
				return
			}
			seen[strings.ToLower(k.(string))]++
			var skip json.RawMessage
			if dec.Decode(&skip) != nil {
				return
			}
		}
		if seen["prev"] > 1 || seen["job_id"] > 1 {
			return
		}
		var rl struct {
			Prev  *int64  `json:"prev"`
			JobID *string `json:"job_id"`
		}
		if err := json.Unmarshal(b, &rl); err != nil {
			// A value of another type elsewhere (such as "run_id" of a
			// run that is not a string) fails the decoding of a run too;
			// it does not fail here, where only two fields are read.
			t.Fatalf("decode %s: %v", b, err)
		}
		if rl.Prev == nil || *rl.Prev != prev || rl.JobID == nil || *rl.JobID != string(id) {
			t.Fatalf("lineHead(%s) = %d %q; decoded %v %v", b, prev, id, rl.Prev, rl.JobID)
		}
	})
}
