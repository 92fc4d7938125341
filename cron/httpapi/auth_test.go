package httpapi

import (
	"encoding/json"
	"fmt"
	"github.com/ksana-dev/ksana/cron"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func bearer(tok string) map[string]string {
	return map[string]string{"Authorization": "Bearer " + tok}
}

// TestRoles: every endpoint against every role: a viewer reads, an
// operator also runs, pauses and resumes, an admin does everything; a too
// small role gets 403 naming the role needed, an unknown token 401, and
// a refused write changes nothing.
func TestRoles(t *testing.T) {
	set, err := NewTokenSet([]Token{
		{Secret: "v-secret-00000001", Role: RoleViewer, Name: "vera"},
		{Secret: "o-secret-00000001", Role: RoleOperator, Name: "otto"},
		{Secret: "a-secret-00000001", Role: RoleAdmin, Name: "ada"},
	})
	if err != nil {
		t.Fatal(err)
	}
	tokens := map[Role]string{RoleViewer: "v-secret-00000001", RoleOperator: "o-secret-00000001", RoleAdmin: "a-secret-00000001", "single": "single-secret-0001"}
	type call struct {
		method, path, body string
		need               Role
		ok                 int // status when allowed
	}
	calls := []call{
		{"GET", "/jobs", "", RoleViewer, 200},
		{"GET", "/jobs/fixed", "", RoleViewer, 200},
		{"HEAD", "/jobs/fixed/runs", "", RoleViewer, 200},
		{"GET", "/jobs/fixed/runs", "", RoleViewer, 200},
		{"GET", "/jobs/fixed/next", "", RoleViewer, 200},
		{"GET", "/openapi.json", "", RoleViewer, 200},
		{"GET", "/metrics", "", RoleViewer, 404},
		{"GET", "/audit", "", RoleViewer, 200},
		{"POST", "/schedules/preview", `{"schedule":{"kind":"every","every":"1h"}}`, RoleViewer, 200},
		{"POST", "/jobs/fixed/run-now", "", RoleOperator, 202},
		{"POST", "/jobs/fixed/pause", "", RoleOperator, 200},
		{"POST", "/jobs/fixed/resume", "", RoleOperator, 200},
		{"POST", "/jobs", strings.Replace(validJob, `"fixed"`, `"other"`, 1), RoleAdmin, 201},
		{"PATCH", "/jobs/fixed", `{"name":"renamed"}`, RoleAdmin, 200},
		{"DELETE", "/jobs/fixed", "", RoleAdmin, 204},
	}
	for _, role := range []Role{RoleViewer, RoleOperator, RoleAdmin, "single"} {
		for _, c := range calls {
			t.Run(fmt.Sprintf("%s/%s %s", role, c.method, c.path), func(t *testing.T) {
				f := newFixture(t, Config{Token: "single-secret-0001", Authenticator: set})
				if r := f.do(t, "POST", "/jobs", validJob, bearer("a-secret-00000001")); r.status != 201 {
					t.Fatalf("create: %d %s", r.status, r.body)
				}
				before := f.do(t, "GET", "/jobs/fixed", "", bearer("v-secret-00000001")).body
				has := role
				if role == "single" {
					has = RoleAdmin
				}
				r := f.do(t, c.method, c.path, c.body, bearer(tokens[role]))
				if has.Includes(c.need) {
					if r.status != c.ok {
						t.Fatalf("%s as %s: %d %s, want %d", c.method, c.path, r.status, r.body, c.ok)
					}
					return
				}
				if r.status != 403 {
					t.Fatalf("%s %s as %s: %d %s, want 403", c.method, c.path, role, r.status, r.body)
				}
				var fb forbiddenBody
				if err := json.Unmarshal([]byte(r.body), &fb); err != nil || fb.Role != c.need || !strings.Contains(fb.Error, string(c.need)+" role") {
					t.Errorf("403 body %s: want role %q named (%v)", r.body, c.need, err)
				}
				if after := f.do(t, "GET", "/jobs/fixed", "", bearer("v-secret-00000001")).body; after != before {
					t.Errorf("refused %s changed the job:\n%s\nwas\n%s", c.method, after, before)
				}
				if r := f.do(t, "GET", "/jobs/other", "", bearer("v-secret-00000001")); r.status != 404 {
					t.Errorf("refused create made the job: %d", r.status)
				}
				if got := f.do(t, "GET", "/audit", "", bearer("v-secret-00000001")).body; strings.Count(got, `"who"`) != 1 {
					t.Errorf("a refused write was audited: %s", got)
				}
			})
		}
	}
	f := newFixture(t, Config{Token: "single-secret-0001", Authenticator: set})
	for _, tok := range []string{"", "Bearer nope", "Bearer v-secre", "Basic v-secret-00000001"} {
		r := f.do(t, "GET", "/jobs", "", map[string]string{"Authorization": tok})
		if r.status != 401 {
			t.Errorf("Authorization %q: %d, want 401", tok, r.status)
		}
	}
	if r := f.do(t, "GET", "/health", "", nil); r.status != 200 {
		t.Errorf("/health without a token: %d", r.status)
	}
	// A method the route does not take is 405 whatever the role.
	if r := f.do(t, "PUT", "/jobs/fixed", "", bearer("v-secret-00000001")); r.status != 405 {
		t.Errorf("PUT as viewer: %d, want 405", r.status)
	}
}

// TestTokenSetStore: a bad list is refused, naming the token and not its
// secret, and the old tokens stay.
func TestTokenSetStore(t *testing.T) {
	set, err := NewTokenSet([]Token{{Secret: "keep-secret-00001", Role: RoleViewer, Name: "k"}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		tokens []Token
		want   string
	}{
		{[]Token{{Secret: "", Role: RoleAdmin, Name: "a"}}, "token 1 (a): the secret must not be empty"},
		{[]Token{{Secret: "x y", Role: RoleAdmin}}, "token 1 (admin): the secret must not be empty nor hold white space"},
		{[]Token{{Secret: "s1-secret-000001"[:MinTokenLen-1], Role: RoleAdmin, Name: "short"}}, "token 1 (short): the secret must be at least 16 bytes"},
		{[]Token{{Secret: "s1-secret-0000001", Role: "root", Name: "r"}}, `token 1 (r): unknown role "root"`},
		{[]Token{{Secret: "s1-secret-0000001", Role: RoleAdmin}, {Secret: "s1-secret-0000001", Role: RoleViewer, Name: "b"}}, "token 2 (b): the same secret as token 1"},
	} {
		err := set.Store(tc.tokens)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Store(%v): %v, want %q", tc.tokens, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "s1-secret-0000001") {
			t.Errorf("error shows the secret: %v", err)
		}
		if id, ok := set.Authenticate("keep-secret-00001"); !ok || id != (Identity{Name: "k", Role: RoleViewer}) {
			t.Errorf("after a refused Store: %v %v, want the old token", id, ok)
		}
	}
	if err := set.Store([]Token{{Secret: "new-secret-000001", Role: RoleOperator}}); err != nil {
		t.Fatal(err)
	}
	if _, ok := set.Authenticate("keep-secret-00001"); ok {
		t.Error("old token still known after Store")
	}
	if id, ok := set.Authenticate("new-secret-000001"); !ok || id != (Identity{Name: "operator", Role: RoleOperator}) {
		t.Errorf("new token: %v %v", id, ok)
	}
	var zero TokenSet
	if _, ok := zero.Authenticate(""); ok {
		t.Error("zero TokenSet knows the empty token")
	}
}

// TestAudit: each successful write is recorded with who, what, the job
// before and after; reads and refused writes are not; GET /audit filters
// and pages; the log is bounded and the sink sees every entry.
func TestAudit(t *testing.T) {
	set, err := NewTokenSet([]Token{
		{Secret: "o-secret-00000001", Role: RoleOperator, Name: "otto"},
		{Secret: "v-secret-00000001", Role: RoleViewer, Name: "vera"},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{Token: "root-secret-00001", Authenticator: set})
	admin, op := bearer("root-secret-00001"), bearer("o-secret-00000001")
	steps := []struct {
		method, path, body string
		h                  map[string]string
		status             int
	}{
		{"POST", "/jobs", validJob, admin, 201},
		{"POST", "/jobs/fixed/pause", "", op, 200},
		{"PATCH", "/jobs/fixed", `{"name":"pong"}`, op, 403}, // refused: not recorded
		{"PATCH", "/jobs/fixed", `{"name":7}`, admin, 400},   // bad: not recorded
		{"GET", "/jobs/fixed", "", admin, 200},               // read: not recorded
		{"PATCH", "/jobs/fixed", `{"name":"pong"}`, admin, 200},
		{"POST", "/jobs", strings.Replace(validJob, `"fixed"`, `"b"`, 1), admin, 201},
		{"DELETE", "/jobs/fixed", "", admin, 204},
	}
	for _, s := range steps {
		if r := f.do(t, s.method, s.path, s.body, s.h); r.status != s.status {
			t.Fatalf("%s %s: %d %s, want %d", s.method, s.path, r.status, r.body, s.status)
		}
	}
	r := f.do(t, "GET", "/audit", "", bearer("v-secret-00000001"))
	var got []AuditEntry
	if err := json.Unmarshal([]byte(r.body), &got); err != nil || r.status != 200 {
		t.Fatalf("GET /audit: %d %v\n%s", r.status, err, r.body)
	}
	type brief struct {
		ID                        int64
		Who                       string
		Role                      Role
		Action                    cron.Action
		Job                       string
		BeforeName, AfterName     string
		BeforePaused, AfterPaused bool
	}
	field := func(raw json.RawMessage) (name string, enabled bool) {
		if raw == nil {
			return "-", false
		}
		var j struct {
			Name    string `json:"name"`
			Enabled bool   `json:"enabled"`
		}
		if err := json.Unmarshal(raw, &j); err != nil {
			t.Fatalf("audit job %s: %v", raw, err)
		}
		return j.Name, !j.Enabled
	}
	var briefs []brief
	for _, e := range got {
		b := brief{ID: e.ID, Who: e.Who, Role: Role(e.Role), Action: e.Action, Job: e.JobID}
		b.BeforeName, b.BeforePaused = field(e.Before)
		b.AfterName, b.AfterPaused = field(e.After)
		if e.Time.IsZero() {
			t.Errorf("entry %d has no time", e.ID)
		}
		briefs = append(briefs, b)
	}
	want := []brief{
		{1, "admin", RoleAdmin, cron.ActionCreate, "fixed", "-", "ping", false, false},
		{2, "otto", RoleOperator, cron.ActionPause, "fixed", "ping", "ping", false, true},
		{3, "admin", RoleAdmin, cron.ActionUpdate, "fixed", "ping", "pong", true, true},
		{4, "admin", RoleAdmin, cron.ActionCreate, "b", "-", "ping", false, false},
		{5, "admin", RoleAdmin, cron.ActionDelete, "fixed", "pong", "-", true, false},
	}
	if diff := cmp.Diff(want, briefs); diff != "" {
		t.Errorf("audit (-want +got):\n%s", diff)
	}

	// Filters and pages.
	ids := func(q string) (out []int64, link string) {
		r := f.do(t, "GET", "/audit"+q, "", admin)
		var es []AuditEntry
		if err := json.Unmarshal([]byte(r.body), &es); err != nil || r.status != 200 {
			t.Fatalf("GET /audit%s: %d %s", q, r.status, r.body)
		}
		for _, e := range es {
			out = append(out, e.ID)
		}
		return out, r.header.Get("Link")
	}
	for _, tc := range []struct {
		q    string
		want []int64
		link string
	}{
		{"?job_id=fixed", []int64{1, 2, 3, 5}, ""},
		{"?job_id=b", []int64{4}, ""},
		{"?job_id=nope", nil, ""},
		{"?limit=2", []int64{1, 2}, `<?after=2&limit=2>; rel="next"`},
		{"?limit=2&after=3", []int64{4, 5}, ""},
		{"?after=4&job_id=fixed", []int64{5}, ""},
	} {
		got, link := ids(tc.q)
		if diff := cmp.Diff(tc.want, got); diff != "" || link != tc.link {
			t.Errorf("GET /audit%s (-want +got):\n%s link %q, want %q", tc.q, diff, link, tc.link)
		}
	}
	for q, field := range map[string]string{"?limit=0": "limit", "?after=-1": "after", "?x=1": "x", "?limit=1&limit=2": "limit"} {
		r := f.do(t, "GET", "/audit"+q, "", admin)
		if r.status != 400 || !strings.Contains(r.body, `"field":"`+field+`"`) {
			t.Errorf("GET /audit%s: %d %s, want 400 naming %s", q, r.status, r.body, field)
		}
	}
}

// TestSecretsHiddenBelowAdmin: a viewer or an operator reads a job with
// its header values, URL password and alert secret hidden; an admin reads
// them; the audit log keeps them hidden for everyone; and the stored job
// keeps the real values.
func TestSecretsHiddenBelowAdmin(t *testing.T) {
	set, err := NewTokenSet([]Token{
		{Secret: "v-secret-00000001", Role: RoleViewer, Name: "vera"},
		{Secret: "o-secret-00000001", Role: RoleOperator, Name: "otto"},
		{Secret: "a-secret-00000001", Role: RoleAdmin, Name: "ada"},
	})
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, Config{Authenticator: set})
	job := `{"id":"s","name":"s","http":{"method":"POST","url":"http://bob:pw-123@127.0.0.1:9/x","headers":{"Authorization":"Bearer cb-token"}},
		"schedule":{"kind":"every","every":"1h"},"alert":{"url":"http://127.0.0.1:9/hook","secret":"alert-secret-1"}}`
	if r := f.do(t, "POST", "/jobs", job, bearer("a-secret-00000001")); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	secrets := []string{"pw-123", "cb-token", "alert-secret-1"}
	for _, c := range []struct{ method, path, tok string }{
		{"GET", "/jobs/s", "v-secret-00000001"}, {"GET", "/jobs", "v-secret-00000001"}, {"GET", "/jobs/s", "o-secret-00000001"},
		{"POST", "/jobs/s/pause", "o-secret-00000001"}, {"POST", "/jobs/s/resume", "o-secret-00000001"}, {"GET", "/audit", "a-secret-00000001"},
	} {
		r := f.do(t, c.method, c.path, "", bearer(c.tok))
		if r.status != 200 {
			t.Fatalf("%s %s: %d %s", c.method, c.path, r.status, r.body)
		}
		for _, sec := range secrets {
			if strings.Contains(r.body, sec) {
				t.Errorf("%s %s with %s shows the secret %q: %s", c.method, c.path, c.tok, sec, r.body)
			}
		}
		if !strings.Contains(r.body, "(hidden)") {
			t.Errorf("%s %s with %s: no (hidden) value in %s", c.method, c.path, c.tok, r.body)
		}
	}
	r := f.do(t, "GET", "/jobs/s", "", bearer("a-secret-00000001"))
	for _, sec := range secrets {
		if !strings.Contains(r.body, sec) {
			t.Errorf("admin GET /jobs/s lacks %q: %s", sec, r.body)
		}
	}
}
