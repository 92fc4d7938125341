-- One event on several jobs (on a cluster, jobs of one deadline shard,
-- whose keys share its slot), each as the one-job script would apply it;
-- the server's time is read once.
--   KEYS    = the jobs' fsm keys
--   ARGV    = event, max_attempts, ttl_ms, then the attempt of each job
--   reply   = step's reply for each job, in order
local ev, max, ttl = ARGV[1], tonumber(ARGV[2]), ARGV[3]
local out = {}
for i = 1, #KEYS do
  out[i] = step(KEYS[i], ev, tonumber(ARGV[3 + i]), '', max, ttl, '')
end
return out
