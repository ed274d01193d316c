"""Who someone is: the principal every surface decides as, and the identities the run state records.

A principal is known by a stable subject id, its issuer and its subject together: two principals are
one person only when both match, so a token from an identity provider and an API key carrying the same
issuer and subject are one approver, while ``alice`` of one issuer is not ``alice`` of another. Names
given in-process (the Python API, ``troupe approve --as``) and API keys without an issuer of their own
belong to the local issuer ``troupe``. Separation of duties and quorum compare subject ids only; the
display name is for people.

Who a principal is gets decided at the edge (API keys, bearer tokens, the host app's dependency, the
CLI's ``--as``); the core only compares. A principal marked ``anonymous`` (an open server's caller, a
decision link's holder) decides only calls no approver policy governs.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

LOCAL_ISSUER = "troupe"
# Decisions the runtime makes itself (an expiry, an answer taken from a chat message).
SYSTEM_ISSUER = "troupe:system"

# Where a decision came from, as the audit records it.
Surface = Literal["python", "http", "inbox", "link", "cli", "mcp", "a2a", "ag-ui", "system"]
SURFACES: frozenset[str] = frozenset(Surface.__args__)  # type: ignore[attr-defined]


def subject_id(issuer: str, subject: str) -> str:
    """The stable id of ``subject`` at ``issuer``. An issuer never holds ``#`` (OIDC issuers have no
    fragment, and ``Principal`` refuses one), so the id splits back unambiguously at the first ``#``."""
    return f"{issuer}#{subject}"


class _Known:
    """What a principal and its record share: the subject id, and the name people see."""

    issuer: str
    subject: str
    name: str

    @property
    def id(self) -> str:
        """The stable subject id, ``issuer#subject``: what separation of duties and quorum compare."""
        return subject_id(self.issuer, self.subject)

    @property
    def display(self) -> str:
        """The name people see (the subject when there is no name)."""
        return self.name or self.subject


@dataclass(frozen=True)
class Principal(_Known):
    """Someone who starts, decides or cancels runs: a stable subject id, a name, resources and roles.

    Over HTTP the front door makes the principal from the caller's key or token; in-process a decision
    method's ``decided_by`` takes one (or a bare name, a principal of the local issuer).

    Args:
        subject: Who, at the issuer (a user id, a key's name).
        issuer: Who vouches for the subject (default ``"troupe"``, the local issuer; an OIDC
            provider's issuer URL for its tokens). Two principals are one person only when both match.
        name: The name people see (default: the subject).
        resources: The resources whose runs it may see and decide.
        roles: Its roles, which approver policies check.
        admin: It may see and decide every run, whatever its resource.
        anonymous: An open server's caller or a decision link's holder: it decides only calls no
            approver policy governs.

    Raises:
        ValueError: An empty subject or issuer, an issuer with ``#``, or names that are not strings.

    Example:
        >>> alice = Principal("alice", resources=frozenset({"acme"}), roles=frozenset({"finance"}))
        >>> await agent.approve_tool_call(run_id=run_id, decided_by=alice)
    """

    subject: str
    issuer: str = LOCAL_ISSUER
    name: str = ""
    resources: frozenset[str] = field(default_factory=frozenset)
    roles: frozenset[str] = field(default_factory=frozenset)
    admin: bool = False
    anonymous: bool = False

    def __post_init__(self) -> None:
        for label, value in (("subject", self.subject), ("issuer", self.issuer)):
            if not isinstance(value, str) or not value:
                raise ValueError(f"a principal's {label} must be a non-empty string, got {value!r}")
        if "#" in self.issuer:
            raise ValueError(f"an issuer cannot contain '#': {self.issuer!r}")
        object.__setattr__(self, "resources", _names("resources", self.resources))
        object.__setattr__(self, "roles", _names("roles", self.roles))

    def may(self, resource_id: str | None) -> bool:
        """Whether this principal may see and act on a run of a resource.

        Args:
            resource_id: The run's resource (None: a run of no resource, which only an admin may see).
        """
        return self.admin or (resource_id is not None and resource_id in self.resources)

    def identity(self, surface: str = "") -> Identity:
        """What the run's state and the audit record of this principal.

        Args:
            surface: Where it acted (``"python"``, ``"http"``, ``"inbox"``, ...).
        """
        return Identity(issuer=self.issuer, subject=self.subject, name=self.display, surface=surface)

    @classmethod
    def named(cls, who: str | Principal, roles: Iterable[str] | None = None) -> Principal:
        """A principal given in-process: a ``Principal`` as it is, or a bare name of the local issuer.

        Args:
            who: A ``Principal``, or a name (a principal of the local issuer with that subject).
            roles: Its roles (replacing a given principal's own).

        Raises:
            ValueError: ``who`` is neither a non-empty name nor a Principal.
        """
        if isinstance(who, Principal):
            return who if roles is None else cls(**{**who.__dict__, "roles": frozenset(roles)})
        if not isinstance(who, str) or not who:
            raise ValueError(f"who decides (or starts) must be a non-empty name or a Principal, got {who!r}")
        return cls(who, LOCAL_ISSUER, who, roles=frozenset(roles or ()))

    @classmethod
    def system(cls, what: str) -> Principal:
        """The runtime itself deciding (an expiry, say), as the audit records it.

        Args:
            what: What decides (``"expiry"``, ...).
        """
        return cls(what, SYSTEM_ISSUER, what)


def _names(label: str, values: Any) -> frozenset[str]:
    if isinstance(values, str) or not all(isinstance(v, str) and v for v in values):
        raise ValueError(f"a principal's {label} must be a collection of non-empty strings, got {values!r}")
    return frozenset(values)


class Identity(BaseModel, _Known):
    """A principal as the run state and the audit keep it: its subject id, the name people see, and
    the surface it acted through."""

    model_config = ConfigDict(extra="forbid")

    issuer: str
    subject: str
    name: str = ""
    surface: str = ""

    @classmethod
    def legacy(cls, name: str) -> Identity:
        """A name recorded before subjects had issuers: a principal of the local issuer."""
        return cls(issuer=LOCAL_ISSUER, subject=name, name=name)


class Approval(Identity):
    """One approver's approval towards a quorum, and the args it approved (``edited_args`` merged over
    the call's own; None: the call as proposed)."""

    edited_args: dict[str, Any] | None = None


def starter_fields(started_by: str | Principal | None) -> dict[str, Any]:
    """Who started a run, as its state keeps it (``RunState.started_by`` and ``starter``: separation of
    duties and who may cancel compare the latter); nothing for a run nobody named."""
    if started_by is None:
        return {}
    who = Principal.named(started_by)
    return {"started_by": who.display, "starter": who.identity()}


__all__ = [
    "LOCAL_ISSUER",
    "SURFACES",
    "SYSTEM_ISSUER",
    "Approval",
    "Identity",
    "Principal",
    "Surface",
    "starter_fields",
    "subject_id",
]
