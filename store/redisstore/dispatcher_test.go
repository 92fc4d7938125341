package redisstore

import (
	"context"
	"testing"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/ksana-dev/ksana/store/storetest"
)

func TestDispatcherConformance(t *testing.T) {
	for _, s := range testServers(t) {
		t.Run(s.name, func(t *testing.T) {
			storetest.TestDispatcher(t, func(t *testing.T) storetest.DispatcherHarness {
				cfg := storetest.DispatchTestConfig("x")
				cfg.Redis.KeyPrefix = testPrefix(t)
				keys := NewKeys(cfg.Redis.KeyPrefix)
				return storetest.DispatcherHarness{
					Stores: func() scheduler.Stores {
						st, err := NewStores(s.client, cfg, nil)
						if err != nil {
							t.Fatal(err)
						}
						return st
					},
					Poison: func(id string, f map[string]string) error {
						fv := s.client.B().Xadd().Key(keys.Inbox(id)).Id("*").FieldValue()
						for k, v := range f {
							fv = fv.FieldValue(k, v)
						}
						return s.client.Do(context.Background(), fv.Build()).Error()
					},
				}
			})
		})
	}
}
