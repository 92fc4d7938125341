//go:build unix

package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ksana-dev/ksana/cron"
	"github.com/ksana-dev/ksana/cron/client"
)

// TestCLIEscapes: a job whose name, and whose callback's reply (in its
// last_error and runs), hold terminal escapes, C1 and bidi controls is
// shown by every command with them escaped; -o json stays exact JSON
// that decodes to the same values.
func TestCLIEscapes(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	const evil = "\x1b]0;PWNED\a\x1b[2J \u009b31m \u202egnp.exe \x7f"
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusBadRequest)
		w.Write([]byte("reply " + evil))
	}))
	defer hook.Close()
	bin := buildKsana(t)
	m := startMember(t, bin, "esc", "KSANA_DATA="+t.TempDir())
	env := []string{"KSANA_ADDR=" + m.url}
	c, err := client.New(m.url, nil, "")
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := c.Create(ctx, cron.Job{ID: "evil", Name: "name " + evil, HTTP: cron.HTTPConfig{URL: hook.URL},
		Schedule: cron.ScheduleSpec{Kind: cron.KindEvery, Every: cron.Duration(3600e9)}}); err != nil {
		t.Fatal(err)
	}
	if code, out, errOut := cli(t, bin, env, "", "jobs", "run", "evil"); code != 0 {
		t.Fatalf("jobs run: %d %s %s", code, out, errOut)
	}
	waitFor(t, "the failed run", func() bool {
		j, err := c.Get(ctx, "evil")
		return err == nil && j.LastStatus == cron.StatusFailed
	})
	raw := []string{"\x1b", "\a", "\u009b", "\u202e", "\x7f"}
	escaped := `\x1b]0;PWNED\x07\x1b[2J \u009b31m \u202egnp.exe \x7f`
	for _, args := range [][]string{
		{"jobs", "get", "evil"}, {"jobs", "ls"}, {"jobs", "runs", "evil"}, {"runs"}, {"audit"}, {"health"},
		{"jobs", "get", "nope\x1b]0;PWNED\a"},
	} {
		_, out, errOut := cli(t, bin, env, "", args...)
		for _, s := range raw {
			if strings.Contains(out, s) || strings.Contains(errOut, s) {
				t.Errorf("ksana %q prints %q raw:\nstdout:\n%s\nstderr:\n%s", args, s, out, errOut)
			}
		}
		if strings.Join(args, " ") == "jobs get evil" && (!strings.Contains(out, "name "+escaped) || !strings.Contains(out, "reply "+escaped)) {
			t.Errorf("ksana %q: the name and the reply are not shown escaped as %q:\n%s", args, escaped, out)
		}
	}
	// -o json: the same values, decoded, as the API's.
	var j cron.Job
	jsonOut(t, bin, env, &j, "jobs", "get", "evil", "-o", "json")
	if j.Name != "name "+evil || !strings.Contains(j.LastError, "reply "+evil) {
		t.Errorf("jobs get -o json: name %q, last_error %q; want them exact", j.Name, j.LastError)
	}
	_, out, _ := cli(t, bin, env, "", "jobs", "get", "evil", "-o", "json")
	for _, s := range raw {
		if strings.Contains(out, s) {
			t.Errorf("jobs get -o json prints %q raw:\n%s", s, out)
		}
	}
}
