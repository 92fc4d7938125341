module github.com/ksana-dev/ksana/bench

go 1.26.0

replace github.com/ksana-dev/ksana => ../

require (
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/ksana-dev/ksana v0.0.0-00010101000000-000000000000
	github.com/robfig/cron/v3 v3.0.1
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/jonboulle/clockwork v0.5.0 // indirect
)
