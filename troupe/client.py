"""The Python client of a Troupe server (``troupe serve``): the agent methods of the Python API over HTTP.

    from troupe.client import AsyncTroupeClient, TroupeClient

``AsyncTroupeClient(url, api_key=...)`` / ``TroupeClient`` (blocking) -> ``.get_agent(id)`` with ``stream``,
``generate``, ``approve_tool_call``, ``decline_tool_call``, their ``_generate`` forms, ``resume_stream``,
``resume_generate``, ``list_suspended_runs`` and ``send_tool_approval``. HTTP errors are raised as the
matching ``troupe.errors`` class, or as the front door's own ``AuthenticationError`` (401),
``PermissionDeniedError`` (403) and ``InvalidRequestError`` (422), exported here; a server that does not
take the connection as ``ServerUnreachableError``, naming its URL.

``AgentAPI`` is the protocol those agents share with ``troupe.Agent``: ``AsyncAgentAPI`` for an
in-process Agent or an ``AsyncAgentClient``'s agent, ``SyncAgentAPI`` for a ``TroupeClient``'s.
"""

from troupe.api.client import AsyncAgentClient, AsyncTroupeClient
from troupe.api.errors import (
    AuthenticationError,
    HttpError,
    InvalidRequestError,
    PermissionDeniedError,
    ServerUnreachableError,
)
from troupe.api.sync_client import AgentClient, SyncAgentAPI, SyncAgentStream, TroupeClient
from troupe.core.vocabulary.agent_api import AgentAPI, AsyncAgentAPI

__all__ = [
    "AgentAPI",
    "AgentClient",
    "AsyncAgentAPI",
    "AsyncAgentClient",
    "AsyncTroupeClient",
    "AuthenticationError",
    "HttpError",
    "InvalidRequestError",
    "PermissionDeniedError",
    "ServerUnreachableError",
    "SyncAgentAPI",
    "SyncAgentStream",
    "TroupeClient",
]
