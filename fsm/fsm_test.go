package fsm

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

var update = flag.Bool("update", false, "rewrite testdata/fsm.mmd from the table")

// spec is the lifecycle written out by hand, independently of the table:
// for each state and event with the job's own attempt, "->X" is a move to
// X, "retry" a move back to CREATED (or FAILED when attempts are used up),
// "dup" a replay and "-" an invalid transition.
var spec = map[State]map[Event]string{
	Created:    {Dispatch: "->DISPATCHED", Ack: "-", Start: "-", Result: "-", Release: "-", Timeout: "-", Failover: "-", Fail: "->FAILED", Undelivered: "-"},
	Dispatched: {Dispatch: "dup", Ack: "->ACCEPTED", Start: "->RUNNING", Result: "->FINISHED", Release: "-", Timeout: "retry", Failover: "retry", Fail: "-", Undelivered: "requeue"},
	Accepted:   {Dispatch: "dup", Ack: "dup", Start: "->RUNNING", Result: "->FINISHED", Release: "-", Timeout: "retry", Failover: "retry", Fail: "-", Undelivered: "-"},
	Running:    {Dispatch: "dup", Ack: "dup", Start: "dup", Result: "->FINISHED", Release: "-", Timeout: "retry", Failover: "retry", Fail: "-", Undelivered: "-"},
	Finished:   {Dispatch: "dup", Ack: "dup", Start: "dup", Result: "dup", Release: "->RELEASED", Timeout: "-", Failover: "-", Fail: "-", Undelivered: "-"},
	Released:   {Dispatch: "dup", Ack: "dup", Start: "dup", Result: "dup", Release: "dup", Timeout: "-", Failover: "-", Fail: "-", Undelivered: "-"},
	Failed:     {Dispatch: "-", Ack: "-", Start: "-", Result: "-", Release: "-", Timeout: "dup", Failover: "dup", Fail: "dup", Undelivered: "dup"},
}

type result struct {
	Out Outcome
	Err error // the sentinel, nil on success
}

// expect derives the wanted result of Apply from spec.
func expect(t *testing.T, m Machine, job Job, ev Event, attempt int) result {
	t.Helper()
	unchanged := Outcome{Job: job}
	switch {
	case !job.State.Valid():
		return result{unchanged, ErrUnknownState}
	case !ev.Valid():
		return result{unchanged, ErrUnknownEvent}
	case attempt < 1 || job.Attempt < 1:
		return result{unchanged, ErrInvalidAttempt}
	case attempt < job.Attempt:
		return result{unchanged, ErrStaleAttempt}
	case attempt > job.Attempt:
		return result{unchanged, ErrFutureAttempt}
	}
	cell, ok := spec[job.State][ev]
	if !ok {
		t.Fatalf("spec has no cell for %s/%s", job.State, ev)
	}
	switch {
	case cell == "-":
		return result{unchanged, ErrInvalidTransition}
	case cell == "dup":
		return result{Outcome{Job: job, Duplicate: true}, nil}
	case cell == "requeue": // back to CREATED in the same attempt, off the node
		return result{Outcome{Job: Job{Created, job.Attempt}, FreeReservation: true}, nil}
	case cell == "retry":
		if job.Attempt < m.Max() {
			return result{Outcome{Job: Job{Created, job.Attempt + 1}, FreeReservation: true}, nil}
		}
		return result{Outcome{Job: Job{Failed, job.Attempt}, FreeReservation: true}, nil}
	default:
		to := State(strings.TrimPrefix(cell, "->"))
		return result{Outcome{Job: Job{to, job.Attempt}, FreeReservation: to == Finished}, nil}
	}
}

func sentinel(err error) error {
	for _, s := range []error{ErrUnknownState, ErrUnknownEvent, ErrInvalidAttempt, ErrStaleAttempt, ErrFutureAttempt, ErrInvalidTransition} {
		if errors.Is(err, s) {
			return s
		}
	}
	return err
}

// TestApplyExhaustive runs every state (and one unknown), every event (and
// one unknown), job attempts 0..4 and event attempts 0..5, under several
// MaxAttempts, against the hand-written spec.
func TestApplyExhaustive(t *testing.T) {
	t.Parallel()
	states := append(States(), "LOST")
	events := append(Events(), "job_cancel")
	n := 0
	for _, max := range []int{0, 1, 2, 3, 5} {
		m := Machine{MaxAttempts: max}
		for _, s := range states {
			for _, ev := range events {
				for ja := 0; ja <= 4; ja++ {
					for a := 0; a <= 5; a++ {
						job := Job{State: s, Attempt: ja}
						want := expect(t, m, job, ev, a)
						out, err := m.Apply(job, ev, a)
						got := result{out, sentinel(err)}
						if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y error) bool { return x == y })); diff != "" {
							t.Errorf("Machine{%d}.Apply(%+v, %s, %d) mismatch (-want +got):\n%s", max, job, ev, a, diff)
						}
						if err != nil {
							var te *TransitionError
							if !errors.As(err, &te) || te.Job != job || te.Event != ev || te.Attempt != a {
								t.Errorf("Apply(%+v, %s, %d) error = %#v, want *TransitionError carrying the input", job, ev, a, err)
							}
						}
						n++
					}
				}
			}
		}
	}
	if want := 5 * 10 * 8 * 5 * 6; n != want {
		t.Fatalf("ran %d combinations, want %d", n, want)
	}
}

// TestTableMatchesSpec checks that the table and the spec agree cell by
// cell, so neither has a row the other lacks.
func TestTableMatchesSpec(t *testing.T) {
	t.Parallel()
	dups := Duplicates()
	for _, s := range States() {
		for _, ev := range Events() {
			tr, move := lookup(s, ev)
			dup := false
			for _, d := range dups[s] {
				dup = dup || d == ev
			}
			var got string
			switch {
			case move && dup:
				t.Fatalf("%s/%s is both a move and a duplicate", s, ev)
			case move && tr.Retry:
				got = "retry"
			case move && tr.To == Created:
				got = "requeue"
			case move:
				got = "->" + string(tr.To)
			case dup:
				got = "dup"
			default:
				got = "-"
			}
			if want := spec[s][ev]; got != want {
				t.Errorf("table cell %s/%s = %q, want %q", s, ev, got, want)
			}
		}
	}
}

func TestLifecycle(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		steps []Event
		want  Job
	}{
		{"happy path", []Event{Dispatch, Ack, Start, Result, Release}, Job{Released, 1}},
		{"started without ack", []Event{Dispatch, Start, Result, Release}, Job{Released, 1}},
		{"result without ack or start", []Event{Dispatch, Result, Release}, Job{Released, 1}},
		{"replays absorbed", []Event{Dispatch, Dispatch, Ack, Start, Ack, Start, Result, Result, Release, Release}, Job{Released, 1}},
		{"timeout then redispatch", []Event{Dispatch, Ack, Timeout, Dispatch, Start, Result, Release}, Job{Released, 2}},
		{"failed after max attempts", []Event{Dispatch, Timeout, Dispatch, Failover, Dispatch, Timeout}, Job{Failed, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			job := New()
			for _, ev := range tt.steps {
				out, err := Apply(job, ev, job.Attempt)
				if err != nil {
					t.Fatalf("Apply(%+v, %s): %v", job, ev, err)
				}
				job = out.Job
			}
			if diff := cmp.Diff(tt.want, job); diff != "" {
				t.Errorf("final job mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestStaleAfterRetry(t *testing.T) {
	t.Parallel()
	job := New()
	out, _ := Apply(job, Dispatch, 1)
	out, _ = Apply(out.Job, Timeout, 1)
	for _, ev := range []Event{Ack, Start, Result, Timeout, Failover} {
		got, err := Apply(out.Job, ev, 1)
		if !errors.Is(err, ErrStaleAttempt) {
			t.Errorf("Apply(%+v, %s, 1) error = %v, want ErrStaleAttempt", out.Job, ev, err)
		}
		if got.Job != out.Job {
			t.Errorf("Apply(%+v, %s, 1) job = %+v, want unchanged", out.Job, ev, got.Job)
		}
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, s := range States() {
		if got, err := ParseState(string(s)); err != nil || got != s {
			t.Errorf("ParseState(%q) = %q, %v; want %q, nil", s, got, err, s)
		}
	}
	for _, ev := range Events() {
		if got, err := ParseEvent(string(ev)); err != nil || got != ev {
			t.Errorf("ParseEvent(%q) = %q, %v; want %q, nil", ev, got, err, ev)
		}
	}
	if _, err := ParseState("created"); !errors.Is(err, ErrUnknownState) || !strings.Contains(err.Error(), `"created"`) {
		t.Errorf("ParseState(created) error = %v, want ErrUnknownState naming the input", err)
	}
	if _, err := ParseEvent("ack"); !errors.Is(err, ErrUnknownEvent) || !strings.Contains(err.Error(), `"ack"`) {
		t.Errorf("ParseEvent(ack) error = %v, want ErrUnknownEvent naming the input", err)
	}
}

// TestMermaidGolden keeps testdata/fsm.mmd equal to the rendered table and
// checks that the package documentation shows the same diagram.
// Refresh with go test ./fsm -run Mermaid -update.
func TestMermaidGolden(t *testing.T) {
	t.Parallel()
	got := Mermaid()
	path := filepath.Join("testdata", "fsm.mmd")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if diff := cmp.Diff(string(want), got); diff != "" {
		t.Errorf("Mermaid() differs from %s (-file +got); run with -update:\n%s", path, diff)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimRight(got, "\n"), "\n") {
		if !strings.Contains(string(doc), "//\t"+line+"\n") {
			t.Errorf("doc.go does not show the diagram line %q (copy testdata/fsm.mmd into the doc, each line as //<TAB>line)", line)
		}
	}
}

func FuzzApply(f *testing.F) {
	f.Add("RUNNING", "job_result", 1, 1, 3)
	f.Add("DISPATCHED", "timeout", 3, 3, 3)
	f.Add("", "", 0, -1, -5)
	f.Fuzz(func(t *testing.T, state, event string, jobAttempt, attempt, max int) {
		m := Machine{MaxAttempts: max}
		job := Job{State: State(state), Attempt: jobAttempt}
		out, err := m.Apply(job, Event(event), attempt)
		if err != nil {
			if out.Job != job {
				t.Fatalf("error %v changed the job: %+v -> %+v", err, job, out.Job)
			}
			return
		}
		if !out.Job.State.Valid() || out.Job.Attempt < job.Attempt || out.Job.Attempt > job.Attempt+1 {
			t.Fatalf("Apply(%+v, %q, %d) = %+v", job, event, attempt, out)
		}
		if out.Job.Attempt > job.Attempt && out.Job.Attempt > m.Max() {
			t.Fatalf("Apply(%+v, %q, %d) started attempt %d beyond max %d", job, event, attempt, out.Job.Attempt, m.Max())
		}
	})
}

// TestValidMatchesLists keeps Valid and the lists of States and Events one.
func TestValidMatchesLists(t *testing.T) {
	t.Parallel()
	for _, s := range States() {
		if !s.Valid() {
			t.Errorf("state %s in States() is not Valid", s)
		}
	}
	for _, e := range Events() {
		if !e.Valid() {
			t.Errorf("event %s in Events() is not Valid", e)
		}
	}
	for _, s := range []State{"", "created", "PENDING"} {
		if s.Valid() {
			t.Errorf("state %q is Valid", s)
		}
	}
	for _, e := range []Event{"", "JOB_ACK", "job_cancel"} {
		if e.Valid() {
			t.Errorf("event %q is Valid", e)
		}
	}
}
