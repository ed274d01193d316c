"""What can go wrong with a remote A2A agent, as Troupe errors (each names the remote agent).

TroupeError
 ├── RemoteAgentError             A2A_REMOTE_AGENT_FAILED   the remote agent failed its task or
 │    │                                                     answered what cannot be used (a tool
 │    │                                                     error the model sees)
 │    ├── RemoteCardError         A2A_CARD_INVALID          its card cannot be fetched or read
 │    ├── RemoteUnreachable       A2A_REMOTE_UNREACHABLE    a request never left (connection.py)
 │    ├── RemoteRefused           A2A_REMOTE_REFUSED        it answered a request with an error
 │    ├── RemoteFailed            A2A_REMOTE_FAILED         it failed handling a request (it may have
 │    │                                                     acted on it)
 │    └── RemoteLost              A2A_REMOTE_LOST           a request may or may not have been taken
 └── DecisionRejectedError
      └── DecisionNotDeliveredError  A2A_DECISION_NOT_DELIVERED  an answer that never reached it
                                                             (unreachable, or refused): the call
                                                             stays paused
"""

from __future__ import annotations

from troupe.core.vocabulary.errors import DecisionRejectedError, TroupeError


class RemoteAgentError(TroupeError):
    """A remote A2A agent failed, could not be reached, or answered what cannot be used."""

    code = "A2A_REMOTE_AGENT_FAILED"
    http_status = 502


class RemoteCardError(RemoteAgentError):
    """A remote A2A agent's card could not be fetched, or does not parse."""

    code = "A2A_CARD_INVALID"


class DecisionNotDeliveredError(DecisionRejectedError):
    """An answer for a remote A2A agent was not delivered (it could not be reached, or refused it);
    nothing was taken there and the call stays paused, to be decided again."""

    code = "A2A_DECISION_NOT_DELIVERED"
    http_status = 503


__all__ = ["DecisionNotDeliveredError", "RemoteAgentError", "RemoteCardError"]
