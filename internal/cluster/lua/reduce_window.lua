-- limiterd strict and local_first: the Arweave 2.9.7 manual reduction of a
-- hybrid group without a bucket (leaky_limit 0; the local backend's
-- reduceOldest): the cleanup tick in force first (as in hybrid.lua), then
-- the oldest window timestamp held goes, expired or not. It never creates
-- state.
-- KEYS[1] w (as in hybrid.lua)
-- ARGV[1] now in ms, '' for Redis TIME; ARGV[2..7] the cleanup schedule;
-- ARGV[8] cleanup age (limiter.Group.CleanupAge)
-- Returns {1 reduced | 0 nothing held, now}
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local floor = math.floor
local ca, ci, civ = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local csw, cswi, cniv = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local cut
if csw ~= 0 and now >= csw then
  cut = csw + floor((now - csw) / cniv) * cniv
else
  cut = ca + floor((now - ca) / civ) * civ
end
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', '(' .. (cut - tonumber(ARGV[8])))
-- the oldest is read before it goes: a score no admission can have
-- written (not an integer ms) is corruption, the caller repairs the key
local r = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if #r == 0 then
  return {0, now}
end
local ts = tonumber(r[2])
if ts == nil or ts ~= math.floor(ts) or math.abs(ts) > 9007199254740992 then
  return redis.error_reply('CORRUPT window timestamp holds ' .. string.format('%q', tostring(r[2])))
end
redis.call('ZREM', KEYS[1], r[1])
return {1, now}
