package main

import (
	"encoding/json"
	"testing"
)

// FuzzDecode feeds arbitrary frames to the decoder a peer's messages go
// through: it never panics, a refusal always says what is wrong, and a
// message it accepts encodes back to JSON that decodes to the same
// message.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"type":"register","node_id":"n1","pools":["zh-en"],"models":["m"],"capacity":4}`,
		`{"type":"job_result","job_id":"j1","attempt":1,"payload":"aGVsbG8="}`,
		`{"type":"job_request","request_id":"r1","turn_id":"t1","reason":"manual"}`,
		`{"type":"ping"}`, `{"type":1}`, `{"attempt":1e99}`, `[]`, `null`, `{"payload":"@"}`, `{} {}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var m inbound
		if e := decode(b, &m); e != nil {
			if e.Code == "" || e.Error == "" {
				t.Fatalf("refusal without code or message: %+v", e)
			}
			return
		}
		_ = m.Envelope.Validate()
		again, err := json.Marshal(m)
		if err != nil {
			t.Fatalf("accepted message does not encode: %v", err)
		}
		var m2 inbound
		if e := decode(again, &m2); e != nil {
			t.Fatalf("re-encoded message %s refused: %+v", again, e)
		}
	})
}
