// Command dispatch-session is a session for trying cmd/dispatcher: it
// connects to a dispatcher's /ws/session, sends job requests in turns and
// prints each answer (job_result or job_failed) with the node that ran the
// job and the latency from the request to its answer.
//
//	go run ./examples/dispatch-session -url ws://127.0.0.1:7200/ws/session
//
// A turn is -per-turn requests with one turn_id: all but the last say
// reason "max_duration" (the turn goes on), the last "manual" (the turn
// ends, its node affinity is cleared). The session waits for a turn's
// answers before it starts the next turn, and exits 0 once every request
// is answered, 1 when -timeout passes first.
//
// # Flags
//
//	-url list        dispatcher URLs, comma separated (default ws://127.0.0.1:7200/ws/session);
//	                 when the connection drops the session reconnects to the next one and
//	                 sends its unanswered requests again (request ids make that safe)
//	-id name         session_id (default session-1)
//	-turns n         turns (default 3)
//	-per-turn n      requests per turn (default 4)
//	-pool name       pool of every request (default zh-en)
//	-model name      model of every request (default none)
//	-interval d      pause between two requests of a turn (default 0)
//	-prefix s        request id prefix (default: random, so each run makes new jobs)
//	-timeout d       give up after this long (default 1m)
//	-token t         bearer token (dispatcher.session_token), also read from
//	                 DISPATCH_SESSION_TOKEN
package main
