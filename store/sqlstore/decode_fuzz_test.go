package sqlstore

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// FuzzDeploymentRow feeds arbitrary args and env column texts to the row
// decoder: it never panics, an error names the column, and what it reads
// is read again the same once written as Add writes it.
func FuzzDeploymentRow(f *testing.F) {
	for _, s := range [][2]string{
		{"", ""}, {"null", "null"}, {"[]", "{}"}, {`["-v","--port=1"]`, `{"A":"1","B":""}`},
		{`[1,2]`, `{"A":1}`}, {`["a"`, `{"a":`}, {`[null]`, `{"a":null}`}, {`"x"`, `[]`}, {` []`, ` {}`},
		{`["\u0000\ud800"]`, `{"\u00e9":"\n"}`},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, args, env string) {
		r := deploymentRow{ID: "d", Args: args, Env: env}
		d, err := r.deployment()
		if err != nil {
			if !strings.Contains(err.Error(), "column args") && !strings.Contains(err.Error(), "column env") {
				t.Fatalf("error %q names no column", err)
			}
			return
		}
		if d.Args != nil && len(d.Args) == 0 || d.Env != nil && len(d.Env) == 0 {
			t.Errorf("empty args %#v or env %#v read as non-nil", d.Args, d.Env)
		}
		// Written back as Add writes it, and read again.
		r2 := deploymentRow{ID: "d", Args: "[]", Env: "{}"}
		if d.Args != nil {
			b, err := json.Marshal(d.Args)
			if err != nil {
				t.Fatal(err)
			}
			r2.Args = string(b)
		}
		if d.Env != nil {
			b, err := json.Marshal(d.Env)
			if err != nil {
				t.Fatal(err)
			}
			r2.Env = string(b)
		}
		d2, err := r2.deployment()
		if err != nil {
			t.Fatalf("args %q env %q, written back as %q %q, do not read: %v", args, env, r2.Args, r2.Env, err)
		}
		if diff := cmp.Diff(d, d2); diff != "" {
			t.Errorf("args %q env %q read again (-first +again):\n%s", args, env, diff)
		}
	})
}

// FuzzDBTime feeds arbitrary column values to the time scanner: it never
// panics, reads text and bytes alike, returns UTC, and a time it reads
// survives the SQLite text form the store writes (to the millisecond).
func FuzzDBTime(f *testing.F) {
	for _, s := range []string{"2026-05-01 12:00:00.123", "2026-05-01T12:00:00Z", "2026-05-01T12:00:00.5+02:00",
		"2026-05-01 12:00:00-07:00", "2026-05-01", "0000-01-01 00:00:00", "9999-12-31 23:59:59.999", "", "yesterday", "2026-13-01"} {
		f.Add(s, int64(0))
	}
	f.Add("", int64(-1))
	f.Add("", int64(1<<62))
	f.Fuzz(func(t *testing.T, s string, ms int64) {
		var a, b dbTime
		errA, errB := a.Scan(s), b.Scan([]byte(s))
		if (errA == nil) != (errB == nil) || !a.Time.Equal(b.Time) {
			t.Fatalf("%q as text: %v, %v; as bytes: %v, %v", s, a.Time, errA, b.Time, errB)
		}
		if errA == nil {
			if a.Location() != time.UTC {
				t.Errorf("%q read in %v, want UTC", s, a.Location())
			}
			if y := a.Year(); y >= 0 && y <= 9999 {
				text := a.Format(sqliteTimeLayout)
				var c dbTime
				if err := c.Scan(text); err != nil {
					t.Fatalf("%q read as %v, written as %q, does not read: %v", s, a.Time, text, err)
				}
				if want := a.Truncate(time.Millisecond); !c.Time.Equal(want) {
					t.Errorf("%q read as %v, written as %q, reads as %v", s, a.Time, text, c.Time)
				}
			}
		}
		var m dbTime
		if err := m.Scan(ms); err != nil {
			t.Fatalf("Scan(%d): %v", ms, err)
		}
		if m.Location() != time.UTC || m.UnixMilli() != ms {
			t.Errorf("Scan(%d) = %v (UnixMilli %d), want UTC and the same milliseconds", ms, m.Time, m.UnixMilli())
		}
	})
}
