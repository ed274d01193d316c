"""The supervisor the A2A remote-agent tests delegate from: ``desk`` calls its one remote subagent
(``agent-vendor``, call ``d1``) and then answers with what it was told (``d1=<result>``)."""

from __future__ import annotations

from typing import Any

from helpers import echo_model

from troupe import A2AAgent, Agent
from troupe.testing import tool_call


def desk(remote: A2AAgent, prompt: str = "delete abc-123, please", **options: Any) -> Agent:
    """``options``: more of ``Agent``'s (``memory``, say)."""
    return Agent(
        "desk",
        description="The front desk",
        model=echo_model(tool_call(f"agent-{remote.id}", {"prompt": prompt}, id="d1")),
        agents={remote.id: remote},
        **options,
    )
