-- limiterd strict mode: one hybrid decision of SPEC §6 for one (peer, group),
-- atomically. A transcription of limiter.StepHybrid over the state the local
-- backend keeps, with its ticks applied lazily (limiter.LeakyTicks,
-- limiter.CleanupCut). All keys share the (peer, group) hash tag.
--
-- KEYS[1] h  HASH tok (tokens consumed), tk (leaky tick index they are aged to)
-- KEYS[2] w  ZSET window timestamps (score ms, member "<ms>:<slot>")
-- KEYS[3] f  ZSET in-flight slots (member slot id, score lease expiry ms)
-- ARGV[1]      now in ms, '' for Redis TIME (tests inject their clock)
-- ARGV[2..7]   the group's leaky schedule: anchor, index, interval, switch, switch index, next interval
-- ARGV[8..13]  the group's cleanup schedule, likewise
-- ARGV[14] cleanup expiry  15 concurrency_limit  16 sliding_window_limit
-- ARGV[17] sliding_window_duration  18 leaky_limit  19 leaky_tick_reduction
-- ARGV[20] slot id (unique)  21 lease ms
-- Returns the state before the decision and the verdict, integers only:
--   {verdict, inflight, window, oldest, tokens, now, next_tick}
--   verdict 0 concurrency, 1 rate_limit, 2 admitted by the window, 3 by the bucket
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function sched(i)
  return {tonumber(ARGV[i]), tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]),
          tonumber(ARGV[i + 3]), tonumber(ARGV[i + 4]), tonumber(ARGV[i + 5])}
end
-- limiter.Schedule.IndexAt and TimeOf
local function idx(s, t)
  if s[4] ~= 0 and t >= s[4] then return s[5] + math.floor((t - s[4]) / s[6]) end
  return s[2] + math.floor((t - s[1]) / s[3])
end
local function tof(s, k)
  if s[4] ~= 0 and k >= s[5] then return s[4] + (k - s[5]) * s[6] end
  return s[1] + (k - s[2]) * s[3]
end
local L, C = sched(2), sched(8)
local expiry, climit, swl = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local swd, ll, tr = tonumber(ARGV[17]), tonumber(ARGV[18]), tonumber(ARGV[19])
local slot, lease = ARGV[20], tonumber(ARGV[21])

-- In flight: the slots whose lease has not ended.
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local inflight = redis.call('ZCARD', KEYS[3])

-- Tokens, with the leaky ticks since they were last aged.
local kn = idx(L, now)
local st = redis.call('HMGET', KEYS[1], 'tok', 'tk')
local tok = tonumber(st[1]) or 0
local tk = tonumber(st[2])
if tk and kn > tk then tok = math.max(0, tok - (kn - tk) * tr) end
local next_tick = tof(L, kn + 1)

-- Window: the cleanup tick in force drops what is older than its cut; a
-- timestamp counts while ts + duration > now.
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (tof(C, idx(C, now)) - expiry))
local lo = '(' .. (now - swd)
local wc = redis.call('ZCOUNT', KEYS[2], lo, '+inf')
local oldest = 0
if wc > 0 then
  oldest = tonumber(redis.call('ZRANGEBYSCORE', KEYS[2], lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2])
end

local verdict
if inflight + 1 > climit then
  return {0, inflight, wc, oldest, tok, now, next_tick}
elseif wc + 1 > swl then
  if tok + 1 > ll then
    return {1, inflight, wc, oldest, tok, now, next_tick}
  end
  redis.call('HSET', KEYS[1], 'tok', tok + 1, 'tk', kn)
  -- the tokens are back at 0 after ceil((tok+1)/tr) ticks: nothing to keep then
  redis.call('PEXPIRE', KEYS[1], math.max(1, tof(L, kn + math.ceil((tok + 1) / tr)) - now) + 1000)
  verdict = 3
else
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - swd)
  redis.call('ZADD', KEYS[2], now, now .. ':' .. slot)
  redis.call('PEXPIRE', KEYS[2], swd + 1000)
  verdict = 2
end
redis.call('ZADD', KEYS[3], now + lease, slot)
redis.call('PEXPIRE', KEYS[3], lease + 1000)
return {verdict, inflight, wc, oldest, tok, now, next_tick}
