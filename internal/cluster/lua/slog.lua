-- limiterd strict mode: one decision, or one manual reduction, of the
-- sliding log (docs/limiting.md) for one (peer, group), atomically: the
-- concurrency check first, then the log — the timestamps of the
-- admissions of the last period; a request is admitted while fewer than
-- limit of them count (ts > now − period).
-- KEYS[1] l  ZSET timestamps (score ms, member "<ms>:<slot>")
-- KEYS[2] f  ZSET in-flight slots (as in hybrid.lua)
-- ARGV[1] now in ms, '' for Redis TIME  2 op: 'd' decide, 'r' reduce
-- ARGV[3] limit  4 period  5 concurrency_limit  6 slot id  7 lease ms
-- Returns {verdict, inflight, count, gate, now}: the timestamps counted
-- before the decision and, when they are limit or more, the (count −
-- limit)-th oldest of them (0-based), which must expire before the next
-- admission — after an admission, the new log's; verdict as in algo.lua.
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local op, L, P = ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4])
local lo = '(' .. (now - P)
local count = redis.call('ZCOUNT', KEYS[1], lo, '+inf')
local gate = 0
if count >= L then
  gate = tonumber(redis.call('ZRANGEBYSCORE', KEYS[1], lo, '+inf', 'WITHSCORES', 'LIMIT', count - L, 1)[2])
end
if op == 'r' then
  -- the newest timestamp that still counts
  if count == 0 then return {6, 0, count, gate, now} end
  local newest = redis.call('ZREVRANGEBYSCORE', KEYS[1], '+inf', lo, 'LIMIT', 0, 1)
  redis.call('ZREM', KEYS[1], newest[1])
  return {5, 0, count, gate, now}
end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local inflight = redis.call('ZCARD', KEYS[2])
if inflight + 1 > tonumber(ARGV[5]) then
  return {0, inflight, count, gate, now}
end
if count + 1 > L then
  return {1, inflight, count, gate, now}
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - P)
redis.call('ZADD', KEYS[1], now, now .. ':' .. ARGV[6])
redis.call('PEXPIRE', KEYS[1], P + 1000)
-- admitted: the gate is the new log's, once it holds limit timestamps
if count + 1 >= L then
  gate = tonumber(redis.call('ZRANGEBYSCORE', KEYS[1], lo, '+inf', 'WITHSCORES', 'LIMIT', count + 1 - L, 1)[2])
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[7]), ARGV[6])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[7]) + 1000)
return {4, inflight, count, gate, now}
