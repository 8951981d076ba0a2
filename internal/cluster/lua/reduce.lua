-- limiterd strict mode: the manual reduction (docs/limiting.md, "Reduce";
-- algo.Reduce of the hybrid) on the hybrid's tokens: the due leaky ticks first, then
-- one token back when any is consumed. It never creates state.
-- KEYS[1] h (as in hybrid.lua)
-- ARGV[1] now in ms, '' for Redis TIME; ARGV[2..7] the leaky schedule; ARGV[8] leaky_tick_reduction
-- Returns {1 reduced | 0 nothing to give back, now}
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local L = {tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]),
           tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])}
local tr = tonumber(ARGV[8])
local function idx(s, t)
  if s[4] ~= 0 and t >= s[4] then return s[5] + math.floor((t - s[4]) / s[6]) end
  return s[2] + math.floor((t - s[1]) / s[3])
end
local function tof(s, k)
  if s[4] ~= 0 and k >= s[5] then return s[4] + (k - s[5]) * s[6] end
  return s[1] + (k - s[2]) * s[3]
end
local st = redis.call('HMGET', KEYS[1], 'tok', 'tk')
if not st[1] and not st[2] then return {0, now} end
local tok, tk = tonumber(st[1]), tonumber(st[2])
if not tok or tok < 0 or tok ~= math.floor(tok) or tok > 9007199254740992 or
   not tk or tk ~= math.floor(tk) or math.abs(tk) > 9007199254740992 then
  return redis.error_reply('CORRUPT tok, tk hold ' .. string.format('%q %q', tostring(st[1]), tostring(st[2])))
end
local kn = idx(L, now)
if tk and kn > tk then tok = math.max(0, tok - (kn - tk) * tr) end
if tok <= 0 then return {0, now} end
tok = tok - 1
-- (the hash may hold the requests in flight too, in strict mode: only the
-- tokens go, and its life is only ever extended)
if tok == 0 then
  redis.call('HDEL', KEYS[1], 'tok', 'tk')
else
  redis.call('HSET', KEYS[1], 'tok', tok, 'tk', kn)
  local keep = math.max(1, tof(L, kn + math.ceil(tok / tr)) - now) + 1000
  if redis.call('PTTL', KEYS[1]) < keep then redis.call('PEXPIRE', KEYS[1], keep) end
end
return {1, now}
