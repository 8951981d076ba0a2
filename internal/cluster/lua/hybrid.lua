-- limiterd strict mode: one hybrid decision (docs/limiting.md) for one (peer,
-- group), atomically. A transcription of limiter.StepHybrid over the state the
-- local backend keeps, with its ticks applied lazily (limiter.LeakyTicks,
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
-- ARGV[20] slot id (unique)  21 lease ms  22 ms the window key outlives an
--          admission (arweave.version 2.9.7 keeps timestamps past the window
--          until a cleanup tick drops them: its reduction may take one)
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
local floor = math.floor
-- limiter.Schedule.IndexAt and TimeOf, inline (no closure or table per call)
local la, li, liv = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local lsw, lswi, lniv = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local kn, next_tick
if lsw ~= 0 and now >= lsw then
  kn = lswi + floor((now - lsw) / lniv)
  next_tick = lsw + (kn + 1 - lswi) * lniv
else
  kn = li + floor((now - la) / liv)
  next_tick = la + (kn + 1 - li) * liv
  if lsw ~= 0 and kn + 1 >= lswi then next_tick = lsw + (kn + 1 - lswi) * lniv end
end
local climit, swl = tonumber(ARGV[15]), tonumber(ARGV[16])
local swd, ll, tr = tonumber(ARGV[17]), tonumber(ARGV[18]), tonumber(ARGV[19])
local slot, lease = ARGV[20], tonumber(ARGV[21])

-- In flight: the slots whose lease has not ended.
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now)
local inflight = redis.call('ZCARD', KEYS[3])

-- Tokens, with the leaky ticks since they were last aged.
local st = redis.call('HMGET', KEYS[1], 'tok', 'tk')
local tok = tonumber(st[1]) or 0
local tk = tonumber(st[2])
if tk and kn > tk then tok = math.max(0, tok - (kn - tk) * tr) end

-- Window (a group without one never reads it: every request goes to the
-- bucket). The cleanup tick in force drops what is older than its cut; a
-- timestamp counts while ts + duration > now.
local wc, oldest = 0, 0
if swl > 0 then
  local ca, ci, civ = tonumber(ARGV[8]), tonumber(ARGV[9]), tonumber(ARGV[10])
  local csw, cswi, cniv = tonumber(ARGV[11]), tonumber(ARGV[12]), tonumber(ARGV[13])
  local cut
  if csw ~= 0 and now >= csw then
    cut = csw + floor((now - csw) / cniv) * cniv
  else
    cut = ca + floor((now - ca) / civ) * civ
  end
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. (cut - tonumber(ARGV[14])))
  local lo = '(' .. (now - swd)
  wc = redis.call('ZCOUNT', KEYS[2], lo, '+inf')
  if wc > 0 then
    oldest = tonumber(redis.call('ZRANGEBYSCORE', KEYS[2], lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2])
  end
end

if inflight + 1 > climit then
  return {0, inflight, wc, oldest, tok, now, next_tick}
end
local verdict
if wc + 1 > swl then
  if tok + 1 > ll then
    return {1, inflight, wc, oldest, tok, now, next_tick}
  end
  redis.call('HSET', KEYS[1], 'tok', tok + 1, 'tk', kn)
  -- the tokens are back at 0 after ceil((tok+1)/tr) ticks: nothing to keep
  -- then (with a change of interval pending, the longer one counts)
  local iv = liv
  if lsw ~= 0 then iv = math.max(liv, lniv) end
  local zero = next_tick + (math.ceil((tok + 1) / tr) - 1) * iv
  redis.call('PEXPIRE', KEYS[1], math.max(1, zero - now) + 1000)
  verdict = 3
else
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now - swd)
  redis.call('ZADD', KEYS[2], now, now .. ':' .. slot)
  redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[22]))
  verdict = 2
end
redis.call('ZADD', KEYS[3], now + lease, slot)
redis.call('PEXPIRE', KEYS[3], lease + 1000)
return {verdict, inflight, wc, oldest, tok, now, next_tick}
