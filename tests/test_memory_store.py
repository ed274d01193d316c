"""What MemoryStore does beyond the conformance suite (tests/test_store_conformance.py): it keeps
notification deliveries after they are delivered (to be shown and sent again, until pruned), so its outbox
must not be read whole by the calls a host makes every few seconds."""

from __future__ import annotations

from typing import Any

import pytest
from test_store_conformance import delivery, running
from troupe.core.vocabulary.store import OutboxEntry
from troupe.storage import MemoryStore


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of the deliveries the store parses back from JSON."""
    seen: list[str] = []
    parse = OutboxEntry.model_validate_json

    def counting(raw: Any, *args: Any, **kwargs: Any) -> OutboxEntry:
        entry = parse(raw, *args, **kwargs)
        seen.append(entry.id)
        return entry

    monkeypatch.setattr(OutboxEntry, "model_validate_json", counting)
    return seen


async def test_a_claim_and_a_runs_listing_parse_only_the_deliveries_they_return(parsed: list[str]):
    store = MemoryStore()
    await store.create_run(running("r1"))
    sent = tuple(delivery("r1", n, at=100.0 + n) for n in range(300))
    await store.save_run(running("r1"), expected_version=1, outbox=sent)
    for claimed in await store.claim_deliveries("host-a", now=1_000.0, lease_s=10, limit=300):
        assert await store.settle_delivery(claimed.model_copy(update={"status": "delivered"}))
    await store.create_run(running("r2"))
    waiting = delivery("r2", 1, at=2_000.0)
    await store.save_run(running("r2"), expected_version=1, outbox=(waiting,))
    parsed.clear()

    assert await store.claim_deliveries("host-b", now=1_500.0, lease_s=10, limit=10) == []
    (claimed,) = await store.claim_deliveries("host-b", now=2_000.0, lease_s=10, limit=10)
    assert claimed.id == waiting.id and claimed.lease_owner == "host-b"
    assert [e.id for e in await store.list_deliveries("r2")] == [waiting.id]
    assert parsed == [waiting.id, waiting.id]  # not the 300 delivered ones, each time
    assert len(await store.list_deliveries("r1")) == 300
