package storetest

import (
	"fmt"
	"testing"

	"github.com/ksana-dev/ksana/scheduler"
)

// PlaneAdapter is an implementation of the dispatch plane's stores under
// test: one constructor per store, each returning a store in a namespace
// of its own (an empty in-memory store, or a fresh key prefix on a
// server). [TestPlaneStores] runs every suite the stores must pass over it.
type PlaneAdapter struct {
	Presence  func(t *testing.T) scheduler.Presence
	Owners    func(t *testing.T) scheduler.Owners
	Snapshots func(t *testing.T) SnapshotHarness
	Streams   func(t *testing.T, opts StreamsOptions) StreamsHarness
	Storm     func(t *testing.T, w scheduler.StormWindows) scheduler.StormGuard
	Jobs      func(t *testing.T, maxAttempts int) scheduler.JobStore
	Due       func(t *testing.T) scheduler.DueIndex
	// JobsDue gives a job store and the deadline index its Open writes
	// to, in one namespace, for [TestOpenDeadline].
	JobsDue      func(t *testing.T) (scheduler.JobStore, DueProbe)
	Reservations func(t *testing.T) ReservationHarness
	Turns        func(t *testing.T) TurnHarness
	// Dispatcher gives whole planes for [TestDispatcher].
	Dispatcher func(t *testing.T) DispatcherHarness
	// Synctest says that the stores read their time from package time in
	// this process and run no goroutine of their own beyond the test's (the
	// in-memory stores): the Dispatcher suite then runs in
	// testing/synctest bubbles ([TestDispatcherSynctest]), in fake time.
	Synctest bool
}

// TestPlaneStores runs every suite of the dispatch plane's stores over a: the
// store suites at once (t.Parallel; every store has a namespace of its
// own), after the Dispatcher suite, which runs alone because its cases
// measure deadlines on the machine's clock unless a.Synctest. A nil
// constructor fails the test: an adapter passes all the suites or none.
func TestPlaneStores(t *testing.T, a PlaneAdapter) {
	need := func(name string, f any) {
		if f == nil {
			t.Fatalf("storetest.TestPlaneStores: PlaneAdapter.%s is nil; every suite must run", name)
		}
	}
	need("Presence", a.Presence)
	need("Owners", a.Owners)
	need("Snapshots", a.Snapshots)
	need("Streams", a.Streams)
	need("Storm", a.Storm)
	need("Jobs", a.Jobs)
	need("Due", a.Due)
	need("JobsDue", a.JobsDue)
	need("Reservations", a.Reservations)
	need("Turns", a.Turns)
	need("Dispatcher", a.Dispatcher)
	t.Run("Dispatcher", func(t *testing.T) {
		if a.Synctest {
			TestDispatcherSynctest(t, a.Dispatcher)
		} else {
			TestDispatcher(t, a.Dispatcher)
		}
	})
	parallel := func(name string, f func(t *testing.T)) {
		t.Run(name, func(t *testing.T) { t.Parallel(); f(t) })
	}
	parallel("Presence", func(t *testing.T) { TestPresence(t, a.Presence) })
	parallel("Owners", func(t *testing.T) { TestOwners(t, a.Owners) })
	parallel("Snapshots", func(t *testing.T) { TestNodeSnapshots(t, a.Snapshots) })
	parallel("Streams", func(t *testing.T) { TestStreams(t, a.Streams) })
	parallel("Storm", func(t *testing.T) { TestStorm(t, a.Storm) })
	parallel("Jobs", func(t *testing.T) {
		for _, max := range []int{0, 1, 4} {
			t.Run(fmt.Sprintf("MaxAttempts=%d", max), func(t *testing.T) {
				TestJobStore(t, max, func(t *testing.T) scheduler.JobStore { return a.Jobs(t, max) })
			})
		}
	})
	parallel("Book", func(t *testing.T) { TestJobBook(t, func(t *testing.T) scheduler.JobStore { return a.Jobs(t, 0) }) })
	parallel("Due", func(t *testing.T) { TestDueIndex(t, a.Due) })
	parallel("OpenDeadline", func(t *testing.T) { TestOpenDeadline(t, a.JobsDue) })
	parallel("Reservations", func(t *testing.T) { TestReservationStore(t, a.Reservations) })
	parallel("Turns", func(t *testing.T) { TestTurnStore(t, a.Turns) })
}
