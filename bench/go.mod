module github.com/ksana-dev/ksana/bench

go 1.26.0

require (
	github.com/coder/websocket v1.8.15
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/hibiken/asynq v0.26.0
	github.com/ksana-dev/ksana v0.0.0
	github.com/redis/go-redis/v9 v9.14.1
	github.com/robfig/cron/v3 v3.0.1
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/dgryski/go-rendezvous v0.0.0-20200823014737-9f7001d12a5f // indirect
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/google/uuid v1.6.0 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
	github.com/redis/rueidis v1.0.79 // indirect
	github.com/spf13/cast v1.10.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/time v0.14.0 // indirect
	google.golang.org/protobuf v1.36.12 // indirect
)

replace github.com/ksana-dev/ksana => ../
