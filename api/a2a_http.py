"""``/a2a/{agentId}``: each agent of the runtime as an A2A agent (protocol 1.0, JSON-RPC binding), served
with the official ``a2a-sdk`` behind the same credentials as ``/api``.

    GET  /a2a/{agentId}/.well-known/agent-card.json   the agent's card
    POST /a2a/{agentId}                               JSON-RPC: SendMessage, SendStreamingMessage,
                                                      GetTask, ListTasks, CancelTask, SubscribeToTask

The card names the agent, its skills (its tools and subagents), its capabilities (streaming; no push
notifications) and security schemes that say how this front door authenticates: ``Authorization:
Bearer`` with an API key, or an OIDC token where an identity provider is configured. Both routes need a
credential as every ``/api`` route does (none in open mode), the host app's identity dependency
included (``troupe_router(identity=...)``); the SDK's JSON-RPC dispatcher reads the body and calls
``troupe.api.a2a_server.AgentsOverA2A`` with the caller's principal. Without ``a2a-sdk`` installed
(``pip install troupe-runtime[a2a]``) they answer 404 naming that extra.
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse, Response
from troupe.api.auth import Gate
from troupe.api.not_installed import not_installed
from troupe.api.routing import TroupeRoute
from troupe.api.service import CallerDep, ServiceDep
from troupe.supervisor.agent import Agent

PROTOCOL_VERSION = "1.0"
CARD_PATH = "/.well-known/agent-card.json"


def agent_card(agent: Agent, url: str, gate: Gate) -> Any:
    """The A2A ``AgentCard`` of ``agent``, served at ``url`` (its JSON-RPC endpoint)."""
    from a2a.types.a2a_pb2 import AgentCapabilities, AgentCard, AgentInterface

    schemes, requirements = _security(gate)
    return AgentCard(
        name=agent.name,
        description=agent.description or f"The Troupe agent {agent.id!r}",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version=PROTOCOL_VERSION)
        ],
        version=_version(),
        capabilities=AgentCapabilities(streaming=True, push_notifications=False, extended_agent_card=False),
        security_schemes=schemes,
        security_requirements=requirements,
        default_input_modes=["text/plain", "application/json"],
        default_output_modes=["text/plain"],
        skills=_skills(agent),
    )


def _security(gate: Gate) -> tuple[dict[str, Any], list[Any]]:
    """How the front door authenticates, as A2A security schemes, and what a call must present (any
    one of them; nothing in open mode)."""
    from a2a.types.a2a_pb2 import (
        HTTPAuthSecurityScheme,
        OpenIdConnectSecurityScheme,
        SecurityRequirement,
        SecurityScheme,
        StringList,
    )

    schemes = {
        "apiKey": SecurityScheme(
            http_auth_security_scheme=HTTPAuthSecurityScheme(
                scheme="Bearer",
                bearer_format="Troupe API key",
                description="A Troupe API key, sent as 'Authorization: Bearer <key>'",
            )
        )
    }
    if gate.tokens is not None:
        issuer = gate.tokens.settings.issuer.rstrip("/")
        schemes["oidc"] = SecurityScheme(
            open_id_connect_security_scheme=OpenIdConnectSecurityScheme(
                open_id_connect_url=f"{issuer}/.well-known/openid-configuration",
                description="A token of the identity provider, sent as 'Authorization: Bearer <token>'",
            )
        )
    if gate.open_mode:
        return schemes, []
    return schemes, [SecurityRequirement(schemes={name: StringList()}) for name in schemes]


def _skills(agent: Agent) -> list[Any]:
    """What the agent can do, as skills: its tools and its subagents (the agent itself if neither)."""
    from a2a.types.a2a_pb2 import AgentSkill

    skills = [
        AgentSkill(
            id=name,
            name=name,
            description=tool.description or name,
            tags=["tool", "needs-approval"] if tool.require_approval is True else ["tool"],
        )
        for name, tool in agent.tools.items()
    ]
    skills += [
        AgentSkill(
            id=f"agent-{key}",
            name=sub.name,
            description=sub.description or f"Delegates to the {sub.name} agent",
            tags=["subagent"],
        )
        for key, sub in agent.agents.items()
    ]
    if not skills:
        skills.append(
            AgentSkill(
                id=agent.id, name=agent.name, description=agent.description or agent.name, tags=["agent"]
            )
        )
    return skills


def _version() -> str:
    try:
        return metadata.version("troupe")
    except metadata.PackageNotFoundError:
        return "0"


def a2a_router() -> APIRouter:
    """The A2A routes (``/a2a/...``); without ``a2a-sdk``, routes that say so (404 naming the extra).
    Mounted by ``troupe_router``."""
    try:
        from a2a.server.request_handlers.response_helpers import agent_card_to_dict
        from a2a.server.routes.common import DefaultServerCallContextBuilder
        from a2a.server.routes.jsonrpc_dispatcher import JsonRpcDispatcher
        from troupe.api.a2a_server import CALL_KEY, A2ACall, AgentsOverA2A
    except ImportError:
        return _not_installed_router()

    class CallContext(DefaultServerCallContextBuilder):
        """The SDK's call context, with the caller the route found (and no credential in it)."""

        def build(self, request: Any) -> Any:
            context = super().build(request)
            context.state["headers"].pop("authorization", None)
            context.state[CALL_KEY] = request.scope[CALL_KEY]
            return context

    dispatcher = JsonRpcDispatcher(AgentsOverA2A(), context_builder=CallContext())
    router = APIRouter(tags=["a2a"], route_class=TroupeRoute)

    @router.get("/a2a/{agentId}" + CARD_PATH, name="a2a_card")
    async def card(agentId: str, request: Request, service: ServiceDep, caller: CallerDep) -> Response:
        """The agent's A2A card."""
        agent = service.agent(agentId)
        url = str(request.url_for("a2a_rpc", agentId=agent.id))
        return JSONResponse(agent_card_to_dict(agent_card(agent, url, service.gate)))

    @router.post("/a2a/{agentId}", name="a2a_rpc")
    async def rpc(agentId: str, request: Request, service: ServiceDep, caller: CallerDep) -> Response:
        """A2A's JSON-RPC methods on the agent's tasks (its runs)."""
        service.agent(agentId)
        inbox = str(request.url_for("inbox_page"))
        request.scope[CALL_KEY] = A2ACall(service, agentId, caller, inbox, request)
        response: Response = await dispatcher.handle_requests(request)
        return response

    return router


def _not_installed_router() -> APIRouter:
    router = APIRouter(tags=["a2a"], route_class=TroupeRoute)

    @router.api_route("/a2a/{path:path}", methods=["GET", "POST"], include_in_schema=False)
    async def unserved(path: str, caller: CallerDep) -> Response:
        """Any A2A route on a server without ``a2a-sdk``, after the caller's credential as the real ones."""
        raise not_installed("A2A", "a2a-sdk", "a2a")

    return router


__all__ = ["CARD_PATH", "PROTOCOL_VERSION", "a2a_router", "agent_card"]
