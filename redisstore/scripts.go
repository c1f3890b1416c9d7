package redisstore

// The Lua scripts, one per operation. Times are Unix milliseconds and
// counts integers; Lua holds both as doubles, exact up to 2^53 (counts are
// capped at MaxCount, and times and scales stay far below 2^53 ms). A
// stored value holding a number further than MaxCount from zero is not one
// this store wrote: load and windowScript refuse it, as decodeRead does.
//
// A counter key holds "c1,e1,c2,e2,…": the count and the window end of each
// tier (one tier for a Window). It is always written with SET and an
// expiry, the value and its expiry in one command, the expiry being the end
// of the latest tier's window: no key ever exists without a TTL. With
// ServerClock (an empty now argument) the expiry is that end itself, on
// Redis's clock: SET … PXAT end. Not PX (end - now): Redis adds a PX to its
// own time of the command, which from Redis 7.2 on is the time the script
// started (commandTimeSnapshot), earlier than the TIME the script read, so
// the key would expire before its window's end, by the script's time
// before its TIME call, and a call in that gap would open the window again
// at zero. With LocalClock (a non-empty now argument), the expiry is PX
// (end - now) plus one more scale (the largest tier's): Redis counts a TTL
// down by its own clock, and a caller's clock that was stepped back, or
// runs behind Redis's by less than a scale, must not see a key vanish
// before the window it holds has ended.
//
// A stored end later than one scale after now (written by an instance whose
// clock is ahead, or before the clock stepped back or Redis failed over to a
// server whose clock is behind) is capped to now plus the scale. Every call
// the embedded DB would write stores the capped end, as the embedded DB caps
// it (see the root package's doc): every script except readScript, an undo
// that matches no tier, and a call that fails (an overflowing Inc). A window never lasts more than one scale from the
// time it is read, and once a writing call capped it, it ends there.

// prelude holds the helpers every script shares.
const prelude = `
local function clock(a)
  if a ~= '' then return tonumber(a) end
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function decode(s)
  local a, b = string.match(s, '^(%-?%d+),(%-?%d+)$')
  if a then return {tonumber(a), tonumber(b)} end
  local out, i = {}, 0
  for v in string.gmatch(s, '[^,]+') do
    i = i + 1
    out[i] = tonumber(v)
  end
  return out
end
local function encode(t)
  if #t == 2 then return string.format('%d,%d', t[1], t[2]) end
  local parts = {}
  for i = 1, #t do parts[i] = string.format('%d', t[i]) end
  return table.concat(parts, ',')
end
-- load returns the n tiers stored under key, {} when there is none. A
-- value this store did not write (another program's) is an error, never
-- read as no window: the call fails and the value stays as it is. Every
-- number of a value this store writes is within MaxCount
-- (9007199254740991) of zero, which Lua reads exactly; decodeRead refuses
-- the same values.
local function load(key, n)
  local s = redis.call('GET', key)
  if not s then return {} end
  local a, b = string.match(s, '^(%d+),(%-?%d+)$')
  local t
  if a then
    t = {tonumber(a), tonumber(b)}
  else
    t = {}
    for c, e in string.gmatch(s, '(%d+),(%-?%d+),?') do
      t[#t + 1], t[#t + 2] = tonumber(c), tonumber(e)
    end
  end
  for i = 1, #t do
    if t[i] > 9007199254740991 or t[i] < -9007199254740991 then t = {} break end
  end
  if not a and encode(t) ~= s then t = {} end
  if #t ~= 2 * n then
    error({err = 'RATEDB_BADVALUE a counter key holds a value ratedb did not write'})
  end
  return t
end
-- nextEnd is the end of the window a tier opens at now (see window.go,
-- perkey.go and staggered.go of the root package): FixedWindow (off = 0)
-- and StaggeredWindow windows are [off + k*scale, off + (k+1)*scale);
-- a PerKeyWindow window starts at now.
local function nextEnd(alg, now, scale, off)
  if alg == 2 then return now + scale end
  local x = now - off
  local q = math.floor(x / scale)
  local r = x - q * scale
  if r < 0 then q = q - 1 elseif r >= scale then q = q + 1 end
  return q * scale + scale + off
end
-- expiry returns the SET option and its value that make a key whose
-- latest window ends at e expire (see the comment at the top of
-- scripts.go): PXAT e on Redis's clock, or with a caller's clock PX from
-- now to e plus slack.
local function expiry(now, e, slack)
  if ARGV[1] == '' then return 'PXAT', e end
  return 'PX', e - now + slack
end
`

// countScript is Hit and Inc, for a Window (one tier) or a Layered limiter.
//
// KEYS[1] is the counter key; KEYS[2], if present, the request's dedup key.
// ARGV: now (empty: read TIME), algorithm (1 fixed, 2 per key, 3
// staggered), mode ('h' hit, 'i' inc), increment, then per tier its scale,
// stagger offset and limit, then, with KEYS[2], the dedup TTL (ms). The
// constant 9007199254740991 is MaxCount.
//
// It returns {allowed, now, c1, e1, fits1, c2, e2, fits2, …}, the counts
// being those after the call. A hit is allowed only if every tier has room;
// then every tier counts it, else nothing changes. Inc counts without a
// check and fails with RATEDB_OVERFLOW followed by the (storage) index of
// every tier it would take past MaxCount, writing nothing (a call that
// fails changes nothing, a capped end included, as in the embedded DB).
//
// Deduplication: a counted call stores its reply under KEYS[2] (SET NX, for
// the dedup TTL) before it writes the counter; if KEYS[2] already exists,
// the call is a retry of one that was counted, and it returns that reply
// and writes nothing. A call that would be denied also returns the stored
// reply if there is one (the first attempt was allowed and counted). So a
// counted call costs TIME, GET, SET NX and SET; a denied one TIME, GET, GET.
var countScript = newScript(prelude + `
local now = clock(ARGV[1])
local dk = KEYS[2]
local alg, mode, inc = tonumber(ARGV[2]), ARGV[3], tonumber(ARGV[4])
local n = math.floor((#ARGV - 4) / 3)
local st = load(KEYS[1], n)
local reply = {1, now}
local slack, capped, over = 0, false, nil
for i = 1, n do
  local b = 4 + 3 * (i - 1)
  local scale, off, limit = tonumber(ARGV[b + 1]), tonumber(ARGV[b + 2]), tonumber(ARGV[b + 3])
  if ARGV[1] ~= '' and scale > slack then slack = scale end
  local c, e = st[2 * i - 1], st[2 * i]
  if c == nil or e == nil or e <= now then
    c, e = 0, nextEnd(alg, now, scale, off)
  elseif e > now + scale then
    e, st[2 * i], capped = now + scale, now + scale, true
  end
  local fits = 1
  if mode == 'h' then
    if c > limit - inc then
      fits, reply[1] = 0, 0
    end
  elseif c > 9007199254740991 - inc then
    if over then over = over .. ' ' .. (i - 1) else over = tostring(i - 1) end
  end
  reply[3 * i], reply[3 * i + 1], reply[3 * i + 2] = c, e, fits
end
if reply[1] == 0 or over then
  if dk then
    local prev = redis.call('GET', dk)
    if prev then return decode(prev) end
  end
  if over then return redis.error_reply('RATEDB_OVERFLOW ' .. over) end
  if capped then
    local maxEnd = 0
    for i = 2, #st, 2 do if st[i] > maxEnd then maxEnd = st[i] end end
    redis.call('SET', KEYS[1], encode(st), expiry(now, maxEnd, slack))
  end
  return reply
end
local state, maxEnd = {}, 0
for i = 1, n do
  local c, e = reply[3 * i] + inc, reply[3 * i + 1]
  reply[3 * i] = c
  state[2 * i - 1], state[2 * i] = c, e
  if e > maxEnd then maxEnd = e end
end
if dk then
  local prev = redis.call('SET', dk, encode(reply), 'NX', 'PX', ARGV[#ARGV], 'GET')
  if prev then return decode(prev) end
end
redis.call('SET', KEYS[1], encode(state), expiry(now, maxEnd, slack))
return reply
`)

// windowScript is countScript for a Window (one tier) without a dedup
// key, written for speed: the same arguments, reply and semantics, without
// the helpers and loops the general script needs (about a third less Redis
// CPU per call). A value is "count,end"; numbers under 1e14 concatenate
// exactly (Lua's %.14g), larger ones go through %d.
var windowScript = newScript(`
local now = ARGV[1]
if now == '' then
  local t = redis.call('TIME')
  now = t[1] * 1000 + math.floor(t[2] / 1000)
else
  now = tonumber(now)
end
local alg, mode, inc = ARGV[2], ARGV[3], tonumber(ARGV[4])
local scale, off, limit = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local c, e = 0, 0
local cur = redis.call('GET', KEYS[1])
if cur then
  local a, b = string.match(cur, '^(%d+),(%-?%d+)$')
  if not a then
    return redis.error_reply('RATEDB_BADVALUE a counter key holds a value ratedb did not write')
  end
  c, e = tonumber(a), tonumber(b)
  if c > 9007199254740991 or e > 9007199254740991 or e < -9007199254740991 then
    return redis.error_reply('RATEDB_BADVALUE a counter key holds a value ratedb did not write')
  end
end
local px, base = 'PXAT', 0 -- the expiry: see expiry in prelude
if ARGV[1] ~= '' then px, base = 'PX', now - scale end
if e > now + scale then
  e = now + scale
  if mode == 'h' and c > limit - inc then
    redis.call('SET', KEYS[1], string.format('%d,%d', c, e), px, e - base)
  end
elseif e <= now then
  c = 0
  if alg == '2' then
    e = now + scale
  else
    local x = now - off
    e = x - x % scale + scale + off
  end
end
if mode == 'h' then
  if c > limit - inc then return {0, now, c, e, 0} end
elseif c > 9007199254740991 - inc then
  return redis.error_reply('RATEDB_OVERFLOW 0')
end
c = c + inc
local v
if c < 1e14 and e < 1e14 and e > -1e14 then v = c .. ',' .. e else v = string.format('%d,%d', c, e) end
redis.call('SET', KEYS[1], v, px, e - base)
return {1, now, c, e, 1}
`)

// readScript is Get and ExpiresAt: it returns {now, stored value or an
// empty string}. KEYS[1] is the counter key, ARGV[1] now (empty: read
// TIME). It writes nothing: decodeRead caps the ends it returns, as the
// embedded DB caps a copy for a call that only reads.
var readScript = newScript(prelude + `
local now = clock(ARGV[1])
local cur = redis.call('GET', KEYS[1])
return {now, cur or ''}
`)

// setScript is Window.Set. KEYS[1] is the counter key; ARGV: now (empty: reads
// TIME), algorithm, scale, stagger offset, count. FixedWindow and
// StaggeredWindow set the count of the current window (opening it if
// needed); PerKeyWindow restarts the window at now. It returns the count.
// The stored value is read with load, as by every other writing script: a
// value this store did not write fails the call with RATEDB_BADVALUE and
// stays as it is, whatever the algorithm.
var setScript = newScript(prelude + `
local now = clock(ARGV[1])
local alg, scale, off, count = tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4]), tonumber(ARGV[5])
local st = load(KEYS[1], 1)
local e
if alg ~= 2 and st[2] and st[2] > now then e = math.min(st[2], now + scale) end
if not e then e = nextEnd(alg, now, scale, off) end
redis.call('SET', KEYS[1], encode({count, e}), expiry(now, e, scale))
return count
`)

// refundScript is Window.Refund, Layered.Refund and the Undo methods.
// KEYS[1] is the counter key; ARGV: now (empty: read TIME), amount, tiers,
// each tier's scale, then for an undo the end of each tier's window the
// undone hit counted in.
// Every tier whose window is open (and, for an undo, still ends there) has
// its count lowered by amount, never below zero; no end moves, and the TTL
// stays the latest end. A key with no open window is not written. It
// returns {now, c1, e1, c2, e2, …}: each tier's count after the refund and
// its end, {0, 0} for a tier with no open window.
var refundScript = newScript(prelude + `
local now = clock(ARGV[1])
local amount, n = tonumber(ARGV[2]), tonumber(ARGV[3])
local undo = #ARGV > 3 + n
local out = {now}
for i = 1, n do out[2*i], out[2*i+1] = 0, 0 end
local st = load(KEYS[1], n)
if #st == 0 then return out end
local maxEnd, changed, slack = 0, false, 0
for i = 1, n do
  local c, e = st[2*i-1], st[2*i]
  local scale = tonumber(ARGV[3+i])
  if ARGV[1] ~= '' and scale > slack then slack = scale end
  if c ~= nil and e ~= nil then
    local lim = now + scale
    if e > lim then e, st[2*i] = lim, lim end
    if e > maxEnd then maxEnd = e end
    if e > now and (not undo or e == tonumber(ARGV[3+n+i])) then
      c = c - amount
      if c < 0 then c = 0 end
      st[2*i-1] = c
      changed = true
      out[2*i], out[2*i+1] = c, e
    end
  end
end
-- A capped end is stored with a change (a capped window is open, so a
-- refund changes it; an undo that matches no tier writes nothing, as the
-- embedded DB's).
if changed then redis.call('SET', KEYS[1], encode(st), expiry(now, maxEnd, slack)) end
return out
`)

// resetScript is Reset: it deletes the counter key.
var resetScript = newScript(`return redis.call('DEL', KEYS[1])`)
