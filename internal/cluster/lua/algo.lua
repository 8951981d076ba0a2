-- limiterd strict mode: one decision, or one manual reduction, of
-- token_bucket, gcra, fixed_window or sliding_window (docs/limiting.md) for one
-- (peer, group), atomically: the concurrency check first, then the
-- algorithm — a transcription of package limiter/algo's integer step
-- functions (algo.Decide, algo.Reduce). All keys share the (peer, group)
-- hash tag. Every product stays below 2^53 (cluster mode checks
-- burst·period and limit·period), so Lua's doubles compute exactly.
--
-- KEYS[1] a  STRING "k A B C l p u": the algorithm, the state (C is the
--            sliding window's previous count, B its current one), and the
--            limit, period and burst the state is measured in
-- KEYS[2] f  ZSET in-flight slots (as in hybrid.lua)
-- ARGV[1] now in ms, '' for Redis TIME
-- ARGV[2] op: 'd' decide, 'r' reduce
-- ARGV[3] kind (1 token_bucket, 2 gcra, 3 fixed_window, 5 sliding_window)
-- ARGV[4] limit  5 period  6 burst (resolved)  7 concurrency_limit
-- ARGV[8] slot id  9 lease ms
-- ARGV[10] '' or, once the caller rescaled a state measured in other
--          limits (algo.Rescale), the stored "A B C l p u" it read, and
--          ARGV[11] the state "A B C" to put in its place
-- Returns {verdict, inflight, A, B, C, now, l, p, u} with the state before
-- the decision (fresh when there was none): verdict 0 concurrency,
-- 1 rate_limit, 4 admitted, 5 reduced, 6 nothing to reduce, 9 the state
-- is measured in other limits (l, p, u are the stored ones): the caller
-- rescales it and calls again with ARGV[10..11].
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local op, kind = ARGV[2], tonumber(ARGV[3])
local L, P, U = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local floor, ceil, min, max = math.floor, math.ceil, math.min, math.max

local raw = redis.call('GET', KEYS[1])
local st = {}
if raw then
  local i = 1
  for w in string.gmatch(raw, '%S+') do st[i] = w; i = i + 1 end
end
local A, B, C
local fresh = tonumber(st[1]) ~= kind
if not fresh then
  A, B, C = tonumber(st[2]), tonumber(st[3]), tonumber(st[4])
  if tonumber(st[5]) ~= L or tonumber(st[6]) ~= P or tonumber(st[7]) ~= U then
    if ARGV[10] == table.concat({st[2], st[3], st[4], st[5], st[6], st[7]}, ' ') then
      local a, b, c = string.match(ARGV[11], '^(%-?%d+) (%-?%d+) (%-?%d+)$')
      A, B, C = tonumber(a), tonumber(b), tonumber(c)
    else
      return {9, 0, A, B, C, now, tonumber(st[5]), tonumber(st[6]), tonumber(st[7])}
    end
  end
elseif op == 'r' then
  return {6, 0, 0, 0, 0, now, L, P, U}   -- a reduction never creates state
else
  -- algo.Fresh: a full bucket, a TAT at now, empty windows
  if kind == 1 then A, B, C = U * P, now, 0
  elseif kind == 2 then A, B, C = now, 0, 0
  else A, B, C = 0, 0, 0 end
end

local inflight = 0
if op == 'd' then
  redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
  inflight = redis.call('ZCARD', KEYS[2])
  if inflight + 1 > tonumber(ARGV[7]) then
    return {0, inflight, A, B, C, now, L, P, U}
  end
end

local nA, nB, nC, ok, ttl = A, B, C, false, 0
if kind == 1 then
  -- token bucket: tokens in units of 1/P, refilled L units a ms, capped at U·P
  local cap = U * P
  local u, last = min(A, cap), B
  if now > last then
    if now - last >= ceil((cap - u) / L) then u = cap else u = u + (now - last) * L end
    last = now
  end
  if op == 'd' then
    ok = u >= P
    nA, nB = u - P, last
  else
    ok = u < cap
    nA, nB = min(cap, u + P), last
  end
  ttl = ceil((cap - nA) / L)                           -- full again: nothing to keep
elseif kind == 2 then
  -- GCRA: TAT = A + B/L ms; the debt tat − now in units of 1/L ms
  local t = max(now, A)
  local d = 0
  if t - A < ceil(B / L) then d = B - (t - A) * L end
  if op == 'd' then
    ok = d <= (U - 1) * P
    nA, nB = t, d + P
  else
    ok = d > 0
    nA, nB = t, max(0, d - P)
  end
  ttl = nA - now + ceil(nB / L)                        -- the TAT passed: nothing to keep
elseif kind == 3 then
  -- fixed window: A its end, B its count
  local e, n = A, B
  if op == 'd' then
    if now >= e then e, n = (floor(now / P) + 1) * P, 0 end
    ok = n + 1 <= L
    nA, nB = e, n + 1
  else
    ok = now < e and n > 0
    nA, nB = e, n - 1
  end
  ttl = nA - now
else
  -- sliding window: A the current window's end, B its count, C the
  -- previous window's
  local e, curr, prev = A, B, C
  if now >= e then
    local nxt = (floor(now / P) + 1) * P
    if nxt == e + P then prev = curr else prev = 0 end
    e, curr = nxt, 0
  end
  if op == 'd' then
    ok = (curr + 1) * P + prev * min(e - now, P) <= L * P
    nA, nB, nC = e, curr + 1, prev
  else
    ok = curr > 0
    nA, nB, nC = e, curr - 1, prev
  end
  ttl = nA + P - now                                   -- still the previous window in the next one
end
if not ok then
  if op == 'r' then return {6, 0, A, B, C, now, L, P, U} end
  return {1, inflight, A, B, C, now, L, P, U}
end
redis.call('SET', KEYS[1], string.format('%d %d %d %d %d %d %d', kind, nA, nB, nC, L, P, U), 'PX', max(1, ttl) + 1000)
if op == 'r' then return {5, 0, A, B, C, now, L, P, U} end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[9]), ARGV[8])
redis.call('PEXPIRE', KEYS[2], tonumber(ARGV[9]) + 1000)
return {4, inflight, A, B, C, now, L, P, U}
