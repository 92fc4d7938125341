package redisstore

import (
	"errors"
	"fmt"

	"github.com/ksana-dev/ksana/scheduler"
	"github.com/redis/rueidis"
)

// NewClient connects to the Redis of cfg ([scheduler.RedisConfig], the
// [scheduler.phase2.redis] table): in single mode to redis.url, with
// rueidis's ForceSingleClient so that no cluster discovery is tried; in
// cluster mode to the seeds of redis.cluster_urls, from which rueidis
// learns the slot map and follows MOVED and ASK. The URLs may carry a user,
// a password and (single mode) a database, as rueidis.ParseURL reads them;
// rediss:// turns TLS on. tune, when given, adjusts the rueidis options
// before the client is built (timeouts, pool sizes, client-side caching).
func NewClient(cfg scheduler.RedisConfig, tune ...func(*rueidis.ClientOption)) (rueidis.Client, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: NewClient: %w", err)
	}
	opt, err := ClientOption(cfg)
	if err != nil {
		return nil, err
	}
	for _, f := range tune {
		f(&opt)
	}
	c, err := rueidis.NewClient(opt)
	if err != nil {
		return nil, fmt.Errorf("redisstore: connect to %v: %w", opt.InitAddress, err)
	}
	return c, nil
}

// ClientOption returns the rueidis options NewClient uses for cfg, which
// must be valid.
func ClientOption(cfg scheduler.RedisConfig) (rueidis.ClientOption, error) {
	if cfg.Mode == scheduler.ModeCluster {
		if len(cfg.ClusterURLs) == 0 {
			return rueidis.ClientOption{}, errors.New("redisstore: no cluster URLs")
		}
		var opt rueidis.ClientOption
		for i, u := range cfg.ClusterURLs {
			o, err := rueidis.ParseURL(u)
			if err != nil {
				return rueidis.ClientOption{}, fmt.Errorf("redisstore: %s.redis.cluster_urls[%d]: %w", scheduler.ConfigPath, i, err)
			}
			if i == 0 {
				opt = o
				opt.InitAddress = nil
			}
			opt.InitAddress = append(opt.InitAddress, o.InitAddress...)
		}
		opt.SelectDB = 0
		return opt, nil
	}
	opt, err := rueidis.ParseURL(cfg.URL)
	if err != nil {
		return rueidis.ClientOption{}, fmt.Errorf("redisstore: %s.redis.url: %w", scheduler.ConfigPath, err)
	}
	opt.ForceSingleClient = true
	return opt, nil
}
