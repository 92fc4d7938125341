package redisstore

import "testing"

// The keys are what operators see in Redis: each keeps its documented
// spelling, hash tag included.
func TestKeysLayout(t *testing.T) {
	k := NewKeys("p")
	for _, tc := range []struct{ got, want string }{
		{k.NodeOwner("n1"), "p:nodes:owner:{node:n1}"},
		{k.SessionOwner("s1"), "p:sessions:owner:{session:s1}"},
		{k.Inbox("a"), "p:streams:{instance:a}:inbox"},
		{k.DLQ("a"), "p:streams:{instance:a}:dlq"},
		{k.NodeReserved("n1"), "p:v1:nodes:{node:n1}:reserved"},
		{k.JobFSM("j1"), "p:v1:jobs:{due:4}:{job:j1}:fsm"},
		{k.Due(3), "p:v1:jobs:due:{due:3}"},
		{k.StormWindow("m", "n1"), "p:v1:storm:{model:m}:window:n1"},
		{k.StormUnavailable("m", "n1"), "p:v1:storm:{model:m}:unavailable:n1"},
		{k.StormRate("m"), "p:v1:storm:{model:m}:rate"},
		{k.SchedulerPresence("a"), "p:schedulers:presence:a"},
		{k.Turn("t"), "p:scheduler:turn:t"},
	} {
		if tc.got != tc.want {
			t.Errorf("key %q, want %q", tc.got, tc.want)
		}
	}
}
