-- limiterd strict mode: renew this instance's in-flight slots on one key.
-- XX: a released slot is never brought back; GT: a lease is never shortened.
-- KEYS[1] f (as in hybrid.lua)
-- ARGV[1] now in ms, '' for Redis TIME; ARGV[2] lease ms; ARGV[3..] slot ids
-- Returns the number of slots renewed.
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local lease = tonumber(ARGV[2])
local args = {}
for i = 3, #ARGV do
  args[#args + 1] = now + lease
  args[#args + 1] = ARGV[i]
end
if #args == 0 then return 0 end
local n = redis.call('ZADD', KEYS[1], 'XX', 'GT', 'CH', unpack(args))
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('PEXPIRE', KEYS[1], lease + 1000) end
return n
