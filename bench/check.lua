-- wrk script: limiterd's decision endpoints, 10 000 peers (12.x.y.1, apart
-- from xff.lua's 11.x.y.1), the admin token "bench", keep-alive.
--   wrk ... -s bench/check.lua URL/api/v1/check            POST, JSON body
--   wrk ... -s bench/check.lua URL/api/v1/check/auth -- auth   GET, nginx headers
-- The 10 000 requests are formatted once per thread.
local reqs = {}
local n = 0

init = function(args)
  local auth = args[1] == "auth"
  for i = 0, 9999 do
    local ip = "12." .. math.floor(i / 256) .. "." .. (i % 256) .. ".1"
    if auth then
      reqs[i] = wrk.format("GET", nil, {
        ["Authorization"] = "Bearer bench",
        ["X-Original-Method"] = "GET",
        ["X-Original-URI"] = "/info?i=" .. i,
        ["X-Real-IP"] = ip,
      })
    else
      reqs[i] = wrk.format("POST", nil, {
        ["Authorization"] = "Bearer bench",
        ["Content-Type"] = "application/json",
      }, '{"peer":"' .. ip .. '","method":"GET","path":"/info"}')
    end
  end
end

request = function()
  n = n + 1
  return reqs[n % 10000]
end
