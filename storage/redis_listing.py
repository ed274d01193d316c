"""RedisStore's listings of paused runs: a page out of sorted sets, and the change log, per shard.

Each listing (``troupe.core.vocabulary.listing.IndexKey``) is a sorted set of run ids scored by the
negated pause time (``Keys.listing``), written by the run's own save script. A page is one script per
shard (``PAGE``): for each index of the query it seeks to the cursor's place by rank (``ZCOUNT`` and
``ZRANK`` are O(log n)), reads the next ``offset + limit + 1`` members, merges the indexes, and returns
the ids with their scores, and on one server the states of the page too (one round trip). On a
cluster the shards' ids are merged here first and only the page's states are read, from their shards.
``total`` is the size of each index (``ZCARD``), or its count between two scores (``ZCOUNT``), in the
same script as the page.

Newest first is the sets' own order (score, then member, as bytes). Oldest first (the pause time up,
then the run id) is read backwards by rank, whole pause times at a time (the runs that share the pause
time at the edge of a read are read with it), then put in order: run ids that share a pause time are
compared byte by byte, as Redis orders them (Lua's string comparison would follow the server's locale).

The change log of each shard is a stream (``Keys.changes``); a position is the list of the last ids
read per shard. A stream remembers the largest id it ever trimmed, so a reader that fell behind the
log's retention is told (``complete=False``).

Indexes written by a Troupe from before the top-level listings existed are rebuilt once per shard, from
the index of every suspended run (``Listings.ready``); a marker key says it is done.
"""

from __future__ import annotations

import asyncio
import functools
import json
import math
from typing import Any

from troupe.core.vocabulary.errors import InvalidPaginationError
from troupe.core.vocabulary.listing import (
    IndexKey,
    PausedChange,
    PausedChanges,
    PausedPage,
    PausedQuery,
    Place,
    page_of,
    readable,
)
from troupe.core.vocabulary.run_record import RunRecord
from troupe.core.vocabulary.state import RunState
from troupe.storage.redis_keys import Keys, Layout
from troupe.storage.redis_link import Link
from troupe.storage.redis_scripts import _RUN_HELPERS

# The marker's value once a shard's indexes hold every listing.
LISTING_VERSION = "2"
_MIGRATION_BATCH = 500

# Shared by PAGE: run ids compared as Redis orders members (bytes), and the rank of a place.
_ORDERING = """
local function not_after(a, b)
  local n = math.min(#a, #b)
  for i = 1, n do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return #a <= #b
end
local function below(key, score)
  if score == '-inf' then return 0 end
  return redis.call('ZCOUNT', key, '-inf', '(' .. score)
end
local function through(key, score, id)
  local base = below(key, score)
  local tied = redis.call('ZCOUNT', key, score, score)
  local lo, hi = base, base + tied
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if not_after(redis.call('ZRANGE', key, mid, mid)[1], id) then lo = mid + 1 else hi = mid end
  end
  return lo
end
"""

# KEYS: the query's indexes (disjoint). ARGV: order ('oldest' or 'newest'), lowest score, highest score
# ('-inf'/'+inf' or a number), '1' if a cursor is given, its score and run id, how many runs each index
# gives at most, the run key prefix, '1' to return the states, the page's offset. Returns {total, id,
# score, state, ...}: the first runs of the merged indexes after the cursor, in order, with the states
# of those past the offset when asked for (false otherwise).
PAGE = (
    _ORDERING
    + """
local order, low, high, cursor = ARGV[1], ARGV[2], ARGV[3], ARGV[4] == '1'
local cscore, cid, wanted = ARGV[5], ARGV[6], tonumber(ARGV[7])

-- Each run of a WITHSCORES reply as {id, score as a number (to sort), score as Redis wrote it}: the text
-- goes back in the cursor, since Lua's tostring keeps 14 digits, 100 µs of an epoch time, and a cursor
-- placed beside its run would show runs again on the next page.
local function take(pairs_, out)
  for i = 1, #pairs_, 2 do out[#out + 1] = {pairs_[i], tonumber(pairs_[i + 1]), pairs_[i + 1]} end
end

local function newest(key, out)
  local first, last = below(key, low), redis.call('ZCOUNT', key, '-inf', high)
  if cursor then first = math.max(first, through(key, cscore, cid)) end
  if first >= last then return end
  local found = redis.call('ZRANGE', key, first, math.min(first + wanted, last) - 1, 'WITHSCORES')
  take(found, out)
end

local function oldest(key, out)
  local floor, top = below(key, low), redis.call('ZCOUNT', key, '-inf', high)
  local taken = 0
  if cursor then
    local group = below(key, cscore)
    if group >= floor and group < top then
      local ends = math.min(group + redis.call('ZCOUNT', key, cscore, cscore), top)
      local from = through(key, cscore, cid)
      if from < ends then
        local rest = redis.call('ZRANGE', key, from, math.min(ends, from + wanted) - 1, 'WITHSCORES')
        take(rest, out)
        taken = #rest / 2
      end
    end
    top = math.min(top, group)
  end
  while taken < wanted and top > floor do
    local from = math.max(floor, top - (wanted - taken))
    local batch = redis.call('ZRANGE', key, from, top - 1, 'WITHSCORES')
    if from > floor then
      local start = math.max(floor, below(key, batch[2]))
      if start < from then
        local more = redis.call('ZRANGE', key, start, from - 1, 'WITHSCORES')
        for i = 1, #batch do more[#more + 1] = batch[i] end
        batch, from = more, start
      end
    end
    -- Whole pause times only (the sort below puts them in order): never the first ids of one cut off.
    take(batch, out)
    taken = taken + #batch / 2
    top = from
  end
end

local total, found = 0, {}
for _, key in ipairs(KEYS) do
  if low == '-inf' and high == '+inf' then
    total = total + redis.call('ZCARD', key)
  else
    total = total + redis.call('ZCOUNT', key, low, high)
  end
  if order == 'oldest' then oldest(key, found) else newest(key, found) end
end
table.sort(found, function(a, b)
  if a[2] ~= b[2] then
    if order == 'oldest' then return a[2] > b[2] end
    return a[2] < b[2]
  end
  return a[1] ~= b[1] and not_after(a[1], b[1])
end)
local reply = {total}
for i = 1, math.min(#found, wanted) do
  local id = found[i][1]
  reply[#reply + 1] = id
  reply[#reply + 1] = found[i][3]
  reply[#reply + 1] = ARGV[9] == '1' and i > tonumber(ARGV[10]) and redis.call('HGET', ARGV[8] .. id, 'state')
end
return reply
"""
)

# KEYS: run hashes of one shard. Returns each run's state (false for a run gone since).
STATES = """
local reply = {}
for i, key in ipairs(KEYS) do reply[i] = redis.call('HGET', key, 'state') end
return reply
"""

# KEYS: run hashes. Returns each run's version.
VERSIONS = """
local reply = {}
for i, key in ipairs(KEYS) do reply[i] = redis.call('HGET', key, 'version') end
return reply
"""

# KEYS: a shard's change log, its count. ARGV: the count read up to ('' for none: from now on), how many
# to read. Returns {position, complete, entry id, run id, listed, of, ...}; complete is 0 if entries after
# the position were trimmed away (or the position is not this log's).
CHANGES = """
local last = tonumber(redis.call('GET', KEYS[2]) or '0')
local after = ARGV[1]
if after == '' then return {tostring(last), 1} end
if not string.match(after, '^%d+$') or tonumber(after) > last then return {tostring(last), 0} end
local seen = tonumber(after)
local entries = redis.call('XRANGE', KEYS[1], '(' .. seen .. '-0', '+', 'COUNT', ARGV[2])
local first = entries[1] and tonumber(string.match(entries[1][1], '^(%d+)-'))
if (first and first > seen + 1) or (not first and last > seen) then return {tostring(last), 0} end
local reply = {after, 1}
for _, entry in ipairs(entries) do
  local fields = {}
  for i = 1, #entry[2], 2 do fields[entry[2][i]] = entry[2][i + 1] end
  reply[1] = string.match(entry[1], '^(%d+)-')
  reply[#reply + 1] = reply[1]
  reply[#reply + 1] = fields['run']
  reply[#reply + 1] = fields['listed']
  reply[#reply + 1] = fields['of']
end
return reply
"""

# A run's indexes rebuilt from its state (once per shard, for runs written before the top-level
# listings). KEYS: run hash, then its indexes. ARGV: its version as read, run id, listed, of, the scores.
# Returns 0 (nothing done) if the run changed since it was read: its write indexed it already.
REINDEX = (
    _RUN_HELPERS
    + """
if redis.call('HGET', KEYS[1], 'version') ~= ARGV[1] then return 0 end
unindex(KEYS[1], ARGV[2])
local indexes = {}
for i = 2, #KEYS do
  redis.call('ZADD', KEYS[i], ARGV[i + 3], ARGV[2])
  indexes[#indexes + 1] = KEYS[i]
end
redis.call('HSET', KEYS[1], 'indexes', cjson.encode(indexes), 'listed', ARGV[3], 'of', ARGV[4])
return 1
"""
)

# KEYS: the marker. ARGV: '' to read it, or the value to set.
MARKER = """
if ARGV[1] == '' then return redis.call('GET', KEYS[1]) end
redis.call('SET', KEYS[1], ARGV[1])
return ARGV[1]
"""


def change_of(record: RunRecord) -> tuple[str, str]:
    """What a run's write records for the change log: whether it is listed, and its filters (JSON)."""
    return "1" if record.listed else "0", _filters(record.agent_id, record.resource_id, record.top_level)


@functools.lru_cache(maxsize=1024)
def _filters(agent_id: str, resource_id: str | None, top_level: bool) -> str:
    # A handful of values per agent: each is made once, not once per write.
    return json.dumps([agent_id, resource_id, top_level])


class Listings:
    """The listings of a store's shards (``layout``)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self._ready = False

    async def page(self, link: Link, query: PausedQuery) -> PausedPage:
        await self.ready(link)
        one = len(self.layout.shards) == 1
        replies = await asyncio.gather(
            *(self._page_of(link, shard, query, one) for shard in self.layout.shards)
        )
        total = sum(int(reply[0]) for reply in replies)
        rows = [
            (Place(-float(reply[i + 1]), reply[i]), (n, reply[i], reply[i + 2]))
            for n, reply in enumerate(replies)
            for i in range(1, len(reply), 3)
        ]
        chosen, cursor = page_of(rows, query)
        if one:
            return PausedPage(readable(raw for _, _, raw in chosen if raw), total, cursor)
        return PausedPage(await self._states(link, chosen), total, cursor)

    def _page_of(self, link: Link, shard: Keys, query: PausedQuery, bodies: bool) -> Any:
        low, high = query.bounds()
        start = query.after()
        args = [
            query.order,
            _score(-high),
            _score(-low),
            "0" if start is None else "1",
            "" if start is None else repr(-start.at),
            "" if start is None else start.run_id,
            query.wanted(),
            shard.run(""),
            "1" if bodies else "0",
            query.offset,
        ]
        return link.script(PAGE)(keys=[shard.listing(key) for key in query.index_keys()], args=args)

    async def _states(self, link: Link, chosen: list[tuple[int, str, Any]]) -> list[RunState]:
        """The page's states, read from each run's shard, in the page's order."""
        wanted: dict[int, list[str]] = {}
        for n, run_id, _ in chosen:
            wanted.setdefault(n, []).append(run_id)
        shards = self.layout.shards
        found = await asyncio.gather(
            *(link.script(STATES)(keys=[shards[n].run(r) for r in ids]) for n, ids in wanted.items())
        )
        raw = {
            (n, r): state
            for (n, ids), states in zip(wanted.items(), found, strict=True)
            for r, state in zip(ids, states, strict=True)
        }
        return readable(raw[n, r] for n, r, _ in chosen if raw[n, r])

    async def changes(self, link: Link, after: str | None, limit: int) -> PausedChanges:
        await self.ready(link)
        shards = self.layout.shards
        seen = [""] * len(shards) if after is None else _positions(after, len(shards))
        replies = await asyncio.gather(
            *(
                link.script(CHANGES)(keys=[s.changes(), s.changes() + "-n"], args=[p, limit])
                for s, p in zip(shards, seen, strict=True)
            )
        )
        if not all(int(reply[1]) for reply in replies):
            return PausedChanges([], json.dumps([str(reply[0]) for reply in replies]), complete=False)
        changes: list[PausedChange] = []
        positions = []
        for shard_seen, reply in zip(seen, replies, strict=True):
            # Up to the limit in all: a shard cut short is read on from its last entry taken.
            entries = [reply[i : i + 4] for i in range(2, len(reply), 4)][: max(limit - len(changes), 0)]
            for _, run_id, is_listed, of in entries:
                agent, resource, top = json.loads(of)
                changes.append(PausedChange(run_id, is_listed == "1", agent, resource, bool(top)))
            positions.append(str(entries[-1][0]) if entries else shard_seen or str(reply[0]))
        return PausedChanges(changes, json.dumps(positions))

    @property
    def known_ready(self) -> bool:
        return self._ready

    async def ready(self, link: Link) -> None:
        """Rebuild the indexes of shards written by a Troupe from before the top-level listings, once
        (a shard with no suspended run has nothing to rebuild: it is marked at once). Called before this
        process's first write and first listing."""
        if self._ready:
            return
        marks = await asyncio.gather(
            *(link.script(MARKER)(keys=[s.listing_version()], args=[""]) for s in self.layout.shards)
        )
        for shard, mark in zip(self.layout.shards, marks, strict=True):
            if mark != LISTING_VERSION:
                await self._reindex(link, shard)
                await link.script(MARKER)(keys=[shard.listing_version()], args=[LISTING_VERSION])
        self._ready = True

    async def _reindex(self, link: Link, shard: Keys) -> None:
        every = shard.listing(IndexKey(False))
        start = 0
        # Runs this Troupe wrote are indexed already: reading them again does nothing (their versions
        # still match, so REINDEX writes what is there).
        while ids := await link.client.zrange(every, start, start + _MIGRATION_BATCH - 1):
            states = await link.script(STATES)(keys=[shard.run(r) for r in ids])
            versions = await link.script(VERSIONS)(keys=[shard.run(r) for r in ids])
            for run_id, raw, version in zip(ids, states, versions, strict=True):
                if raw and version:
                    record = RunRecord.of(RunState.from_json(raw))
                    indexes = shard.indexes(record)
                    is_listed, of = change_of(record)
                    keys = [shard.run(run_id), *(key for key, _ in indexes)]
                    args = [version, run_id, is_listed, of, *(score for _, score in indexes)]
                    await link.script(REINDEX)(keys=keys, args=args)
            start += _MIGRATION_BATCH


def _score(value: float) -> str:
    if value == math.inf:
        return "+inf"
    if value == -math.inf:
        return "-inf"
    return repr(value)


def _positions(after: str, shards: int) -> list[str]:
    try:
        found = json.loads(after)
    except ValueError:
        found = None
    if not isinstance(found, list) or len(found) != shards or not all(isinstance(p, str) for p in found):
        raise InvalidPaginationError(f"not a position in this store's change log: {after!r}")
    return found


__all__ = ["LISTING_VERSION", "Listings", "change_of"]
