"""PausedRuns: the checkpoint a host wrote when a run paused, kept for the decision that comes next.

A decision claims a paused run with a compare-and-set on the version it read. When the decision reaches
the host that paused the run (the usual case: one host per agent, and a decision soon after the pause),
the state that host wrote is exactly what a read would return, so the claim is made against that copy
and the read is skipped: one store round trip less per decision.

The store still decides. Run ids are never reused (a finished run leaves a tombstone), so a run's
version is written once; if anything wrote the run since (another host, a replica, an expiry), the
version no longer matches, the claim's write fails and the claim starts again from a fresh read. A
claim refused on a kept copy is also tried again from a read before the refusal is reported, so an
error never stems from a stale copy.

Each copy is handed out once, and beyond ``limit`` the oldest go: a host holds at most ``limit`` paused
states however many runs wait (a run beyond them is read from the store, as always).
"""

from __future__ import annotations

from collections import OrderedDict

from troupe.core.vocabulary.state import RunState
from troupe.core.vocabulary.store import StoredRun

DEFAULT_LIMIT = 1024


class PausedRuns:
    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        self.limit = limit
        self._runs: OrderedDict[str, StoredRun] = OrderedDict()

    def keep(self, state: RunState, version: int) -> None:
        """Keep ``state`` as written at ``version``; its owner hands it over and never changes it again."""
        self._runs[state.run_id] = StoredRun(state, version)
        self._runs.move_to_end(state.run_id)
        while len(self._runs) > self.limit:
            self._runs.popitem(last=False)

    def pop(self, run_id: str) -> StoredRun | None:
        """The kept copy, handed out once (it is no longer kept), or None: read the run from the store."""
        return self._runs.pop(run_id, None)

    def __len__(self) -> int:
        return len(self._runs)


__all__ = ["DEFAULT_LIMIT", "PausedRuns"]
