-- limiterd: read the shared live state and its version at once.
-- KEYS[1] ver, KEYS[2] state. Returns {version (0: none), field, value, …}.
local out = {tonumber(redis.call('GET', KEYS[1]) or '0')}
local all = redis.call('HGETALL', KEYS[2])
for i = 1, #all do out[#out + 1] = all[i] end
return out
