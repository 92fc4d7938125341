package fsm

import (
	"fmt"
	"strings"
)

// Transition is one move of the table: Event takes a job in From to To.
type Transition struct {
	From  State
	Event Event
	To    State
	// Retry marks a move that starts a new attempt: the job reaches To
	// (always [Created]) with its attempt incremented, or [Failed] with
	// the attempt unchanged once it has had MaxAttempts attempts.
	Retry bool
	// FreeReservation marks a move that takes the job off its node.
	FreeReservation bool
}

// table is the one source of the job's rules. The Redis adapter's script
// and the package's diagram are generated from it.
var table = []Transition{
	{From: Created, Event: Dispatch, To: Dispatched},
	{From: Dispatched, Event: Ack, To: Accepted},
	{From: Dispatched, Event: Start, To: Running},
	{From: Accepted, Event: Start, To: Running},
	{From: Dispatched, Event: Result, To: Finished, FreeReservation: true},
	{From: Accepted, Event: Result, To: Finished, FreeReservation: true},
	{From: Running, Event: Result, To: Finished, FreeReservation: true},
	{From: Finished, Event: Release, To: Released},
	{From: Dispatched, Event: Timeout, To: Created, Retry: true, FreeReservation: true},
	{From: Accepted, Event: Timeout, To: Created, Retry: true, FreeReservation: true},
	{From: Running, Event: Timeout, To: Created, Retry: true, FreeReservation: true},
	{From: Dispatched, Event: Failover, To: Created, Retry: true, FreeReservation: true},
	{From: Accepted, Event: Failover, To: Created, Retry: true, FreeReservation: true},
	{From: Running, Event: Failover, To: Created, Retry: true, FreeReservation: true},
	{From: Created, Event: Fail, To: Failed},
	{From: Dispatched, Event: Undelivered, To: Created, FreeReservation: true},
}

// duplicates lists, per state, the events that a job in that state has
// already seen in its current attempt: replaying one changes nothing. A
// late job_ack after job_started counts as such a replay: the job is past it.
var duplicates = map[State][]Event{
	Dispatched: {Dispatch},
	Accepted:   {Dispatch, Ack},
	Running:    {Dispatch, Ack, Start},
	Finished:   {Dispatch, Ack, Start, Result},
	Released:   {Dispatch, Ack, Start, Result, Release},
	Failed:     {Timeout, Failover, Fail, Undelivered},
}

// Frees reports whether some move of e takes a job off its node (a
// result, a timeout, a failover). A duplicate of such an event names the
// node again, so that a caller replaying it after a crash frees the
// node's reservation too.
func (e Event) Frees() bool {
	for _, t := range table {
		if t.Event == e && t.FreeReservation {
			return true
		}
	}
	return false
}

// Table returns the moves of the state machine, in table order. The slice
// is a copy.
func Table() []Transition { return append([]Transition(nil), table...) }

// Duplicates returns, for each state, the events whose replay in the same
// attempt is a duplicate (see [Machine.Apply]). The map is a copy.
func Duplicates() map[State][]Event {
	m := make(map[State][]Event, len(duplicates))
	for s, evs := range duplicates {
		m[s] = append([]Event(nil), evs...)
	}
	return m
}

// Mermaid renders the table as a Mermaid state diagram: one edge per move
// (a retry move as two edges, one while attempts remain, one to [Failed]
// when they are used up), duplicates left out.
func Mermaid() string {
	var b strings.Builder
	b.WriteString("stateDiagram-v2\n")
	fmt.Fprintf(&b, "    [*] --> %s\n", Created)
	for _, t := range table {
		switch {
		case t.Retry:
			fmt.Fprintf(&b, "    %s --> %s : %s (attempt < max, attempt+1)\n", t.From, t.To, t.Event)
			fmt.Fprintf(&b, "    %s --> %s : %s (attempt = max)\n", t.From, Failed, t.Event)
		default:
			fmt.Fprintf(&b, "    %s --> %s : %s\n", t.From, t.To, t.Event)
		}
	}
	for _, s := range States() {
		if s.Terminal() {
			fmt.Fprintf(&b, "    %s --> [*]\n", s)
		}
	}
	return b.String()
}
