"""Run options: what ``stream()``/``generate()`` take, merged over an agent's ``default_options``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field, fields
from datetime import datetime
from typing import Any, TypedDict

from troupe.core.vocabulary.errors import InvalidOptionError
from troupe.core.vocabulary.identity import Principal
from troupe.core.vocabulary.seconds import is_seconds, seconds_expected

# What ``require_tool_approval`` takes: a bool for every call, or a function
# ``(tool_name, args, request_context, workspace) -> bool`` (sync or async) asked for each call
# (``troupe.core.deciding.policy`` says who wins when a tool has a say of its own).
RunPolicy = bool | Callable[[str, dict[str, Any], dict[str, Any], Any], bool | Awaitable[bool]]



def text_or_none(**given: Any) -> None:
    """Refuse, naming it, a value given where text (or nothing) goes (``InvalidOptionError``): before
    anything is sent, so ``reason=123`` or ``thread_id=42`` is the caller's clear error, not a
    validation error from deep in the run."""
    for name, value in given.items():
        if value is not None and not isinstance(value, str):
            shown = f"{type(value).__name__} {repr(value)[:100]}"
            raise InvalidOptionError(f"{name} must be a string, got {shown}", option=name)


@dataclass(frozen=True)
class RunOptions:
    require_tool_approval: RunPolicy = False
    auto_resume_suspended_tools: bool = False
    thread_id: str | None = None
    resource_id: str | None = None
    request_context: dict[str, Any] = field(default_factory=dict)
    max_steps: int = 10
    run_id: str | None = None
    # Seconds a pause may wait for its human; after that it is declined with a reason the model sees.
    approval_timeout: float | None = None
    # Who starts the run (a name of the local issuer, or a Principal): an approver policy with separation
    # of duties keeps them from deciding its calls.
    started_by: str | Principal | None = None
    # Seconds the run may take in all (None: no limit); after that it ends with finish_reason
    # "max-duration", whatever it was doing. Time spent waiting for people does not count, unless
    # ``duration_counts_waiting``.
    max_duration_s: float | None = None
    duration_counts_waiting: bool = False

    @classmethod
    def names(cls) -> frozenset[str]:
        return frozenset(f.name for f in fields(cls))

    @classmethod
    def merge(cls, call: dict[str, Any], defaults: dict[str, Any] | None) -> RunOptions:
        """Options given in the call win; omitted ones (``None``) come from the agent's defaults."""
        merged = dict(defaults or {})
        merged.update({k: v for k, v in call.items() if v is not None})
        check_option_names(merged, "stream()")
        options = cls(**merged)
        options.validate()
        return options

    def validate(self) -> None:
        policy = self.require_tool_approval
        if not (isinstance(policy, bool) or callable(policy)):
            raise InvalidOptionError(
                "require_tool_approval must be a bool or a function "
                "(tool_name, args, request_context, workspace) -> bool",
                option="require_tool_approval",
            )
        # An id is a string: a user's or a tenant's numeric id is one only once written as one.
        text_or_none(thread_id=self.thread_id, resource_id=self.resource_id, run_id=self.run_id)
        if not isinstance(self.max_steps, int) or isinstance(self.max_steps, bool) or self.max_steps < 1:
            raise InvalidOptionError(
                f"max_steps must be an integer >= 1, got {self.max_steps!r}", option="max_steps"
            )
        if not isinstance(self.request_context, dict):
            raise InvalidOptionError("request_context must be a dict", option="request_context")
        for name in ("approval_timeout", "max_duration_s"):
            seconds = getattr(self, name)
            if seconds is not None and not is_seconds(seconds):
                raise InvalidOptionError(seconds_expected(name, seconds), option=name)
        starter = self.started_by
        if starter is not None and not (
            isinstance(starter, Principal) or (isinstance(starter, str) and starter)
        ):
            raise InvalidOptionError(
                "started_by must be a non-empty name or a troupe Principal", option="started_by"
            )
        if not isinstance(self.duration_counts_waiting, bool):
            raise InvalidOptionError(
                "duration_counts_waiting must be a bool", option="duration_counts_waiting"
            )
        if not isinstance(self.auto_resume_suspended_tools, bool):
            raise InvalidOptionError(
                "auto_resume_suspended_tools must be a bool", option="auto_resume_suspended_tools"
            )


class StreamOptions(TypedDict, total=False):
    """The keyword options of ``stream()`` and ``generate()``; defaults are RunOptions'."""

    require_tool_approval: RunPolicy
    auto_resume_suspended_tools: bool
    thread_id: str
    resource_id: str
    request_context: dict[str, Any]
    max_steps: int
    run_id: str
    approval_timeout: float
    started_by: str | Principal
    max_duration_s: float
    duration_counts_waiting: bool


class SuspendedRunFilters(TypedDict, total=False):
    """What ``list_suspended_runs`` narrows by; every filter given must match."""

    thread_id: str | None
    resource_id: str | None
    from_date: datetime | None  # paused at or after
    to_date: datetime | None  # paused at or before
    page: int | None  # 0-based; per_page runs a page (default 100)
    per_page: int | None
    cursor: str | None  # the next_cursor of the page before: the page after it (with the same filters)


def check_option_names(options: dict[str, Any], where: str) -> None:
    unknown = sorted(set(options) - RunOptions.names())
    if unknown:
        raise InvalidOptionError(
            f"unknown option(s) for {where}: {', '.join(unknown)}; "
            f"known: {', '.join(sorted(RunOptions.names()))}",
            options=unknown,
        )


def check_defaults(options: dict[str, Any], where: str) -> None:
    """Refuse, where they are given, default options that every run would refuse (an unknown name, a
    NaN ``approval_timeout``, ``max_steps=0``): otherwise the agent is made and every call fails."""
    check_option_names(options, where)
    try:
        RunOptions(**options).validate()
    except InvalidOptionError as exc:
        raise InvalidOptionError(f"{where}: {exc}", **exc.details) from None


__all__ = [
    "RunOptions",
    "RunPolicy",
    "StreamOptions",
    "SuspendedRunFilters",
    "check_defaults",
    "check_option_names",
    "text_or_none",
]
