// Package testenv tells tests where the real servers they need are.
//
// The README's test command (./test.sh) gives each run a PostgreSQL
// database, a standalone Redis and a 3-master Redis Cluster of its own, and
// exports their addresses in the environment variables below. A test that
// needs a server calls one of the functions here: when the server cannot
// be reached the test fails, except under go test -short, where it is
// skipped.
//
//	KSANA_TEST_POSTGRES_URL        default postgres://postgres:postgres@127.0.0.1:5432/postgres?sslmode=disable
//	KSANA_TEST_REDIS_URL           default redis://127.0.0.1:6379
//	KSANA_TEST_REDIS_CLUSTER_URLS  no default: set by ./test.sh
//
// # What a test owns
//
// Tests of many packages share these servers at once, so a test keeps to
// names of its own and deletes them when it ends, also when it fails:
// a PostgreSQL schema from [PostgresSchema], a Redis key prefix no other
// test uses, ports from the kernel (127.0.0.1:0), directories from
// t.TempDir. A test that owns everything it touches runs with t.Parallel.
// ./test.sh fails a run that leaves a schema or a key of the tests' names
// behind.
package testenv
