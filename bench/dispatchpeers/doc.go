// Package dispatchpeers measures the dispatch plane beside a well-known
// Redis task queue, github.com/hibiken/asynq, on the same Redis server in
// the same run. It holds benchmarks only; it lives in a module of its own
// so that the library does not depend on asynq.
//
// BenchmarkPeers alternates rounds of both systems with 64 jobs in flight:
// asynq's one-way trip (enqueue to handler) and the Dispatcher's round
// trip (a session's Submit to its answer, through two Dispatchers over one
// Redis, the node attached to one and the session to the other). It reports
// asynq_tasks/s, dispatcher_jobs/s and their ratio. asynq runs with 64
// workers and a TaskCheckInterval of 10ms (its default of 1s would idle it
// at the start of every round). Then it counts the server's work for each
// system alone, as Redis counts it (INFO commandstats, the commands that
// scripts run included): a round of the Dispatcher with asynq's server
// stopped, and a round of asynq with the Dispatchers stopped, each with its
// background loops; it reports dispatcher_cmds/job, dispatcher_scripts/job,
// asynq_cmds/task and asynq_scripts/task, and logs the commands. Use a
// Redis nothing else uses while it runs:
//
//	KSANA_TEST_REDIS_URL=redis://127.0.0.1:6379 go test -run '^$' -bench Peers -benchtime 20000x ./dispatchpeers/
package dispatchpeers
