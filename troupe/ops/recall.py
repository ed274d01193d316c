"""Which call an operator's decision meant, remembered between invocations of the CLI.

``troupe decline RUN`` without a CALL picks the run's latest paused call. A retry of the same command
(after a timeout, say) must mean the same call, not the one the run paused on next: so the call is
resolved once, written here before the decision is sent, and a retry within a day reuses it (and hears
"already declined"). The file lives in the user's state directory and only the user can read it.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from pathlib import Path
from typing import Any

KEEP_S = 24 * 3600


def _path() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(base) / "troupe" / "cli-decisions.json"


def _key(where: str, run_id: str, command: str) -> str:
    return json.dumps([where, run_id, command])


def _load(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _recent(entry: Any, now: float) -> bool:
    """Whether ``entry`` is a record written within ``KEEP_S``. One that is not a record with a time
    (the file edited by hand, or damaged) counts as absent: it is forgotten, never a failed command."""
    at = entry.get("at") if isinstance(entry, dict) else None
    return isinstance(at, int | float) and not isinstance(at, bool) and now - at < KEEP_S


def recalled(where: str, run_id: str, command: str) -> tuple[str, str] | None:
    """``(agent, call)`` an earlier ``command`` on this run (at this source) resolved to, if recent."""
    entry: Any = _load(_path()).get(_key(where, run_id, command))
    if not _recent(entry, time.time()):
        return None
    agent, call = entry.get("agent"), entry.get("call")
    return (agent, call) if isinstance(agent, str) and isinstance(call, str) else None


def remember(where: str, run_id: str, command: str, agent: str, call: str) -> None:
    path = _path()
    now = time.time()
    data = {k: v for k, v in _load(path).items() if _recent(v, now)}
    data[_key(where, run_id, command)] = {"agent": agent, "call": call, "at": now}
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    temp = path.with_suffix(f".{os.getpid()}.tmp")
    fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(data, f)
    try:
        os.replace(temp, path)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


__all__ = ["recalled", "remember"]
