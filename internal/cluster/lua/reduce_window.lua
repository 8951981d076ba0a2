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
if #redis.call('ZPOPMIN', KEYS[1]) == 0 then
  return {0, now}
end
return {1, now}
