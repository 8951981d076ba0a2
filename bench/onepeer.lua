-- wrk script: one peer only, so that after 450 requests every answer is a 429.
request = function()
  return wrk.format("GET", "/info", { ["X-Forwarded-For"] = "203.0.113.66" })
end
