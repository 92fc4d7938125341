package claimtest

import (
	"context"
	"errors"
	"maps"
	"slices"
	"time"

	"github.com/ksana-dev/ksana/claim"
)

var (
	_ claim.Store  = (*ViewStore)(nil)
	_ claim.Viewer = (*ViewStore)(nil)
)

// ViewStore is a [Store] that also implements [claim.Viewer], so that a
// loop over it reads a summary, its own rows and a window of candidates
// instead of every row. It shares the state of the Store it wraps.
type ViewStore struct {
	*Store
}

// Viewing returns s as a [ViewStore]. Pass the ViewStore (or s) as the
// loop's Membership too: Shares accepts both.
func Viewing(s *Store) *ViewStore { return &ViewStore{Store: s} }

// Shares implements [claim.Viewer]: m is s, or the Store s wraps.
func (s *ViewStore) Shares(m claim.Membership) bool {
	switch m := m.(type) {
	case *ViewStore:
		return m.Store == s.Store
	case *Store:
		return m == s.Store
	}
	return false
}

// View implements [claim.Viewer]: one statement ("View") that heartbeats
// self, takes a copy of the table for the view's reads until Commit, and
// reads the summary.
func (s *ViewStore) View(ctx context.Context, self claim.NodeUnit, ttl time.Duration, endpoints bool) (claim.View, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.begin("View"); err != nil {
		return nil, err
	}
	s.heartbeat(self)
	v := &view{s: s, snap: maps.Clone(s.deps), ids: slices.Clone(s.ids)}
	for _, n := range s.active(ttl) {
		a := claim.NodeUnit{Address: n.Address}
		if endpoints {
			a.UsageEndpoint = n.UsageEndpoint
		}
		v.sum.Active = append(v.sum.Active, a)
	}
	v.sum.Bound = map[string]int{}
	for _, d := range v.snap {
		switch {
		case !d.Enabled || d.Type != claim.TypeDeployment || d.ID == "":
		case d.Address == "":
			v.sum.Unassigned = true
		default:
			v.sum.Bound[d.Address]++
		}
	}
	return v, nil
}

// view is one ViewStore view: reads go to snap until Commit, then to the
// live table.
type view struct {
	s         *ViewStore
	snap      map[string]claim.Deployment
	ids       []string
	sum       claim.Summary
	committed bool
	closed    bool
}

var errViewClosed = errors.New("claimtest: view closed")

// read runs f on the view's table (the copy, or the live one after Commit)
// under the store's lock, counting one statement named method.
func (v *view) read(method string, f func(deps map[string]claim.Deployment, ids []string)) error {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	if v.closed {
		return errViewClosed
	}
	if err := v.s.begin(method); err != nil {
		return err
	}
	if v.committed {
		f(v.s.deps, v.s.ids)
	} else {
		f(v.snap, v.ids)
	}
	return nil
}

func (v *view) Summary() claim.Summary { return v.sum }

func (v *view) Versions(ctx context.Context, address string) ([]claim.Version, error) {
	var out []claim.Version
	err := v.read("Versions", func(deps map[string]claim.Deployment, ids []string) {
		for _, id := range ids {
			d := deps[id]
			if d.Enabled && (d.Type != claim.TypeDeployment || d.Address == address) {
				out = append(out, claim.Version{ID: d.ID, UpdatedAt: d.UpdatedAt})
			}
		}
	})
	return out, err
}

func (v *view) Get(ctx context.Context, ids []string) ([]claim.Deployment, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var out []claim.Deployment
	err := v.read("Get", func(deps map[string]claim.Deployment, _ []string) {
		for _, id := range ids {
			if d, ok := deps[id]; ok && d.Enabled {
				out = append(out, clone(d))
			}
		}
	})
	return out, err
}

func (v *view) candidates(deps map[string]claim.Deployment, lost []string) []claim.Deployment {
	var all []claim.Deployment
	for _, d := range deps {
		if d.ID != "" {
			all = append(all, d)
		}
	}
	return claim.Candidates(all, lost)
}

func (v *view) CountCandidates(ctx context.Context, lost []string, limit int) (int, error) {
	n := 0
	err := v.read("CountCandidates", func(deps map[string]claim.Deployment, _ []string) {
		n = min(len(v.candidates(deps, lost)), limit)
	})
	return n, err
}

func (v *view) Candidates(ctx context.Context, lost []string, offset, limit int) ([]claim.Deployment, error) {
	var out []claim.Deployment
	err := v.read("Candidates", func(deps map[string]claim.Deployment, _ []string) {
		all := v.candidates(deps, lost)
		for _, d := range all[min(offset, len(all)):min(offset+limit, len(all))] {
			out = append(out, clone(d))
		}
	})
	return out, err
}

// Commit ends the copy; it is no statement of its own.
func (v *view) Commit(ctx context.Context) error {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	if v.closed {
		return errViewClosed
	}
	v.committed, v.snap, v.ids = true, nil, nil
	return nil
}

func (v *view) Close() error {
	v.s.mu.Lock()
	defer v.s.mu.Unlock()
	v.closed = true
	return nil
}
