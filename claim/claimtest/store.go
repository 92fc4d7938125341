package claimtest

import (
	"context"
	"errors"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ksana-dev/ksana/claim"
)

// ErrNotFound is returned by [Store.Get] for an unknown id.
var ErrNotFound = errors.New("claimtest: deployment not found")

// Store is an in-memory deployment table and node-unit membership. The zero
// value is not usable; call [NewStore].
type Store struct {
	mu         sync.Mutex
	deps       map[string]claim.Deployment
	ids        []string // the keys of deps, sorted
	nodes      map[string]claim.NodeUnit
	statements int                       // calls that a SQL store makes one statement each
	fail       func(method string) error // see SetFail
	onWrite    func(id, from, to string) // see SetOnWrite
}

var (
	_ claim.Store            = (*Store)(nil)
	_ claim.Membership       = (*Store)(nil)
	_ claim.HeartbeatActiver = (*Store)(nil)
)

// NewStore returns an empty store. Its clock, the "database's clock", is
// package time (time.Now); tests that need to control it run under
// testing/synctest.
func NewStore() *Store {
	return &Store{deps: map[string]claim.Deployment{}, nodes: map[string]claim.NodeUnit{}}
}

// SetFail installs f, called with the method name ("Deployments", "Claim",
// "ClaimMany", "Release", "Heartbeat", "Active", "HeartbeatActive",
// "Leave") before each statement; a non-nil result fails the call. nil
// removes it.
func (s *Store) SetFail(f func(method string) error) {
	s.mu.Lock()
	s.fail = f
	s.mu.Unlock()
}

// SetOnWrite installs f, called (under the store's lock, so it must not call
// the store) after every change of a deployment's address by Claim,
// ClaimMany or Release.
func (s *Store) SetOnWrite(f func(id, from, to string)) {
	s.mu.Lock()
	s.onWrite = f
	s.mu.Unlock()
}

// Statements returns how many statements the store has served.
func (s *Store) Statements() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.statements
}

func (s *Store) begin(method string) error {
	s.statements++
	if s.fail != nil {
		return s.fail(method)
	}
	return nil
}

func clone(d claim.Deployment) claim.Deployment {
	d.Args = slices.Clone(d.Args)
	if d.Env != nil {
		env := make(map[string]string, len(d.Env))
		for k, v := range d.Env {
			env[k] = v
		}
		d.Env = env
	}
	return d
}

// Put inserts or replaces d as given (any type, address and timestamps; a
// zero CreatedAt or UpdatedAt is set to time.Now). It is the admin
// path, not part of claim.Store.
func (s *Store) Put(d claim.Deployment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now()
	if d.CreatedAt.IsZero() {
		d.CreatedAt = now
	}
	if d.UpdatedAt.IsZero() {
		d.UpdatedAt = now
	}
	if _, ok := s.deps[d.ID]; !ok {
		i, _ := slices.BinarySearch(s.ids, d.ID)
		s.ids = slices.Insert(s.ids, i, d.ID)
	}
	s.deps[d.ID] = clone(d)
}

// SetEnabled enables or disables deployment id (admin path). It reports
// whether id exists.
func (s *Store) SetEnabled(id string, enabled bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deps[id]
	if ok {
		d.Enabled = enabled
		d.UpdatedAt = time.Now()
		s.deps[id] = d
	}
	return ok
}

// Delete removes deployment id (admin path).
func (s *Store) Delete(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.deps[id]; ok {
		delete(s.deps, id)
		i, _ := slices.BinarySearch(s.ids, id)
		s.ids = slices.Delete(s.ids, i, i+1)
	}
}

// Get returns deployment id, enabled or not, or [ErrNotFound].
func (s *Store) Get(id string) (claim.Deployment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, ok := s.deps[id]
	if !ok {
		return claim.Deployment{}, ErrNotFound
	}
	return clone(d), nil
}

// All returns every deployment, enabled or not, ordered by id.
func (s *Store) All() []claim.Deployment {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]claim.Deployment, 0, len(s.deps))
	for _, id := range s.ids {
		out = append(out, clone(s.deps[id]))
	}
	return out
}

// Addresses returns every deployment's address by id.
func (s *Store) Addresses() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]string, len(s.deps))
	for id, d := range s.deps {
		out[id] = d.Address
	}
	return out
}

// Backdate moves node address's last-seen time age into the past (admin
// path), as if it had stopped sending heartbeats age ago.
func (s *Store) Backdate(address string, age time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.nodes[address]; ok {
		n.LastSeen = time.Now().Add(-age)
		s.nodes[address] = n
	}
}

// Deployments implements [claim.Store].
func (s *Store) Deployments(ctx context.Context) ([]claim.Deployment, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("Deployments"); err != nil {
		return nil, err
	}
	out := make([]claim.Deployment, 0, len(s.deps))
	for _, id := range s.ids {
		if d := s.deps[id]; d.Enabled {
			out = append(out, clone(d))
		}
	}
	return out, nil
}

func (s *Store) claimable(d claim.Deployment, ok bool, lost []string) bool {
	return ok && d.Type == claim.TypeDeployment && d.Enabled &&
		(d.Address == "" || slices.Contains(lost, d.Address))
}

func (s *Store) setAddress(id string, d claim.Deployment, to string) {
	from := d.Address
	d.Address = to
	d.UpdatedAt = time.Now()
	s.deps[id] = d
	if s.onWrite != nil {
		s.onWrite(id, from, to)
	}
}

// Claim implements [claim.Store].
func (s *Store) Claim(ctx context.Context, id, address string, lost []string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("Claim"); err != nil {
		return false, err
	}
	d, ok := s.deps[id]
	if !s.claimable(d, ok, lost) {
		return false, nil
	}
	s.setAddress(id, d, address)
	return true, nil
}

// ClaimMany implements [claim.Store].
func (s *Store) ClaimMany(ctx context.Context, ids []string, address string, lost []string) ([]string, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("ClaimMany"); err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		d, ok := s.deps[id]
		if !s.claimable(d, ok, lost) {
			continue
		}
		s.setAddress(id, d, address)
		out = append(out, id)
	}
	return out, nil
}

// Release implements [claim.Store].
func (s *Store) Release(ctx context.Context, id, address string) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("Release"); err != nil {
		return false, err
	}
	d, ok := s.deps[id]
	if !ok || d.Type != claim.TypeDeployment || d.Address != address || address == "" {
		return false, nil
	}
	s.setAddress(id, d, "")
	return true, nil
}

// Heartbeat implements [claim.Membership].
func (s *Store) Heartbeat(ctx context.Context, n claim.NodeUnit) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("Heartbeat"); err != nil {
		return err
	}
	s.heartbeat(n)
	return nil
}

func (s *Store) heartbeat(n claim.NodeUnit) {
	n.LastSeen = time.Now()
	s.nodes[n.Address] = n
}

func (s *Store) active(ttl time.Duration) []claim.NodeUnit {
	now := time.Now()
	var out []claim.NodeUnit
	for _, n := range s.nodes {
		if now.Sub(n.LastSeen) < ttl {
			out = append(out, n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Address < out[j].Address })
	return out
}

// Active implements [claim.Membership]: the nodes whose last heartbeat is
// less than ttl before time.Now.
func (s *Store) Active(ctx context.Context, ttl time.Duration) ([]claim.NodeUnit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("Active"); err != nil {
		return nil, err
	}
	return s.active(ttl), nil
}

// HeartbeatActive implements [claim.HeartbeatActiver] as one statement.
func (s *Store) HeartbeatActive(ctx context.Context, n claim.NodeUnit, ttl time.Duration) ([]claim.NodeUnit, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("HeartbeatActive"); err != nil {
		return nil, err
	}
	s.heartbeat(n)
	return s.active(ttl), nil
}

// Leave implements [claim.Membership].
func (s *Store) Leave(ctx context.Context, address string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("Leave"); err != nil {
		return err
	}
	delete(s.nodes, address)
	return nil
}
