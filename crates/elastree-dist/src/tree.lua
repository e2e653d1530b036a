#!lua name=elastree
--[[
The server side of elastree-dist: the part of every operation below the cut-off, run as Redis
Functions on the master that owns a sub-tree (execution migration, one round trip).

Keys of one sub-tree share the hash tag of their prefix P = "{et:<index>:<token>}", so they
live in one slot on one master:
  P..":m"        hash: next (last node id given out), count (entries held by the tag's
                 sub-trees), frz:<root id> = "<deadline ms>:<holder>" while a migration
                 holds that sub-tree
  P..":n:"..id   one node, in the "page" layout documented field by field in
                 crates/elastree-dist/src/node.rs (the client reads the same bytes):
                 a 28-byte header (kind, flags, n, right, heap_end, dead, fence lengths,
                 prefix), the fences, n slots (4-byte head, record offset) in key order,
                 and a heap of records (value, key length, key bytes after the prefix).
Node ids are u32; in this file an id is always its 4 big-endian bytes (a Lua string), which
is also how a node's key ends, so that no id is ever formatted as a number (a sprintf of a
double per key); ids cross to the client as numbers (num) and back (id_of).
Invariants: keys strictly ascending inside a node and inside [low, high); an inner node's
entry i is (low fence of child i, child i), its first key its own low fence; all leaves of
a sub-tree at level 0, chained left to right by their right links.

Every function is atomic (Redis runs one at a time), so inside a sub-tree no reader ever sees
a half-done split; B-link right links matter only at the sub-tree root level, where a
client's cached top may be stale.

Cost model (what shaped this file): each redis.call costs about 8K instructions, a C call
from Lua (string.sub, struct.unpack) about 1.3K, a string comparison about 600 (strcoll), a
number comparison about 100. So: searches compare the slots' 4-byte heads as numbers and
touch key bytes only on equal heads; inserts splice one slot and append one record instead
of decoding and re-encoding the node; reads return the leaf's bytes and the client searches
them; decoded inner nodes are cached by their bytes (which can never be stale).

Replies are arrays: {status, hint_sep, hint_id, ...}. status is OK, FWD (token, id), STALE,
BUSY or LOWERED (lo1, id1, ...). hint_id > 0 says the call moved right past the client's
sub-tree root to a sub-tree root starting at hint_sep: the client's top is stale and that
root may still need posting.
]]

local VERSION = 'elastree-tree-13'

local HDR = '>BBI2c4I4I4I4I4I4'
local HDR_LEN = 28
-- The header fields a scan follows leaves by: flags, n, right, low and high fence lengths.
local LEAF_LINKS = '>xBI2c4xxxxxxxxI4I4'
local FWD, LOWERED = 0xF0, 0xF1
local ROOT, HIGH_INF, FROZEN = 1, 2, 4
local ZEROS = '\0\0\0\0'
local NONE = ZEROS -- the id of no node
local MAX_ID = 4294967295

-- Shortcuts to the standard libraries. Redis runs a library's top level without them (they
-- exist only while a function runs), so they are bound on the first call (see register).
local sub, byte, char, concat, pack, unpack, lt

local function bind()
  sub, byte, char, concat = string.sub, string.byte, string.char, table.concat
  pack, unpack = struct.pack, struct.unpack
  -- Byte order on strings. Lua compares strings with strcoll; under the C locale (which
  -- Redis normally has) that is byte order and the fast path is used.
  if ('a' < 'B') == false and ('\195\169' > 'z') and ('a\0b' < 'a\0c') and ('\255' > 'a') then
    lt = function(a, b) return a < b end
  else
    lt = function(a, b)
      local n = math.min(#a, #b)
      for i = 1, n do
        local x, y = byte(a, i), byte(b, i)
        if x ~= y then return x < y end
      end
      return #a < #b
    end
  end
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- The length of the longest common prefix of a and b.
local function common_prefix(a, b)
  local lo, hi = 0, math.min(#a, #b)
  while lo < hi do
    local d = hi - lo
    local mid = lo + (d + d % 2) / 2
    if sub(a, 1, mid) == sub(b, 1, mid) then lo = mid else hi = mid - 1 end
  end
  return lo
end

-- The head of a key suffix: its first 4 bytes, zero-padded, as a number.
local function head_of(suffix)
  return (unpack('>I4', suffix .. ZEROS))
end

-- A node id from its decimal form (an argument) / as a number (for a reply).
local function id_of(decimal)
  return pack('>I4', tonumber(decimal))
end

-- A root id argument: the client sends the 4 bytes.
local function root_arg(a)
  if #a ~= 4 then error('elastree: a root id argument is 4 bytes, not ' .. #a) end
  return a
end

local function num(id)
  return (unpack('>I4', id))
end

---------------------------------------------------------------------------------------------
-- Views of stored nodes

-- Flag tests and changes in arithmetic (bit.band is a C call, ten times the cost).
local function has(flags, f)
  return flags % (2 * f) >= f
end

local function with_flag(flags, f)
  if has(flags, f) then return flags end
  return flags + f
end

local function without_flag(flags, f)
  if has(flags, f) then return flags - f end
  return flags
end

-- A node's header fields and where its parts start (1-based positions in s).
local function node_view(s, kind)
  local _, flags, n, right, heap_end, dead, ll, hl, p = unpack(HDR, s)
  local S = HDR_LEN + ll + hl + 1
  return {s = s, kind = kind, flags = flags, n = n, right = right, heap_end = heap_end,
          dead = dead, ll = ll, hl = hl, p = p, S = S, H = S + 8 * n,
          vlen = (kind == 0) and 8 or 4, root = has(flags, ROOT), hi_inf = has(flags, HIGH_INF)}
end

local function low_of(v)
  local lo = v.lo
  if lo == nil then
    lo = sub(v.s, HDR_LEN + 1, HDR_LEN + v.ll)
    v.lo = lo
  end
  return lo
end

-- nil: +infinity.
local function high_of(v)
  if v.hi_inf then return nil end
  local hi = v.hi
  if hi == nil then
    hi = sub(v.s, HDR_LEN + v.ll + 1, HDR_LEN + v.ll + v.hl)
    v.hi = hi
  end
  return hi
end

-- Decoded inner nodes by their stored bytes: the header, fences, and every slot's head,
-- record position and child id. Lua interns strings, so a node's bytes are a cheap table
-- key, and an entry depends on nothing but those bytes: it can never be stale. Leaves, one
-- per call and mostly different ones, are not cached. Bounded: emptied when it reaches
-- CACHE_LIMIT entries.
local CACHE_LIMIT = 4096
local SLOTS_PER_UNPACK = 256
local cache, cached = {}, 0
local slot_formats = {}

local function inner_view(s)
  local v = cache[s]
  if v then return v end
  v = node_view(s, byte(s, 1))
  local heads, recs, kids = {}, {}, {}
  local i = 1
  while i <= v.n do
    local m = math.min(SLOTS_PER_UNPACK, v.n - i + 1)
    local fmt = slot_formats[m]
    if fmt == nil then
      fmt = '>' .. string.rep('I4I4', m)
      slot_formats[m] = fmt
    end
    local t = {unpack(fmt, s, v.S + 8 * (i - 1))}
    for j = 1, m do
      local rec = v.H + t[2 * j]
      heads[i + j - 1], recs[i + j - 1], kids[i + j - 1] = t[2 * j - 1], rec, sub(s, rec, rec + 3)
    end
    i = i + m
  end
  v.heads, v.recs, v.kids = heads, recs, kids
  low_of(v)
  high_of(v)
  if cached >= CACHE_LIMIT then cache, cached = {}, 0 end
  cache[s] = v
  cached = cached + 1
  return v
end

-- A view of whatever a node key holds: an inner node (cached), a leaf, or a marker:
-- {kind = FWD, id, token} or {kind = LOWERED, los, ids}.
local function view(s)
  local kind = byte(s, 1)
  if kind == 0 then return node_view(s, 0) end
  if kind < FWD then return inner_view(s) end
  if kind == FWD then
    return {kind = FWD, id = sub(s, 2, 5), token = sub(s, 6)}
  end
  local count, at = unpack('>I2', s, 2)
  local los, ids = {}, {}
  for i = 1, count do
    ids[i], los[i], at = unpack('>c4I4c0', s, at)
  end
  return {kind = LOWERED, los = los, ids = ids}
end

-- Slot i's head and its record's position in s.
local function slot(v, i)
  local heads = v.heads
  if heads then return heads[i], v.recs[i] end
  local h, off = unpack('>I4I4', v.s, v.S + 8 * (i - 1))
  return h, v.H + off
end

local function record(v, i)
  local _, rec = slot(v, i)
  return rec
end

-- Entry i's key bytes after the prefix.
local function suffix(v, i)
  return (unpack('>I4c0', v.s, record(v, i) + v.vlen))
end

-- A leaf entry's tid (8 bytes) / an inner entry's child id.
local function tid_at(v, i)
  local rec = record(v, i)
  return sub(v.s, rec, rec + 7)
end

local function child(v, i)
  local kids = v.kids
  if kids then return kids[i] end
  local rec = record(v, i)
  return sub(v.s, rec, rec + 3)
end

-- The first entry whose key is above `key` (upper) or not below it (not upper); n + 1 if
-- none. kz is key .. ZEROS; the key must lie within the node's fences (high included), so
-- it starts with the node's prefix.
local function bound(v, key, kz, upper)
  local p = v.p
  if #kz < p + 4 then error('elastree: key outside the fences of the node searched') end
  local qh = unpack('>I4', kz, p + 1)
  local heads = v.heads
  local qs
  local lo, hi = 1, v.n + 1
  while lo < hi do
    local sum = lo + hi
    local mid = (sum - sum % 2) / 2
    local h, rec
    if heads then h = heads[mid] else h, rec = slot(v, mid) end
    local before
    if h ~= qh then
      before = h < qh
    else
      if qs == nil then qs = sub(key, p + 1) end
      local ks = unpack('>I4c0', v.s, (rec or v.recs[mid]) + v.vlen)
      if upper then before = not lt(qs, ks) else before = lt(ks, qs) end
    end
    if before then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- Whether entry i holds exactly `key`.
local function holds(v, i, key)
  return i <= v.n and suffix(v, i) == sub(key, v.p + 1)
end

local function node_key(P, id)
  return P .. ':n:' .. id
end

-- The node or marker stored under id, as a view (nil if absent).
local function load(P, id)
  local s = redis.call('GET', node_key(P, id))
  if not s then return nil end
  return view(s)
end

-- A node below a sub-tree root: a missing one is corruption.
local function load_below(P, id)
  local v = load(P, id)
  if v == nil or v.kind >= FWD then error('elastree: missing node ' .. num(id) .. ' in ' .. P) end
  return v
end

local function store(P, id, s)
  redis.call('SET', node_key(P, id), s)
end

local function drop(P, id)
  redis.call('DEL', node_key(P, id))
end

local function new_id(P)
  local id = redis.call('HINCRBY', P .. ':m', 'next', 1)
  if id > MAX_ID then error('elastree: node ids of ' .. P .. ' exhausted') end
  return pack('>I4', id)
end

-- (Redis refuses "-0", which is what Lua prints for minus zero.)
local function add_count(P, delta)
  if delta ~= 0 then redis.call('HINCRBY', P .. ':m', 'count', delta) end
end

---------------------------------------------------------------------------------------------
-- Building and changing nodes (each returns the new bytes)

local function header(v, n, heap_end, dead, flags, right)
  return pack(HDR, v.kind, flags or v.flags, n, right or v.right, heap_end, dead, v.ll, v.hl, v.p)
end

-- A node of entries from..to of keys/vals (leaf vals: 8-byte tids; inner vals: child ids).
-- right: an id.
local function build(kind, flags, right, lo, hi, keys, vals, from, to)
  local p = 0
  if hi ~= nil then p = common_prefix(lo, hi) end
  local slots, recs, off = {}, {}, 0
  for i = from, to do
    local suf = sub(keys[i], p + 1)
    local rec = vals[i] .. pack('>I4', #suf) .. suf
    slots[#slots + 1] = pack('>I4I4', head_of(suf), off)
    recs[#recs + 1] = rec
    off = off + #rec
  end
  if hi == nil then
    flags, hi = with_flag(flags, HIGH_INF), ''
  else
    flags = without_flag(flags, HIGH_INF)
  end
  return pack(HDR, kind, flags, #slots, right, off, 0, #lo, #hi, p) .. lo .. hi
    .. concat(slots) .. concat(recs)
end

-- The node's entries: whole keys and values (leaf: tids; inner: child ids).
local function entries(v)
  local keys, vals = {}, {}
  local pre = sub(v.s, HDR_LEN + 1, HDR_LEN + v.p)
  local fmt = (v.kind == 0) and '>c8I4c0' or '>c4I4c0'
  for i = 1, v.n do
    local val, suf = unpack(fmt, v.s, record(v, i))
    keys[i], vals[i] = pre .. suf, val
  end
  return keys, vals
end

-- The same node without dead records.
local function rebuilt(v)
  local keys, vals = entries(v)
  return build(v.kind, v.flags, v.right, low_of(v), high_of(v), keys, vals, 1, v.n)
end

-- The node's bytes, rebuilt if more than half its heap is dead.
local function compacted(v)
  if v.dead * 2 > v.heap_end then return rebuilt(v) end
  return v.s
end

-- With (key, value bytes) inserted before entry i: the record appended to the heap, one
-- slot spliced in (no other record moves).
local function with_entry(v, i, key, value)
  local suf = sub(key, v.p + 1)
  local rec = value .. pack('>I4', #suf) .. suf
  local cut = v.S + 8 * (i - 1)
  return header(v, v.n + 1, v.heap_end + #rec, v.dead)
    .. sub(v.s, HDR_LEN + 1, cut - 1)
    .. pack('>I4I4', head_of(suf), v.heap_end)
    .. sub(v.s, cut) .. rec
end

-- Without entry i: its slot dropped, its record's bytes counted dead.
local function without_entry(v, i)
  local rec = record(v, i)
  local size = v.vlen + 4 + unpack('>I4', v.s, rec + v.vlen)
  local cut = v.S + 8 * (i - 1)
  return header(v, v.n - 1, v.heap_end, v.dead + size)
    .. sub(v.s, HDR_LEN + 1, cut - 1) .. sub(v.s, cut + 8)
end

-- With leaf entry i's tid replaced, in place.
local function with_tid(v, i, tid)
  local rec = record(v, i)
  return sub(v.s, 1, rec - 1) .. tid .. sub(v.s, rec + 8)
end

-- With other flags and right link.
local function with_links(v, flags, right)
  return header(v, v.n, v.heap_end, v.dead, flags, right) .. sub(v.s, HDR_LEN + 1)
end

---------------------------------------------------------------------------------------------
-- Entering a sub-tree and descending it

-- A position in key space: key == nil is plus infinity. strict: the position is "just
-- below key" (looking for the largest entry < key), so the node covering it has
-- low < key <= high; otherwise low <= key < high.
local function beyond_high(v, key, strict)
  local hi = high_of(v)
  if hi == nil then return false end
  if key == nil then return true end
  if strict then return lt(hi, key) end
  return not lt(key, hi)
end

local function below_low(v, key, strict)
  if key == nil then return false end
  local lo = low_of(v)
  if strict then return lo ~= '' and not lt(lo, key) end
  return lt(key, lo)
end

-- {LOWERED, '', 0, lo1, id1, ...}: the children that replaced a lowered root.
local function lowered_reply(m)
  local r = {'LOWERED', '', 0}
  for i = 1, #m.ids do
    r[#r + 1] = m.los[i]
    r[#r + 1] = num(m.ids[i])
  end
  return r
end

-- Enters the sub-tree root `id` for the position (key, strict), moving right along the
-- root level while the position lies beyond a root's high fence. Returns the root id and
-- view and the hint sep, id ('', 0 when it did not move), or nil and the reply to return.
local function enter(P, id, key, strict)
  local v = load(P, id)
  if v == nil then return nil, nil, nil, nil, {'STALE', '', 0} end
  if v.kind == FWD then return nil, nil, nil, nil, {'FWD', '', 0, v.token, num(v.id)} end
  if v.kind == LOWERED then return nil, nil, nil, nil, lowered_reply(v) end
  if not v.root or below_low(v, key, strict) then return nil, nil, nil, nil, {'STALE', '', 0} end
  local hint_sep, hint_id = '', 0
  while beyond_high(v, key, strict) do
    local rid, sep = v.right, high_of(v)
    local r = rid ~= NONE and load(P, rid) or nil
    if r == nil then return nil, nil, nil, nil, {'STALE', '', 0} end
    if r.kind == FWD then return nil, nil, nil, nil, {'FWD', sep, num(rid), r.token, num(r.id)} end
    if r.kind == LOWERED or not r.root then return nil, nil, nil, nil, {'STALE', sep, num(rid)} end
    id, v, hint_sep, hint_id = rid, r, sep, num(rid)
  end
  return id, v, hint_sep, hint_id, nil
end

-- The entry of inner node v whose child covers the position.
local function child_for(v, key, kz, strict)
  local i
  if key == nil then
    i = v.n
  elseif strict then
    i = bound(v, key, kz, false) - 1
  else
    i = bound(v, key, kz, true) - 1
  end
  if i < 1 then i = 1 end
  return i
end

-- Descends from (id, v) to the leaf covering the position, recording the path: ids and
-- views from the sub-tree root down, and pos[d], the entry taken in views[d].
local function descend(P, id, v, key, kz, strict)
  local ids, views, pos = {id}, {v}, {}
  while v.kind > 0 do
    local i = child_for(v, key, kz, strict)
    pos[#ids] = i
    id = child(v, i)
    v = load_below(P, id)
    ids[#ids + 1] = id
    views[#views + 1] = v
  end
  return ids, views, pos
end

-- The bytes of the leaf under sub-tree root v covering key (not strict): the reads' descent,
-- which needs no path and no view of the leaf.
local function leaf_bytes(P, v, key, kz)
  local s = v.s
  while v.kind > 0 do
    local id = v.kids[child_for(v, key, kz, false)]
    s = redis.call('GET', P .. ':n:' .. id)
    if not s then error('elastree: missing node ' .. num(id) .. ' in ' .. P) end
    v = cache[s]
    if v == nil then
      if byte(s, 1) == 0 then break end
      v = inner_view(s)
    end
  end
  return s
end

-- Moves the path to the leaf left of its current one, inside the sub-tree; nil at its first.
local function prev_leaf(P, ids, views, pos)
  local d = #ids - 1
  while d >= 1 and pos[d] == 1 do d = d - 1 end
  if d < 1 then return nil end
  for j = #ids, d + 1, -1 do ids[j], views[j], pos[j] = nil, nil, nil end
  pos[d] = pos[d] - 1
  local id = child(views[d], pos[d])
  while true do
    local c = load_below(P, id)
    ids[#ids + 1], views[#views + 1] = id, c
    if c.kind == 0 then return c end
    pos[#ids] = c.n
    id = child(c, c.n)
  end
end

-- Whether a migration holds the sub-tree of root (id, v): {deadline, holder} or nil. The
-- hold is the meta hash's field "frz:" .. id.
local function freeze_of(P, id, v)
  if not has(v.flags, FROZEN) then return nil end
  local f = redis.call('HGET', P .. ':m', 'frz:' .. id)
  if not f then return nil end
  local deadline, holder = string.match(f, '^(%d+):(.*)$')
  deadline = tonumber(deadline)
  if deadline == nil or now_ms() >= deadline then return nil end
  return {deadline, holder}
end

---------------------------------------------------------------------------------------------
-- The operations

-- et_get(KEYS: P:m; ARGV: P, root, key) -> the bytes of the leaf covering the key, which the
-- client searches (or {OK, hs, hid, leaf bytes} when the call moved right: a reply element
-- costs more than the bytes).
local function et_get(keys, args)
  local P, key = args[1], args[3]
  local kz = key .. ZEROS
  local _, v, hs, hid, err = enter(P, root_arg(args[2]), key, false)
  if err then return err end
  local s = leaf_bytes(P, v, key, kz)
  if hid == 0 then return s end
  return {'OK', hs, hid, s}
end

-- Splits node views[level] if it overflows, up the path, storing what changed. An
-- overflowing sub-tree root splits into two sub-tree roots when allow_post or when growing
-- would take the sub-tree past max_levels; else it grows a level. Returns the post
-- {sep, id} when it split into two sub-tree roots.
local function split_up(P, ids, views, pos, cap, allow_post, max_levels)
  local level = #ids
  while true do
    local v, nid = views[level], ids[level]
    if v.n <= cap then
      store(P, nid, v.s)
      return nil
    end
    local keys, vals = entries(v)
    local m = v.n
    local half = (m - m % 2) / 2
    local sep = keys[half + 1]
    local lo, hi = low_of(v), high_of(v)
    if level == 1 and (allow_post or v.kind + 2 > max_levels) then
      -- The sub-tree root splits into two sub-tree roots; the client posts the new one.
      local sid = new_id(P)
      store(P, sid, build(v.kind, ROOT, v.right, sep, hi, keys, vals, half + 1, m))
      store(P, nid, build(v.kind, v.flags, sid, lo, sep, keys, vals, 1, half))
      return {sep, num(sid)}
    elseif level == 1 then
      -- The sub-tree grows one level; the root keeps its id (the top refers to it).
      local lid, rid = new_id(P), new_id(P)
      store(P, lid, build(v.kind, 0, rid, lo, sep, keys, vals, 1, half))
      store(P, rid, build(v.kind, 0, NONE, sep, hi, keys, vals, half + 1, m))
      store(P, nid, build(v.kind + 1, v.flags, v.right, lo, hi, {lo, sep}, {lid, rid}, 1, 2))
      return nil
    else
      local sid = new_id(P)
      store(P, sid, build(v.kind, 0, v.right, sep, hi, keys, vals, half + 1, m))
      store(P, nid, build(v.kind, 0, sid, lo, sep, keys, vals, 1, half))
      local parent = views[level - 1]
      views[level - 1] = view(with_entry(parent, pos[level - 1] + 1, sep, sid))
      level = level - 1
    end
  end
end

-- et_put(KEYS: P:m; ARGV: P, root, key, tid, cap, allow_post, mode, max_levels)
-- mode 'u': insert or replace; 'a': insert only if absent. max_levels: the height a
-- sub-tree may grow to (split_up).
-- -> {OK, hs, hid [, old tid] [, sep, id]}
local function et_put(keys, args)
  local P, key, tid, cap = args[1], args[3], args[4], tonumber(args[5])
  local allow_post, mode, max_levels = args[6] == '1', args[7], tonumber(args[8])
  local kz = key .. ZEROS
  local id, v, hs, hid, err = enter(P, root_arg(args[2]), key, false)
  if err then return err end
  if freeze_of(P, id, v) then return {'BUSY', '', 0} end
  local ids, views, pos = descend(P, id, v, key, kz, false)
  local leaf = views[#views]
  local i = bound(leaf, key, kz, false)
  if holds(leaf, i, key) then
    local rec = record(leaf, i)
    local old = sub(leaf.s, rec, rec + 7)
    if mode == 'u' and old ~= tid then
      -- In place: building the new bytes in Lua costs more than the call.
      redis.call('SETRANGE', node_key(P, ids[#ids]), rec - 1, tid)
    end
    return {'OK', hs, hid, old}
  end
  -- The count changes last: in a slot that is migrating away, creating a node key fails the
  -- call, and nothing but the stores before it may have happened (a split stores its new
  -- node first).
  local s = with_entry(leaf, i, key, tid)
  if leaf.n < cap then
    store(P, ids[#ids], s)
    add_count(P, 1)
    return {'OK', hs, hid}
  end
  views[#views] = view(s)
  local post = split_up(P, ids, views, pos, cap, allow_post, max_levels)
  add_count(P, 1)
  if post then return {'OK', hs, hid, false, post[1], post[2]} end
  return {'OK', hs, hid}
end

-- Merges underfull nodes up the path after a removal, storing what changed.
local function merge_up(P, ids, views, pos, min_fill, cap)
  local level = #ids
  while level > 1 do
    local v, nid = views[level], ids[level]
    if v.n >= min_fill then
      store(P, nid, compacted(v))
      return
    end
    local parent, at = views[level - 1], pos[level - 1]
    local left_id, left, right_id, right, gone
    if at < parent.n then
      left_id, left, right_id, gone = nid, v, child(parent, at + 1), at + 1
      right = load_below(P, right_id)
    elseif at > 1 then
      right_id, right, left_id, gone = nid, v, child(parent, at - 1), at
      left = load_below(P, left_id)
    else
      store(P, nid, compacted(v))
      return
    end
    if left.n + right.n > cap then
      store(P, nid, compacted(v))
      return
    end
    local lk, lv = entries(left)
    local rk, rv = entries(right)
    for j = 1, #rk do
      lk[#lk + 1], lv[#lv + 1] = rk[j], rv[j]
    end
    store(P, left_id, build(left.kind, left.flags, right.right, low_of(left), high_of(right), lk, lv, 1, #lk))
    drop(P, right_id)
    views[level - 1] = view(without_entry(parent, gone))
    level = level - 1
  end
  -- level 1: the sub-tree root. An inner root left with one child takes the child's place.
  local root, rid = views[1], ids[1]
  if root.kind > 0 and root.n == 1 then
    local cid = child(root, 1)
    local c = load_below(P, cid)
    local ck, cv = entries(c)
    store(P, rid, build(c.kind, root.flags, root.right, low_of(root), high_of(root), ck, cv, 1, #ck))
    drop(P, cid)
  else
    store(P, rid, compacted(root))
  end
end

-- et_del(KEYS: P:m; ARGV: P, root, key, min_fill, cap, expected) -> {OK, hs, hid [, old,
-- removed]}; expected: '' removes any tid, else only that tid.
local function et_del(keys, args)
  local P, key = args[1], args[3]
  local min_fill, cap, expected = tonumber(args[4]), tonumber(args[5]), args[6]
  local kz = key .. ZEROS
  local id, v, hs, hid, err = enter(P, root_arg(args[2]), key, false)
  if err then return err end
  if freeze_of(P, id, v) then return {'BUSY', '', 0} end
  local ids, views, pos = descend(P, id, v, key, kz, false)
  local leaf = views[#views]
  local i = bound(leaf, key, kz, false)
  if not holds(leaf, i, key) then return {'OK', hs, hid} end
  local old = tid_at(leaf, i)
  if expected ~= '' and old ~= expected then return {'OK', hs, hid, old, '0'} end
  views[#views] = view(without_entry(leaf, i))
  merge_up(P, ids, views, pos, min_fill, cap)
  add_count(P, -1)
  return {'OK', hs, hid, old, '1'}
end

-- et_scan(KEYS: P:m; ARGV: P, root, dir, max, pos_has, pos_key, pos_strict, stop_has,
-- stop_key) -> {OK, hs, hid, leaf1, leaf2, ...}: the leaf covering the position (pos_has
-- '0': the first key ascending, +infinity descending), then its neighbours in the scan's
-- direction ('a' or 'd') inside the sub-tree, until the leaves after the first hold `max`
-- entries, the next leaf would lie wholly past stop_key, or the sub-tree ends. The client
-- reads their entries and goes on after the last leaf.
local function et_scan(keys, args)
  local P, dir, max = args[1], args[3], tonumber(args[4])
  local key = nil
  if args[5] == '1' then key = args[6] end
  local strict = args[7] == '1'
  local stop = nil
  if args[8] == '1' then stop = args[9] end
  if dir == 'a' and key == nil then key = '' end
  local kz = key and (key .. ZEROS)
  local id, root, hs, hid, err = enter(P, root_arg(args[2]), key, strict)
  if err then return err end
  local out = {'OK', hs, hid}
  local held = 0
  if dir == 'a' then
    -- Ascending: the leaves' right links, reading only the header fields needed.
    local s = leaf_bytes(P, root, key, kz)
    out[4] = s
    local root_hi = high_of(root)
    local first = true
    while true do
      local flags, n, right, ll, hl = unpack(LEAF_LINKS, s)
      if first then first = false else held = held + n end
      if held >= max or has(flags, HIGH_INF) or right == NONE then break end
      local hi = sub(s, HDR_LEN + ll + 1, HDR_LEN + ll + hl)
      if hi == root_hi or (stop ~= nil and lt(stop, hi)) then break end
      s = redis.call('GET', P .. ':n:' .. right)
      if not s then error('elastree: missing node ' .. num(right) .. ' in ' .. P) end
      out[#out + 1] = s
    end
  else
    -- Descending: the path's left neighbours (leaves link only rightwards).
    local ids, views, pos = descend(P, id, root, key, kz, strict)
    local leaf = views[#views]
    out[4] = leaf.s
    while held < max do
      local lo = low_of(leaf)
      if stop ~= nil and not lt(stop, lo) then break end
      leaf = prev_leaf(P, ids, views, pos)
      if leaf == nil then break end
      out[#out + 1] = leaf.s
      held = held + leaf.n
    end
  end
  return out
end

-- et_new_root(KEYS: P:m; ARGV: P) -> id of a new empty sub-tree root (a leaf covering all keys).
local function et_new_root(keys, args)
  local P = args[1]
  local id = new_id(P)
  redis.call('HINCRBY', P .. ':m', 'count', 0)
  store(P, id, build(0, ROOT, NONE, '', nil, {}, {}, 1, 0))
  return num(id)
end

-- The ids of a sub-tree's nodes, root first.
local function subtree_ids(P, id)
  local ids, i = {id}, 1
  while i <= #ids do
    local v = load_below(P, ids[i])
    if v.kind > 0 then
      for j = 1, v.n do ids[#ids + 1] = child(v, j) end
    end
    i = i + 1
  end
  return ids
end

-- Appends id, bytes of every node of the sub-tree to out; returns the entries it holds.
local function export(P, id, out)
  local count = 0
  for _, nid in ipairs(subtree_ids(P, id)) do
    local s = redis.call('GET', node_key(P, nid))
    if byte(s, 1) == 0 then count = count + unpack('>I2', s, 3) end
    out[#out + 1] = num(nid)
    out[#out + 1] = s
  end
  return count
end

-- et_export(KEYS: P:m; ARGV: P, root) -> {OK, count, id1, bytes1, ...} | {MISSING} | {MARKER}:
-- every node of the sub-tree, for the client's invariant check.
local function et_export(keys, args)
  local P, id = args[1], root_arg(args[2])
  local root = load(P, id)
  if root == nil then return {'MISSING'} end
  if root.kind >= FWD then return {'MARKER'} end
  local out = {'OK', 0}
  out[2] = export(P, id, out)
  return out
end

-- et_freeze(KEYS: P:m; ARGV: P, root, holder, ttl_ms) -> {OK, count, id1, bytes1, ...}:
-- freezes the sub-tree (writes answer BUSY until the deadline) and exports its nodes.
local function et_freeze(keys, args)
  local P, id, holder, ttl = args[1], root_arg(args[2]), args[3], tonumber(args[4])
  local root = load(P, id)
  if root == nil or root.kind >= FWD or not root.root then return {'STALE'} end
  local f = freeze_of(P, id, root)
  if f and f[2] ~= holder then return {'BUSY'} end
  redis.call('HSET', P .. ':m', 'frz:' .. id, (now_ms() + ttl) .. ':' .. holder)
  store(P, id, with_links(root, with_flag(root.flags, FROZEN), root.right))
  local out = {'OK', 0}
  out[2] = export(P, id, out)
  return out
end

-- et_import(KEYS: Q:m; ARGV: Q, count, id1, bytes1, ...): writes an exported sub-tree into
-- the fresh tag Q, its root unfrozen. Q holds nothing else (its token is fresh and no route
-- leads to it before et_forward), so its count is set, not added to: a repeat of the call
-- writes the same state.
local function et_import(keys, args)
  local Q, count = args[1], tonumber(args[2])
  local max_id = tonumber(redis.call('HGET', Q .. ':m', 'next') or '0')
  local present = {}
  for j = 3, #args, 2 do present[id_of(args[j])] = true end
  for j = 3, #args, 2 do
    local nid = id_of(args[j])
    local v = view(args[j + 1])
    -- A right link out of the sub-tree names a node of the old tag: cut it (a call that
    -- would follow it answers STALE and the client re-reads the top).
    local right = v.right
    if not present[right] then right = NONE end
    store(Q, nid, with_links(v, without_flag(v.flags, FROZEN), right))
    if tonumber(args[j]) > max_id then max_id = tonumber(args[j]) end
  end
  redis.call('HSET', Q .. ':m', 'next', max_id, 'count', count)
  return 'OK'
end

-- et_forward(KEYS: P:m; ARGV: P, root, holder, new_token): if the sub-tree is still frozen
-- by `holder`, replaces its root by a forwarding marker to new_token and deletes its other
-- nodes. A repeat finds its own marker and answers OK again (the client retries a call
-- whose reply a failover lost, and the copy must stay: every route to it goes through the
-- marker; new_token is fresh for each move, so a marker to it is this move's own).
local function et_forward(keys, args)
  local P, id, holder, new_token = args[1], root_arg(args[2]), args[3], args[4]
  local root = load(P, id)
  if root ~= nil and root.kind == FWD and root.token == new_token then return 'OK' end
  if root == nil or root.kind >= FWD then return 'EXPIRED' end
  local f = freeze_of(P, id, root)
  if f == nil or f[2] ~= holder then return 'EXPIRED' end
  local count = 0
  for _, nid in ipairs(subtree_ids(P, id)) do
    local v = load_below(P, nid)
    if v.kind == 0 then count = count + v.n end
    if nid ~= id then drop(P, nid) end
  end
  store(P, id, char(FWD) .. id .. new_token)
  redis.call('HDEL', P .. ':m', 'frz:' .. id)
  add_count(P, -count)
  return 'OK'
end

-- et_unfreeze(KEYS: P:m; ARGV: P, root, holder): lifts a freeze this holder made (a
-- migration that gave up).
local function et_unfreeze(keys, args)
  local P, id, holder = args[1], root_arg(args[2]), args[3]
  local f = redis.call('HGET', P .. ':m', 'frz:' .. id)
  if f and string.match(f, '^%d+:(.*)$') == holder then
    redis.call('HDEL', P .. ':m', 'frz:' .. id)
    local root = load(P, id)
    if root ~= nil and root.kind < FWD then
      store(P, id, with_links(root, without_flag(root.flags, FROZEN), root.right))
    end
  end
  return 'OK'
end

-- et_lower(KEYS: P:m; ARGV: P, root) -> {LOWERED, '', 0, lo1, id1, lo2, id2, ...}: the cut-off
-- moves below this root: its children become sub-tree roots (chained by right links) and the
-- root becomes a lowered marker. A leaf root cannot be lowered: {LEAF}.
local function et_lower(keys, args)
  local P, id = args[1], root_arg(args[2])
  local root = load(P, id)
  -- A repeat (its first reply lost to a failover) gets the same answer, so the client
  -- finishes the top update.
  if root ~= nil and root.kind == LOWERED then return lowered_reply(root) end
  if root == nil or root.kind >= FWD or not root.root then return {'STALE'} end
  if freeze_of(P, id, root) then return {'BUSY'} end
  if root.kind == 0 then return {'LEAF'} end
  local m = {kind = LOWERED, los = {}, ids = {}}
  local parts = {char(LOWERED), pack('>I2', root.n)}
  for i = 1, root.n do
    local cid = child(root, i)
    local c = load_below(P, cid)
    local right = (i < root.n) and child(root, i + 1) or root.right
    store(P, cid, with_links(c, with_flag(c.flags, ROOT), right))
    local lo = low_of(c)
    m.los[i], m.ids[i] = lo, cid
    parts[#parts + 1] = cid .. pack('>I4', #lo) .. lo
  end
  store(P, id, concat(parts))
  return lowered_reply(m)
end

-- et_memory(KEYS: P:m; ARGV: P, root) -> {inner bytes, leaf bytes, marker bytes}: what the
-- sub-tree's node keys take on this master by MEMORY USAGE (value, key and Redis's own
-- per-key overhead); a root that is a marker counts as marker bytes.
local function et_memory(keys, args)
  local P = args[1]
  local inner, leaves, markers = 0, 0, 0
  local ids, i = {root_arg(args[2])}, 1
  while i <= #ids do
    local k = node_key(P, ids[i])
    local s = redis.call('GET', k)
    if s then
      local bytes = redis.call('MEMORY', 'USAGE', k)
      local kind = byte(s, 1)
      if kind == 0 then
        leaves = leaves + bytes
      elseif kind < FWD then
        inner = inner + bytes
        local v = node_view(s, kind)
        for j = 1, v.n do ids[#ids + 1] = child(v, j) end
      else
        markers = markers + bytes
      end
    elseif i > 1 then
      error('elastree: missing node ' .. num(ids[i]) .. ' in ' .. P)
    end
    i = i + 1
  end
  return {inner, leaves, markers}
end

-- et_tag_count(KEYS: P:m) -> entries held by the tag's sub-trees
local function et_tag_count(keys, args)
  return tonumber(redis.call('HGET', keys[1], 'count') or '0')
end

-- et_drop(KEYS: P:m; ARGV: P, root): deletes a sub-tree (or a marker).
local function et_drop(keys, args)
  local P, id = args[1], root_arg(args[2])
  local root = load(P, id)
  if root == nil then return 0 end
  -- Whatever of the sub-tree is there (a copy that failed half-way is dropped too).
  local ids, i, count = {id}, 1, 0
  while i <= #ids do
    local v = load(P, ids[i])
    if v ~= nil then
      if v.kind == 0 then
        count = count + v.n
      elseif v.kind < FWD then
        for j = 1, v.n do ids[#ids + 1] = child(v, j) end
      end
      drop(P, ids[i])
    end
    i = i + 1
  end
  add_count(P, -count)
  redis.call('HDEL', P .. ':m', 'frz:' .. id)
  if tonumber(redis.call('HGET', P .. ':m', 'count') or '0') == 0 then
    redis.call('DEL', P .. ':m')
  end
  return #ids
end

---------------------------------------------------------------------------------------------
-- The top (the fully replicated levels above the cut-off), in the index's own tag T:
--   T..":top"  hash: low fence of a sub-tree -> "token:id" of its root
--   T..":conf" hash: version (bumped on every top change), unique, capacity, tokens (next
--              tag token to hand out), and the index's settings.

-- et_top(KEYS: T:top; ARGV: T) -> {version, lo1, ref1, ...}
local function et_top(keys, args)
  local T = args[1]
  local v = redis.call('HGET', T .. ':conf', 'version') or '0'
  local all = redis.call('HGETALL', T .. ':top')
  local r = {v}
  for j = 1, #all do r[j + 1] = all[j] end
  return r
end

-- et_post(KEYS: T:top; ARGV: T, sep, ref): adds a sub-tree root if its low fence is new.
local function et_post(keys, args)
  local T = args[1]
  if redis.call('HSETNX', T .. ':top', args[2], args[3]) == 1 then
    return redis.call('HINCRBY', T .. ':conf', 'version', 1)
  end
  return tonumber(redis.call('HGET', T .. ':conf', 'version') or '0')
end

-- et_top_cas(KEYS: T:top; ARGV: T, lo1, expected1, new1, ...): every entry lo_i must hold
-- expected_i ('' = absent) and is set to new_i; all or nothing. -> version or CONFLICT. A
-- top that already holds every new_i answers its version (a repeat of a change whose reply
-- a failover lost).
local function et_top_cas(keys, args)
  local T = args[1]
  local done = true
  for j = 2, #args, 3 do
    local cur = redis.call('HGET', T .. ':top', args[j]) or ''
    if cur ~= args[j + 2] then done = false end
  end
  if done then return tonumber(redis.call('HGET', T .. ':conf', 'version') or '0') end
  for j = 2, #args, 3 do
    local cur = redis.call('HGET', T .. ':top', args[j]) or ''
    if cur ~= args[j + 1] then return 'CONFLICT' end
  end
  for j = 2, #args, 3 do
    redis.call('HSET', T .. ':top', args[j], args[j + 2])
  end
  return redis.call('HINCRBY', T .. ':conf', 'version', 1)
end

-- et_init(KEYS: T:conf; ARGV: T, ref, field1, value1, ...): creates the index's settings and
-- its first sub-tree entry unless they exist; returns the stored settings as a flat array.
local function et_init(keys, args)
  local T = args[1]
  if redis.call('EXISTS', T .. ':conf') == 0 then
    for j = 3, #args, 2 do redis.call('HSET', T .. ':conf', args[j], args[j + 1]) end
    redis.call('HSET', T .. ':conf', 'version', 1)
    redis.call('HSETNX', T .. ':conf', 'tokens', 1)
    redis.call('HSETNX', T .. ':top', '', args[2])
  end
  return redis.call('HGETALL', T .. ':conf')
end

-- et_tokens(KEYS: T:conf; ARGV: n) -> first of n fresh tag tokens
local function et_tokens(keys, args)
  local n = tonumber(args[1])
  return redis.call('HINCRBY', keys[1], 'tokens', n) - n
end

-- et_version() -> the library's version string
local function et_version(keys, args)
  return VERSION
end

---------------------------------------------------------------------------------------------
-- The Baseline (the paper's B+-tree without co-location or execution migration): every node
-- its own key, anywhere in the cluster; the client walks the tree one node per round trip.
-- These single-key functions only make a change to one node atomic.

-- etb_leaf_put(KEYS: node; ARGV: key, tid, cap, mode) -> {OK [, old]} | {RIGHT, id} | {FULL}
local function etb_leaf_put(keys, args)
  local s = redis.call('GET', keys[1])
  if not s then return {'MISSING'} end
  local v = view(s)
  local key, tid, cap, mode = args[1], args[2], tonumber(args[3]), args[4]
  if beyond_high(v, key, false) then return {'RIGHT', num(v.right)} end
  local i = bound(v, key, key .. ZEROS, false)
  if holds(v, i, key) then
    local old = tid_at(v, i)
    if mode == 'u' and old ~= tid then redis.call('SET', keys[1], with_tid(v, i, tid)) end
    return {'OK', old}
  end
  if v.n >= cap then return {'FULL'} end
  redis.call('SET', keys[1], with_entry(v, i, key, tid))
  return {'OK'}
end

-- etb_leaf_del(KEYS: node; ARGV: key, expected) -> {OK [, old, removed]} | {RIGHT, id}
local function etb_leaf_del(keys, args)
  local s = redis.call('GET', keys[1])
  if not s then return {'MISSING'} end
  local v = view(s)
  local key, expected = args[1], args[2]
  if beyond_high(v, key, false) then return {'RIGHT', num(v.right)} end
  local i = bound(v, key, key .. ZEROS, false)
  if not holds(v, i, key) then return {'OK'} end
  local old = tid_at(v, i)
  if expected ~= '' and old ~= expected then return {'OK', old, '0'} end
  redis.call('SET', keys[1], compacted(view(without_entry(v, i))))
  return {'OK', old, '1'}
end

-- etb_inner_put(KEYS: node; ARGV: sep, child, cap) -> {OK} | {RIGHT, id} | {FULL}: adds a
-- separator and its right child (idempotent).
local function etb_inner_put(keys, args)
  local s = redis.call('GET', keys[1])
  if not s then return {'MISSING'} end
  local v = view(s)
  local sep, cid, cap = args[1], id_of(args[2]), tonumber(args[3])
  if beyond_high(v, sep, false) then return {'RIGHT', num(v.right)} end
  local i = bound(v, sep, sep .. ZEROS, true)
  if i > 1 and holds(v, i - 1, sep) then return {'OK'} end
  if v.n >= cap then return {'FULL'} end
  redis.call('SET', keys[1], with_entry(v, i, sep, cid))
  return {'OK'}
end

-- etb_cas(KEYS: key; ARGV: expected, new): sets the key if it holds `expected` ('' = absent);
-- a key that holds `new` already answers OK (a repeat whose reply a failover lost).
local function etb_cas(keys, args)
  local cur = redis.call('GET', keys[1]) or ''
  if cur == args[2] then return 'OK' end
  if cur ~= args[1] then return 'CONFLICT' end
  redis.call('SET', keys[1], args[2])
  return 'OK'
end

local function register(name, fn, read_only)
  local function call(keys, args)
    if sub == nil then bind() end
    return fn(keys, args)
  end
  if read_only then
    redis.register_function{function_name = name, callback = call, flags = {'no-writes'}}
  else
    redis.register_function(name, call)
  end
end

register('et_get', et_get, true)
register('et_put', et_put)
register('et_del', et_del)
register('et_scan', et_scan, true)
register('et_new_root', et_new_root)
register('et_export', et_export, true)
register('et_freeze', et_freeze)
register('et_import', et_import)
register('et_forward', et_forward)
register('et_unfreeze', et_unfreeze)
register('et_lower', et_lower)
register('et_memory', et_memory, true)
register('et_tag_count', et_tag_count, true)
register('et_drop', et_drop)
register('et_top', et_top, true)
register('et_post', et_post)
register('et_top_cas', et_top_cas)
register('et_init', et_init)
register('et_tokens', et_tokens)
register('et_version', et_version, true)
register('etb_leaf_put', etb_leaf_put)
register('etb_leaf_del', etb_leaf_del)
register('etb_inner_put', etb_inner_put)
register('etb_cas', etb_cas)
