package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/fsm"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/scheduler/console"
)

const (
	readToken  = "read-token-0123456789"
	adminToken = "admin-token-0123456789"
	// other is a second instance of the plane, known to presence only:
	// its dead-letter queue holds the fixture's dead letters.
	other = "inst-b"
)

// holdNode acknowledges and starts every job it gets, and never answers:
// its jobs stay in flight.
type holdNode struct {
	d  *scheduler.Dispatcher
	wg *sync.WaitGroup
}

func (n holdNode) Send(ctx context.Context, m scheduler.Envelope) error {
	if m.Type != scheduler.TypeJobAssign {
		return nil
	}
	n.wg.Go(func() {
		for _, t := range []scheduler.MessageType{scheduler.TypeJobAck, scheduler.TypeJobStarted} {
			n.d.NodeEvent(context.Background(), m.NodeID, scheduler.Envelope{Type: t, JobID: m.JobID, Attempt: m.Attempt})
		}
	})
	return nil
}

type nopSession struct{}

func (nopSession) Send(context.Context, scheduler.Envelope) error { return nil }

// fixture is one instance in memory with two nodes, a session, three
// running jobs, and two dead letters in the inbox of another instance,
// behind a console mounted at /ui/.
type fixture struct {
	d     *scheduler.Dispatcher
	st    scheduler.Stores
	srv   *httptest.Server
	base  string // the console's URL, ".../ui"
	dead  []scheduler.DeadLetter
	jobs  []string
	inbox scheduler.Inbox // of other
}

func newFixture(t *testing.T, cfg console.Config) *fixture {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pcfg := scheduler.Config{InstanceID: "inst-a"}
	st, err := scheduler.NewMemStores(pcfg)
	if err != nil {
		t.Fatal(err)
	}
	d, err := scheduler.NewDispatcher(st, pcfg)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	done := make(chan struct{})
	go func() { d.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done; wg.Wait() })

	f := &fixture{d: d, st: st}
	node := holdNode{d: d, wg: &wg}
	for _, n := range []scheduler.NodeInfo{
		{NodeID: "node-1", Pools: []string{"zh-en"}, Models: []string{"m1"}, Capacity: 4},
		{NodeID: "node-2", Pools: []string{"en-fr"}, Models: []string{"m2"}, Capacity: 2},
	} {
		if err := d.AttachNode(ctx, n, node); err != nil {
			t.Fatal(err)
		}
	}
	if err := d.AttachSession(ctx, "session-1", nopSession{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		id, err := d.Submit(ctx, "session-1", scheduler.Request{RequestID: fmt.Sprintf("req-%d", i), TurnID: "turn-1", Pool: "zh-en"})
		if err != nil {
			t.Fatal(err)
		}
		f.jobs = append(f.jobs, id)
	}
	waitFor(t, "three jobs running", func() bool {
		p, err := d.Jobs(ctx, scheduler.JobQuery{})
		return err == nil && p.Counts[fsm.Running] == 3
	})

	if err := st.Presence.Announce(ctx, other, time.Hour); err != nil {
		t.Fatal(err)
	}
	f.inbox = st.Inbox(other)
	if err := f.inbox.EnsureGroup(ctx); err != nil {
		t.Fatal(err)
	}
	for i, v := range []string{"job_result", "<script>alert(1)</script>"} {
		id, err := st.Sender.Send(ctx, other, scheduler.Fields{{Name: "type", Value: v}, {Name: "job_id", Value: fmt.Sprintf("j-dead-%d", i)}, {Name: "payload", Value: "secret-payload"}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.inbox.Read(ctx, "c", 1, 0); err != nil {
			t.Fatal(err)
		}
		dl, ok, err := f.inbox.DeadLetter(ctx, "c", id, 0, "malformed: test")
		if err != nil || !ok {
			t.Fatalf("DeadLetter: %v, %v", ok, err)
		}
		f.dead = append(f.dead, dl)
	}

	c, err := console.New(d, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/ui/", c)
	f.srv = httptest.NewServer(mux)
	t.Cleanup(f.srv.Close)
	f.base = f.srv.URL + "/ui"
	return f
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// user is one browser: its own cookies, no redirects followed.
type user struct {
	t    *testing.T
	f    *fixture
	c    *http.Client
	csrf string // the CSRF token of the last page read
}

func (f *fixture) user(t *testing.T) *user {
	jar, _ := cookiejar.New(nil)
	return &user{t: t, f: f, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

var csrfRE = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// get returns the status and body of a GET of path (below the mount
// point), and keeps the page's CSRF token.
func (u *user) get(path string) (int, string, http.Header) {
	u.t.Helper()
	res, err := u.c.Get(u.f.base + path)
	if err != nil {
		u.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if m := csrfRE.FindSubmatch(b); m != nil {
		u.csrf = string(m[1])
	}
	return res.StatusCode, string(b), res.Header
}

// post sends a form to path with the user's CSRF token (unless the form
// has one), from the console's own origin; edit may change the request.
func (u *user) post(path string, form url.Values, edit func(*http.Request)) (int, string) {
	u.t.Helper()
	if form == nil {
		form = url.Values{}
	}
	if _, ok := form["csrf"]; !ok {
		form.Set("csrf", u.csrf)
	}
	req, _ := http.NewRequest(http.MethodPost, u.f.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", u.f.srv.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	if edit != nil {
		edit(req)
	}
	res, err := u.c.Do(req)
	if err != nil {
		u.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

// login signs in with token and fails the test unless it worked.
func (u *user) login(token string) {
	u.t.Helper()
	u.get("/login")
	if code, body := u.post("/login", url.Values{"token": {token}}, nil); code != http.StatusSeeOther {
		u.t.Fatalf("sign in: status %d, want 303\n%s", code, body)
	}
	u.get("/")
}
