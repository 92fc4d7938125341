// Package storetest holds the exported conformance suites that every adapter
// of a store interface runs, so that the in-memory, JSON, SQL and Redis
// implementations of one interface behave the same.
//
// Each suite is a function an adapter's test calls with a way to open a
// fresh store:
//
//	func TestConformance(t *testing.T) {
//		storetest.TestCronStore(t, func(t *testing.T) cron.Store { return openMyStore(t) })
//	}
//
// # Suites
//
//   - [TestCronStore] for [github.com/ksana-dev/ksana/cron.Store] and its
//     optional [github.com/ksana-dev/ksana/cron.RunStore].
//   - [TestSharedStore] for [github.com/ksana-dev/ksana/cron.SharedStore],
//     the store that several runners share.
//   - [TestClaimStore] for the stores of package claim.
//   - [TestPlaneStores] for the stores of the dispatch plane (package
//     scheduler): one entry point that runs every suite an adapter must
//     pass, given a [PlaneAdapter] ([TestJobStore], [TestJobBook],
//     [TestDueIndex], [TestReservationStore], [TestTurnStore],
//     [TestPresence], [TestOwners], [TestNodeSnapshots], [TestStreams],
//     [TestStorm], and [TestDispatcher] end to end over whole planes, in
//     fake time with [TestDispatcherSynctest] for in-memory stores).
//
// Each runs against the in-memory reference implementation in its core
// package and against every adapter in store/...; the Redis adapters run
// them on a standalone server and on a 3-master cluster.
package storetest
