package scheduler_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
)

// An envelope goes into an inbox as the fields named in the wire format,
// version first, empty ones left out, and comes back out the same.
func TestEnvelopeFieldsRoundTrip(t *testing.T) {
	e := scheduler.Envelope{
		Type: scheduler.TypeJobAssign, JobID: "j1", Attempt: 2, NodeID: "n1", SessionID: "s1",
		RequestID: "r1", TurnID: "t1", Model: "m", Payload: []byte("hi"), Hops: 1,
	}
	want := scheduler.Fields{
		{Name: "v", Value: "1"}, {Name: "type", Value: "job_assign"}, {Name: "job_id", Value: "j1"},
		{Name: "attempt", Value: "2"}, {Name: "node_id", Value: "n1"}, {Name: "session_id", Value: "s1"},
		{Name: "request_id", Value: "r1"}, {Name: "turn_id", Value: "t1"}, {Name: "model", Value: "m"},
		{Name: "payload", Value: "aGk="}, {Name: "hops", Value: "1"},
	}
	got := e.Fields()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("Fields (-want +got):\n%s", d)
	}
	buf := make(scheduler.Fields, 0, 16)
	if d := cmp.Diff(want, e.AppendFields(buf[:0])); d != "" {
		t.Errorf("AppendFields (-want +got):\n%s", d)
	}
	back, err := scheduler.DecodeEnvelope(got)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(e, back); d != "" {
		t.Errorf("DecodeEnvelope (-want +got):\n%s", d)
	}
	// Order does not matter to the decoder.
	rev := append(scheduler.Fields(nil), got...)
	for i, j := 0, len(rev)-1; i < j; i, j = i+1, j-1 {
		rev[i], rev[j] = rev[j], rev[i]
	}
	if back, err := scheduler.DecodeEnvelope(rev); err != nil || !cmp.Equal(e, back) {
		t.Errorf("DecodeEnvelope of the reversed fields = %+v, %v", back, err)
	}
}

func TestDecodeEnvelopeMalformed(t *testing.T) {
	ok := scheduler.Envelope{Type: scheduler.TypeJobResult, JobID: "j1", Attempt: 1, SessionID: "s1"}.Fields()
	for name, f := range map[string]scheduler.Fields{
		"no version":    ok[1:],
		"other version": append(scheduler.Fields{{Name: "v", Value: "2"}}, ok[1:]...),
		"unknown field": append(append(scheduler.Fields(nil), ok...), scheduler.Field{Name: "extra", Value: "x"}),
		"bad attempt":   append(append(scheduler.Fields(nil), ok...), scheduler.Field{Name: "attempt", Value: "one"}),
		"bad payload":   append(append(scheduler.Fields(nil), ok...), scheduler.Field{Name: "payload", Value: "!"}),
	} {
		if _, err := scheduler.DecodeEnvelope(f); !errors.Is(err, scheduler.ErrMalformed) {
			t.Errorf("%s: err = %v, want ErrMalformed", name, err)
		}
	}
}

func TestFieldsGetAndMap(t *testing.T) {
	f := scheduler.Fields{{Name: "a", Value: "1"}, {Name: "b", Value: "2"}, {Name: "a", Value: "3"}}
	if got := f.Get("a"); got != "3" {
		t.Errorf(`Get("a") = %q, want the last one, "3"`, got)
	}
	if got := f.Get("c"); got != "" {
		t.Errorf(`Get("c") = %q, want ""`, got)
	}
	if d := cmp.Diff(map[string]string{"a": "3", "b": "2"}, f.Map()); d != "" {
		t.Errorf("Map (-want +got):\n%s", d)
	}
}
