"""One structured log line per decision, expiry and recovery, beside the audit log.

The line is ``<event> run=… call=… agent_path=… decision=… who=… fingerprint=…`` with every value JSON
encoded (ASCII only), so ids and names written by callers or models cannot forge or break log lines; the
same fields ride on the record as ``record.troupe`` for structured handlers.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from troupe.core.vocabulary.store import AuditEntry

log = logging.getLogger(__name__)


def _emit(event: str, fields: dict[str, Any]) -> None:
    if not log.isEnabledFor(logging.INFO):
        return  # nobody listens: spare every decision the encoding
    text = " ".join(
        f"{key}={json.dumps(value, ensure_ascii=True, default=str)}" for key, value in fields.items()
    )
    log.info("%s %s", event, text, extra={"troupe": {"event": event, **fields}})


def decided(entry: AuditEntry) -> None:
    """A human decision, or an expiry (``entry.kind == "expired"``), as claimed on a top-level run."""
    _emit(
        "expiry" if entry.kind == "expired" else "decision",
        {
            "run": entry.run_id,
            "call": entry.tool_call_id,
            "agent_path": entry.agent_path,
            "tool": entry.tool_name,
            "decision": entry.kind,
            "who": entry.decided_by,
            "subject": entry.subject,
            "issuer": entry.issuer,
            "surface": entry.surface,
            "fingerprint": entry.fingerprint,
        },
    )


def cancelled(entry: AuditEntry) -> None:
    """A top-level run cancelled (its run-level audit entry), by whom, through which surface, and why."""
    _emit(
        "cancel",
        {
            "run": entry.run_id,
            "call": None,
            "agent_path": entry.agent_path,
            "decision": "cancelled",
            "who": entry.decided_by,
            "subject": entry.subject,
            "issuer": entry.issuer,
            "surface": entry.surface,
            "reason": entry.reason,
            "fingerprint": None,
        },
    )


def recovered(run_id: str, agent_id: str, calls: list[str], owner: str, previous: str | None) -> None:
    """A run taken over from a dead host, with the calls it found interrupted."""
    _emit(
        "recovery",
        {
            "run": run_id,
            "call": calls,
            "agent_path": [agent_id],
            "decision": "recovered",
            "who": owner,
            "previous_owner": previous,
            "fingerprint": None,
        },
    )


__all__ = ["cancelled", "decided", "recovered"]
