-- index_ended(key, run_id, was, status, now_s): keep the ended-runs index (retention reads it) in step with a
-- run's status: added when the run ends, dropped if it ever runs again. Touches nothing while a run is running.
local function has_ended(status)
  return status ~= '' and status ~= 'running' and status ~= 'paused'
end

local function index_ended(key, run_id, was, status, now_s)
  if has_ended(status) then redis.call('ZADD', key, now_s, run_id)
  elseif has_ended(was) then redis.call('ZREM', key, run_id) end
end
