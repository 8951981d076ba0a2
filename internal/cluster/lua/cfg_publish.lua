-- limiterd: publish one live edit to the other instances (docs/cluster.md). The
-- edit's fields are written into the shared live state, its version is
-- bumped, and the version goes out on the channel; an instance that misses
-- the message sees the version move on its next poll.
-- KEYS[1] ver, KEYS[2] state (both under the {cfg} tag)
-- ARGV[1] channel, ARGV[2] origin instance, ARGV[3] n, then n field/value
-- pairs to set, then the fields to delete.
-- Returns the new version.
local v = redis.call('INCR', KEYS[1])
local n = tonumber(ARGV[3])
local i = 4
for _ = 1, n do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i <= #ARGV do
  redis.call('HDEL', KEYS[2], ARGV[i])
  i = i + 1
end
redis.call('PUBLISH', ARGV[1], v .. ' ' .. ARGV[2])
return v
