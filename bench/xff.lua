-- wrk script: every request names one of 10 000 peers in X-Forwarded-For,
-- so that limiterd and nginx decide for many peers through a trusted proxy.
local n = 0
request = function()
  n = n + 1
  local i = n % 10000
  local ip = "11." .. math.floor(i / 256) .. "." .. (i % 256) .. ".1"
  return wrk.format("GET", "/info", { ["X-Forwarded-For"] = ip })
end
