package redisstore

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/ksana-dev/ksana/internal/testenv"
	"github.com/redis/rueidis"
)

func TestClientOption(t *testing.T) {
	tests := []struct {
		name      string
		cfg       ClientConfig
		wantAddrs []string
		wantForce bool
		wantErr   string
	}{
		{"single", ClientConfig{URL: "redis://u:p@h1:6380/2"}, []string{"h1:6380"}, true, ""},
		{"cluster", ClientConfig{ClusterURLs: []string{"redis://a:7000", "redis://b:7001"}}, []string{"a:7000", "b:7001"}, false, ""},
		{"none", ClientConfig{}, nil, false, "redisstore: ClientConfig: URL or ClusterURLs is required"},
		{"both", ClientConfig{URL: "redis://h:1", ClusterURLs: []string{"redis://h:2"}}, nil, false, "URL and ClusterURLs are both set"},
		{"bad scheme", ClientConfig{URL: "http://h:1"}, nil, false, "redisstore: ClientConfig.URL: "},
		{"bad seed", ClientConfig{ClusterURLs: []string{"redis://h:1", "redis://"}}, nil, false, "redisstore: ClientConfig.ClusterURLs[1]: "},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			opt, err := ClientOption(tc.cfg)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("ClientOption error = %v, want %q", err, tc.wantErr)
				}
				if _, err := NewClient(tc.cfg); err == nil {
					t.Fatal("NewClient accepted it")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.wantAddrs, opt.InitAddress); d != "" {
				t.Errorf("InitAddress (-want +got):\n%s", d)
			}
			if opt.ForceSingleClient != tc.wantForce {
				t.Errorf("ForceSingleClient = %v, want %v", opt.ForceSingleClient, tc.wantForce)
			}
		})
	}
}

func TestNewClientConnects(t *testing.T) {
	tests := []struct {
		name string
		cfg  ClientConfig
		want rueidis.ClientMode
	}{
		{"single", ClientConfig{URL: testenv.RedisURL(t)}, rueidis.ClientModeStandalone},
		{"cluster", ClientConfig{ClusterURLs: testenv.RedisClusterURLs(t)}, rueidis.ClientModeCluster},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewClient(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if err := c.Do(context.Background(), c.B().Ping().Build()).Error(); err != nil {
				t.Fatalf("ping: %v", err)
			}
			if got := c.Mode(); got != tc.want {
				t.Errorf("Mode() = %v, want %v", got, tc.want)
			}
		})
	}
}
