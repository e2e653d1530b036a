#!lua name=elastree
--[[
The server side of elastree-dist: the part of every operation below the cut-off, run as Redis
Functions on the master that owns a sub-tree (execution migration, one round trip).

Layout (one sub-tree's nodes share the hash tag of their prefix P = "{et:<index>:<token>}",
so they live in one slot on one master):
  P..":m"        hash: next (last node id given out), count (entries held by the tag's
                 sub-trees)
  P..":n:"..id   one node, MessagePack array:
                 [1] level: 0 for a leaf, >0 for an inner node, FWD or LOWERED for markers
                 [2] low fence (inclusive; "" is minus infinity)
                 [3] high fence (exclusive; false is plus infinity)
                 [4] right link: id of the next node on this level (0: none). Followed only
                     between sub-tree roots (B-link) and between the leaves of one sub-tree.
                 [5] keys: leaf: the entry keys; inner: the separators (n-1 for n children)
                 [6] vals: leaf: 8-byte tids; inner: child ids
                 [7] 1 if this node is a sub-tree root, else 0
                 [8] freeze deadline (ms since the epoch, 0: not frozen), roots only
                 [9] freeze token, roots only
  Markers: {FWD, token, id}: the sub-tree moved to tag token, same id.
           {LOWERED, los, ids}: this root's children (low fences, ids) became sub-tree roots
           (the cut-off moved down); kept so a client can finish the top update.
Invariants of a node: keys strictly ascending, every key in [low, high); an inner node's
child i covers [keys[i-1], keys[i]) with the node's fences at the ends; all leaves of a
sub-tree at level 0; the leaves of a sub-tree are chained left to right by their right links.

Every function is atomic (Redis runs one at a time), so inside a sub-tree no reader ever sees
a half-done split; B-link right links matter only at the sub-tree root level, where a
client's cached top may be stale.

Replies are arrays: {status, hint_sep, hint_id, ...}. status is OK, END, NEXT (scan: go on
at the returned key in the next sub-tree), LIMIT, MOVED, FWD (token, id), STALE, BUSY.
hint_id > 0 says the call moved right past the client's sub-tree root to a sub-tree root
starting at hint_sep: the client's top is stale and that root may still need posting.
]]

local VERSION = 'elastree-tree-7'
local FWD, LOWERED = -1, -2

-- Byte order on strings. Lua compares strings with strcoll; under the C locale (which Redis
-- normally has) that is byte order and the fast path is used.
local lt
if ('a' < 'B') == false and ('\195\169' > 'z') and ('a\0b' < 'a\0c') and ('\255' > 'a') then
  lt = function(a, b) return a < b end
else
  lt = function(a, b)
    local n = math.min(#a, #b)
    for i = 1, n do
      local x, y = string.byte(a, i), string.byte(b, i)
      if x ~= y then return x < y end
    end
    return #a < #b
  end
end

local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- Decoded inner nodes by their stored bytes. Lua interns strings, so a node's bytes are a
-- cheap table key; a decoded node depends on nothing but those bytes, so an entry can never
-- be stale. Every call passes through the inner nodes above its leaf, and decoding
-- dominates the cost of a call; leaves, one per call and mostly different ones, are decoded
-- each time (caching them too filled the Lua heap with garbage and slowed every call down).
-- Entries are shared: a caller that changes a node changes a copy (copy()). Bounded:
-- emptied when it reaches CACHE_LIMIT entries.
local CACHE_LIMIT = 4096
local cache, cached = {}, 0

local function decode(s)
  local n = cache[s]
  if n == nil then
    n = cmsgpack.unpack(s)
    if n[1] > 0 then
      if cached >= CACHE_LIMIT then cache, cached = {}, 0 end
      cache[s] = n
      cached = cached + 1
    end
  end
  return n
end

-- A node as stored, shared with the cache: do not change it (see copy).
local function load(P, id)
  local s = redis.call('GET', P .. ':n:' .. id)
  if not s then return nil end
  return decode(s)
end

-- A copy of a node that the caller may change.
local function copy(n)
  local c = {}
  for i = 1, #n do c[i] = n[i] end
  if type(n[5]) == 'table' then
    c[5] = {}
    for i = 1, #n[5] do c[5][i] = n[5][i] end
  end
  if type(n[6]) == 'table' then
    c[6] = {}
    for i = 1, #n[6] do c[6][i] = n[6][i] end
  end
  return c
end

local function store(P, id, n)
  redis.call('SET', P .. ':n:' .. id, cmsgpack.pack(n))
end

local function drop(P, id)
  redis.call('DEL', P .. ':n:' .. id)
end

local function new_id(P)
  return redis.call('HINCRBY', P .. ':m', 'next', 1)
end

-- (Redis refuses "-0", which is what Lua prints for minus zero.)
local function add_count(P, delta)
  if delta ~= 0 then redis.call('HINCRBY', P .. ':m', 'count', delta) end
end

-- first i with ks[i] >= key
local function lower_bound(ks, key)
  local lo, hi = 1, #ks + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if lt(ks[mid], key) then lo = mid + 1 else hi = mid end
  end
  return lo
end

-- first i with ks[i] > key
local function upper_bound(ks, key)
  local lo, hi = 1, #ks + 1
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if lt(key, ks[mid]) then hi = mid else lo = mid + 1 end
  end
  return lo
end

local function slice(t, from, to)
  local out = {}
  for i = from, to do out[#out + 1] = t[i] end
  return out
end

local function truncate(t, len)
  for i = #t, len + 1, -1 do t[i] = nil end
end

-- A position in key space: key == nil is plus infinity. strict: the position is "just
-- below key" (looking for the largest entry < key), so the node covering it has
-- low < key <= high; otherwise low <= key < high.
local function beyond_high(n, key, strict)
  if n[3] == false then return false end
  if key == nil then return true end
  if strict then return lt(n[3], key) end
  return not lt(key, n[3])
end

local function below_low(n, key, strict)
  if key == nil then return false end
  if strict then return n[2] ~= '' and not lt(n[2], key) end
  return lt(key, n[2])
end

-- {LOWERED, '', 0, lo1, id1, ...}: the children that replaced a lowered root.
local function lowered_reply(n)
  local r = {'LOWERED', '', 0}
  for i = 1, #n[3] do
    r[#r + 1] = n[2][i]
    r[#r + 1] = n[3][i]
  end
  return r
end

-- Enters the sub-tree root `id` for the position (key, strict), moving right along the
-- root level while the position lies beyond a root's high fence. Returns the root id and
-- node, the hint (sep, id) when it moved, or nil and the reply to return.
local function enter(P, id, key, strict)
  local n = load(P, id)
  if not n then return nil, nil, nil, {'STALE', '', 0} end
  if n[1] == FWD then return nil, nil, nil, {'FWD', '', 0, n[2], n[3]} end
  if n[1] == LOWERED then return nil, nil, nil, lowered_reply(n) end
  if n[7] ~= 1 then return nil, nil, nil, {'STALE', '', 0} end
  if below_low(n, key, strict) then return nil, nil, nil, {'STALE', '', 0} end
  local hint_sep, hint_id = '', 0
  while beyond_high(n, key, strict) do
    local rid = n[4]
    local sep = n[3]
    local r = rid ~= 0 and load(P, rid) or nil
    if r == nil then return nil, nil, nil, {'STALE', '', 0} end
    if r[1] == FWD then return nil, nil, nil, {'FWD', sep, rid, r[2], r[3]} end
    if r[1] == LOWERED or r[7] ~= 1 then return nil, nil, nil, {'STALE', sep, rid} end
    id, n, hint_sep, hint_id = rid, r, sep, rid
  end
  return id, n, {hint_sep, hint_id}, nil
end

-- Descends from (id, n) to the leaf covering the position, recording the path.
local function descend(P, id, n, key, strict)
  local ids, nodes, pos = {id}, {n}, {}
  while n[1] > 0 do
    local i
    if key == nil then
      i = #n[6]
    elseif strict then
      i = lower_bound(n[5], key)
    else
      i = upper_bound(n[5], key)
    end
    pos[#ids] = i
    id = n[6][i]
    n = load(P, id)
    if n == nil or n[1] < 0 then error('elastree: missing node ' .. tostring(id) .. ' in ' .. P) end
    ids[#ids + 1] = id
    nodes[#nodes + 1] = n
  end
  return ids, nodes, pos
end

local function frozen(root)
  return root[8] ~= nil and root[8] ~= 0 and now_ms() < root[8]
end

-- A reply {status, hint_sep, hint_id, next, items...} built without unpack (which is bounded
-- by the Lua stack).
local function reply(status, hint, next, items)
  local r = {status, hint[1], hint[2], next}
  for j = 1, #items do r[j + 4] = items[j] end
  return r
end

local function ok(hint, ...)
  return {'OK', hint[1], hint[2], ...}
end

-- et_get(KEYS: P:m; ARGV: P, root, key) -> {OK, hs, hid [, tid]}
local function et_get(keys, args)
  local P, key = args[1], args[3]
  local id, n, hint, err = enter(P, tonumber(args[2]), key, false)
  if err then return err end
  local _, nodes = descend(P, id, n, key, false)
  local leaf = nodes[#nodes]
  local i = lower_bound(leaf[5], key)
  if leaf[5][i] == key then return ok(hint, leaf[6][i]) end
  return ok(hint)
end

-- Splits node (at path level `level`) if it overflows, up the path. Returns the post
-- {sep, id} when a sub-tree root split into two sub-tree roots.
local function split_up(P, ids, nodes, pos, level, cap, allow_post)
  while true do
    local node, nid = nodes[level], ids[level]
    local size = node[1] == 0 and #node[5] or #node[6]
    if size <= cap then
      store(P, nid, node)
      return nil
    end
    local rk, rv, sep
    local m = #node[5]
    if node[1] == 0 then
      local half = math.floor(m / 2)
      rk, rv = slice(node[5], half + 1, m), slice(node[6], half + 1, m)
      sep = rk[1]
      truncate(node[5], half)
      truncate(node[6], half)
    else
      local h = math.floor((m + 1) / 2)
      sep = node[5][h]
      rk, rv = slice(node[5], h + 1, m), slice(node[6], h + 1, m + 1)
      truncate(node[5], h - 1)
      truncate(node[6], h)
    end
    if level == 1 and allow_post then
      -- The sub-tree root splits into two sub-tree roots; the client posts the new one.
      local sid = new_id(P)
      store(P, sid, {node[1], sep, node[3], node[4], rk, rv, 1, 0, ''})
      node[3], node[4] = sep, sid
      store(P, nid, node)
      return {sep, sid}
    elseif level == 1 then
      -- The sub-tree grows one level; the root keeps its id (the top refers to it).
      local lid, rid = new_id(P), new_id(P)
      store(P, lid, {node[1], node[2], sep, rid, node[5], node[6], 0})
      store(P, rid, {node[1], sep, node[3], 0, rk, rv, 0})
      store(P, nid, {node[1] + 1, node[2], node[3], node[4], {sep}, {lid, rid}, 1, node[8] or 0, node[9] or ''})
      return nil
    else
      local sid = new_id(P)
      store(P, sid, {node[1], sep, node[3], node[4], rk, rv, 0})
      node[3], node[4] = sep, sid
      store(P, nid, node)
      local parent, at = copy(nodes[level - 1]), pos[level - 1]
      nodes[level - 1] = parent
      table.insert(parent[5], at, sep)
      table.insert(parent[6], at + 1, sid)
      level = level - 1
    end
  end
end

-- et_put(KEYS: P:m; ARGV: P, root, key, tid, cap, allow_post, mode)
-- mode 'u': insert or replace; 'a': insert only if absent. -> {OK, hs, hid [, old tid] [, sep, id]}
local function et_put(keys, args)
  local P, key, val, cap = args[1], args[3], args[4], tonumber(args[5])
  local allow_post, mode = args[6] == '1', args[7]
  local id, n, hint, err = enter(P, tonumber(args[2]), key, false)
  if err then return err end
  if frozen(n) then return {'BUSY', '', 0} end
  local ids, nodes, pos = descend(P, id, n, key, false)
  local leaf = copy(nodes[#nodes])
  nodes[#nodes] = leaf
  local i = lower_bound(leaf[5], key)
  if leaf[5][i] == key then
    local old = leaf[6][i]
    if mode == 'u' and old ~= val then
      leaf[6][i] = val
      store(P, ids[#ids], leaf)
    end
    return ok(hint, old)
  end
  table.insert(leaf[5], i, key)
  table.insert(leaf[6], i, val)
  add_count(P, 1)
  local post = split_up(P, ids, nodes, pos, #ids, cap, allow_post)
  if post then return ok(hint, false, post[1], post[2]) end
  return ok(hint)
end

-- Merges underfull nodes up the path after a removal.
local function merge_up(P, ids, nodes, pos, min_fill, cap)
  local level = #ids
  while level > 1 do
    local node, nid = nodes[level], ids[level]
    local size = node[1] == 0 and #node[5] or #node[6]
    if size >= min_fill then
      store(P, nid, node)
      return
    end
    local parent, at = copy(nodes[level - 1]), pos[level - 1]
    nodes[level - 1] = parent
    local left_id, right_id, left, right, sep_at
    if at < #parent[6] then
      left_id, left, right_id, sep_at = nid, node, parent[6][at + 1], at
      right = load(P, right_id)
    elseif at > 1 then
      right_id, right, left_id, sep_at = nid, node, parent[6][at - 1], at - 1
      left = copy(load(P, left_id))
    else
      store(P, nid, node)
      return
    end
    local lsize = left[1] == 0 and #left[5] or #left[6]
    local rsize = right[1] == 0 and #right[5] or #right[6]
    if lsize + rsize > cap then
      store(P, nid, node)
      return
    end
    if left[1] > 0 then table.insert(left[5], parent[5][sep_at]) end
    for j = 1, #right[5] do left[5][#left[5] + 1] = right[5][j] end
    for j = 1, #right[6] do left[6][#left[6] + 1] = right[6][j] end
    left[3], left[4] = right[3], right[4]
    store(P, left_id, left)
    drop(P, right_id)
    table.remove(parent[5], sep_at)
    table.remove(parent[6], sep_at + 1)
    level = level - 1
  end
  -- level 1: the sub-tree root. An inner root left with one child takes the child's place.
  local root, rid = copy(nodes[1]), ids[1]
  if root[1] > 0 and #root[6] == 1 then
    local cid = root[6][1]
    local child = load(P, cid)
    root[1], root[5], root[6] = child[1], child[5], child[6]
    drop(P, cid)
  end
  store(P, rid, root)
end

-- et_del(KEYS: P:m; ARGV: P, root, key, min_fill, cap, expected) -> {OK, hs, hid [, old]}
-- expected: '' removes any tid; else only that tid.
local function et_del(keys, args)
  local P, key = args[1], args[3]
  local min_fill, cap, expected = tonumber(args[4]), tonumber(args[5]), args[6]
  local id, n, hint, err = enter(P, tonumber(args[2]), key, false)
  if err then return err end
  if frozen(n) then return {'BUSY', '', 0} end
  local ids, nodes, pos = descend(P, id, n, key, false)
  local leaf = copy(nodes[#nodes])
  nodes[#nodes] = leaf
  local i = lower_bound(leaf[5], key)
  if leaf[5][i] ~= key then return ok(hint) end
  local old = leaf[6][i]
  if expected ~= '' and old ~= expected then return ok(hint, old, '0') end
  table.remove(leaf[5], i)
  table.remove(leaf[6], i)
  add_count(P, -1)
  merge_up(P, ids, nodes, pos, min_fill, cap)
  return ok(hint, old, '1')
end

-- et_scan(KEYS: P:m; ARGV: P, root, dir, limit, lo_has, lo_key, lo_incl, hi_has, hi_key, hi_incl)
-- -> {status, hs, hid, next, k1, v1, k2, v2, ...}; status END (nothing more in range),
-- LIMIT (limit reached), NEXT (this sub-tree is done; go on at `next`).
local function et_scan(keys, args)
  local P, dir, limit = args[1], args[3], tonumber(args[4])
  local lo_has, lo_key, lo_incl = args[5] == '1', args[6], args[7] == '1'
  local hi_has, hi_key, hi_incl = args[8] == '1', args[9], args[10] == '1'
  local out = {}
  if dir == 'a' then
    local start = lo_has and lo_key or ''
    local id, root, hint, err = enter(P, tonumber(args[2]), start, false)
    if err then return err end
    local _, nodes = descend(P, id, root, start, false)
    local leaf = nodes[#nodes]
    local i = lower_bound(leaf[5], start)
    if lo_has and not lo_incl and leaf[5][i] == start then i = i + 1 end
    local emitted = 0
    while true do
      if i > #leaf[5] then
        if leaf[3] == false then return reply('END', hint, '', out) end
        if leaf[3] == root[3] then return reply('NEXT', hint, root[3], out) end
        leaf = load(P, leaf[4])
        i = 1
      else
        local k = leaf[5][i]
        if hi_has and (lt(hi_key, k) or (not hi_incl and k == hi_key)) then
          return reply('END', hint, '', out)
        end
        if emitted == limit then return reply('LIMIT', hint, '', out) end
        out[#out + 1] = k
        out[#out + 1] = leaf[6][i]
        emitted = emitted + 1
        i = i + 1
      end
    end
  else
    local pos_key, strict = nil, false
    if hi_has then pos_key, strict = hi_key, not hi_incl end
    local id, root, hint, err = enter(P, tonumber(args[2]), pos_key, strict)
    if err then return err end
    local _, nodes = descend(P, id, root, pos_key, strict)
    local leaf = nodes[#nodes]
    local i
    if pos_key == nil then i = #leaf[5]
    elseif strict then i = lower_bound(leaf[5], pos_key) - 1
    else i = upper_bound(leaf[5], pos_key) - 1 end
    local emitted = 0
    while true do
      if i < 1 then
        if leaf[2] == '' then return reply('END', hint, '', out) end
        if leaf[2] == root[2] then return reply('NEXT', hint, root[2], out) end
        local _, again = descend(P, id, root, leaf[2], true)
        leaf = again[#again]
        i = #leaf[5]
      else
        local k = leaf[5][i]
        if lo_has and (lt(k, lo_key) or (not lo_incl and k == lo_key)) then
          return reply('END', hint, '', out)
        end
        if emitted == limit then return reply('LIMIT', hint, '', out) end
        out[#out + 1] = k
        out[#out + 1] = leaf[6][i]
        emitted = emitted + 1
        i = i - 1
      end
    end
  end
end

-- et_new_root(KEYS: P:m; ARGV: P) -> id of a new empty sub-tree root (a leaf covering all keys).
local function et_new_root(keys, args)
  local P = args[1]
  local id = new_id(P)
  redis.call('HINCRBY', P .. ':m', 'count', 0)
  store(P, id, {0, '', false, 0, {}, {}, 1, 0, ''})
  return id
end

-- Collects the ids of a sub-tree's nodes, root first.
local function subtree_ids(P, id)
  local ids, i = {id}, 1
  while i <= #ids do
    local n = load(P, ids[i])
    if n == nil then error('elastree: missing node ' .. tostring(ids[i]) .. ' in ' .. P) end
    if n[1] > 0 then
      for _, c in ipairs(n[6]) do ids[#ids + 1] = c end
    end
    i = i + 1
  end
  return ids
end

-- et_freeze(KEYS: P:m; ARGV: P, root, token, ttl_ms) -> {OK, count, id1, blob1, ...}
-- Freezes the sub-tree (writes answer BUSY until the deadline) and exports its nodes.
local function et_freeze(keys, args)
  local P, id, token, ttl = args[1], tonumber(args[2]), args[3], tonumber(args[4])
  local root = load(P, id)
  if root == nil or root[1] < 0 or root[7] ~= 1 then return {'STALE'} end
  if frozen(root) and root[9] ~= token then return {'BUSY'} end
  root = copy(root)
  root[8], root[9] = now_ms() + ttl, token
  store(P, id, root)
  local out, count = {'OK', 0}, 0
  for _, nid in ipairs(subtree_ids(P, id)) do
    local s = redis.call('GET', P .. ':n:' .. nid)
    local n = cmsgpack.unpack(s)
    if n[1] == 0 then count = count + #n[5] end
    out[#out + 1] = nid
    out[#out + 1] = s
  end
  out[2] = count
  return out
end

-- et_import(KEYS: Q:m; ARGV: Q, count, id1, blob1, ...): writes an exported sub-tree into
-- the fresh tag Q, its root unfrozen.
local function et_import(keys, args)
  local Q, count = args[1], tonumber(args[2])
  local max_id = tonumber(redis.call('HGET', Q .. ':m', 'next') or '0')
  local present = {}
  for j = 3, #args, 2 do present[tonumber(args[j])] = true end
  for j = 3, #args, 2 do
    local nid = tonumber(args[j])
    local n = cmsgpack.unpack(args[j + 1])
    if n[7] == 1 then n[8], n[9] = 0, '' end
    -- A right link out of the sub-tree names a node of the old tag: cut it (a call that
    -- would follow it answers STALE and the client re-reads the top).
    if not present[n[4]] then n[4] = 0 end
    store(Q, nid, n)
    if nid > max_id then max_id = nid end
  end
  redis.call('HSET', Q .. ':m', 'next', max_id)
  add_count(Q, count)
  return 'OK'
end

-- et_forward(KEYS: P:m; ARGV: P, root, token, new_token): if the sub-tree is still frozen by
-- `token`, replaces its root by a forwarding marker to new_token and deletes its other nodes.
local function et_forward(keys, args)
  local P, id, token, new_token = args[1], tonumber(args[2]), args[3], args[4]
  local root = load(P, id)
  if root == nil or root[1] < 0 or root[9] ~= token or not frozen(root) then return 'EXPIRED' end
  local count = 0
  for _, nid in ipairs(subtree_ids(P, id)) do
    local n = load(P, nid)
    if n[1] == 0 then count = count + #n[5] end
    if nid ~= id then drop(P, nid) end
  end
  store(P, id, {FWD, new_token, id})
  add_count(P, -count)
  return 'OK'
end

-- et_unfreeze(KEYS: P:m; ARGV: P, root, token): lifts a freeze this token made (a migration
-- that gave up).
local function et_unfreeze(keys, args)
  local P, id, token = args[1], tonumber(args[2]), args[3]
  local root = load(P, id)
  if root ~= nil and root[1] >= 0 and root[9] == token then
    root = copy(root)
    root[8], root[9] = 0, ''
    store(P, id, root)
  end
  return 'OK'
end

-- et_lower(KEYS: P:m; ARGV: P, root) -> {LOWERED, '', 0, lo1, id1, lo2, id2, ...}: the cut-off
-- moves below this root: its children become sub-tree roots (chained by right links) and the
-- root becomes a LOWERED marker. A leaf root cannot be lowered: {LEAF}.
local function et_lower(keys, args)
  local P, id = args[1], tonumber(args[2])
  local root = load(P, id)
  if root == nil or root[1] < 0 or root[7] ~= 1 then return {'STALE'} end
  if frozen(root) then return {'BUSY'} end
  if root[1] == 0 then return {'LEAF'} end
  local children = root[6]
  local los = {}
  for i, cid in ipairs(children) do
    local c = copy(load(P, cid))
    c[7], c[8], c[9] = 1, 0, ''
    c[4] = (i < #children) and children[i + 1] or root[4]
    store(P, cid, c)
    los[i] = c[2]
  end
  local marker = {LOWERED, los, children}
  store(P, id, marker)
  return lowered_reply(marker)
end

-- Checks one sub-tree; returns {count, height, nodes} or raises the first violation.
local function check_node(P, id, n, lo, hi, level, cap, leaves)
  local where = P .. ' node ' .. tostring(id)
  if n[1] ~= level then error('elastree check: ' .. where .. ' level ' .. n[1] .. ' expected ' .. level) end
  if n[2] ~= lo then error('elastree check: ' .. where .. ' low fence differs from its parent separator') end
  if n[3] ~= hi then error('elastree check: ' .. where .. ' high fence differs from its parent separator') end
  local ks = n[5]
  for i = 1, #ks do
    if i > 1 and not lt(ks[i - 1], ks[i]) then error('elastree check: ' .. where .. ' keys out of order') end
    if lt(ks[i], lo) or (hi ~= false and not lt(ks[i], hi)) then error('elastree check: ' .. where .. ' key outside fences') end
  end
  if level == 0 then
    if #n[6] ~= #ks then error('elastree check: ' .. where .. ' keys and tids differ in number') end
    if #ks > cap then error('elastree check: ' .. where .. ' overfull') end
    leaves[#leaves + 1] = {id, n}
    return #ks, 1
  end
  if #n[6] ~= #ks + 1 then error('elastree check: ' .. where .. ' children and separators mismatch') end
  if #n[6] > cap then error('elastree check: ' .. where .. ' overfull') end
  local count, nodes = 0, 0
  for i, cid in ipairs(n[6]) do
    local c = load(P, cid)
    if c == nil then error('elastree check: ' .. where .. ' child ' .. tostring(cid) .. ' missing') end
    local clo, chi = lo, hi
    if i > 1 then clo = ks[i - 1] end
    if i < #n[6] then chi = ks[i] end
    local cc, cn = check_node(P, cid, c, clo, chi, level - 1, cap, leaves)
    count, nodes = count + cc, nodes + cn
  end
  return count, nodes + 1
end

-- et_check(KEYS: P:m; ARGV: P, root, cap) -> {OK, count, height, nodes, lo, hi-or-'', hi_is_inf}
local function et_check(keys, args)
  local P, id, cap = args[1], tonumber(args[2]), tonumber(args[3])
  local root = load(P, id)
  if root == nil then return {'MISSING'} end
  if root[1] < 0 then return {'MARKER'} end
  if root[7] ~= 1 then error('elastree check: ' .. P .. ' node ' .. id .. ' is not marked as a sub-tree root') end
  local leaves = {}
  local count, nodes = check_node(P, id, root, root[2], root[3], root[1], cap, leaves)
  for i = 1, #leaves - 1 do
    if leaves[i][2][4] ~= leaves[i + 1][1] then
      error('elastree check: ' .. P .. ' leaf ' .. leaves[i][1] .. ' is not linked to its right neighbour')
    end
  end
  local hi = root[3]
  return {'OK', count, root[1] + 1, nodes, root[2], hi == false and '' or hi, hi == false and 1 or 0}
end

-- et_tag_count(KEYS: P:m) -> entries held by the tag's sub-trees
local function et_tag_count(keys, args)
  return tonumber(redis.call('HGET', keys[1], 'count') or '0')
end

-- et_drop(KEYS: P:m; ARGV: P, root): deletes a sub-tree (or a marker).
local function et_drop(keys, args)
  local P, id = args[1], tonumber(args[2])
  local root = load(P, id)
  if root == nil then return 0 end
  local ids = {id}
  if root[1] >= 0 then ids = subtree_ids(P, id) end
  local count = 0
  for _, nid in ipairs(ids) do
    local n = load(P, nid)
    if n[1] == 0 then count = count + #n[5] end
    drop(P, nid)
  end
  add_count(P, -count)
  if tonumber(redis.call('HGET', P .. ':m', 'count') or '0') == 0 then
    redis.call('DEL', P .. ':m')
  end
  return #ids
end

---------------------------------------------------------------------------------------------
-- The top (the fully replicated levels above the cut-off), in the index's own tag T:
--   T..":top"  hash: low fence of a sub-tree -> "token:id" of its root
--   T..":conf" hash: version (bumped on every top change), unique, cap, tokens (next tag
--              token to hand out), and the index's settings.

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
-- expected_i ('' = absent) and is set to new_i; all or nothing. -> version or CONFLICT.
local function et_top_cas(keys, args)
  local T = args[1]
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
-- These single-key functions only make a change to one node atomic. Nodes have the layout
-- above, [8] a version bumped on every change.

-- etb_leaf_put(KEYS: node; ARGV: key, tid, cap, mode) -> {OK [, old]} | {RIGHT, id} | {FULL}
local function etb_leaf_put(keys, args)
  local s = redis.call('GET', keys[1])
  if not s then return {'MISSING'} end
  local n = cmsgpack.unpack(s)
  local key, val, cap, mode = args[1], args[2], tonumber(args[3]), args[4]
  if beyond_high(n, key, false) then return {'RIGHT', n[4]} end
  local i = lower_bound(n[5], key)
  if n[5][i] == key then
    local old = n[6][i]
    if mode == 'u' and old ~= val then
      n[6][i] = val
      n[8] = (n[8] or 0) + 1
      redis.call('SET', keys[1], cmsgpack.pack(n))
    end
    return {'OK', old}
  end
  if #n[5] >= cap then return {'FULL'} end
  table.insert(n[5], i, key)
  table.insert(n[6], i, val)
  n[8] = (n[8] or 0) + 1
  redis.call('SET', keys[1], cmsgpack.pack(n))
  return {'OK'}
end

-- etb_leaf_del(KEYS: node; ARGV: key, expected) -> {OK [, old, removed]} | {RIGHT, id}
local function etb_leaf_del(keys, args)
  local s = redis.call('GET', keys[1])
  if not s then return {'MISSING'} end
  local n = cmsgpack.unpack(s)
  local key, expected = args[1], args[2]
  if beyond_high(n, key, false) then return {'RIGHT', n[4]} end
  local i = lower_bound(n[5], key)
  if n[5][i] ~= key then return {'OK'} end
  local old = n[6][i]
  if expected ~= '' and old ~= expected then return {'OK', old, '0'} end
  table.remove(n[5], i)
  table.remove(n[6], i)
  n[8] = (n[8] or 0) + 1
  redis.call('SET', keys[1], cmsgpack.pack(n))
  return {'OK', old, '1'}
end

-- etb_inner_put(KEYS: node; ARGV: sep, child, cap) -> {OK} | {RIGHT, id} | {FULL}: adds a
-- separator and its right child (idempotent).
local function etb_inner_put(keys, args)
  local s = redis.call('GET', keys[1])
  if not s then return {'MISSING'} end
  local n = cmsgpack.unpack(s)
  local sep, child, cap = args[1], tonumber(args[2]), tonumber(args[3])
  if beyond_high(n, sep, false) then return {'RIGHT', n[4]} end
  local i = upper_bound(n[5], sep)
  if n[5][i - 1] == sep then return {'OK'} end
  if #n[6] >= cap then return {'FULL'} end
  table.insert(n[5], i, sep)
  table.insert(n[6], i + 1, child)
  n[8] = (n[8] or 0) + 1
  redis.call('SET', keys[1], cmsgpack.pack(n))
  return {'OK'}
end

-- etb_cas(KEYS: key; ARGV: expected, new): sets the key if it holds `expected` ('' = absent).
local function etb_cas(keys, args)
  local cur = redis.call('GET', keys[1]) or ''
  if cur ~= args[1] then return 'CONFLICT' end
  redis.call('SET', keys[1], args[2])
  return 'OK'
end

redis.register_function('et_get', et_get)
redis.register_function('et_put', et_put)
redis.register_function('et_del', et_del)
redis.register_function('et_scan', et_scan)
redis.register_function('et_new_root', et_new_root)
redis.register_function('et_freeze', et_freeze)
redis.register_function('et_import', et_import)
redis.register_function('et_forward', et_forward)
redis.register_function('et_unfreeze', et_unfreeze)
redis.register_function('et_lower', et_lower)
redis.register_function('et_check', et_check)
redis.register_function('et_tag_count', et_tag_count)
redis.register_function('et_drop', et_drop)
redis.register_function('et_top', et_top)
redis.register_function('et_post', et_post)
redis.register_function('et_top_cas', et_top_cas)
redis.register_function('et_init', et_init)
redis.register_function('et_tokens', et_tokens)
redis.register_function('etb_leaf_put', etb_leaf_put)
redis.register_function('etb_leaf_del', etb_leaf_del)
redis.register_function('etb_inner_put', etb_inner_put)
redis.register_function('etb_cas', etb_cas)
redis.register_function{function_name = 'et_version', callback = et_version, flags = {'no-writes'}}
