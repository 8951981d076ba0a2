-- limiterd strict mode: renew this instance's lease on the requests it
-- holds in flight on one key (docs/cluster.md, "strict: one script call per
-- decision"): the lease field of its count, when it still counts any, and
-- the key's life, only ever extended.
-- KEYS[1] the hash holding the counts (as in decide.lua)
-- ARGV[1] now in ms, '' for Redis TIME; ARGV[2] lease ms; ARGV[3] instance id
-- Returns 1 when renewed, 0 when this instance holds nothing there.
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local lease = tonumber(ARGV[2])
if redis.call('HEXISTS', KEYS[1], 'i:' .. ARGV[3]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'e:' .. ARGV[3], now + lease)
if redis.call('PTTL', KEYS[1]) < lease + 1000 then redis.call('PEXPIRE', KEYS[1], lease + 1000) end
return 1
