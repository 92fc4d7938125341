package main

import (
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/cron"
)

// TestCLIRunNow: jobs run with a body, a header, args, -force and an
// idempotency key; jobs add with an alert.
func TestCLIRunNow(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildKsana(t)
	m := startMember(t, bin, "cli", "KSANA_DATA="+t.TempDir())
	hook := newCallback(t, 200, 0)
	env := []string{"KSANA_ADDR=" + m.url}
	tests := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"add with an alert", `{"id":"j","http":{"url":"` + hook.URL + `/a"},"schedule":{"kind":"every","every":"1h"},"alert":{"url":"https://hooks.example/a","after":2}}`,
			[]string{"jobs", "add", "-f", "-", "-o", "json"}, 0, []string{`"alert": {`, `"after": 2`}, nil},
		{"add a bad alert", `{"http":{"url":"` + hook.URL + `/a"},"schedule":{"kind":"every","every":"1h"},"alert":{"url":"mailto:x"}}`,
			[]string{"jobs", "add", "-f", "-"}, 1, nil, []string{"field alert.url", "HTTP 400"}},
		{"run with overrides", "", []string{"jobs", "run", "j", "--body", "once", "--header", "X-A=1", "--idempotency-key", "k1"}, 0, []string{"queued run", "of j"}, nil},
		{"the same key, another body", "", []string{"jobs", "run", "j", "--body", "twice", "--idempotency-key", "k1"}, 1, nil, []string{"HTTP 422", "another body"}},
		{"run forced", "", []string{"jobs", "run", "j", "--force", "-o", "json"}, 0, []string{`"run_id"`}, nil},
		{"run a bad header", "", []string{"jobs", "run", "j", "--header", "nope"}, 2, nil, []string{"NAME=VALUE"}},
		{"run args on an HTTP job", "", []string{"jobs", "run", "j", "--args", `{"a":1}`}, 1, nil, []string{"-args: is for jobs that run a Go function", "HTTP 400"}},
	}
	for _, tt := range tests {
		code, out, errOut := cli(t, bin, env, tt.stdin, tt.args...)
		if code != tt.code {
			t.Fatalf("%s: ksana %q: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tt.name, tt.args, code, tt.code, out, errOut)
		}
		for _, s := range tt.stdout {
			if !strings.Contains(out, s) {
				t.Errorf("%s: stdout lacks %q:\n%s", tt.name, s, out)
			}
		}
		for _, s := range tt.stderr {
			if !strings.Contains(errOut, s) {
				t.Errorf("%s: stderr lacks %q:\n%s", tt.name, s, errOut)
			}
		}
	}
	var runs []cron.Run
	waitFor(t, "two runs of j", func() bool {
		jsonOut(t, bin, env, &runs, "jobs", "runs", "j", "-o", "json")
		return len(runs) == 2
	})
	time.Sleep(100 * time.Millisecond)
	if n := hook.count(); n != 2 {
		t.Errorf("callback called %d times, want 2 (one per run; the repeated key made none)", n)
	}
}
