-- The transition of one job, as package fsm's Machine.Apply makes it, on
-- the job's hash. It reads the tables and names of the generated lines
-- above (STATES, EVENTS, MOVES, DUPS, FREES, and the state and event
-- names it needs), and stores and replies strings only: Lua formats a
-- number with sprintf, which costs more than the rest of the step.
--
-- step(key, ev, attempt, node, max, ttl, outcome) returns
--   {status, state, attempt, node_id, free_node, created_at_ms,
--    updated_at_ms, dispatched_at_ms}
-- with status "ok", "dup" or a refusal (unknown_event, invalid_attempt,
-- stale_attempt, future_attempt, invalid_transition, wrong_node) and the
-- record after the step (free_node: the node whose slot the step frees,
-- "" for none; dispatched_at_ms "" before the first dispatch), or
-- {"not_found"}, or {"corrupt", field, value}. With an outcome (finish),
-- the book follows as a second return value: {spec, tried, waiters,
-- outcome}, outcome "=" when this step stored the one passed.

-- now returns the server's time in milliseconds, read once per script
-- call: TIME's seconds followed by the first three of its six digits of
-- microseconds.
local nowms
local function now()
  if not nowms then
    local t = redis.call('TIME')
    nowms = t[1] .. string.sub('00000' .. t[2], -6, -4)
  end
  return nowms
end

local function step(key, ev, attempt, node, max, ttl, outcome)
  local h
  local expires
  if outcome == '' then
    h = redis.call('HMGET', key, 'state', 'attempt', 'node_id', 'created_at_ms', 'updated_at_ms', 'dispatched_at_ms',
      'expires_at_ms')
    expires = h[7]
  else
    -- A finish reads the book with the record: one read for both.
    h = redis.call('HMGET', key, 'state', 'attempt', 'node_id', 'created_at_ms', 'updated_at_ms', 'dispatched_at_ms',
      'outcome', 'spec', 'tried', 'waiters', 'expires_at_ms')
    expires = h[11]
  end
  local state, cur, curnode, created, updated, dsp = h[1], h[2], h[3] or '', h[4], h[5], h[6]
  local book
  if outcome ~= '' then book = {h[8] or '', h[9] or '', h[10] or '', h[7] or ''} end
  if not state and not cur and not created then
    if redis.call('EXISTS', key) == 0 then return {NOT_FOUND}, book end
  end
  local function corrupt(field, v) return {CORRUPT, field, tostring(v)}, book end
  if not state or not STATES[state] then return corrupt('state', state) end
  if not cur or not string.find(cur, '^%d+$') then return corrupt('attempt', cur) end
  local a = tonumber(cur)
  if a < 1 then return corrupt('attempt', cur) end
  if not tonumber(created) then return corrupt('created_at_ms', created) end
  if not tonumber(updated) then return corrupt('updated_at_ms', updated) end
  if dsp and not tonumber(dsp) then return corrupt('dispatched_at_ms', dsp) end
  dsp = dsp or ''
  local function reply(status, free)
    return {status, state, cur, curnode, free, created, updated, dsp}, book
  end
  -- The checks of Machine.Apply, in its order; then the node's.
  if not EVENTS[ev] then return reply(UNKNOWN_EVENT, '') end
  if attempt < 1 then return reply(INVALID_ATTEMPT, '') end
  if attempt < a then return reply(STALE_ATTEMPT, '') end
  if attempt > a then return reply(FUTURE_ATTEMPT, '') end
  if node ~= '' and ev ~= DISPATCH and node ~= curnode then return reply(WRONG_NODE, '') end
  local mv = MOVES[state] and MOVES[state][ev]
  if not mv then
    if not (DUPS[state] and DUPS[state][ev]) then return reply(INVALID_TRANSITION, '') end
    -- A replay: a replayed freeing event names the node again, and a
    -- replayed end stores its outcome unless the job has one.
    if outcome ~= '' and (state == FINISHED or state == FAILED) and book[4] == '' then
      redis.call('HSET', key, 'outcome', outcome)
      book[4] = '='
    end
    local free = ''
    if FREES[ev] then free = curnode end
    return reply(DUP, free)
  end
  local to, retry, frees = mv[1], mv[2], mv[3]
  if retry then
    if a < max then cur = tostring(a + 1) else to = FAILED end
  end
  local free = ''
  if frees then free = curnode end
  if ev == DISPATCH then curnode = node elseif to == CREATED then curnode = '' end
  state, updated = to, now()
  -- The record lives at least ttl after its last change: the step pushes
  -- its expiry (expires_at_ms, the key's PEXPIREAT) to ttl and a sixteenth
  -- on only when less than ttl is left, so the steps of a job's life that
  -- follow each other closely renew it once.
  local fields = {'state', to, 'attempt', cur, 'node_id', curnode, 'updated_at_ms', updated}
  if outcome ~= '' and (to == FINISHED or to == FAILED) and book[4] == '' then
    fields[9], fields[10] = 'outcome', outcome
    book[4] = '='
  end
  local exp, ttln = '', tonumber(ttl)
  if not tonumber(expires) or tonumber(expires) < tonumber(updated) + ttln then
    exp = string.format('%d', tonumber(updated) + ttln + math.floor(ttln / 16))
    fields[#fields + 1], fields[#fields + 2] = 'expires_at_ms', exp
  end
  redis.call('HSET', key, unpack(fields))
  if to == CREATED and ev ~= UNDELIVERED then
    -- A new attempt begins to wait for a node; an undelivered one waits on.
    redis.call('HSET', key, 'queued_at_ms', updated)
  end
  if ev == DISPATCH then
    dsp = updated
    local tried = redis.call('HGET', key, 'tried') or ''
    local seen = false
    for n in string.gmatch(tried, '[^\n]+') do if n == node then seen = true end end
    if seen then
      redis.call('HSET', key, 'dispatched_at_ms', updated)
    else
      if tried == '' then tried = node else tried = tried .. '\n' .. node end
      redis.call('HSET', key, 'dispatched_at_ms', updated, 'tried', tried)
    end
  end
  if exp ~= '' then redis.call('PEXPIREAT', key, exp) end
  return reply(OK, free)
end
