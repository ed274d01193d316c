"""Read by mypy only: ``troupe.Agent`` and both HTTP clients' agents are ``AgentAPI``s (see
``troupe.core.vocabulary.agent_api``). A method renamed, an option dropped or retyped in one of them fails the
type check here. Nothing under ``TYPE_CHECKING`` runs, so importing this module imports nothing."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from troupe.api.client import AsyncAgentClient
    from troupe.api.sync_client import AgentClient, SyncAgentAPI
    from troupe.core.vocabulary.agent_api import AsyncAgentAPI
    from troupe.supervisor.agent import Agent

    def _in_process(agent: Agent) -> AsyncAgentAPI:
        return agent

    def _over_http(agent: AsyncAgentClient) -> AsyncAgentAPI:
        return agent

    def _over_http_blocking(agent: AgentClient) -> SyncAgentAPI:
        return agent

    def _blocking_options_are_typed(agent: AgentClient) -> None:
        # The ignores below must be needed: were the options ``**Any`` again, mypy would report each
        # ignore as unused (warn_unused_ignores), so these lines fail the check.
        agent.stream("hi", max_step=3)  # type: ignore[call-arg]
        agent.generate("hi", max_steps="three")  # type: ignore[arg-type]
