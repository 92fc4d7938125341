package redisstore

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
	"github.com/redis/rueidis"
)

func newRequests(t testing.TB, c rueidis.Client, cfg RequestsConfig) *Requests {
	t.Helper()
	cfg.Prefix = testPrefix(t)
	if cfg.WaitTimeout == 0 {
		cfg.WaitTimeout = 20 * time.Second
	}
	s, err := NewRequests(c, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRequestsConformance(t *testing.T) {
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			storetest.TestRequestStore(t, func(t *testing.T) scheduler.RequestStore {
				return newRequests(t, srv.client, RequestsConfig{})
			})
		})
	}
}

// TestRequestsCorruptBinding: a stored binding that does not decode is
// ErrBindingCorrupt, create is not called, and the value stays.
func TestRequestsCorruptBinding(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		s := newRequests(t, srv.client, RequestsConfig{})
		c := srv.client
		for _, bad := range []string{`{"job_id":`, `{"job_id":""}`, `not json`, `{"job_id":"j"} trailing`} {
			key := s.keys.RequestBinding("r")
			if err := c.Do(ctx, c.B().Set().Key(key).Value(bad).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			var calls atomic.Int64
			_, _, err := s.Bind(ctx, "r", func(context.Context) (scheduler.RequestBinding, error) {
				calls.Add(1)
				return scheduler.RequestBinding{JobID: "j"}, nil
			})
			var ce *CorruptError
			if !errors.Is(err, scheduler.ErrBindingCorrupt) || !errors.As(err, &ce) || ce.Key != key {
				t.Errorf("%s: Bind over %q: error = %v, want ErrBindingCorrupt naming %s", srv.name, bad, err, key)
			}
			if calls.Load() != 0 {
				t.Errorf("%s: create called over a corrupt binding", srv.name)
			}
			if got, _ := c.Do(ctx, c.B().Get().Key(key).Build()).ToString(); got != bad {
				t.Errorf("%s: stored binding = %q, want %q unchanged", srv.name, got, bad)
			}
			if err := c.Do(ctx, c.B().Get().Key(s.keys.RequestLock("r")).Build()).Error(); !isNil(err) {
				t.Errorf("%s: lock after Bind over a corrupt binding: %v, want none", srv.name, err)
			}
		}
	}
}

// TestRequestsKeys checks the two keys and their TTLs after a bind.
func TestRequestsKeys(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		s := newRequests(t, srv.client, RequestsConfig{LockTTL: time.Minute, BindingTTL: time.Hour})
		if _, _, err := s.Bind(ctx, "r1", func(context.Context) (scheduler.RequestBinding, error) {
			return scheduler.RequestBinding{JobID: "j1", NodeID: "n1"}, nil
		}); err != nil {
			t.Fatal(err)
		}
		c := srv.client
		p := s.keys.Prefix()
		got, err := c.Do(ctx, c.B().Get().Key(p+":v1:requests:binding:r1").Build()).ToString()
		if diff := cmp.Diff(`{"job_id":"j1","node_id":"n1"}`, got); err != nil || diff != "" {
			t.Errorf("%s: binding JSON (-want +got): %v\n%s", srv.name, err, diff)
		}
		// The lock lives as long as the binding once it is stored.
		for key, max := range map[string]time.Duration{p + ":v1:requests:binding:r1": time.Hour, p + ":v1:requests:lock:r1": time.Hour} {
			pttl, err := c.Do(ctx, c.B().Pttl().Key(key).Build()).AsInt64()
			if err != nil || pttl <= max.Milliseconds()-time.Minute.Milliseconds() || pttl > max.Milliseconds() {
				t.Errorf("%s: PTTL %s = %d, %v; want within %v", srv.name, key, pttl, err, max)
			}
		}
	}
}

// TestRequestsWaitTimeout: a duplicate gives up after WaitTimeout.
func TestRequestsWaitTimeout(t *testing.T) {
	ctx := context.Background()
	s := newRequests(t, testServers(t)[0].client, RequestsConfig{WaitTimeout: 100 * time.Millisecond})
	c := s.c
	// Someone holds the lock and never binds.
	if err := c.Do(ctx, c.B().Set().Key(s.keys.RequestLock("r")).Value("other").PxMilliseconds(time.Minute.Milliseconds()).Build()).Error(); err != nil {
		t.Fatal(err)
	}
	_, _, err := s.Bind(ctx, "r", func(context.Context) (scheduler.RequestBinding, error) {
		t.Error("create called while another holds the lock")
		return scheduler.RequestBinding{JobID: "j"}, nil
	})
	if !errors.Is(err, scheduler.ErrBindWait) {
		t.Errorf("Bind behind a held lock: error = %v, want ErrBindWait", err)
	}
}

// TestRequestsBindingWithoutLock: a binding whose lock has expired (or is
// held by someone else) is returned as it is; create is not called, and a
// lock taken beside it is given back while another's lock is left alone.
func TestRequestsBindingWithoutLock(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		for _, tt := range []struct {
			name     string
			lock     string // the lock's value before Bind, "" for none
			wantLock string // after Bind
		}{
			{"lock expired", "", ""},
			{"lock held by another", "other", "other"},
		} {
			s := newRequests(t, srv.client, RequestsConfig{})
			c := srv.client
			if err := c.Do(ctx, c.B().Set().Key(s.keys.RequestBinding("r")).Value(`{"job_id":"j","node_id":"n"}`).Build()).Error(); err != nil {
				t.Fatal(err)
			}
			if tt.lock != "" {
				if err := c.Do(ctx, c.B().Set().Key(s.keys.RequestLock("r")).Value(tt.lock).Build()).Error(); err != nil {
					t.Fatal(err)
				}
			}
			got, created, err := s.Bind(ctx, "r", func(context.Context) (scheduler.RequestBinding, error) {
				t.Errorf("%s %s: create called over a stored binding", srv.name, tt.name)
				return scheduler.RequestBinding{JobID: "other"}, nil
			})
			if diff := cmp.Diff(scheduler.RequestBinding{JobID: "j", NodeID: "n"}, got); err != nil || created || diff != "" {
				t.Errorf("%s %s: Bind = created %v, %v; binding (-want +got):\n%s", srv.name, tt.name, created, err, diff)
			}
			lock, err := c.Do(ctx, c.B().Get().Key(s.keys.RequestLock("r")).Build()).ToString()
			if isNil(err) {
				err = nil
			}
			if err != nil || lock != tt.wantLock {
				t.Errorf("%s %s: lock after Bind = %q, %v; want %q", srv.name, tt.name, lock, err, tt.wantLock)
			}
		}
	}
}

// TestBindCreateTwiceMakesOneJob: a create that outlasts the lock runs
// twice for one request id; deriving the job from the request id and
// opening it once keeps that to one job, and both callers get it.
func TestBindCreateTwiceMakesOneJob(t *testing.T) {
	ctx := context.Background()
	for _, srv := range testServers(t) {
		t.Run(srv.name, func(t *testing.T) {
			prefix := testPrefix(t)
			s, err := NewRequests(srv.client, RequestsConfig{Prefix: prefix, LockTTL: 20 * time.Millisecond, PollInterval: time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			book, err := NewBook(srv.client, BookConfig{Prefix: prefix})
			if err != nil {
				t.Fatal(err)
			}
			var calls, opened atomic.Int32
			create := func(ctx context.Context) (scheduler.RequestBinding, error) {
				calls.Add(1)
				time.Sleep(100 * time.Millisecond) // outlasts the lock
				job := scheduler.JobIDFor("req")
				_, created, err := book.Open(ctx, job, scheduler.JobSpec{RequestID: "req", SessionID: "s"}, time.Minute)
				if created {
					opened.Add(1)
				}
				return scheduler.RequestBinding{JobID: job}, err
			}
			var wg sync.WaitGroup
			got := make([]scheduler.RequestBinding, 2)
			for i := range got {
				wg.Go(func() {
					if i == 1 {
						time.Sleep(40 * time.Millisecond) // after the lock expired
					}
					b, _, err := s.Bind(ctx, "req", create)
					if err != nil {
						t.Error(err)
					}
					got[i] = b
				})
			}
			wg.Wait()
			if calls.Load() != 2 {
				t.Fatalf("create ran %d times; the test needs the lock to expire under it (2)", calls.Load())
			}
			if opened.Load() != 1 || got[0].JobID != got[1].JobID {
				t.Errorf("%d jobs opened, bindings %v and %v; want one job for both", opened.Load(), got[0], got[1])
			}
		})
	}
}
