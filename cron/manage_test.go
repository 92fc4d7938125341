package cron

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/google/go-cmp/cmp"
)

// audited returns the audit records after id after, as "who action job"
// (with "replay" for a replayed run-now).
func audited(t *testing.T, r *Runner, after int64) ([]string, int64) {
	t.Helper()
	es, _, err := r.Audit(context.Background(), AuditQuery{After: after, Limit: 1000})
	if err != nil {
		t.Fatalf("Audit: %v", err)
	}
	var out []string
	for _, e := range es {
		s := e.Who + " " + e.Role + " " + string(e.Action) + " " + e.JobID
		if e.Replay {
			s += " replay"
		}
		out = append(out, s)
		after = e.ID
	}
	return out, after
}

// TestAuditEveryChange: every change, whatever the caller (Go code with
// no actor, Go code for a named actor), leaves exactly one audit record
// naming the actor and the action, with the job before and after; a
// refused change leaves none.
func TestAuditEveryChange(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newTestRunner(t, NewMemStore(), &fakeExec{}, Config{})
		start(t, r)
		ann := WithActor(context.Background(), Actor{Name: "ann", Role: RoleOperator})
		ada := WithActor(context.Background(), Actor{Name: "ada", Role: RoleAdmin})
		bg := context.Background()
		j := httpJob("j", Every(time.Hour))
		var last int64
		for _, c := range []struct {
			name string
			do   func() error
			want string // "" for no record
		}{
			{"create (Go, no actor)", func() error { _, err := r.Add(bg, j); return err }, "local admin create j"},
			{"create of another (admin)", func() error { _, err := r.Add(ada, httpJob("k", Every(time.Hour))); return err }, "ada admin create k"},
			{"update (operator: refused)", func() error {
				_, err := r.Update(ann, "j", func(j *Job) error { j.Name = "x"; return nil })
				return err
			}, ""},
			{"update (admin)", func() error {
				_, err := r.Update(ada, "j", func(j *Job) error { j.Name = "x"; return nil })
				return err
			}, "ada admin update j"},
			{"pause", func() error { _, err := r.Pause(ann, "j", time.Time{}); return err }, "ann operator pause j"},
			{"resume", func() error { _, err := r.Resume(ann, "j"); return err }, "ann operator resume j"},
			{"pause until", func() error { _, err := r.Pause(ann, "j", time.Now().Add(time.Hour)); return err }, "ann operator pause j"},
			{"run-now", func() error { _, err := r.RunNow(ann, "j", RunOptions{Force: true}); return err }, "ann operator run-now j"},
			{"run-now with a key", func() error {
				_, err := r.RunNow(ann, "k", RunOptions{IdempotencyKey: "a", Force: true})
				return err
			}, "ann operator run-now k"},
			{"its replay", func() error {
				t, err := r.RunNow(ann, "k", RunOptions{IdempotencyKey: "a", Force: true})
				if err == nil && !t.Replayed {
					err = errors.New("not a replay")
				}
				return err
			}, "ann operator run-now k replay"},
			{"pause-all (operator: refused)", func() error { _, err := r.PauseAll(ann, time.Time{}, "x"); return err }, ""},
			{"pause-all", func() error { _, err := r.PauseAll(ada, time.Time{}, "upgrade"); return err }, "ada admin pause-all "},
			{"resume-all", func() error { _, err := r.ResumeAll(ada); return err }, "ada admin resume-all "},
			{"delete (operator: refused)", func() error { return r.Remove(ann, "k") }, ""},
			{"delete", func() error { return r.Remove(ada, "k") }, "ada admin delete k"},
		} {
			err := c.do()
			if c.want == "" {
				if !errors.Is(err, ErrForbidden) {
					t.Errorf("%s: %v, want ErrForbidden", c.name, err)
				}
			} else if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			synctest.Wait()
			got, next := audited(t, r, last)
			last = next
			var want []string
			if c.want != "" {
				want = []string{c.want}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s: audit records (-want +got):\n%s", c.name, diff)
			}
		}
		// The records carry the job before and after, its secrets hidden.
		es, _, _ := r.Audit(bg, AuditQuery{JobID: "j"})
		if len(es) < 2 || es[0].Before != nil || es[0].After == nil || es[1].Before == nil || !strings.Contains(string(es[1].After), `"name":"x"`) {
			t.Errorf("records of j: %+v", es)
		}
	})
}

// TestAuditRunnerOwnChanges: the runner's own changes are audited as
// the runner: the end of a timed pause of a job, the end of a timed
// service pause, and the pause of a job after failures in a row.
func TestAuditRunnerOwnChanges(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
			if j.ID == "bad" {
				return Result{Status: StatusFailed, Attempts: 1, Error: "boom"}
			}
			return Result{Status: StatusSuccess, Attempts: 1}
		}}
		r := newTestRunner(t, NewMemStore(), ex, Config{})
		start(t, r)
		ctx := context.Background()
		mustAdd(t, r, httpJob("j", Every(time.Hour)))
		bad := httpJob("bad", Every(time.Minute))
		bad.Alert = &AlertConfig{URL: "http://alerts.test/hook", PauseAfter: 2}
		mustAdd(t, r, bad)
		_, last := audited(t, r, 0)
		if _, err := r.Pause(ctx, "j", time.Now().Add(10*time.Minute)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.PauseAll(ctx, time.Now().Add(20*time.Minute), "window"); err != nil {
			t.Fatal(err)
		}
		_, last = audited(t, r, last)
		time.Sleep(30 * time.Minute)
		synctest.Wait()
		got, _ := audited(t, r, last)
		want := []string{"runner admin resume j", "runner admin resume-all "}
		if diff := cmp.Diff(want, got[:min(2, len(got))]); diff != "" {
			t.Errorf("the runner's ends of pauses (-want +got):\n%s", diff)
		}
		time.Sleep(5 * time.Minute)
		synctest.Wait()
		got, _ = audited(t, r, last)
		if n := strings.Count(strings.Join(got, ","), "runner admin pause bad"); n != 1 {
			t.Errorf("the pause after failures: %d records, want 1: %v", n, got)
		}
	})
}

// TestAuthorizer: a custom Authorizer decides every change; front ends
// may ask it first through Runner.Authorize.
func TestAuthorizer(t *testing.T) {
	var asked []string
	deny := errors.New("not on Sundays")
	authz := authorizerFunc(func(_ context.Context, a Actor, act Action, id string) error {
		asked = append(asked, a.Name+" "+string(act)+" "+id)
		if a.Name == "eve" {
			return deny
		}
		return nil
	})
	r := newTestRunner(t, NewMemStore(), &fakeExec{}, Config{Authorizer: authz})
	eve := WithActor(context.Background(), Actor{Name: "eve", Role: RoleAdmin})
	if _, err := r.Add(eve, httpJob("j", Every(time.Hour))); !errors.Is(err, deny) {
		t.Errorf("Add as eve: %v, want the Authorizer's error", err)
	}
	if _, err := r.Get(context.Background(), "j"); !errors.Is(err, ErrNotFound) {
		t.Errorf("a refused Add stored the job: %v", err)
	}
	mustAdd(t, r, httpJob("j", Every(time.Hour)))
	if err := r.Authorize(eve, ActionDelete, "j"); !errors.Is(err, deny) {
		t.Errorf("Authorize: %v", err)
	}
	if diff := cmp.Diff([]string{"eve create j", "local create j", "eve delete j"}, asked); diff != "" {
		t.Errorf("asked (-want +got):\n%s", diff)
	}
}

type authorizerFunc func(ctx context.Context, a Actor, act Action, id string) error

func (f authorizerFunc) Authorize(ctx context.Context, a Actor, act Action, id string) error {
	return f(ctx, a, act, id)
}

// TestRunNowHeaders: a run-now may not set Host or a hop-by-hop header;
// replacing a header the job sets needs the admin role; adding one does
// not; the audit keeps the names of the headers, not their values.
func TestRunNowHeaders(t *testing.T) {
	r := newTestRunner(t, NewMemStore(), &fakeExec{}, Config{})
	start(t, r)
	j := httpJob("j", Every(time.Hour))
	j.HTTP.Headers = map[string]string{"Authorization": "Bearer author-secret"}
	mustAdd(t, r, j)
	op := WithActor(context.Background(), Actor{Name: "otto", Role: RoleOperator})
	admin := WithActor(context.Background(), Actor{Name: "ada", Role: RoleAdmin})
	for _, h := range []string{"Host", "host", "Connection", "Transfer-Encoding", "Upgrade", "Proxy-Authorization", "TE"} {
		_, err := r.RunNow(admin, "j", RunOptions{Headers: map[string]string{h: "x"}, Force: true})
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.Field != "headers" {
			t.Errorf("run-now with %s: %v, want a ValidationError naming headers", h, err)
		}
	}
	if _, err := r.RunNow(op, "j", RunOptions{Headers: map[string]string{"authorization": "Bearer mine"}, Force: true}); !errors.Is(err, ErrForbidden) {
		t.Errorf("operator replacing the job's Authorization: %v, want ErrForbidden", err)
	}
	if _, err := r.RunNow(op, "j", RunOptions{Headers: map[string]string{"X-Release": "42"}, Force: true}); err != nil {
		t.Errorf("operator adding a header: %v", err)
	}
	if _, err := r.RunNow(admin, "j", RunOptions{Headers: map[string]string{"Authorization": "Bearer override-secret"}, Force: true}); err != nil {
		t.Errorf("admin replacing a header: %v", err)
	}
	es, _, _ := r.Audit(context.Background(), AuditQuery{JobID: "j"})
	var overrides []string
	for _, e := range es {
		if e.Action == ActionRunNow {
			overrides = append(overrides, e.Who+" "+string(e.Overrides))
		}
	}
	want := []string{`otto {"headers":{"X-Release":"(hidden)"},"force":true}`, `ada {"headers":{"Authorization":"(hidden)"},"force":true}`}
	if diff := cmp.Diff(want, overrides); diff != "" {
		t.Errorf("audit of the run-nows (-want +got):\n%s", diff)
	}
}

// TestIdempotentRunNow: a repeat answers the first run; the same key
// with other options is ErrIdempotencyKeyReused; a repeat of a run-now
// still being answered elsewhere waits for it, or is
// ErrIdempotencyPending once it waited its bound; a reservation left
// without a run long enough is taken over; a run-now that queued nothing
// gives its key up.
func TestIdempotentRunNow(t *testing.T) {
	st := NewMemStore()
	r := newTestRunner(t, st, &fakeExec{}, Config{})
	start(t, r)
	ctx := context.Background()
	mustAdd(t, r, httpJob("h", Every(time.Hour)))
	opts := RunOptions{Force: true, IdempotencyKey: "k1"}
	first, err := r.RunNow(ctx, "h", opts)
	if err != nil || first.Replayed || first.RunID == "" {
		t.Fatalf("first: %+v %v", first, err)
	}
	if again, err := r.RunNow(ctx, "h", opts); err != nil || !again.Replayed || again.RunID != first.RunID {
		t.Errorf("repeat: %+v %v, want a replay of %s", again, err, first.RunID)
	}
	body := "other"
	if _, err := r.RunNow(ctx, "h", RunOptions{Force: true, Body: &body, IdempotencyKey: "k1"}); !errors.Is(err, ErrIdempotencyKeyReused) {
		t.Errorf("same key, other options: %v", err)
	}
	if _, err := r.RunNow(ctx, "nope", RunOptions{IdempotencyKey: "k1"}); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown job: %v", err)
	}
	if _, first, _ := st.ReserveIdempotencyKey(ctx, "nope", "k1", IdempotencyEntry{At: time.Now()}); !first {
		t.Errorf("the key of a run-now that queued nothing is still held")
	}
	if _, err := r.RunNow(ctx, "h", RunOptions{IdempotencyKey: "bad\x01key"}); err == nil {
		t.Error("a key with a control character was taken")
	}

	// Reserved elsewhere, answered while this call waits.
	sum := idemSum(RunOptions{Force: true})
	e, _, _ := st.ReserveIdempotencyKey(ctx, "h", "k2", IdempotencyEntry{Sum: sum, At: time.Now()})
	done := make(chan RunTicket, 1)
	go func() {
		tk, _ := r.RunNow(ctx, "h", RunOptions{Force: true, IdempotencyKey: "k2"})
		done <- tk
	}()
	time.Sleep(20 * time.Millisecond)
	if err := st.CompleteIdempotencyKey(ctx, "h", "k2", e.At, "run-elsewhere"); err != nil {
		t.Fatal(err)
	}
	if tk := <-done; tk.RunID != "run-elsewhere" || !tk.Replayed {
		t.Errorf("repeat of a run-now answered elsewhere: %+v", tk)
	}
	// Reserved elsewhere and never answered: pending after the wait.
	r.idemT.wait = 100 * time.Millisecond
	st.ReserveIdempotencyKey(ctx, "h", "k3", IdempotencyEntry{Sum: sum, At: time.Now()})
	if _, err := r.RunNow(ctx, "h", RunOptions{Force: true, IdempotencyKey: "k3"}); !errors.Is(err, ErrIdempotencyPending) {
		t.Errorf("repeat of a run-now never answered: %v", err)
	}
	// Reserved long ago and never answered: taken over.
	st.ReserveIdempotencyKey(ctx, "h", "k4", IdempotencyEntry{Sum: sum, At: time.Now().Add(-idempotencyAbandon - time.Second)})
	tk, err := r.RunNow(ctx, "h", RunOptions{Force: true, IdempotencyKey: "k4"})
	if err != nil || tk.Replayed || tk.RunID == "" {
		t.Errorf("a key reserved long ago: %+v %v, want a run of its own", tk, err)
	}
}

// secretJob holds a secret in every place the secrets rule covers.
func secretJob() Job {
	return Job{
		ID: "s", Name: "s",
		HTTP: HTTPConfig{Method: "POST", URL: "http://user-sec1:pass-sec2@cb.test/p?api_key=qry-sec3&x=1",
			Headers: map[string]string{"Authorization": "Bearer hdr-sec4"}, Body: `{"password":"body-sec5"}`},
		Schedule:  Every(time.Hour),
		Alert:     &AlertConfig{URL: "http://hook:alert-sec6@alerts.test/h?token=alert-sec7", Secret: "sign-sec8"},
		LastError: "http 500; reply: echo Authorization: Bearer hdr-sec4",
	}
}

var secrets = []string{"user-sec1", "pass-sec2", "qry-sec3", "hdr-sec4", "body-sec5", "alert-sec6", "alert-sec7", "sign-sec8"}

// TestSecretsRule: an admin sees every secret; an operator and a viewer
// none (the viewer not even the reply's excerpt); names, hosts and paths
// stay.
func TestSecretsRule(t *testing.T) {
	for _, c := range []struct {
		role  Role
		shown []string // the secrets the role sees
		reply bool     // whether it sees the reply excerpt
	}{
		{RoleAdmin, secrets, true},
		{RoleOperator, nil, true},
		{RoleViewer, nil, false},
		{"", nil, false},
	} {
		j := secretJob()
		j.LastError = "http 500; reply: upstream said no"
		b, _ := json.Marshal(j.RedactedFor(c.role))
		got := string(b)
		for _, s := range secrets {
			if strings.Contains(got, s) != contains(c.shown, s) {
				t.Errorf("%q: shows %s = %v\n%s", c.role, s, !contains(c.shown, s), got)
			}
		}
		if strings.Contains(got, "upstream said no") != c.reply {
			t.Errorf("%q: reply excerpt shown %v, want %v", c.role, !c.reply, c.reply)
		}
		for _, keep := range []string{"cb.test/p", "api_key=", "Authorization", "alerts.test/h"} {
			if !strings.Contains(got, keep) {
				t.Errorf("%q: %s is gone: %s", c.role, keep, got)
			}
		}
	}
	// The runner stores a reply with the job's secrets taken out.
	j := secretJob()
	scrubbed := j.ScrubText("got Bearer hdr-sec4 and pass-sec2 and " + "dXNlci1zZWMxOnBhc3Mtc2VjMg==" + " and body-sec5")
	for _, s := range append(secrets, "dXNlci1zZWMxOnBhc3Mtc2VjMg==") {
		if strings.Contains(scrubbed, s) {
			t.Errorf("ScrubText left %s: %s", s, scrubbed)
		}
	}
	if got := RedactURL("https://u:p@h.test:8/a/b?k=v&flag#frag"); got != "https://(hidden):(hidden)@h.test:8/a/b?k=(hidden)&flag#(hidden)" {
		t.Errorf("RedactURL = %s", got)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// TestRunErrorScrubbed: a reply that echoes the request is stored in the
// history and last_error without the job's secrets, and the log record
// of the run has no reply at all.
func TestRunErrorScrubbed(t *testing.T) {
	var logs syncBuf
	ex := &fakeExec{fn: func(ctx context.Context, j *Job, info RunInfo) Result {
		return Result{Status: StatusFailed, Attempts: 1, HTTPStatus: 500,
			Error: "http 500; reply: you sent Authorization: " + j.HTTP.Headers["Authorization"] + " body " + j.HTTP.Body}
	}}
	r := newTestRunner(t, NewMemStore(), ex, Config{Logger: newTextLogger(&logs)})
	start(t, r)
	j := secretJob()
	j.Alert = nil
	mustAdd(t, r, j)
	if _, err := r.RunNow(context.Background(), "s", RunOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	var runs []Run
	waitUntil(t, func() bool { runs, _ = r.Runs(context.Background(), "s", 10); return len(runs) > 0 })
	got := mustGet(t, r, "s")
	for _, s := range secrets {
		if strings.Contains(runs[0].Error, s) || strings.Contains(got.LastError, s) || strings.Contains(logs.String(), s) {
			t.Errorf("secret %s kept: run %q, last_error %q, logs %q", s, runs[0].Error, got.LastError, logs.String())
		}
	}
	if !strings.Contains(runs[0].Error, "you sent Authorization: (hidden) body (hidden)") {
		t.Errorf("run error %q, want the reply with the secret hidden", runs[0].Error)
	}
}

func newTextLogger(w *syncBuf) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }

// waitUntil polls cond until it holds, for up to 10s.
func waitUntil(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
