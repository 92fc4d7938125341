package redisstore

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/redis/rueidis"
)

// ClientConfig says where the Redis server is: one standalone server at
// URL, or a Redis Cluster reached through the seeds ClusterURLs. Exactly
// one of the two is set. The URLs may carry a user, a password and (for a
// standalone server) a database, as rueidis.ParseURL reads them; rediss://
// turns TLS on.
type ClientConfig struct {
	// URL is the redis:// or rediss:// URL of a standalone server.
	URL string
	// ClusterURLs are seed URLs of a cluster; rueidis learns the slot map
	// from them and follows MOVED and ASK.
	ClusterURLs []string
}

// NewClient connects to the Redis of cfg: a standalone server with
// rueidis's ForceSingleClient, so that no cluster discovery is tried, or a
// cluster. tune, when given, adjusts the rueidis options before the client
// is built (timeouts, pool sizes, client-side caching).
func NewClient(cfg ClientConfig, tune ...func(*rueidis.ClientOption)) (rueidis.Client, error) {
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

// ClientOption returns the rueidis options [NewClient] uses for cfg. The
// error names the bad field.
func ClientOption(cfg ClientConfig) (rueidis.ClientOption, error) {
	switch {
	case cfg.URL == "" && len(cfg.ClusterURLs) == 0:
		return rueidis.ClientOption{}, errors.New("redisstore: ClientConfig: URL or ClusterURLs is required")
	case cfg.URL != "" && len(cfg.ClusterURLs) > 0:
		return rueidis.ClientOption{}, errors.New("redisstore: ClientConfig: URL and ClusterURLs are both set")
	case cfg.URL != "":
		opt, err := parseURL(cfg.URL)
		if err != nil {
			return rueidis.ClientOption{}, fmt.Errorf("redisstore: ClientConfig.URL: %w", err)
		}
		opt.ForceSingleClient = true
		return opt, nil
	}
	var opt rueidis.ClientOption
	for i, u := range cfg.ClusterURLs {
		o, err := parseURL(u)
		if err != nil {
			return rueidis.ClientOption{}, fmt.Errorf("redisstore: ClientConfig.ClusterURLs[%d]: %w", i, err)
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

// parseURL is rueidis.ParseURL refusing a URL without a host (which
// rueidis would take for localhost).
func parseURL(raw string) (rueidis.ClientOption, error) {
	if u, err := url.Parse(raw); err == nil && u.Host == "" {
		return rueidis.ClientOption{}, fmt.Errorf("%q has no host", raw)
	}
	return rueidis.ParseURL(raw)
}
