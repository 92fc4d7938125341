// Package storetest holds the exported conformance suites that every adapter
// of a store interface runs, so that the in-memory, JSON, SQL and Redis
// implementations of one interface behave the same.
//
// Each suite is a function an adapter's test calls with a way to open a
// fresh store:
//
//	func TestConformance(t *testing.T) {
//		storetest.CronStore(t, func(t *testing.T) cron.Store { return openMyStore(t) })
//	}
//
// # Suites
//
//   - [CronStore] for [github.com/ksana-dev/ksana/cron.Store] and its
//     optional [github.com/ksana-dev/ksana/cron.RunStore].
//   - [ClaimStore] for the stores of package claim.
//
// Other suites in this package cover the stores of the scheduler's
// dispatch plane; each names the interface it checks.
package storetest
