-- limiterd strict mode: a batch of decisions, reductions and releases, one
-- entry after the other, each atomic (docs/cluster.md, "strict: one script
-- call per decision"). The entries are those of the calls waiting when the
-- batch was sent; on a Redis Cluster every key of one batch shares a hash
-- slot. An entry that fails (a key of the wrong type, a value no decision
-- can have written) answers its error and the others go on.
--
-- A (peer, group)'s state is one string, packed (lua struct's little-endian
-- doubles): a byte nf, the key's expiry (ms), then nf fields — the
-- generation first —, then, per instance, a byte len, its id (len bytes),
-- its requests in flight and its lease (ms), two doubles. It is read with
-- one GET and struct.unpack, no string parsing, and written with one SET
-- (decision 220): with KEEPTTL while the expiry it holds is as late as the
-- write needs, else with PX for what it needs and a second more. The count
-- of an instance whose lease ended is not counted, and is dropped at the
-- next write.
--
-- ARGV[1] now in ms, '' for Redis TIME (tests inject their clock)
-- ARGV[2] instance id, ARGV[3] lease ms, ARGV[4] the number of entries,
-- then the entries, one argument each (decision 237): its op (a byte),
-- its params byte (below), then its numbers packed as little-endian doubles (struct's '<d', read
-- with one struct.unpack rather than a tonumber each), then, for 'h' and
-- 'l', the member its admission adds to the window (the bytes left); its
-- keys are taken from KEYS in order. Arguments that several entries share
-- (a group's limits and schedule) travel once: an entry's "params" is a
-- byte 0 followed by them (they are numbered in order of appearance from
-- 1), or the byte number of an earlier block.
--
--  'h' hybrid decision, 'H' its manual reduction  KEYS t (fields: tok, tk),
--      w (ZSET window)
--      params(20): the leaky schedule (6), the cleanup schedule (6), cleanup
--      expiry, concurrency_limit, sliding_window_limit, sliding_window_duration,
--      leaky_limit, leaky_tick_reduction, ms the window key outlives an
--      admission, the generation; then rel, the releases of this instance on the key not
--      sent yet (applied first), and the slot id (the member).
--      -> {verdict, inflight, window, oldest, tokens, now, next_tick}
--      verdict 0 concurrency, 1 rate_limit, 2 window, 3 bucket;
--      the reduction answers {1 reduced | 0 nothing to give back, now}
--  'a' decision of token_bucket (1), gcra (2), fixed_window (3) or
--      sliding_window (5), 'A' its manual reduction  KEYS s (fields: k A B C l p u)
--      params(6): kind, limit, period, burst, concurrency_limit, the
--      generation; then rel;
--      then 0, or 1
--      and the state "A B C l p u" the caller read and rescaled and the
--      state A B C to put in its place (nine numbers).
--      -> {verdict, inflight, A, B, C, now}: verdict 0 concurrency,
--      1 rate_limit, 4 admitted, 5 reduced, 6 nothing to reduce; or
--      {9, 0, A, B, C, now, l, p, u}: the state is measured in other limits
--      (l, p, u, the stored ones: the caller rescales it and sends the entry
--      again with it)
--  'l' sliding_log decision, 'L' its reduction  KEYS l (ZSET timestamps),
--      c (no fields: the counts only)
--      params(3): limit, period, concurrency_limit; then rel, the slot id
--      (the member).
--      -> {verdict, inflight, count, gate, now}
--  'f' forget  KEYS a state string: its fields go, the counts stay
--      -> {1 | 0 there were none}
--  'r' release  KEYS the key holding the counts; params: none; n
--      -> {the count left}
--  'n' renew this instance's lease on its count in KEYS (the key's life
--      only ever extended)  -> {1 | 0 this instance holds nothing there}
-- ('f', 'r' and 'n' have no params byte.) An entry that fails answers
-- {-1, error}.
local now
if ARGV[1] ~= '' then
  now = tonumber(ARGV[1])
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local inst, lease = ARGV[2], tonumber(ARGV[3])
local floor, ceil, min, max = math.floor, math.ceil, math.min, math.max
local byte, sub, char = string.byte, string.sub, string.char
-- the ops, as the byte an entry starts with
local OPh, OPH, OPa, OPA, OPl, OPL, OPf, OPr, OPn = byte('hHaAlLfrn', 1, 9)
local call = redis.call

-- struct.pack and struct.unpack with the formats used here ('<' then 'B'
-- and 'd'); where the struct library is missing (an in-process Redis of
-- tests), the same bytes in plain Lua.
local pack, unpack
local lib = rawget(_G, 'struct')
if lib then
  pack, unpack = lib.pack, lib.unpack
else
  local frexp, ldexp = math.frexp, math.ldexp
  local function dbl(x)
    local sign = 0
    if x < 0 or (x == 0 and 1 / x < 0) then sign, x = 128, -x end
    local e, m = 0, 0
    if x == math.huge then e = 2047
    elseif x ~= x then e, m = 2047, 1
    elseif x ~= 0 then
      local f, ex = frexp(x)
      e = ex + 1022
      if e <= 0 then m, e = ldexp(f, ex + 1074), 0 else m = (f * 2 - 1) * 4503599627370496 end
    end
    local b = {}
    for j = 1, 6 do local r = m % 256; b[j] = r; m = (m - r) / 256 end
    b[7] = (e % 16) * 16 + m
    b[8] = sign + floor(e / 16)
    return char(b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8])
  end
  local function undbl(s, p)
    local b1, b2, b3, b4, b5, b6, b7, b8 = byte(s, p, p + 7)
    local e = (b8 % 128) * 16 + floor(b7 / 16)
    local m = ((((((b7 % 16) * 256 + b6) * 256 + b5) * 256 + b4) * 256 + b3) * 256 + b2) * 256 + b1
    local v
    if e == 2047 then
      if m == 0 then v = math.huge else v = 0 / 0 end
    elseif e == 0 then v = ldexp(m, -1074)
    else v = ldexp(m + 4503599627370496, e - 1075) end
    if b8 >= 128 then v = -v end
    return v
  end
  -- ('c0': a string as it is, whole)
  pack = function(fmt, ...)
    local out, a = {}, 0
    for j = 2, #fmt do
      local c = sub(fmt, j, j)
      if c ~= '0' then
        a = a + 1
        local v = select(a, ...)
        if c == 'B' then out[a] = char(v) elseif c == 'c' then out[a] = v else out[a] = dbl(v) end
      end
    end
    return table.concat(out)
  end
  unpack = function(fmt, s, p)
    p = p or 1
    local out = {}
    for j = 2, #fmt do
      if sub(fmt, j, j) == 'B' then
        out[j - 1] = byte(s, p); p = p + 1
      else
        out[j - 1] = undbl(s, p); p = p + 8
      end
    end
    out[#fmt] = p
    return _G.unpack(out, 1, #fmt)
  end
end

-- A value read from Redis is an integer within ±2^53 (at least lo): else
-- the entry fails as corrupt and the caller repairs the key. (NaN fails
-- every comparison, infinities the bound.) On the paths every decision
-- takes the test is written out rather than called: a Lua call costs more
-- than the test.
local M = 9007199254740992
local function int(v, lo) return v >= lo and v <= M and v % 1 == 0 end
local function corrupt(what, v)
  error({err = 'CORRUPT ' .. what .. ' holds ' .. string.format('%q', tostring(v))})
end

-- this instance's part of a state string before its two doubles
if #inst > 255 then error('instance id over 255 bytes') end
local mine = char(#inst) .. inst

-- load reads key's state string (and its expiry, into curexp): the raw
-- string (nil when none), the number of its fields that count (0: none, or
-- of another generation), the
-- requests in flight of the instances whose lease holds, this instance's
-- own count less rel (releases of this instance not sent yet), and the
-- other instances' parts still under lease (to write back).
-- The fields begin with the generation of the group's state they belong to
-- (a change of algorithm moves it on: the fields are then dropped, the
-- counts kept); curgen is the entry's (nil: keep the fields whatever their
-- generation, as a release does).
local curgen, curexp
local function load(key, rel)
  local raw = call('GET', key)
  curexp = 0
  if not raw then return nil, 0, 0, 0, '' end
  local len, nf = #raw, byte(raw, 1)
  if not nf or nf > 8 or 9 + 8 * nf > len then corrupt('state of ' .. len .. ' bytes', raw) end
  local exp, g = unpack('<dd', raw, 2)
  if not (exp >= 0 and exp <= M and exp % 1 == 0) then corrupt('expiry', exp) end
  curexp = exp
  local f = nf
  if curgen and nf > 0 then
    if not (g >= 0 and g <= M and g % 1 == 0) then corrupt('generation', g) end
    if g ~= curgen then f = 0 end
  end
  local inflight, own, others = 0, 0, ''
  local p = 10 + 8 * nf
  while p <= len do
    local q = p + byte(raw, p) + 17
    if q - 1 > len then corrupt('in-flight part', sub(raw, p)) end
    local n, e = unpack('<dd', raw, q - 16)
    if not (n >= 0 and n <= M and n % 1 == 0) then corrupt('in-flight count', n) end
    if not (e >= 0 and e <= M and e % 1 == 0) then corrupt('lease', e) end
    if e > now then
      if sub(raw, p, q - 17) == mine then
        n = max(0, n - rel)
        own = n
      else
        others = others .. sub(raw, p, q - 1)
      end
      inflight = inflight + n
    end
    p = q
  end
  return raw, f, inflight, own, others
end

-- head returns the f fields of raw (packed) as load found them.
local function head(raw, f)
  if f == 0 then return '' end
  return sub(raw, 10, 9 + 8 * f)
end

-- store writes key's state: its f fields h (packed; f 0, h '': none), this
-- instance's count n under its lease, the others' parts, living ms at
-- least (and at least the lease and a second; nil: the expiry it has,
-- curexp, as load read it). The expiry is only ever moved later, and then
-- a second further than needed, so that most writes keep it (SET … PX
-- costs Redis more than twice SET … KEEPTTL).
local function store(key, f, h, n, others, ttl)
  local body = others
  if n > 0 then body = mine .. pack('<dd', n, now + lease) .. others end
  if f == 0 and body == '' then
    call('DEL', key)
    return
  end
  local exp = curexp
  if ttl then
    local want = now + max(ttl, lease + 1000)
    if want > exp then
      exp = want + 1000
      call('SET', key, pack('<Bd', f, exp) .. h .. body, 'PX', exp - now)
      return
    end
  end
  call('SET', key, pack('<Bd', f, exp) .. h .. body, 'KEEPTTL')
end

-- put is store for an admission: ... are the nf fields (0, 3 or 8),
-- then mine, this instance's count and its lease, packed with the header
-- in one struct.pack, and the other instances' parts after them (decision
-- 237: one pack and at most one concatenation where store makes three
-- and two).
local HF = {[0] = '<Bdc0dd', [3] = '<Bd' .. string.rep('d', 3) .. 'c0dd', [8] = '<Bd' .. string.rep('d', 8) .. 'c0dd'}
local function put(key, others, ttl, nf, ...)
  local exp = curexp
  local want = now + max(ttl, lease + 1000)
  if want > exp then exp = want + 1000 end
  local v = pack(HF[nf], nf, exp, ...)
  if others ~= '' then v = v .. others end
  if exp ~= curexp then
    call('SET', key, v, 'PX', exp - now)
  else
    call('SET', key, v, 'KEEPTTL')
  end
end

-- settle writes back, on a decision that writes nothing else, the
-- releases it applied.
local function settle(key, rel, raw, f, own, others)
  if rel > 0 then store(key, f, head(raw, f), own, others, nil) end
end

local k = 1
local P = {}
local PF = {[3] = '<ddd', [6] = '<dddddd', [20] = '<' .. string.rep('d', 20)}
-- params returns the n shared params of entry a (a block of its own, or
-- one an earlier entry brought) and where a's own numbers begin.
local function params(a, n)
  local r = byte(a, 2)
  if r ~= 0 then
    local p = P[r]
    if not p or p.n ~= n then error('params block ' .. tostring(r) .. ' of ' .. n .. ' numbers not sent') end
    return p, 3
  end
  local p = {unpack(PF[n], a, 3)}
  local pos = p[n + 1]
  p[n + 1] = nil
  p.n = n
  P[#P + 1] = p
  return p, pos
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

-- the tokens of a hybrid state's fields (generation, tok, tk), aged to
-- tick kn
local function tokens(raw, f, kn, tr)
  if f == 0 then return 0 end
  if f ~= 3 then corrupt('tokens of ' .. f .. ' fields', raw) end
  local tok, tk = unpack('<dd', raw, 18)
  if not (tok >= 0 and tok <= M and tok % 1 == 0) then corrupt('tok', tok) end
  if not (tk >= -M and tk <= M and tk % 1 == 0) then corrupt('tk', tk) end
  if kn > tk then tok = max(0, tok - (kn - tk) * tr) end
  return tok
end

local function hybrid(p, rel, slot)
  local T, W = KEYS[k], KEYS[k + 1]; k = k + 2
  local kn, next_tick, iv = leaky(p)
  local climit, swl, swd, ll, tr = p[14], p[15], p[16], p[17], p[18]
  local raw, f, inflight, own, others = load(T, rel)
  local tok = tokens(raw, f, kn, tr)
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
      local v = call('ZRANGEBYSCORE', W, lo, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)[2]
      oldest = tonumber(v)
      if oldest == nil or not int(oldest, -M) then corrupt('window timestamp', v) end
    end
  end
  if inflight + 1 > climit then
    settle(T, rel, raw, f, own, others)
    return {0, inflight, wc, oldest, tok, now, next_tick}
  end
  local verdict, left = 2, tok
  if wc + 1 > swl then
    if tok + 1 > ll then
      settle(T, rel, raw, f, own, others)
      return {1, inflight, wc, oldest, tok, now, next_tick}
    end
    verdict, left = 3, tok + 1
  else
    call('ZREMRANGEBYSCORE', W, '-inf', now - swd)
    call('ZADD', W, now, now .. ':' .. slot)
    call('PEXPIRE', W, p[19])
  end
  -- the tokens are back at 0 after ceil(left/tr) ticks: nothing to keep then
  if left > 0 then
    put(T, others, max(1, next_tick + (ceil(left / tr) - 1) * iv - now) + 1000, 3, curgen, left, kn, mine, own + 1, now + lease)
  else
    put(T, others, 0, 0, mine, own + 1, now + lease)
  end
  return {verdict, inflight, wc, oldest, tok, now, next_tick}
end

-- package limiter/algo's integer step functions (algo.Decide, algo.Reduce)
local function algo(op, p, rel, ex, nw)
  local S = KEYS[k]; k = k + 1
  local kind, L, Per, U, climit = p[1], p[2], p[3], p[4], p[5]
  local raw, f, inflight, own, others = load(S, rel)
  local A, B, C
  local fresh = true
  local sk, l, pp, u
  if f ~= 0 then
    if f ~= 8 then corrupt('state of ' .. f .. ' fields', raw) end
    sk, A, B, C, l, pp, u = unpack('<ddddddd', raw, 18)
    if not (sk >= -M and sk <= M and sk % 1 == 0) then corrupt('k', sk) end
    fresh = sk ~= kind
  end
  if not fresh then
    if not (A >= 0 and A <= M and A % 1 == 0 and B >= 0 and B <= M and B % 1 == 0 and C >= 0 and C <= M and C % 1 == 0
        and l >= 1 and l <= M and l % 1 == 0 and pp >= 1 and pp <= M and pp % 1 == 0 and u >= 0 and u <= M and u % 1 == 0) then
      if not int(A, 0) then corrupt('A', A) end
      if not int(B, 0) then corrupt('B', B) end
      if not int(C, 0) then corrupt('C', C) end
      if not int(l, 1) then corrupt('l', l) end
      if not int(pp, 1) then corrupt('p', pp) end
      corrupt('u', u)
    end
    if l ~= L or pp ~= Per or u ~= U then
      if ex and ex[1] == A and ex[2] == B and ex[3] == C and ex[4] == l and ex[5] == pp and ex[6] == u then
        A, B, C = nw[1], nw[2], nw[3]
      else
        settle(S, rel, raw, f, own, others)
        return {9, 0, A, B, C, now, l, pp, u}
      end
    end
  elseif op == OPA then
    return {6, 0, 0, 0, 0, now}   -- a reduction never creates state
  else
    -- algo.Fresh: a full bucket, a TAT at now, empty windows
    if kind == 1 then A, B, C = U * Per, now, 0
    elseif kind == 2 then A, B, C = now, 0, 0
    else A, B, C = 0, 0, 0 end
  end
  if op == OPa and inflight + 1 > climit then
    settle(S, rel, raw, f, own, others)
    return {0, inflight, A, B, C, now}
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
    if op == OPa then
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
    if op == OPa then
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
    if op == OPa then
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
    if op == OPa then
      ok = (curr + 1) * Per + prev * min(e - now, Per) <= L * Per
      nA, nB, nC = e, curr + 1, prev
    else
      ok = curr > 0
      nA, nB, nC = e, curr - 1, prev
    end
    ttl = nA + Per - now                                 -- still the previous window in the next one
  end
  if not ok then
    settle(S, rel, raw, f, own, others)
    if op == OPA then return {6, 0, A, B, C, now} end
    return {1, inflight, A, B, C, now}
  end
  ttl = max(1, ttl) + 1000
  if op == OPA then
    store(S, 8, pack('<dddddddd', curgen, kind, nA, nB, nC, L, Per, U), own, others, ttl)
    return {5, 0, A, B, C, now}
  end
  put(S, others, ttl, 8, curgen, kind, nA, nB, nC, L, Per, U, mine, own + 1, now + lease)
  return {4, inflight, A, B, C, now}
end

-- The entries of the request path are decisions ('h', 'a'); the other
-- ops' functions are made only for a batch that has one of them: every
-- function of the script is made again at each call, and each costs Redis
-- about as much as a decision's arithmetic (decision 237).
local n = tonumber(ARGV[4])
local hreduce, slog, release, forget, renew
local rare = false
for e = 1, n do
  local o = byte(ARGV[4 + e] or '', 1)
  if o ~= OPh and o ~= OPa then rare = true break end
end
if rare then
  -- the manual reduction (algo.Reduce of the hybrid) on a hybrid's tokens: the
  -- due leaky ticks first, then one token back when any is consumed; it never
  -- creates state
  function hreduce(p)
    local T = KEYS[k]; k = k + 2
    local kn, next_tick, iv = leaky(p)
    local raw, f, _, own, others = load(T, 0)
    if f == 0 then return {0, now} end
    local tok = tokens(raw, f, kn, p[18])
    if tok <= 0 then return {0, now} end
    tok = tok - 1
    local ttl, nf, h = 0, 0, ''
    if tok > 0 then
      ttl = max(1, next_tick + (ceil(tok / p[18]) - 1) * iv - now) + 1000
      nf, h = 3, pack('<ddd', curgen, tok, kn)
    end
    store(T, nf, h, own, others, ttl)
    return {1, now}
  end

  -- a timestamp ZRANGEBYSCORE … WITHSCORES answered
  local function stamp(v, what)
    local n = tonumber(v)
    if n == nil or not int(n, -M) then corrupt(what, v) end
    return n
  end

  -- the sliding log: the timestamps of the admissions of the last period; a
  -- request is admitted while fewer than limit of them count (ts > now − period)
  function slog(op, p, rel, slot)
    local Lk, Ck = KEYS[k], KEYS[k + 1]; k = k + 2
    local L, Per, climit = p[1], p[2], p[3]
    local lo = '(' .. (now - Per)
    local count = call('ZCOUNT', Lk, lo, '+inf')
    local gate = 0
    if count >= L then
      gate = stamp(call('ZRANGEBYSCORE', Lk, lo, '+inf', 'WITHSCORES', 'LIMIT', count - L, 1)[2], 'log timestamp')
    end
    if op == OPL then
      if count == 0 then return {6, 0, count, gate, now} end
      local newest = call('ZREVRANGEBYSCORE', Lk, '+inf', lo, 'LIMIT', 0, 1)
      call('ZREM', Lk, newest[1])
      return {5, 0, count, gate, now}
    end
    local raw, f, inflight, own, others = load(Ck, rel)
    if inflight + 1 > climit then
      settle(Ck, rel, raw, 0, own, others)
      return {0, inflight, count, gate, now}
    end
    if count + 1 > L then
      settle(Ck, rel, raw, 0, own, others)
      return {1, inflight, count, gate, now}
    end
    call('ZREMRANGEBYSCORE', Lk, '-inf', now - Per)
    call('ZADD', Lk, now, now .. ':' .. slot)
    call('PEXPIRE', Lk, Per + 1000)
    -- admitted: the gate is the new log's, once it holds limit timestamps
    if count + 1 >= L then
      gate = stamp(call('ZRANGEBYSCORE', Lk, lo, '+inf', 'WITHSCORES', 'LIMIT', count + 1 - L, 1)[2], 'log timestamp')
    end
    put(Ck, others, 0, 0, mine, own + 1, now + lease)
    return {4, inflight, count, gate, now}
  end

  function release(n)
    local K = KEYS[k]; k = k + 1
    local raw, f, _, own, others = load(K, n)
    store(K, f, head(raw, f), own, others, nil)
    return {own}
  end

  -- forget drops key's fields (a peer forgotten), keeping the counts
  function forget()
    local K = KEYS[k]; k = k + 1
    local _, f, _, own, others = load(K, 0)
    if f == 0 then return {0} end
    store(K, 0, '', own, others, nil)
    return {1}
  end

  -- renew moves this instance's lease on its count in key on, whether or
  -- not the lease still held (the count is never rewritten), and only ever
  -- extends the key's life
  function renew()
    local K = KEYS[k]; k = k + 1
    local raw = call('GET', K)
    if not raw then return {0} end
    local len, nf = #raw, byte(raw, 1)
    if not nf or nf > 8 or 9 + 8 * nf > len then corrupt('state of ' .. len .. ' bytes', raw) end
    local p = 10 + 8 * nf
    while p <= len do
      local q = p + byte(raw, p) + 17
      if q - 1 > len then corrupt('in-flight part', sub(raw, p)) end
      if sub(raw, p, q - 17) == mine then
        local n = unpack('<d', raw, q - 16)
        if not int(n, 0) then corrupt('in-flight count', n) end
        local keep = max(call('PTTL', K), lease + 1000)
        call('SET', K, sub(raw, 1, q - 17) .. pack('<dd', n, now + lease) .. sub(raw, q), 'PX', keep)
        return {1}
      end
      p = q
    end
    return {0}
  end
end

local nkeys = {[OPh] = 2, [OPH] = 2, [OPa] = 1, [OPA] = 1, [OPl] = 2, [OPL] = 2, [OPr] = 1, [OPf] = 1, [OPn] = 1}

-- entry runs entry a (its op op) on its keys from KEYS[k].
local function entry(op, a)
  curgen = nil
  if op == OPh then
    local p, pos = params(a, 20)
    curgen = p[20]
    return hybrid(p, unpack('<d', a, pos), sub(a, pos + 8))
  elseif op == OPH then
    local p = params(a, 20)
    curgen = p[20]
    return hreduce(p)
  elseif op == OPa or op == OPA then
    local p, pos = params(a, 6)
    curgen = p[6]
    local rel, rescaled, at = unpack('<dd', a, pos)
    local ex, nw
    if rescaled == 1 then
      ex = {unpack('<dddddd', a, at)}
      nw = {unpack('<ddd', a, at + 48)}
    end
    return algo(op, p, rel, ex, nw)
  elseif op == OPl or op == OPL then
    local p, pos = params(a, 3)
    return slog(op, p, unpack('<d', a, pos), sub(a, pos + 8))
  elseif op == OPf then
    return forget()
  elseif op == OPr then
    return release((unpack('<d', a, 2)))
  elseif op == OPn then
    return renew()
  end
  error('unknown entry ' .. string.format('%q', sub(a, 1, 1)))
end

-- The entries run one after the other under one pcall, which a failing
-- entry leaves: its error is its answer, and the next pcall goes on from
-- the entry after it, its keys where the failed entry's end whatever it
-- read (a pcall per entry costs each entry more than the rare failure).
local out = {}
local e, nk = 0, 1
local function run()
  while e < n do
    e = e + 1
    local a = ARGV[4 + e]
    local op = byte(a, 1)
    k = nk
    nk = k + (nkeys[op] or 0)
    out[e] = entry(op, a)
  end
end
while true do
  local ok, res = pcall(run)
  if ok then break end
  local msg = res
  if type(res) == 'table' then msg = res.err end
  out[e] = {-1, tostring(msg)}
end
return out
