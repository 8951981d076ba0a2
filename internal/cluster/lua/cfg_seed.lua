-- limiterd: give an empty Redis (a new one, or one restarted without its
-- data) the live state of the first instance that finds it empty.
-- KEYS[1] ver, KEYS[2] state; ARGV[1] channel, ARGV[2] origin, then
-- field/value pairs.
-- Returns {1 seeded | 0 someone was first, version}.
if redis.call('EXISTS', KEYS[1]) == 1 then
  return {0, tonumber(redis.call('GET', KEYS[1]))}
end
redis.call('DEL', KEYS[2])
for i = 3, #ARGV, 2 do
  redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
end
redis.call('SET', KEYS[1], 1)
redis.call('PUBLISH', ARGV[1], '1 ' .. ARGV[2])
return {1, 1}
