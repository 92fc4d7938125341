//go:build !race

package sqlstore

// raceEnabled reports a build with the race detector, under which the
// embedded SQLite (Go code, instrumented) runs many times slower.
const raceEnabled = false
