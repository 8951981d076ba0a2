-- limiterd: compare and set one field of a hash (the groups' shared tick
-- schedules). KEYS[1] the hash; ARGV[1] field, ARGV[2] expected value ('' =
-- absent), ARGV[3] new value. Returns the value in force afterwards.
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if (cur or '') == ARGV[2] then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
  return ARGV[3]
end
return cur
