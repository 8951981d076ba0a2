-- wrk script: POST /api/v1/throttle/observe, the replies of 1 000 peers
-- ("203.0.x.y:1984") for 4 paths, each with the four ratelimit-* fields of
-- a 2.9.7 node (remaining counting down), the admin token "bench",
-- keep-alive. The bodies are formatted once per thread.
local reqs = {}
local n = 0
local paths = {"/info", "/chunk/123", "/data_sync_record", "/block/hash/abc"}
local groups = {"general", "chunk", "data_sync_record", "general"}

init = function(args)
  for i = 0, 3999 do
    local p = i % 1000
    local k = math.floor(i / 1000) + 1
    local peer = "203.0." .. math.floor(p / 256) .. "." .. (p % 256) .. ":1984"
    local body = '{"peer":"' .. peer .. '","path":"' .. paths[k] .. '","status":200,"headers":{' ..
      '"ratelimit-limit":"453, 453;policy=\\"' .. groups[k] .. ' usage\\", 150;policy=\\"' .. groups[k] .. ' concurrency\\" ",' ..
      '"ratelimit-remaining":"' .. (i % 450) .. '","ratelimit-reset":"1","ratelimit-reset-amount":"450"}}'
    reqs[i] = wrk.format("POST", nil, {
      ["Authorization"] = "Bearer bench",
      ["Content-Type"] = "application/json",
    }, body)
  end
end

request = function()
  n = n + 1
  return reqs[n % 4000]
end
