// Package claimtest provides in-memory implementations of the interfaces of
// package claim, for tests, simulations and examples.
//
// # Store
//
// [Store] is a reference [claim.Store], [claim.Membership] and
// [claim.HeartbeatActiver]: a deployment table and a node-unit membership
// in memory, with the same conditional-update semantics as the SQL adapters
// (it passes store/storetest.TestClaimStore). Its clock, the "database's
// clock", is package time; tests control it with testing/synctest. Beyond the interfaces it has an admin side to set up
// and inspect state ([Store.Put], [Store.SetEnabled], [Store.Get],
// [Store.All], [Store.Addresses], [Store.Backdate]) and hooks for tests:
// [Store.SetFail] injects errors, [Store.SetOnWrite] observes every address
// write, [Store.Statements] counts statements. [Viewing] wraps a Store as
// a [ViewStore], which also implements [claim.Viewer] over the same state
// (its heartbeat is stored at once, committed or not).
//
// # Fakes
//
// [Runner] is a fake [claim.Runner] that records what runs and how often
// each deployment was started; [Runner.Crash] simulates a process that died.
// [Probe] is a fake [claim.UsageProbe] answering from a table, with
// failures and timeouts on demand.
//
// Everything here is safe for concurrent use.
package claimtest
