// Command dispatch-node is a node for trying cmd/dispatcher: it connects
// to a dispatcher's /ws/node, registers, and answers each job_assign with
// job_ack, job_started and, after -delay, a job_result whose payload is
// "done:" followed by the job's payload. A job_cancel stops the job
// without a result.
//
//	go run ./examples/dispatch-node -url ws://127.0.0.1:7200/ws/node -id node-1
//
// # Flags
//
//	-url list          dispatcher URLs, comma separated (default ws://127.0.0.1:7200/ws/node);
//	                   when the connection drops the node registers again on the next one
//	-id name           node_id (default node-1)
//	-pools list        pools served, comma separated (default zh-en)
//	-models list       models installed, comma separated (default none)
//	-capacity n        jobs at once; 0 lets the dispatcher choose (default 0)
//	-delay d           time from job_started to job_result (default 200ms)
//	-silent p          share of jobs acknowledged and then never answered, 0..1;
//	                   the dispatcher's run_timeout_ms moves them on (default 0)
//	-unavailable p     share of jobs answered with model_not_available, 0..1;
//	                   the dispatcher sends them to another node (default 0)
//	-die-after n       exit at once, without a close frame, after job_started of
//	                   the n-th job: a node dying mid-job (default 0, never)
//	-token t           bearer token (dispatcher.node_token), also read from
//	                   DISPATCH_NODE_TOKEN
//	-quiet             do not print each job
//
// Each job is printed with its id, attempt, turn and what the node did.
// The node stops on SIGINT or SIGTERM, closing its connection; the
// dispatcher then sends its unfinished jobs to other nodes.
package main
