"""Where RedisStore keeps things: key names, and on Redis Cluster the shard (hash slot) of each.

Every write of a run is one Lua script, and a script may only touch keys of one hash slot on Redis
Cluster. So the store's keys are split into a fixed number of shards, each a hash tag of its own
(``troupe:{troupe:3}:run:<id>``): a shard holds runs together with the indexes, audit lists, outbox
entries and threads of those runs, and every script works inside one shard, exactly as on one server.
The shards' slots are spread over the cluster's masters, so runs are too.

Which shard a run lives in (its *home*) follows from the run itself: the shard of its thread if it has
one (a run's write appends to its thread in the same script, so a thread and all its runs share a
shard), else the shard of its own id. A run found only by id whose home is its thread's shard leaves a
pointer (``home:<id>``) in the shard of its id, written before the run and never changed afterwards.

Listings read every shard and merge; one shard's part is still read in one atomic script. On a single
server there is one shard and no hash tag, which is the key layout the store always had.
"""

from __future__ import annotations

import zlib

from troupe.core.vocabulary.listing import IndexKey
from troupe.core.vocabulary.run_record import RunRecord
from troupe.core.vocabulary.state import RunState

# Enough that the shards' slots land on every master of a usual cluster; few enough that a listing,
# which reads each shard, stays cheap. Fixed for a store's life: a thread's shard follows from it.
CLUSTER_SHARDS = 16


def _part(value: str) -> str:
    """An id inside a key, escaped so that it cannot run into the next part."""
    return value.replace("%", "%25").replace(":", "%3A")


class Keys:
    """Every key of one shard, built from its base (the prefix, plus the shard's hash tag)."""

    def __init__(self, base: str, number: int = 0) -> None:
        self.prefix = base
        self.number = number

    def run(self, run_id: str) -> str:
        return f"{self.prefix}run:{run_id}"

    def home_of(self, run_id: str) -> str:
        """The pointer to a run's home shard (see the module docstring); set only for runs living
        elsewhere than the shard of their own id."""
        return f"{self.prefix}home:{run_id}"

    def audit(self, run_id: str) -> str:
        return f"{self.prefix}audit:{run_id}"

    def thread(self, thread_id: str) -> str:
        return f"{self.prefix}thread:{thread_id}"

    def suspended(self, agent_id: str | None) -> str:
        """Suspended runs of one agent, or of all agents (``None``)."""
        if agent_id is None:
            return f"{self.prefix}suspended-all"
        return f"{self.prefix}suspended:{_part(agent_id)}"

    def suspended_on_thread(self, agent_id: str, thread_id: str) -> str:
        return f"{self.suspended(agent_id)}:thread:{_part(thread_id)}"

    def suspended_for_resource(self, agent_id: str, resource_id: str) -> str:
        return f"{self.suspended(agent_id)}:resource:{_part(resource_id)}"

    def listing(self, key: IndexKey) -> str:
        """The sorted set of one listing of paused runs (scored by the negated pause time). The first
        four are the suspended indexes the store always had; the top-level ones came with paged
        listings (``suspended-top``)."""
        if not key.top_level:
            if key.agent is None:
                return self.suspended(None)
            if key.thread is not None:
                on_thread = self.suspended_on_thread(key.agent, key.thread)
                return on_thread if key.resource is None else f"{on_thread}:resource:{_part(key.resource)}"
            if key.resource is not None:
                return self.suspended_for_resource(key.agent, key.resource)
            return self.suspended(key.agent)
        name = f"{self.prefix}suspended-top"
        if key.agent is not None:
            name += f":{_part(key.agent)}"
        if key.resource is not None:
            name += f":resource:{_part(key.resource)}"
        if key.role is not None:
            name += f":role:{_part(key.role)}"
        return name

    def changes(self) -> str:
        """The shard's change log of the listings (a stream)."""
        return f"{self.prefix}paused-changes"

    def listing_version(self) -> str:
        """Which listings the shard's indexes hold (``troupe.storage.redis_listing``)."""
        return f"{self.prefix}listing-version"

    def running(self, agent_id: str) -> str:
        return f"{self.prefix}running:{_part(agent_id)}"

    def expiring(self, agent_id: str) -> str:
        return f"{self.prefix}expiring:{_part(agent_id)}"

    def owners(self) -> str:
        return f"{self.prefix}owners"

    def outbox(self, delivery_id: str) -> str:
        return f"{self.prefix}outbox:{delivery_id}"

    def outbox_due(self) -> str:
        return f"{self.prefix}outbox-due"

    def outbox_delivered(self) -> str:
        return f"{self.prefix}outbox-delivered"

    def outbox_of_run(self, run_id: str) -> str:
        return f"{self.prefix}outbox-run:{run_id}"

    def write_token(self, token: str) -> str:
        return f"{self.prefix}write:{token}"

    def link(self, link_id: str) -> str:
        """A decision link's record (``troupe.core.vocabulary.store.LinkRecord``)."""
        return f"{self.prefix}link:{link_id}"

    def indexes(self, record: RunRecord) -> list[tuple[str, float]]:
        """The index keys a run belongs to, each with the run's score there."""
        if record.status == "running":
            return [(self.running(record.agent_id), 0.0)]
        at = record.paused_at
        # A finished run is in no listing; nor is a suspended one with nothing paused (as in MemoryStore).
        if not record.index_keys or at is None:
            return []
        found = [(self.listing(key), -at) for key in record.index_keys]
        if record.expires_at is not None:
            found.append((self.expiring(record.agent_id), record.expires_at))
        return found


class Layout:
    """The store's shards, and which one holds a run or a thread."""

    def __init__(self, prefix: str, shards: int) -> None:
        if shards < 1:
            raise ValueError(f"a Redis store needs at least one shard, got {shards}")
        if shards > 1 and ("{" in prefix or "}" in prefix):
            # Redis hashes only the first {...} of a key: a braced prefix would pin every shard to one slot.
            raise ValueError(
                f"prefix {prefix!r} has a brace; on Redis Cluster the store hash-tags keys itself"
            )
        if shards == 1:
            self.shards = [Keys(prefix)]
        else:
            self.shards = [Keys(f"{prefix}{{{prefix}{n}}}:", n) for n in range(shards)]

    def _of(self, name: str) -> Keys:
        # crc32, not hash(): every process must pick the same shard for a name.
        return self.shards[zlib.crc32(name.encode()) % len(self.shards)]

    def own(self, run_id: str) -> Keys:
        """The shard of a run's id: where the run lives without a thread, or its pointer otherwise."""
        return self._of(f"run:{run_id}")

    def of_thread(self, thread_id: str) -> Keys:
        return self._of(f"thread:{thread_id}")

    def home(self, run: RunState | RunRecord) -> Keys:
        """Where the run lives."""
        return self.own(run.run_id) if run.thread_id is None else self.of_thread(run.thread_id)

    def of_link(self, link_id: str) -> Keys:
        return self._of(f"link:{link_id}")

    @property
    def first(self) -> Keys:
        """The shard of store-wide keys (host heartbeats)."""
        return self.shards[0]


__all__ = ["CLUSTER_SHARDS", "Keys", "Layout"]
