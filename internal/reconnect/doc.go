// Package reconnect paces the reconnection attempts of the example
// WebSocket clients (examples/dispatch-node, examples/dispatch-session):
// pauses that double from 100ms up to 5s, and one line on standard error
// per new cause rather than one per attempt.
package reconnect
