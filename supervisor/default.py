"""The process's default Runtime, for Agents used without one (MemoryStore, Ray started locally).

``TROUPE_EXECUTOR=local`` makes it run agents in-process instead (quick scripts, no Ray start-up).
"""

from __future__ import annotations

import os
import threading

from troupe.supervisor.agent_runtime import provide_default
from troupe.supervisor.runtime import Executor, Runtime

_lock = threading.Lock()
_default: Runtime | None = None


def default_runtime() -> Runtime:
    global _default
    with _lock:
        if _default is None:
            executor = os.environ.get("TROUPE_EXECUTOR", "ray")
            if executor not in ("ray", "local"):
                raise ValueError(f"TROUPE_EXECUTOR must be 'ray' or 'local', got {executor!r}")
            chosen: Executor = "ray" if executor == "ray" else "local"
            _default = Runtime(executor=chosen)
        return _default


provide_default(default_runtime)

__all__ = ["default_runtime"]
