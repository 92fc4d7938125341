package websec

import (
	"log/slog"
	"math"
	"net"
	"net/http"
	"sync"
	"time"
)

// The throttling of wrong tokens by a [Guard].
const (
	// GuessBurst is the failures an address may make in a row.
	GuessBurst = 10
	// GuessRate is the failures a second an address may make once its
	// burst is spent.
	GuessRate = 1.0
)

// guessBuckets bounds the addresses tracked; the fullest buckets (the
// clients that failed least) are forgotten first.
const guessBuckets = 10000

// Guard slows down the guessing of tokens: a token bucket of failed
// sign-ins per client address, [GuessBurst] failures refilled at
// [GuessRate] a second. An address whose bucket is empty must wait
// before its next try; other addresses, and so the right token used from
// elsewhere, are not slowed down. It is safe for concurrent use.
type Guard struct {
	mu   sync.Mutex
	m    map[string]*bucket
	now  func() time.Time
	log  *slog.Logger
	name string
}

type bucket struct {
	tokens float64
	at     time.Time
	fails  int // failures since the last log record
	logged time.Time
}

// NewGuard returns a Guard that logs the failures of an address to log
// at most once a minute, prefixed with name.
func NewGuard(name string, log *slog.Logger) *Guard {
	return &Guard{m: map[string]*bucket{}, now: time.Now, log: log, name: name}
}

// Wait returns how long the client at addr must wait before its next
// try: 0 when it may try now.
func (g *Guard) Wait(addr string) time.Duration {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.m[addr]
	if b == nil {
		return 0
	}
	g.refill(b)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration((1 - b.tokens) / GuessRate * float64(time.Second))
}

// Fail counts a wrong token from addr, and logs the failures of an
// address at most once a minute, with their count.
func (g *Guard) Fail(addr, where string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.m[addr]
	if b == nil {
		if len(g.m) >= guessBuckets {
			g.forget()
		}
		b = &bucket{tokens: GuessBurst, at: g.now()}
		g.m[addr] = b
	}
	g.refill(b)
	b.tokens = math.Max(b.tokens-1, 0)
	b.fails++
	if now := g.now(); now.Sub(b.logged) >= time.Minute {
		g.log.Warn(g.name+": wrong token", "client", addr, "where", where, "failures", b.fails, "throttled", b.tokens < 1)
		b.fails, b.logged = 0, now
	}
}

func (g *Guard) refill(b *bucket) {
	now := g.now()
	b.tokens = math.Min(GuessBurst, b.tokens+now.Sub(b.at).Seconds()*GuessRate)
	b.at = now
}

// forget drops the buckets that are full again, or half of them all.
func (g *Guard) forget() {
	for k, b := range g.m {
		g.refill(b)
		if b.tokens >= GuessBurst {
			delete(g.m, k)
		}
	}
	for k := range g.m {
		if len(g.m) < guessBuckets/2 {
			break
		}
		delete(g.m, k)
	}
}

// ClientAddr is the address a request comes from, without its port.
func ClientAddr(req *http.Request) string {
	host, _, err := net.SplitHostPort(req.RemoteAddr)
	if err != nil {
		return req.RemoteAddr
	}
	return host
}
