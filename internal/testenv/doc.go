// Package testenv tells tests where the real servers they need are.
//
// The README's test command (./test.sh) starts PostgreSQL, a standalone Redis
// and a private 3-master Redis Cluster, and exports their addresses in the
// environment variables below. A test that needs a server calls one of the
// functions here: when the server cannot be reached the test fails, except
// under go test -short, where it is skipped.
//
//	KSANA_TEST_POSTGRES_URL        default postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable
//	KSANA_TEST_REDIS_URL           default redis://127.0.0.1:6379
//	KSANA_TEST_REDIS_CLUSTER_URLS  no default: set by ./test.sh
package testenv
