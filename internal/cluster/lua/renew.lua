-- limiterd strict mode: renew this instance's lease on the requests it
-- holds in flight on one key (docs/cluster.md, "strict: one script call per
-- decision"): the lease of its part of the state string (as in decide.lua),
-- when it still counts any there, and the key's life, only ever extended.
-- KEYS[1] the key holding the counts
-- ARGV[1] now in ms, '' for Redis TIME; ARGV[2] lease ms; ARGV[3] instance id
-- Returns 1 when renewed, 0 when this instance holds nothing there.
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local lease, inst = tonumber(ARGV[2]), ARGV[3]
local raw = redis.call('GET', KEYS[1])
if not raw then return 0 end
local head, tail = string.match(raw, '^([^;]*)(.*)$')
local out, found = {head}, 0
for seg in string.gmatch(tail, ';([^;]*)') do
  local id, n = string.match(seg, '^(%S+) (%S+) ')
  if id == inst then
    local c = tonumber(n)
    if c == nil or c ~= math.floor(c) or c < 0 or c > 9007199254740992 then
      return redis.error_reply('CORRUPT in-flight count holds ' .. string.format('%q', tostring(n)))
    end
    seg = id .. ' ' .. n .. ' ' .. (now + lease)
    found = 1
  end
  out[#out + 1] = seg
end
if found == 0 then return 0 end
local keep = math.max(redis.call('PTTL', KEYS[1]), lease + 1000)
redis.call('SET', KEYS[1], table.concat(out, ';'), 'PX', keep)
return 1
