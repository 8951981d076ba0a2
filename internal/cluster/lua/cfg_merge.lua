-- limiterd: merge live edits into the shared live state (docs/cluster.md,
-- "Live edits"): each field's record is "<stamp> <s|d><value>" (set, or
-- deleted: a tombstone), and a record replaces the stored one only when
-- its stamp is greater (last writer wins, by stamp; stamps are fixed-width,
-- so they compare as strings). When anything changed, the version is
-- bumped and announced on the channel.
-- KEYS[1] ver, KEYS[2] state (both under the {cfg} tag)
-- ARGV[1] channel, ARGV[2] origin instance, then field/record pairs.
-- Returns {the version, the number of records taken}.
local function stamp(rec)
  local i = string.find(rec, ' ', 1, true)
  if not i then return '' end
  return string.sub(rec, 1, i - 1)
end
local taken = 0
for i = 3, #ARGV, 2 do
  local cur = redis.call('HGET', KEYS[2], ARGV[i])
  if not cur or stamp(cur) < stamp(ARGV[i + 1]) then
    redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1])
    taken = taken + 1
  end
end
local v = tonumber(redis.call('GET', KEYS[1]) or '0')
if taken > 0 then
  v = redis.call('INCR', KEYS[1])
  redis.call('PUBLISH', ARGV[1], v .. ' ' .. ARGV[2])
end
return {v, taken}
