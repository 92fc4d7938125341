package redisstore

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
)

// TestScanSpecHead: the scan of a stored spec reads what encoding/json
// reads, and gives up on what it cannot read.
func TestScanSpecHead(t *testing.T) {
	specs := []scheduler.JobSpec{
		{RequestID: "r1", SessionID: "s1"},
		{RequestID: "r1", SessionID: "s1", TurnID: "t", Pool: "p", Model: "m", Reason: "manual", Payload: []byte("audio \x00\xff"), Instance: "i-1"},
		{RequestID: `r"q\x`, SessionID: "s<&>", Instance: "i"},
		{RequestID: "r", SessionID: "s", Payload: make([]byte, 4096)},
	}
	for _, sp := range specs {
		data, err := json.Marshal(sp)
		if err != nil {
			t.Fatal(err)
		}
		var want specHead
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		got, ok := scanSpecHead(string(data))
		if !ok {
			if !strings.Contains(string(data), `\`) {
				t.Errorf("scan gave up on %s, which holds no escape", data)
			}
			continue
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Errorf("scan of %s (-json +scan):\n%s", data, d)
		}
	}
	for _, bad := range []string{"", "{", `{"request_id":1}`, `{"request_id":"r"`, `{"request_id":"r"}x`, `["r"]`, `{"a":"b",}`, `{"a" "b"}`} {
		if h, ok := scanSpecHead(bad); ok {
			t.Errorf("scan of %q = %+v, true; want false", bad, h)
		}
	}
	if _, ok := scanSpecHead(`{}`); !ok {
		t.Errorf("scan of {} gave up")
	}
}
