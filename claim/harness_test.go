package claim_test

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ksana-dev/ksana/claim"
	"github.com/ksana-dev/ksana/claim/claimtest"
)

// logRecord is one captured log record.
type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// logs captures slog records.
type logs struct {
	mu      sync.Mutex
	records []logRecord
	attrs   []slog.Attr
	parent  *logs
}

func (l *logs) root() *logs {
	if l.parent != nil {
		return l.parent.root()
	}
	return l
}

func (l *logs) Enabled(context.Context, slog.Level) bool { return true }

func (l *logs) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range l.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	root := l.root()
	root.mu.Lock()
	root.records = append(root.records, rec)
	root.mu.Unlock()
	return nil
}

func (l *logs) WithAttrs(as []slog.Attr) slog.Handler {
	return &logs{attrs: append(append([]slog.Attr{}, l.attrs...), as...), parent: l.root()}
}

func (l *logs) WithGroup(string) slog.Handler { return l }

// withCode returns the records carrying code.
func (l *logs) withCode(code claim.Code) []logRecord {
	root := l.root()
	root.mu.Lock()
	defer root.mu.Unlock()
	var out []logRecord
	for _, r := range root.records {
		if r.Attrs["code"] == string(code) {
			out = append(out, r)
		}
	}
	return out
}

// node is one node-unit under test: its loop and runner over a shared store.
type node struct {
	addr   string
	loop   *claim.Loop
	runner *claimtest.Runner
	logs   *logs
}

// viewAll reports whether newNode gives the loops of t a claim.Viewer over
// the in-memory store, so that a test written for the full read runs
// through a view: it does in the subtests of TestSpecThroughView, which
// runs those tests again. The test's name says it, not a variable that
// tests running in parallel would share.
func viewAll(t *testing.T) bool {
	return strings.HasPrefix(t.Name(), "TestSpecThroughView/")
}

// viewWrap adds the Viewer of the membership's store to a store (which may
// be a wrapper that watches writes).
type viewWrap struct {
	claim.Store
	v *claimtest.ViewStore
}

func (w viewWrap) Shares(m claim.Membership) bool { return w.v.Shares(m) }

func (w viewWrap) View(ctx context.Context, self claim.NodeUnit, ttl time.Duration, endpoints bool) (claim.View, error) {
	return w.v.View(ctx, self, ttl, endpoints)
}

func newNode(t *testing.T, store claim.Store, members claim.Membership, probe claim.UsageProbe, cfg claim.Config) *node {
	t.Helper()
	if viewAll(t) {
		if s, ok := members.(*claimtest.Store); ok {
			store = viewWrap{store, claimtest.Viewing(s)}
		}
	}
	n := &node{addr: cfg.Address, runner: claimtest.NewRunner(), logs: &logs{}}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(n.logs)
	}
	loop, err := claim.New(store, members, n.runner, probe, cfg)
	if err != nil {
		t.Fatalf("New(%s): %v", cfg.Address, err)
	}
	n.loop = loop
	return n
}

func (n *node) cycle(t *testing.T) claim.Report {
	t.Helper()
	r, err := n.loop.Cycle(context.Background())
	if err != nil {
		t.Fatalf("%s: Cycle: %v", n.addr, err)
	}
	return r
}

// noAddressWrites is a Store that fails the test on any address write.
type noAddressWrites struct {
	claim.Store
	t *testing.T
}

func (s noAddressWrites) Claim(ctx context.Context, id, address string, lost []string) (bool, error) {
	s.t.Errorf("Claim(%q, %q, %q) called: an address write", id, address, lost)
	return false, fmt.Errorf("address write")
}

func (s noAddressWrites) ClaimMany(ctx context.Context, ids []string, address string, lost []string) ([]string, error) {
	s.t.Errorf("ClaimMany(%q, %q, %q) called: an address write", ids, address, lost)
	return nil, fmt.Errorf("address write")
}

func (s noAddressWrites) Release(ctx context.Context, id, address string) (bool, error) {
	s.t.Errorf("Release(%q, %q) called: an address write", id, address)
	return false, fmt.Errorf("address write")
}

// recordingStore records the ids passed to Claim and ClaimMany.
type recordingStore struct {
	claim.Store
	mu      sync.Mutex
	claimed []string
}

func (s *recordingStore) Claim(ctx context.Context, id, address string, lost []string) (bool, error) {
	s.mu.Lock()
	s.claimed = append(s.claimed, id)
	s.mu.Unlock()
	return s.Store.Claim(ctx, id, address, lost)
}

func (s *recordingStore) ClaimMany(ctx context.Context, ids []string, address string, lost []string) ([]string, error) {
	s.mu.Lock()
	s.claimed = append(s.claimed, ids...)
	s.mu.Unlock()
	return s.Store.ClaimMany(ctx, ids, address, lost)
}

// membershipOnly hides the optional HeartbeatActiver.
type membershipOnly struct{ claim.Membership }
