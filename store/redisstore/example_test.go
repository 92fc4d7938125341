package redisstore_test

import (
	"fmt"

	"github.com/ksana-dev/ksana/store/redisstore"
)

// LoadConfig reads the [scheduler.phase2] tables of a config.toml, fills in
// the defaults and validates the result; NewClient then connects.
func ExampleLoadConfig() {
	cfg, err := redisstore.LoadConfig("testdata/config.toml")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.InstanceID, cfg.Redis.Mode, cfg.Redis.URL, cfg.Redis.KeyPrefix)
	fmt.Println("owner TTL:", cfg.OwnerTTL(), "DLQ:", cfg.DLQOn(), "max deliveries:", cfg.DLQMaxDeliveries)
	keys := redisstore.NewKeys(cfg.Redis.KeyPrefix)
	fmt.Println(keys.Inbox(cfg.InstanceID))
	fmt.Println(keys.DLQ(cfg.InstanceID))

	_, err = redisstore.ParseConfig([]byte("[scheduler.phase2]\nenabled = true\n[scheduler.phase2.redis]\nmode = \"x\"\n"))
	fmt.Println(err)
	// Output:
	// dispatcher-a single redis://127.0.0.1:6379 ksana-dev
	// owner TTL: 45s DLQ: true max deliveries: 10
	// ksana-dev:streams:{instance:dispatcher-a}:inbox
	// ksana-dev:streams:{instance:dispatcher-a}:dlq
	// scheduler.phase2.redis.mode: unknown mode "x" (single|cluster)
}
