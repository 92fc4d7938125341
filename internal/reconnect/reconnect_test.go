package reconnect_test

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/internal/reconnect"
)

func TestPacer(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	p := reconnect.Pacer{Name: "node n1", Out: &out}
	refused := errors.New("connection refused")
	var got []time.Duration
	for range 8 {
		got = append(got, p.Failed("ws://a", refused))
	}
	want := []time.Duration{100, 200, 400, 800, 1600, 3200, 5000, 5000}
	for i := range want {
		if got[i] != want[i]*time.Millisecond {
			t.Errorf("pause %d = %v, want %v", i, got[i], want[i]*time.Millisecond)
		}
	}
	p.Connected("ws://a")
	if d := p.Failed("ws://a", refused); d != 100*time.Millisecond {
		t.Errorf("first pause after a connection = %v, want 100ms", d)
	}
	wantOut := "node n1: ws://a: connection refused; reconnecting (retries back off up to 5s)\n" +
		"node n1: connected to ws://a\n" +
		"node n1: ws://a: connection refused; reconnecting (retries back off up to 5s)\n"
	if out.String() != wantOut {
		t.Errorf("output:\n%s\nwant (one line per new cause):\n%s", out.String(), wantOut)
	}
}

// A client that fails three times for one cause says it once.
func ExamplePacer() {
	p := reconnect.Pacer{Name: "dispatch-node n1", Out: os.Stdout}
	for range 3 {
		pause := p.Failed("ws://127.0.0.1:7200/ws/node", errors.New("connection refused"))
		fmt.Println("wait", pause)
	}
	// Output:
	// dispatch-node n1: ws://127.0.0.1:7200/ws/node: connection refused; reconnecting (retries back off up to 5s)
	// wait 100ms
	// wait 200ms
	// wait 400ms
}
