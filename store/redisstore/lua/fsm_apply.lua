-- One event on one job.
--   KEYS[1] = {prefix}:v1:jobs:{job:<id>}:fsm
--   ARGV    = event, attempt, node_id (the dispatch's node, or the node
--             reporting the event; "" for none), max_attempts, ttl_ms,
--             outcome (JSON; optional: a finish)
--   reply   = step's reply; with an outcome {that reply, spec, tried,
--             waiters, outcome}
local outcome = ARGV[6] or ''
local r, book = step(KEYS[1], ARGV[1], tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4]), ARGV[5], outcome)
if outcome == '' then return r end
return {r, book[1], book[2], book[3], book[4]}
