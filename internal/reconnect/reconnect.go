package reconnect

import (
	"fmt"
	"io"
	"os"
	"time"
)

// Pacer spaces the attempts of one client to reconnect. The zero value
// (with Name set) is ready; it is not safe for concurrent use.
type Pacer struct {
	// Name starts each line it prints, such as "dispatch-node n1".
	Name string
	// Out receives the lines; nil means os.Stderr.
	Out io.Writer

	last  string
	pause time.Duration
	up    bool
}

// Failed reports a lost or refused connection to url and returns the pause
// before the next attempt.
func (p *Pacer) Failed(url string, err error) time.Duration {
	if msg := url + ": " + err.Error(); msg != p.last {
		fmt.Fprintf(p.out(), "%s: %s; reconnecting (retries back off up to 5s)\n", p.Name, msg)
		p.last = msg
	}
	if p.up {
		p.pause, p.up = 0, false
	}
	p.pause = min(max(2*p.pause, 100*time.Millisecond), 5*time.Second)
	return p.pause
}

// Connected ends a run of failures: the next one starts again from 100ms.
func (p *Pacer) Connected(url string) {
	if p.last != "" {
		fmt.Fprintf(p.out(), "%s: connected to %s\n", p.Name, url)
	}
	p.last, p.up = "", true
}

func (p *Pacer) out() io.Writer {
	if p.Out == nil {
		return os.Stderr
	}
	return p.Out
}
