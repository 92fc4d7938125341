package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ksana-dev/ksana/cron"
)

// TestCLIListPages: jobs ls prints a page of 100 jobs by default and says
// on stderr how to get more; -all lists every job; -all with -limit is a
// bad command line.
func TestCLIListPages(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	bin := buildKsana(t)
	m := startMember(t, bin, "pages", "KSANA_DATA="+t.TempDir())
	env := []string{"KSANA_ADDR=" + m.url}
	const n = 103
	for i := range n {
		body := fmt.Sprintf(`{"id":"j%03d","http":{"url":"http://127.0.0.1:9/"},"schedule":{"kind":"every","every":"1h"}}`, i)
		if code := call(t, "POST", m.url+"/jobs", body, nil); code != 201 {
			t.Fatalf("POST /jobs: %d", code)
		}
	}
	code, out, errOut := cli(t, bin, env, "", "jobs", "ls", "-o", "json")
	var jobs []cron.Job
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) != 100 {
		t.Fatalf("jobs ls: exit %d, %d jobs; want 0 and a page of 100\n%s", code, len(jobs), errOut)
	}
	if !strings.Contains(errOut, "more jobs follow: -after j099") || !strings.Contains(errOut, "-all") {
		t.Errorf("jobs ls stderr %q; want how to get the next page and every job", errOut)
	}
	code, out, errOut = cli(t, bin, env, "", "jobs", "ls", "-all", "-o", "json")
	jobs = nil
	if code != 0 || json.Unmarshal([]byte(out), &jobs) != nil || len(jobs) != n || jobs[n-1].ID != "j102" || errOut != "" {
		t.Errorf("jobs ls -all: exit %d, %d jobs, stderr %q; want all %d, nothing on stderr", code, len(jobs), errOut, n)
	}
	if code, _, errOut := cli(t, bin, env, "", "jobs", "ls", "-all", "-limit", "5"); code != 2 || !strings.Contains(errOut, "-all lists every job") {
		t.Errorf("jobs ls -all -limit 5: exit %d, %q; want 2", code, errOut)
	}
}
