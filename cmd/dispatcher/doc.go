// Command dispatcher runs one dispatch instance: a
// [github.com/ksana-dev/ksana/scheduler.Dispatcher] behind WebSocket
// endpoints for nodes and sessions.
//
// # Running
//
//	go run ./cmd/dispatcher
//
// starts a single instance in memory on 127.0.0.1:7200, with nothing else
// installed. With -config config.toml and scheduler.phase2.enabled = true
// it joins every instance on the same Redis (redis.mode = "single" or
// "cluster") and key prefix: a node connected to one instance takes jobs
// requested by sessions connected to any other. dispatcher -h lists every
// setting with its default; config.example.toml in this directory is an
// annotated file. A bad value, an unknown key or an unknown table (such
// as a misspelled [scheduler.phase_2]) stops the start with a message
// naming the file and the key, such as "config.toml:
// dispatcher.selection: unknown strategy", and exit status 2. The binary
// owns its configuration: it reads the file, resolves instance_id = "auto"
// (host name and random hex) and turns the TOML tables into the Go values
// of scheduler.Config, redisstore.ClientConfig and redisstore.StoresConfig.
//
// # Endpoints
//
//   - /ws/node: a node's WebSocket. Its first message is register
//     (node_id, pools, models, capacity, and jobs: the ids of the jobs
//     the node still runs, for a node that reconnects); the dispatcher
//     answers registered. Every job the node had acknowledged (job_ack or
//     job_started) and does not list in the first register of a
//     connection goes to another node at once, and the node gets
//     job_cancel for it: a node that lost its jobs with its connection
//     simply registers without jobs. A register sent again on the same
//     connection without jobs leaves the node's jobs as they are. It then gets job_assign (job_id, attempt, session_id,
//     request_id, turn_id, pool, model, reason, payload) and job_cancel
//     (the attempt ended: it failed over or timed out), and reports
//     job_ack, job_started (or asr_partial), job_result (payload) or
//     model_not_available, each with job_id and attempt. A node may report
//     only on its own jobs: the node is the connection's, whatever
//     node_id a message carries. A node that registers again on a new
//     connection replaces the old one, which is closed (status 1008).
//   - /ws/session?session_id=ID: a session's WebSocket. It sends
//     job_request (request_id, and optionally turn_id, pool, model,
//     payload and reason: "manual", "timeout" or "max_duration", the
//     finalize reason of the request that ends a turn) and gets one
//     job_result (node_id, attempt, payload) or job_failed (error) per
//     request id. Request ids are idempotent across instances: a request
//     sent again, on any instance, gets the one answer of its job. A
//     newer connection with the same session_id replaces the old one.
//     When the request's pool already has dispatcher.queue_limit jobs
//     waiting on this instance for a node, the answer is job_failed with
//     "queue_full: ..." at once, and the request id may be sent again
//     later; a job that waits dispatcher.queue_timeout_ms for a free slot
//     gets job_failed with "no_node: ...".
//   - /metrics: Prometheus metrics of the instance (see
//     [github.com/ksana-dev/ksana/metrics.Scheduler]). When
//     dispatcher.metrics_token is set, or the environment variable
//     KSANA_DISPATCHER_METRICS_TOKEN (which wins over the file, so that
//     the secret need not be written there), it requires
//     "Authorization: Bearer <token>" and answers 401 otherwise; the token
//     must be at least 16 bytes. Unset (the default), /metrics is open.
//   - /ui/: the operators' console
//     ([github.com/ksana-dev/ksana/scheduler/console]): server-rendered
//     pages of the instances, the nodes and sessions attached here, the
//     fleet, the pools with their capacity and use (and per pool the
//     nodes serving it and what they run), the jobs in flight by state, a
//     page at a time, every instance's inbox (length, pending entries)
//     and the dead-letter queues. dispatcher.console_read_token (or
//     KSANA_DISPATCHER_CONSOLE_READ_TOKEN) signs in a user who sees every
//     page; dispatcher.console_admin_token (or
//     KSANA_DISPATCHER_CONSOLE_ADMIN_TOKEN) one who may also requeue a
//     dead letter into its inbox or delete it. The variables win over the
//     file; each token is at least 16 bytes, and the two differ. With one
//     of them set every page needs a sign-in; with neither the console is
//     open, read-only (nobody may requeue or delete). Every write carries
//     a CSRF token and is refused from another origin.
//   - /health: {"status", "instance_id", "nodes", "sessions",
//     "fleet_online"}: the nodes and sessions connected here, and the
//     nodes online on every instance as this one sees them; 503 while
//     stopping.
//
// Messages are JSON objects with a type field; payload is base64. Either
// side may send {"type":"ping"}, answered with {"type":"pong"}. The
// dispatcher also sends a WebSocket ping every
// dispatcher.ping_interval_ms; a peer that does not answer within that
// time is disconnected (a node's jobs then go to other nodes).
//
// # Bad input
//
// Every message is checked before anything changes. A message that is not
// one JSON object, has an unknown type or field, lacks a required field,
// or reports on a job that is not the node's current attempt gets an
// error frame, {"type":"error","code",...,"field",...,"error",...}, and
// the connection stays open. Codes: bad_json, bad_message (field names
// the field), frame_too_large, not_registered, forbidden_node, wrong_node,
// stale_attempt, invalid_transition, job_not_found, stopping, internal. A message larger
// than dispatcher.max_frame_bytes is read and dropped with
// frame_too_large; one larger than eight times that closes the connection
// (status 1009). When dispatcher.node_token or dispatcher.session_token
// is set, the endpoint requires "Authorization: Bearer <token>"; tokens
// are compared in constant time. [[dispatcher.node_credentials]] tables
// bind a token to the node ids it may register: a node presenting it may
// register only those (a register for another id gets forbidden_node).
// Any other path answers 404 with a JSON body {"error": ...}, as refused
// upgrades do. A peer that reads too slowly for its
// dispatcher.send_queue is disconnected.
//
// # Connections and their limits
//
// Plain HTTP requests have deadlines: their headers must arrive within
// dispatcher.read_header_timeout_ms (default 10000), their response be
// written within dispatcher.write_timeout_ms (default 10000), and a
// keep-alive connection idle for dispatcher.idle_timeout_ms (default
// 60000) is closed. A WebSocket is exempt from these once upgraded: each
// of its messages must be written within write_timeout_ms, and its pings
// (dispatcher.ping_interval_ms) find a peer that is gone.
//
// Connections not yet authenticated are capped by
// dispatcher.max_pending_conns (default 256): every connection counts
// from its accept until it is a WebSocket that passed its token check
// (with no token configured, until it is a WebSocket), or until it
// closes; /health and /metrics requests and idle keep-alive connections
// count. A connection accepted while the cap is reached is closed at
// once, with one warning in the log per 10 seconds. So clients that open
// connections and send nothing hold at most that many, each for at most
// read_header_timeout_ms; connected nodes and sessions do not count, but
// a new node cannot connect while the cap is held.
//
// # Stopping
//
// On SIGINT or SIGTERM the instance stops accepting connections,
// withdraws its presence (other instances stop routing to it and take
// over its inbox), hands each node and session a close frame (1001) after
// the messages queued for it, lets its nodes' unfinished jobs go to other
// nodes, and exits 0 (within dispatcher.drain_timeout_ms). Nodes and
// sessions then reconnect to another instance; a session sends its
// unanswered requests again and gets their answers.
package main
