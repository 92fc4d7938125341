package redisstore_test

import (
	"fmt"

	"github.com/ksana-dev/ksana/store/redisstore"
)

// ClientOption turns the Go values of a connection into rueidis options;
// NewClient connects with them. Keys spells every key under a prefix.
func ExampleClientOption() {
	opt, err := redisstore.ClientOption(redisstore.ClientConfig{URL: "redis://127.0.0.1:6379/0"})
	fmt.Println(opt.InitAddress, opt.ForceSingleClient, err)
	opt, err = redisstore.ClientOption(redisstore.ClientConfig{ClusterURLs: []string{"redis://h1:7000", "redis://h2:7000"}})
	fmt.Println(opt.InitAddress, opt.ForceSingleClient, err)
	_, err = redisstore.ClientOption(redisstore.ClientConfig{})
	fmt.Println(err)

	keys := redisstore.NewKeys("ksana-dev")
	fmt.Println(keys.Inbox("dispatcher-a"))
	fmt.Println(keys.DLQ("dispatcher-a"))
	// Output:
	// [127.0.0.1:6379] true <nil>
	// [h1:7000 h2:7000] false <nil>
	// redisstore: ClientConfig: URL or ClusterURLs is required
	// ksana-dev:streams:{instance:dispatcher-a}:inbox
	// ksana-dev:streams:{instance:dispatcher-a}:dlq
}
