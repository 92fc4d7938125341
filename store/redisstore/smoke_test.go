package redisstore

import (
	"context"
	"testing"
)

func TestServersReachable(t *testing.T) {
	for _, s := range testServers(t) {
		k := NewKeys(testPrefix(t))
		key := k.JobFSM("j1")
		if err := s.client.Do(context.Background(), s.client.B().Set().Key(key).Value("x").ExSeconds(10).Build()).Error(); err != nil {
			t.Fatalf("%s: set %s: %v", s.name, key, err)
		}
	}
}
