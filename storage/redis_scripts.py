"""The Lua scripts of RedisStore: each is one atomic step on the server.

Reads that must agree with each other (a listing's total and its page) and writes that must happen
together (a compare-and-set, its audit entries and the index changes) are each one script. Every write
carries a random token so that a retried write whose first attempt landed recognises itself; see
``troupe.storage.redis`` for why commands are retried at all.
"""

from __future__ import annotations

from troupe.core.vocabulary.listing import KEEP_CHANGES

# How long an append remembers its token: far longer than the immediate retry that needs it.
TOKEN_TTL_S = 60

# Shared by the write scripts. A run's hash records the index keys it is in, so that it leaves them
# without the script parsing its state, and the token of the write that stored it, so that a retried
# write recognises its own first attempt. ``put`` adds the run to KEYS[first_key..], each scored by the
# ARGV from ``first_score`` on, in the same order. It also records whether the run is in the listings of
# paused runs (``listed``) and what the change log says of it (``of``: its agent, resource and whether it
# is top-level, as JSON), so that a write that lists it or takes it out logs that (``log``) to its shard's
# change log: a stream of the last ``KEEP_CHANGES`` entries (about: trimmed a node at a time), each entry's
# id the log's own count (``<n>-0``, the count kept beside it in ``<log>-n``), so a reader can tell whether
# the entries after its position are all still there.
_RUN_HELPERS = f"""
local function unindex(run_key, run_id)
  local recorded = redis.call('HGET', run_key, 'indexes')
  if recorded then
    for _, index in ipairs(cjson.decode(recorded)) do redis.call('ZREM', index, run_id) end
  end
end
-- A write's own leaving of the indexes: only those the run was in (``recorded``, their JSON) and is in no
-- more; ``put``'s ZADD moves its score in the ones it stays in. A write that keeps its indexes (most
-- do: a running run stays in its agent's running set) removes nothing.
local function leave_others(recorded, run_id, first_key)
  if not recorded then return end
  local now = {{}}
  for i = first_key, #KEYS do now[KEYS[i]] = true end
  for _, index in ipairs(cjson.decode(recorded)) do
    if not now[index] then redis.call('ZREM', index, run_id) end
  end
end
local function put(run_key, state, version, token, run_id, first_key, first_score, listed, of)
  local indexes = {{}}
  for i = first_key, #KEYS do
    redis.call('ZADD', KEYS[i], ARGV[first_score + i - first_key], run_id)
    indexes[#indexes + 1] = KEYS[i]
  end
  redis.call('HSET', run_key, 'state', state, 'version', version, 'write', token,
             'indexes', cjson.encode(indexes), 'listed', listed, 'of', of)
end
local function log(changes, run_id, listed, of)
  local n = redis.call('INCR', changes .. '-n')
  redis.call('XADD', changes, 'MAXLEN', '~', {KEEP_CHANGES}, n .. '-0',
             'run', run_id, 'listed', listed, 'of', of)
end
"""

# Before a run is created in another shard than that of its id (the shard of its thread), the shard of
# its id records where it went, so that it can be found by id. KEYS: the pointer, the run hash in the
# shard of its id. ARGV: the home shard's number. Returns 1 if the id now points there (it may have
# already: a retried create), or 0 if the id is taken (a run here, or a pointer elsewhere). Never
# changed once set, so readers may cache it.
CLAIM_HOME = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local home = redis.call('GET', KEYS[1])
if home and home ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""

# KEYS: a run's pointer and its hash, both in the shard of its id. Returns {home} if the run lives in
# another shard, else {'', state, version} (nil for a run that is not here), in one round trip.
LOAD = """
local home = redis.call('GET', KEYS[1])
if home then return {home} end
local found = redis.call('HMGET', KEYS[2], 'state', 'version')
return {'', found[1], found[2]}
"""

# KEYS: run hash, a guard (the run's home pointer when the run lives in the shard of its id, else the
# run hash again), the shard's change log, the list each of the n pushes goes to (audit entries, thread
# messages), the outbox's due zset, the run's outbox zset, the hash of each of m outbox entries, then the
# indexes the run belongs to now. ARGV: write token, expected version, state, run id, whether it is listed
# ('1' or '0'), what the change log says of it, n, the n values, m, the m entries' JSON, their m due
# times, then the index scores. An outbox entry already stored is left as it is. Expected version 0
# stores a new run (a run's first write): its id must be free.
# Returns the new version, 0 if the run is not at the expected version (or is gone), or -1 if a first
# write finds its id taken (a run, a finished run's tombstone, or a run living in another shard).
SAVE = (
    _RUN_HELPERS
    + """
-- Everything the write reads of the stored run, in one call (each call inside a script costs about
-- what a whole SET does on the server).
local stored = redis.call('HMGET', KEYS[1], 'version', 'write', 'listed', 'of', 'indexes')
local version = tonumber(stored[1] or '0')
local expected = tonumber(ARGV[2])
if version ~= expected then
  if version == expected + 1 and stored[2] == ARGV[1] then return version end
  if expected == 0 then return -1 end
  return 0
end
if version == 0 then
  if redis.call('EXISTS', KEYS[1]) == 1 then return -1 end
  if KEYS[2] ~= KEYS[1] and redis.call('EXISTS', KEYS[2]) == 1 then return -1 end
end
local entries = tonumber(ARGV[7])
local sends = tonumber(ARGV[8 + entries])
leave_others(stored[5], ARGV[4], 6 + entries + sends)
put(KEYS[1], ARGV[3], version + 1, ARGV[1], ARGV[4], 6 + entries + sends, 9 + entries + 2 * sends,
    ARGV[5], ARGV[6])
-- Listed now: logged as it is now; taken out: as it was listed (what a reader filters on).
if ARGV[5] == '1' then log(KEYS[3], ARGV[4], '1', ARGV[6])
elseif stored[3] == '1' then log(KEYS[3], ARGV[4], '0', stored[4]) end
for i = 1, entries do redis.call('RPUSH', KEYS[3 + i], ARGV[7 + i]) end
local due_key, run_outbox = KEYS[4 + entries], KEYS[5 + entries]
for i = 1, sends do
  local key = KEYS[5 + entries + i]
  if redis.call('HSETNX', key, 'entry', ARGV[8 + entries + i]) == 1 then
    local at = ARGV[8 + entries + sends + i]
    redis.call('ZADD', due_key, at, key)
    redis.call('ZADD', run_outbox, redis.call('ZCARD', run_outbox), key)
  end
end
return version + 1
"""
)

# The outbox. Each entry is a hash: ``entry`` (its JSON, rewritten only by Python) and ``owner`` (the
# host holding its lease). The due zset holds pending entries' keys, scored by when a host may take them.

# KEYS: the due zset. ARGV: now, lease end, limit, owner. Leases the due entries; returns their JSON.
CLAIM_OUTBOX = """
local reply = {}
for _, key in ipairs(redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, ARGV[3])) do
  redis.call('HSET', key, 'owner', ARGV[4])
  redis.call('ZADD', KEYS[1], ARGV[2], key)
  reply[#reply + 1] = redis.call('HGET', key, 'entry')
end
return reply
"""

# The same for one target's entries (its lane). ARGV: now, lease end, limit, owner, target, '1' to only
# look (then it returns key, due time pairs, and leases nothing). An entry's target is read from its JSON
# once and kept beside it (``target``), so a look over other targets' entries parses none of them again.
CLAIM_OUTBOX_OF = """
local reply, found, limit, looking = {}, 0, tonumber(ARGV[3]), ARGV[6] == '1'
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'WITHSCORES')
for i = 1, #due, 2 do
  if found >= limit then break end
  local key = due[i]
  local target = redis.call('HGET', key, 'target')
  if not target then
    target = cjson.decode(redis.call('HGET', key, 'entry'))['target']
    if not looking then redis.call('HSET', key, 'target', target) end
  end
  if target == ARGV[5] then
    found = found + 1
    if looking then
      reply[#reply + 1] = key
      reply[#reply + 1] = due[i + 1]
    else
      redis.call('HSET', key, 'owner', ARGV[4])
      redis.call('ZADD', KEYS[1], ARGV[2], key)
      reply[#reply + 1] = redis.call('HGET', key, 'entry')
    end
  end
end
return reply
"""

# KEYS: entry hash, the due zset, the delivered zset. ARGV: lease owner ('' for none: a redelivery),
# entry JSON, 'pending' or not, due time, when it was delivered ('' unless it was). A settle whose lease
# is gone writes nothing (returns 0).
SETTLE_OUTBOX = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] ~= '' and redis.call('HGET', KEYS[1], 'owner') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'entry', ARGV[2])
redis.call('HDEL', KEYS[1], 'owner')
if ARGV[3] == 'pending' then redis.call('ZADD', KEYS[2], ARGV[4], KEYS[1])
else redis.call('ZREM', KEYS[2], KEYS[1]) end
if ARGV[5] ~= '' then redis.call('ZADD', KEYS[3], ARGV[5], KEYS[1])
else redis.call('ZREM', KEYS[3], KEYS[1]) end
return 1
"""

# KEYS: the delivered zset, then for each candidate its entry hash, its run's outbox zset and its run's
# hash. ARGV: the cutoff, now. Deletes the candidates still delivered at or before the cutoff whose run
# has finished (one redelivered since is left alone); one whose run lives is looked at again from now.
# Returns how many went.
PRUNE_OUTBOX = """
local pruned = 0
for i = 2, #KEYS, 3 do
  local at = redis.call('ZSCORE', KEYS[1], KEYS[i])
  if at and tonumber(at) <= tonumber(ARGV[1]) then
    if redis.call('HEXISTS', KEYS[i + 2], 'version') == 1 then
      redis.call('ZADD', KEYS[1], ARGV[2], KEYS[i])
    else
      redis.call('DEL', KEYS[i])
      redis.call('ZREM', KEYS[i + 1], KEYS[i])
      redis.call('ZREM', KEYS[1], KEYS[i])
      pruned = pruned + 1
    end
  end
end
return pruned
"""

# KEYS: a run's outbox zset. Returns its entries' JSON, oldest first.
LIST_OUTBOX = """
local reply = {}
for _, key in ipairs(redis.call('ZRANGE', KEYS[1], 0, -1)) do
  reply[#reply + 1] = redis.call('HGET', key, 'entry')
end
return reply
"""

# KEYS: run hash, the shard's change log, then one list key per value to push. ARGV: expected version
# ('' for any), run id, the values. Idempotent as it is: a run already gone is not deleted again, nor are
# its pushes repeated. Returns 1 (deleted, or already gone), or 0 if the run is at another version.
DELETE = (
    _RUN_HELPERS
    + """
local version = redis.call('HGET', KEYS[1], 'version')
if not version then return 1 end
if ARGV[1] ~= '' and tonumber(version) ~= tonumber(ARGV[1]) then return 0 end
local listing = redis.call('HMGET', KEYS[1], 'listed', 'of')
unindex(KEYS[1], ARGV[2])
redis.call('DEL', KEYS[1])
if listing[1] == '1' then log(KEYS[2], ARGV[2], '0', listing[2]) end
-- A tombstone: the id stays taken for ever (a first write finds the key), yet the run reads as gone.
redis.call('HSET', KEYS[1], 'finished', 1)
for i = 3, #KEYS do redis.call('RPUSH', KEYS[i], ARGV[i]) end
return 1
"""
)

# KEYS: thread list, the write's token key. ARGV: messages. A retried append whose first attempt
# landed finds its token key and appends nothing.
APPEND = f"""
if not redis.call('SET', KEYS[2], 1, 'NX', 'EX', {TOKEN_TTL_S}) then return 0 end
for i = 1, #ARGV do redis.call('RPUSH', KEYS[1], ARGV[i]) end
return 1
"""

# Host heartbeats, scored by expiry on the Redis server's clock (so hosts with skewed clocks agree).
# KEYS: the owners zset. ARGV: owner, ttl in seconds.
TOUCH_OWNER = """
local now = redis.call('TIME')
local expires = tonumber(now[1]) + tonumber(now[2]) / 1000000 + tonumber(ARGV[2])
redis.call('ZADD', KEYS[1], string.format('%.6f', expires), ARGV[1])
return 1
"""

# KEYS: the owners zset. Drops expired heartbeats and returns the live owners.
LIVE_OWNERS = """
local now = redis.call('TIME')
local at = tonumber(now[1]) + tonumber(now[2]) / 1000000
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('%.6f', at))
return redis.call('ZRANGE', KEYS[1], 0, -1)
"""


__all__ = [
    "APPEND",
    "CLAIM_HOME",
    "CLAIM_OUTBOX",
    "DELETE",
    "LIST_OUTBOX",
    "LIVE_OWNERS",
    "LOAD",
    "PRUNE_OUTBOX",
    "SAVE",
    "SETTLE_OUTBOX",
    "TOKEN_TTL_S",
    "TOUCH_OWNER",
]


# Decision links. Each is a hash: ``record`` (LinkRecord JSON without its users), ``expires_at``,
# ``uses`` (a counter) and ``used:<principal>`` (the count at that principal's use, so users keep their
# order), deleted by Redis itself once the record may be forgotten.

# KEYS: the link's hash. ARGV: record JSON, expiry, when to forget it (integer epoch seconds). Keeps the
# record unless one is kept already; returns what is kept (HGETALL).
ISSUE_LINK = """
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('HSET', KEYS[1], 'record', ARGV[1], 'expires_at', ARGV[2], 'uses', 0)
  redis.call('EXPIREAT', KEYS[1], ARGV[3])
end
return redis.call('HGETALL', KEYS[1])
"""

# KEYS: the link's hash. ARGV: principal, now. Marks the link used by the principal unless it is gone,
# expired or used by them already (then nil); returns the hash (HGETALL).
USE_LINK = """
if redis.call('EXISTS', KEYS[1]) == 0 then return nil end
if tonumber(ARGV[2]) >= tonumber(redis.call('HGET', KEYS[1], 'expires_at')) then return nil end
local field = 'used:' .. ARGV[1]
if redis.call('HEXISTS', KEYS[1], field) == 1 then return nil end
redis.call('HSET', KEYS[1], field, redis.call('HINCRBY', KEYS[1], 'uses', 1))
return redis.call('HGETALL', KEYS[1])
"""

# KEYS: the link's hash. ARGV: nothing, or a principal whose use is undone. Returns the hash (HGETALL).
LINK = """
if ARGV[1] then redis.call('HDEL', KEYS[1], 'used:' .. ARGV[1]) end
return redis.call('HGETALL', KEYS[1])
"""
