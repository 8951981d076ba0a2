-- limiterd local_first: merge one instance's unpushed hybrid admissions for one
-- (peer, group) into the shared state and read the state back, in one call
-- (docs/cluster.md). Tokens are replayed tick by tick, so a tick that fell
-- between an admission and its push still leaks it; window timestamps keep the
-- time they were admitted at; in-flight is a count per instance, written whole
-- (so a lost push heals at the next), under the instance's lease.
--
-- KEYS[1] h  HASH tok, tk (as in hybrid.lua)
-- KEYS[2] w  ZSET window timestamps (member "<ms>:<instance>:<batch>:<j>")
-- KEYS[3] c  HASH <instance> = its requests in flight, <instance>:e = lease expiry ms
-- ARGV[1] now in ms, '' for Redis TIME
-- ARGV[2..7] leaky schedule, ARGV[8..13] cleanup schedule (as in hybrid.lua)
-- ARGV[14] cleanup expiry 15 sliding_window_limit 16 sliding_window_duration
-- ARGV[17] leaky_limit 18 leaky_tick_reduction 19 instance id 20 batch id
-- ARGV[21] this instance's requests in flight 22 lease ms
-- ARGV[23] horizon ms: the window timestamps expiring within it are returned
-- ARGV[24] g, then g pairs (tick index, tokens consumed at it), ascending
-- then m, then m window timestamps (ms)
-- Returns {now, others_inflight, window, oldest, tokens, tick index, next_tick,
--          limited_until (0: not rate-limited), n, n timestamps expiring soon}
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
local function idx(s, t)
  if s[4] ~= 0 and t >= s[4] then return s[5] + math.floor((t - s[4]) / s[6]) end
  return s[2] + math.floor((t - s[1]) / s[3])
end
local function tof(s, k)
  if s[4] ~= 0 and k >= s[5] then return s[4] + (k - s[5]) * s[6] end
  return s[1] + (k - s[2]) * s[3]
end
-- A value read from Redis: an integer (>= lo when lo is given) of at most
-- 2^53, else the call fails as corrupt (CORRUPT: the caller repairs the
-- keys; a count read as 0 would admit the peer afresh).
local function num(v, what, lo)
  local n = tonumber(v)
  if n == nil or n ~= math.floor(n) or math.abs(n) > 9007199254740992 or (lo and n < lo) then
    return error({err = 'CORRUPT ' .. what .. ' holds ' .. string.format('%q', tostring(v))})
  end
  return n
end
local L, C = sched(2), sched(8)
local expiry, swl, swd = tonumber(ARGV[14]), tonumber(ARGV[15]), tonumber(ARGV[16])
local ll, tr = tonumber(ARGV[17]), tonumber(ARGV[18])
local inst, batch = ARGV[19], ARGV[20]
local own, lease, horizon = tonumber(ARGV[21]), tonumber(ARGV[22]), tonumber(ARGV[23])
local i = 24

-- Tokens: replay the pushed consumption in tick order, then age to now.
local st = redis.call('HMGET', KEYS[1], 'tok', 'tk')
local tok, cur = 0, nil
if st[1] or st[2] then
  tok, cur = num(st[1], 'tok', 0), num(st[2], 'tk')
end
local g = tonumber(ARGV[i]); i = i + 1
local pushed = g > 0
for _ = 1, g do
  local k, n = tonumber(ARGV[i]), tonumber(ARGV[i + 1]); i = i + 2
  if cur and k > cur then tok = math.max(0, tok - (k - cur) * tr) end
  if not cur or k > cur then cur = k end
  tok = tok + n
end
local kn = idx(L, now)
if cur and kn > cur then tok = math.max(0, tok - (kn - cur) * tr) end
if pushed or (cur and kn > cur) then
  if tok > 0 then
    redis.call('HSET', KEYS[1], 'tok', tok, 'tk', kn)
    redis.call('PEXPIRE', KEYS[1], math.max(1, tof(L, kn + math.ceil(tok / tr)) - now) + 1000)
  else
    redis.call('DEL', KEYS[1])
  end
end

-- Window.
local m = tonumber(ARGV[i]); i = i + 1
for j = 1, m do
  local ts = tonumber(ARGV[i]); i = i + 1
  if ts + swd > now then redis.call('ZADD', KEYS[2], ts, ts .. ':' .. inst .. ':' .. batch .. ':' .. j) end
end
local cut = math.max(now - swd + 1, tof(C, idx(C, now)) - expiry)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', '(' .. cut)
local wc = redis.call('ZCARD', KEYS[2])
if m > 0 and wc > 0 then redis.call('PEXPIRE', KEYS[2], swd + 1000) end
local oldest, soon = 0, {}
if wc > 0 then
  local r = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  oldest = num(r[2], 'window timestamp')
  local r2 = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now - swd + horizon, 'WITHSCORES')
  for a = 2, #r2, 2 do soon[#soon + 1] = num(r2[a], 'window timestamp') end
end

-- In flight: this instance's count, whole; the others' whose lease holds.
if own > 0 then
  redis.call('HSET', KEYS[3], inst, own, inst .. ':e', now + lease)
  redis.call('PEXPIRE', KEYS[3], lease + 1000)
else
  redis.call('HDEL', KEYS[3], inst, inst .. ':e')
end
local others = 0
local all = redis.call('HGETALL', KEYS[3])
local h = {}
for a = 1, #all, 2 do h[all[a]] = all[a + 1] end
for f, v in pairs(h) do
  if string.sub(f, -2) ~= ':e' and f ~= inst then
    local n = num(v, 'in-flight count', 0)
    local e = h[f .. ':e']
    if e then e = num(e, 'lease') else e = 0 end
    if e > now then others = others + n
    else redis.call('HDEL', KEYS[3], f, f .. ':e') end
  end
end

-- limitedUntil: while the window is full and the bucket empty, nothing is
-- admitted, whoever asks (concurrency is not cached: it changes on release).
local next_tick = tof(L, kn + 1)
local until_ms = 0
if wc + 1 > swl and tok + 1 > ll then
  local t = math.huge
  if ll > 0 then t = tof(L, kn + math.ceil((tok + 1 - ll) / tr)) end
  if swl > 0 then
    local r = redis.call('ZRANGE', KEYS[2], wc - swl, wc - swl, 'WITHSCORES')
    t = math.min(t, num(r[2], 'window timestamp') + swd)
  end
  if t == math.huge then t = next_tick end
  until_ms = t
end
local out = {now, others, wc, oldest, tok, kn, next_tick, until_ms, #soon}
for _, ts in ipairs(soon) do out[#out + 1] = ts end
return out
