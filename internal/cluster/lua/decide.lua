-- limiterd strict mode: a batch of decisions, reductions and releases, one
-- entry after the other, each atomic (docs/cluster.md, "strict: one script
-- call per decision"). The entries are those of the calls waiting when the
-- batch was sent; on a Redis Cluster every key of one batch shares a hash
-- slot. An entry that fails (a key of the wrong type, a value no decision
-- can have written) answers its error and the others go on.
--
-- A (peer, group)'s state is one string: the generation and its fields,
-- then, per instance, its requests in flight and its lease (ms),
-- "<generation> <fields>;<instance> <n> <lease>;…" — read with one GET and one anchored match, written with one
-- SET PX (measured cheaper than hash fields, whose every argument Redis
-- converts apart). The count of an instance whose lease ended is not
-- counted, and is dropped at the next write.
--
-- ARGV[1] now in ms, '' for Redis TIME (tests inject their clock)
-- ARGV[2] instance id, ARGV[3] lease ms, ARGV[4] the number of entries,
-- then the entries, each its op, the number of arguments that follow, then
-- those arguments; its keys are taken from KEYS in order. Arguments that several entries share (a group's limits
-- and schedule) travel once: an entry's "params" is 0 followed by them (they
-- are numbered in order of appearance from 1), or the number of an earlier
-- block.
--
--  'h' hybrid decision, 'H' its manual reduction  KEYS t ("tok tk"),
--      w (ZSET window)
--      params(20): the leaky schedule (6), the cleanup schedule (6), cleanup
--      expiry, concurrency_limit, sliding_window_limit, sliding_window_duration,
--      leaky_limit, leaky_tick_reduction, ms the window key outlives an
--      admission, the generation; then rel, the releases of this instance on the key not
--      sent yet (applied first), and the slot id.
--      -> {verdict, inflight, window, oldest, tokens, now, next_tick}
--      verdict 0 concurrency, 1 rate_limit, 2 window, 3 bucket;
--      the reduction answers {1 reduced | 0 nothing to give back, now}
--  'a' decision of token_bucket (1), gcra (2), fixed_window (3) or
--      sliding_window (5), 'A' its manual reduction  KEYS s ("k A B C l p u")
--      params(6): kind, limit, period, burst, concurrency_limit, the
--      generation; then rel;
--      then 0, or 1
--      and the state "A B C l p u" the caller read and rescaled and the
--      state A B C to put in its place.
--      -> {verdict, inflight, A, B, C, now, l, p, u}: verdict 0 concurrency,
--      1 rate_limit, 4 admitted, 5 reduced, 6 nothing to reduce, 9 the state
--      is measured in other limits (l, p, u are the stored ones: the caller
--      rescales it and sends the entry again with it)
--  'l' sliding_log decision, 'L' its reduction  KEYS l (ZSET timestamps),
--      c (no fields: the counts only)
--      params(3): limit, period, concurrency_limit; then rel, the slot id.
--      -> {verdict, inflight, count, gate, now}
--  'f' forget  KEYS a state string: its fields go, the counts stay
--      -> {1 | 0 there were none}
--  'r' release  KEYS the key holding the counts; n
--      -> {the count left}
-- An entry that fails answers {-1, error}.
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local inst, lease = ARGV[2], tonumber(ARGV[3])
local ifield, efield = 'i:' .. inst, 'e:' .. inst
local floor, ceil, min, max = math.floor, math.ceil, math.min, math.max
local call = redis.call

-- A value read from Redis: an integer (>= lo when lo is given), else the
-- entry fails as corrupt and the caller repairs the key.
local function num(v, what, lo)
  local n = tonumber(v)
  if n == nil or n ~= floor(n) or n > 9007199254740992 or n < -9007199254740992 or (lo and n < lo) then
    error({err = 'CORRUPT ' .. what .. ' holds ' .. string.format('%q', tostring(v))})
  end
  return n
end

-- load reads key's state string: its fields part (head: '' when none), the
-- requests in flight of the instances whose lease holds, this instance's
-- own count less rel (releases of this instance not sent yet), and the
-- other instances' parts still under lease (to write back).
-- The fields part begins with the generation of the group's state it
-- belongs to (a change of algorithm moves it on: the fields are then
-- dropped, the counts kept); curgen is the entry's (nil: keep the fields
-- whatever their generation, as a release does).
local curgen
local function load(key, rel)
  local raw = call('GET', key)
  if not raw then return '', 0, 0, '' end
  local head, tail = string.match(raw, '^([^;]*)(.*)$')
  if curgen and head ~= '' then
    local g, rest = string.match(head, '^(%S+) (.*)$')
    num(g, 'generation', 0)
    if g == curgen then head = rest else head = '' end
  end
  local inflight, own, keep = 0, 0, {}
  for seg in string.gmatch(tail, ';([^;]*)') do
    local id, n, e = string.match(seg, '^(%S+) (%S+) (%S+)$')
    if not id then error({err = 'CORRUPT in-flight part holds ' .. string.format('%q', seg)}) end
    n, e = num(n, 'in-flight count', 0), num(e, 'lease', 0)
    if e > now then
      if id == inst then
        n = max(0, n - rel)
        own = n
      else
        keep[#keep + 1] = ';' .. seg
      end
      inflight = inflight + n
    end
  end
  return head, inflight, own, table.concat(keep)
end

-- store writes key's state: head, this instance's count n under its lease,
-- the others' parts, living ms (at least the lease and a second).
-- (ttl nil: the key keeps its expiry)
local function store(key, head, n, others, ttl)
  local mine = ''
  if n > 0 then mine = ';' .. inst .. ' ' .. n .. ' ' .. (now + lease) end
  if curgen and head ~= '' then head = curgen .. ' ' .. head end
  local v = head .. mine .. others
  if v == '' then
    call('DEL', key)
  elseif ttl then
    call('SET', key, v, 'PX', max(ttl, lease + 1000))
  else
    call('SET', key, v, 'KEEPTTL')
  end
end

-- settle writes back, on a decision that writes nothing else, the
-- releases it applied.
local function settle(key, rel, head, own, others)
  if rel > 0 then store(key, head, own, others, nil) end
end

local i = 5
local k = 1
local P = {}
local function params(n)
  local r = tonumber(ARGV[i]); i = i + 1
  if r ~= 0 then return P[r] end
  local p = {}
  for j = 1, n do p[j] = tonumber(ARGV[i + j - 1]) end
  i = i + n
  P[#P + 1] = p
  return p
end

-- the leaky schedule's index of now and its next tick
-- (limiter.Schedule.IndexAt and TimeOf)
local function leaky(p)
  local la, li, liv, lsw, lswi, lniv = p[1], p[2], p[3], p[4], p[5], p[6]
  local kn, next_tick
  if lsw ~= 0 and now >= lsw then
    kn = lswi + floor((now - lsw) / lniv)
    next_tick = lsw + (kn + 1 - lswi) * lniv
  else
    kn = li + floor((now - la) / liv)
    next_tick = la + (kn + 1 - li) * liv
    if lsw ~= 0 and kn + 1 >= lswi then next_tick = lsw + (kn + 1 - lswi) * lniv end
  end
  -- the interval the tokens leak at, the longer one with a change pending
  local iv = liv
  if lsw ~= 0 then iv = max(liv, lniv) end
  return kn, next_tick, iv
end

-- the tokens of a hybrid state's head, aged to tick kn
local function tokens(head, kn, tr)
  if head == '' then return 0 end
  local a, b = string.match(head, '^(%S+) (%S+)$')
  if not a then error({err = 'CORRUPT tokens hold ' .. string.format('%q', head)}) end
  local tok, tk = num(a, 'tok', 0), num(b, 'tk')
  if kn > tk then tok = max(0, tok - (kn - tk) * tr) end
  return tok
end

local function hybrid(p, rel, slot)
  local T, W = KEYS[k], KEYS[k + 1]; k = k + 2
  local kn, next_tick, iv = leaky(p)
  local climit, swl, swd, ll, tr = p[14], p[15], p[16], p[17], p[18]
  local head, inflight, own, others = load(T, rel)
  local tok = tokens(head, kn, tr)
  -- The window (a group without one never reads it). The cleanup tick in
  -- force drops what is older than its cut; a timestamp counts while
  -- ts + duration > now.
  local wc, oldest = 0, 0
  if swl > 0 then
    local ca, ci, civ, csw, cswi, cniv = p[7], p[8], p[9], p[10], p[11], p[12]
    local cut
    if csw ~= 0 and now >= csw then
      cut = csw + floor((now - csw) / cniv) * cniv
    else
      cut = ca + floor((now - ca) / civ) * civ
    end
    call('ZREMRANGEBYSCORE', W, '-inf', '(' .. (cut - p[13]))
    local lo = '(' .. (now - swd)
    wc = call('ZCOUNT', W, lo, '+inf')
    if wc > 0 then
      oldest = num(call('ZRANGEBYSCORE', W, lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2], 'window timestamp')
    end
  end
  if inflight + 1 > climit then
    settle(T, rel, head, own, others)
    return {0, inflight, wc, oldest, tok, now, next_tick}
  end
  local verdict, left = 2, tok
  if wc + 1 > swl then
    if tok + 1 > ll then
      settle(T, rel, head, own, others)
      return {1, inflight, wc, oldest, tok, now, next_tick}
    end
    verdict, left = 3, tok + 1
  else
    call('ZREMRANGEBYSCORE', W, '-inf', now - swd)
    call('ZADD', W, now, now .. ':' .. slot)
    call('PEXPIRE', W, p[19])
  end
  -- the tokens are back at 0 after ceil(left/tr) ticks: nothing to keep then
  local ttl, th = 0, ''
  if left > 0 then
    ttl = max(1, next_tick + (ceil(left / tr) - 1) * iv - now) + 1000
    th = left .. ' ' .. kn
  end
  store(T, th, own + 1, others, ttl)
  return {verdict, inflight, wc, oldest, tok, now, next_tick}
end

-- the manual reduction (limiter.ReduceHybrid) on a hybrid's tokens: the
-- due leaky ticks first, then one token back when any is consumed; it never
-- creates state
local function hreduce(p)
  local T = KEYS[k]; k = k + 2
  local kn, next_tick, iv = leaky(p)
  local head, _, own, others = load(T, 0)
  if head == '' then return {0, now} end
  local tok = tokens(head, kn, p[18])
  if tok <= 0 then return {0, now} end
  tok = tok - 1
  local ttl, th = 0, ''
  if tok > 0 then
    ttl = max(1, next_tick + (ceil(tok / p[18]) - 1) * iv - now) + 1000
    th = tok .. ' ' .. kn
  end
  store(T, th, own, others, ttl)
  return {1, now}
end

-- package limiter/algo's integer step functions (algo.Decide, algo.Reduce)
local function algo(op, p, rel)
  local S = KEYS[k]; k = k + 1
  local kind, L, Per, U, climit = p[1], p[2], p[3], p[4], p[5]
  local rescaled = tonumber(ARGV[i]); i = i + 1
  local ex, nw
  if rescaled == 1 then
    ex = {}
    for j = 1, 6 do ex[j] = tonumber(ARGV[i + j - 1]) end
    nw = {tonumber(ARGV[i + 6]), tonumber(ARGV[i + 7]), tonumber(ARGV[i + 8])}
    i = i + 9
  end
  local head, inflight, own, others = load(S, rel)
  local A, B, C
  local st
  if head ~= '' then
    st = {string.match(head, '^(%S+) (%S+) (%S+) (%S+) (%S+) (%S+) (%S+)$')}
    if #st ~= 7 then error({err = 'CORRUPT state holds ' .. string.format('%q', head)}) end
  end
  local fresh = st == nil or num(st[1], 'k') ~= kind
  if not fresh then
    A, B, C = num(st[2], 'A', 0), num(st[3], 'B', 0), num(st[4], 'C', 0)
    local l, pp, u = num(st[5], 'l', 1), num(st[6], 'p', 1), num(st[7], 'u', 0)
    if l ~= L or pp ~= Per or u ~= U then
      if ex and ex[1] == A and ex[2] == B and ex[3] == C and ex[4] == l and ex[5] == pp and ex[6] == u then
        A, B, C = nw[1], nw[2], nw[3]
      else
        settle(S, rel, head, own, others)
        return {9, 0, A, B, C, now, l, pp, u}
      end
    end
  elseif op == 'A' then
    return {6, 0, 0, 0, 0, now, L, Per, U}   -- a reduction never creates state
  else
    -- algo.Fresh: a full bucket, a TAT at now, empty windows
    if kind == 1 then A, B, C = U * Per, now, 0
    elseif kind == 2 then A, B, C = now, 0, 0
    else A, B, C = 0, 0, 0 end
  end
  if op == 'a' and inflight + 1 > climit then
    settle(S, rel, head, own, others)
    return {0, inflight, A, B, C, now, L, Per, U}
  end
  local nA, nB, nC, ok, ttl = A, B, C, false, 0
  if kind == 1 then
    -- token bucket: tokens in units of 1/P, refilled L units a ms, capped at U·P
    local cap = U * Per
    local u, last = min(A, cap), B
    if now > last then
      if now - last >= ceil((cap - u) / L) then u = cap else u = u + (now - last) * L end
      last = now
    end
    if op == 'a' then
      ok = u >= Per
      nA, nB = u - Per, last
    else
      ok = u < cap
      nA, nB = min(cap, u + Per), last
    end
    ttl = ceil((cap - nA) / L)                           -- full again: nothing to keep
  elseif kind == 2 then
    -- GCRA: TAT = A + B/L ms; the debt tat − now in units of 1/L ms
    local t = max(now, A)
    local d = 0
    if t - A < ceil(B / L) then d = B - (t - A) * L end
    if op == 'a' then
      ok = d <= (U - 1) * Per
      nA, nB = t, d + Per
    else
      ok = d > 0
      nA, nB = t, max(0, d - Per)
    end
    ttl = nA - now + ceil(nB / L)                        -- the TAT passed: nothing to keep
  elseif kind == 3 then
    -- fixed window: A its end, B its count
    local e, n = A, B
    if op == 'a' then
      if now >= e then e, n = (floor(now / Per) + 1) * Per, 0 end
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
      local nxt = (floor(now / Per) + 1) * Per
      if nxt == e + Per then prev = curr else prev = 0 end
      e, curr = nxt, 0
    end
    if op == 'a' then
      ok = (curr + 1) * Per + prev * min(e - now, Per) <= L * Per
      nA, nB, nC = e, curr + 1, prev
    else
      ok = curr > 0
      nA, nB, nC = e, curr - 1, prev
    end
    ttl = nA + Per - now                                 -- still the previous window in the next one
  end
  if not ok then
    settle(S, rel, head, own, others)
    if op == 'A' then return {6, 0, A, B, C, now, L, Per, U} end
    return {1, inflight, A, B, C, now, L, Per, U}
  end
  local nh = string.format('%d %d %d %d %d %d %d', kind, nA, nB, nC, L, Per, U)
  ttl = max(1, ttl) + 1000
  if op == 'A' then
    store(S, nh, own, others, ttl)
    return {5, 0, A, B, C, now, L, Per, U}
  end
  store(S, nh, own + 1, others, ttl)
  return {4, inflight, A, B, C, now, L, Per, U}
end

-- the sliding log: the timestamps of the admissions of the last period; a
-- request is admitted while fewer than limit of them count (ts > now − period)
local function slog(op, p, rel, slot)
  local Lk, Ck = KEYS[k], KEYS[k + 1]; k = k + 2
  local L, Per, climit = p[1], p[2], p[3]
  local lo = '(' .. (now - Per)
  local count = call('ZCOUNT', Lk, lo, '+inf')
  local gate = 0
  if count >= L then
    gate = num(call('ZRANGEBYSCORE', Lk, lo, '+inf', 'WITHSCORES', 'LIMIT', count - L, 1)[2], 'log timestamp')
  end
  if op == 'L' then
    if count == 0 then return {6, 0, count, gate, now} end
    local newest = call('ZREVRANGEBYSCORE', Lk, '+inf', lo, 'LIMIT', 0, 1)
    call('ZREM', Lk, newest[1])
    return {5, 0, count, gate, now}
  end
  local _, inflight, own, others = load(Ck, rel)
  if inflight + 1 > climit then
    settle(Ck, rel, '', own, others)
    return {0, inflight, count, gate, now}
  end
  if count + 1 > L then
    settle(Ck, rel, '', own, others)
    return {1, inflight, count, gate, now}
  end
  call('ZREMRANGEBYSCORE', Lk, '-inf', now - Per)
  call('ZADD', Lk, now, now .. ':' .. slot)
  call('PEXPIRE', Lk, Per + 1000)
  -- admitted: the gate is the new log's, once it holds limit timestamps
  if count + 1 >= L then
    gate = num(call('ZRANGEBYSCORE', Lk, lo, '+inf', 'WITHSCORES', 'LIMIT', count + 1 - L, 1)[2], 'log timestamp')
  end
  store(Ck, '', own + 1, others, 0)
  return {4, inflight, count, gate, now}
end

local function release(n)
  local K = KEYS[k]; k = k + 1
  local head, _, own, others = load(K, n)
  if head ~= '' or own > 0 or others ~= '' then store(K, head, own, others, nil) else call('DEL', K) end
  return {own}
end

-- forget drops key's fields (a peer forgotten), keeping the counts
local function forget()
  local K = KEYS[k]; k = k + 1
  local head, _, own, others = load(K, 0)
  if head == '' then return {0} end
  store(K, '', own, others, nil)
  return {1}
end

local nkeys = {h = 2, H = 2, a = 1, A = 1, l = 2, L = 2, r = 1, f = 1}

local function entry(op)
  curgen = nil
  if op == 'h' then
    local p = params(20)
    curgen = tostring(p[20])
    local rel, slot = tonumber(ARGV[i]), ARGV[i + 1]; i = i + 2
    return hybrid(p, rel, slot)
  elseif op == 'H' then
    local p = params(20)
    curgen = tostring(p[20])
    return hreduce(p)
  elseif op == 'a' or op == 'A' then
    local p = params(6)
    curgen = tostring(p[6])
    local rel = tonumber(ARGV[i]); i = i + 1
    return algo(op, p, rel)
  elseif op == 'l' or op == 'L' then
    local p = params(3)
    local rel, slot = tonumber(ARGV[i]), ARGV[i + 1]; i = i + 2
    return slog(op, p, rel, slot)
  elseif op == 'f' then
    return forget()
  elseif op == 'r' then
    local n = tonumber(ARGV[i]); i = i + 1
    return release(n)
  end
  error('unknown entry ' .. tostring(op))
end

local out = {}
for e = 1, tonumber(ARGV[4]) do
  local op = ARGV[i]
  local ni, nk = i + 2 + tonumber(ARGV[i + 1]), k + (nkeys[op] or 0)
  i = i + 2
  local ok, res = pcall(entry, op)
  if not ok then
    local msg = res
    if type(res) == 'table' then msg = res.err end
    res = {-1, tostring(msg)}
  end
  -- the next entry starts where this one's arguments end, whatever it read
  i, k = ni, nk
  out[e] = res
end
return out
