"""Tools: what an agent can call, and the context a tool runs in.

``create_tool(...)`` builds a ``Tool``. A tool's ``execute(input, ctx)`` gets its validated input model;
it may pause itself with ``return await ctx.agent.suspend(payload)`` and is called again on resume with
``ctx.agent.resume_data`` set.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

from pydantic import BaseModel, ValidationError
from troupe.core.vocabulary.names import name_problem
from troupe.core.vocabulary.seconds import is_seconds, seconds_expected
from troupe.core.vocabulary.tool_threads import Late, ToolThreads

ApprovalRule = bool | Callable[[Any, "ToolContext"], bool | Awaitable[bool]]
Execute = Callable[[Any, "ToolContext"], Any]


class SuspendSignal(BaseException):
    """Raised by ``ctx.agent.suspend``; derives from BaseException so a tool's ``except Exception``
    cannot swallow the pause."""

    def __init__(self, payload: Any, resume_schema: dict[str, Any] | None = None) -> None:
        super().__init__("tool suspended")
        self.payload = payload
        self.resume_schema = resume_schema


class ToolInterrupted(Exception):
    """Raised by a tool whose call was cut short by something outside it (the process that held its
    other end is gone): the call is reported to the model as interrupted, and not run again."""


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` is a coroutine function (or an object whose ``__call__`` is one)."""
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


@dataclass
class AgentContext:
    """``ctx.agent``: how a tool pauses itself and what it is resumed with.

    ``decline_reason`` is set when a person declined the tool's ``suspend()`` pause (only for a tool
    with ``resume_on_decline``; ``expired`` too when nobody answered in time)."""

    resume_data: Any = None
    suspend_schema: type[BaseModel] | None = None
    decline_reason: str | None = None
    expired: bool = False

    async def suspend(self, payload: Any = None, *, resume_schema: dict[str, Any] | None = None) -> NoReturn:
        """Pause the run; ``resume_schema`` (a JSON schema) is what the answer must fit, for this pause
        only, when the tool has no ``resume_schema`` model of its own."""
        if self.suspend_schema is not None:
            try:
                model = self.suspend_schema.model_validate(payload)
            except ValidationError as exc:
                raise ValueError(f"suspend payload does not match suspend_schema: {exc}") from exc
            payload = model.model_dump(mode="json")
        raise SuspendSignal(payload, resume_schema)


@dataclass
class ToolContext:
    """What a tool's ``execute(input, ctx)`` gets as ``ctx``: the run it serves and how to pause.

    Attributes:
        run_id: The run the call belongs to.
        tool_call_id: The call.
        agent_id: The agent whose tool it is.
        thread_id: The run's thread, if any.
        resource_id: The run's resource, if any.
        request_context: The dict the run was started with (``request_context=``).
        agent: ``ctx.agent``: ``await ctx.agent.suspend(payload)`` pauses the run for a person's
            answer, which the tool reads as ``ctx.agent.resume_data`` when it is called again.
    """

    run_id: str
    tool_call_id: str
    agent_id: str
    thread_id: str | None = None
    resource_id: str | None = None
    request_context: dict[str, Any] = field(default_factory=dict)
    agent: AgentContext = field(default_factory=AgentContext)


@dataclass(eq=False)
class Tool:
    """A tool an agent's model may call; make one with ``create_tool`` (its arguments are these fields).

    Attributes:
        id: The tool's id (the name the model sees when an agent lists it in a list).
        description: What the tool does, for the model.
        input_schema: The pydantic model its arguments must fit.
        execute: ``execute(input, ctx)``, sync or async.
        output_schema: A pydantic model its result is validated against, if any.
        suspend_schema: The pydantic model a ``suspend()`` payload must fit, if any.
        resume_schema: The pydantic model a person's answer must fit, if any.
        require_approval: Whether a call waits for a person's approval: a bool, or a function
            ``(input, ctx) -> bool`` (``input`` the validated ``input_schema`` model, as ``execute`` gets).
        allow_edited_args: Whether an approval may change the arguments.
        idempotent: Whether a call interrupted by a crash may simply run again.
        resume_on_decline: A decline of its ``suspend()`` pause calls it again with
            ``ctx.agent.decline_reason`` set, for a tool whose other end must hear the answer (an MCP
            elicitation).
        origin: Where the tool comes from, as people deciding its calls see it (an MCP server's name
            and the tool's annotations, say).
        timeout_s: How long one call may run, in seconds (None: no limit); also the deadline of a call
            in doubt after a takeover.
    """

    id: str
    description: str
    input_schema: type[BaseModel]
    execute: Execute
    output_schema: type[BaseModel] | None = None
    suspend_schema: type[BaseModel] | None = None
    resume_schema: type[BaseModel] | None = None
    require_approval: ApprovalRule = False
    allow_edited_args: bool = False
    idempotent: bool = False
    # A decline of this tool's suspend() pause calls it again with ctx.agent.decline_reason set (instead
    # of ending the call unrun), for a tool whose other end must hear the answer (an MCP elicitation).
    resume_on_decline: bool = False
    # Where the tool comes from, as people deciding its calls see it (JSON; e.g. an MCP server's name and
    # the tool's annotations). Carried on its pauses.
    origin: dict[str, Any] | None = None
    # How long one call may run, in seconds (None: no limit). A call that takes longer is a tool error
    # the model sees; a sync tool's thread cannot be stopped, so what it returns later is recorded in
    # the run's audit log and given to no model. Also the deadline of a call in doubt after a takeover.
    timeout_s: float | None = None

    def spec(self, name: str) -> dict[str, Any]:
        """The OpenAI function spec the model sees.

        Args:
            name: The name the agent gives this tool.

        Returns:
            ``{"type": "function", "function": {"name", "description", "parameters"}}``.
        """
        return {
            "type": "function",
            "function": {
                "name": name,
                "description": self.description,
                "parameters": self.input_schema.model_json_schema(),
            },
        }

    def parse_input(self, args: dict[str, Any]) -> BaseModel:
        """The call's arguments as the tool's ``input_schema`` model.

        Args:
            args: The arguments, as the model gave them.

        Raises:
            pydantic.ValidationError: They do not fit the schema.
        """
        return self.input_schema.model_validate(args)

    def resume_json_schema(self) -> dict[str, Any] | None:
        """The JSON schema of ``resume_schema`` (what a pause chunk shows), or None."""
        return self.resume_schema.model_json_schema() if self.resume_schema else None

    async def run(
        self,
        args: dict[str, Any],
        ctx: ToolContext,
        threads: ToolThreads | None = None,
        late: Late | None = None,
    ) -> Any:
        """Validate the arguments, execute the tool and return its JSON-able output.

        An async ``execute`` runs on the event loop; a sync one runs in a worker thread. The runtime
        calls this; a test may too.

        Args:
            args: The call's arguments.
            ctx: The call's context.
            threads: The pool a sync ``execute`` runs in (default: a private pool of the default size).
            late: Hears what a sync tool's thread returns in the end if this call is cancelled meanwhile.

        Returns:
            The output, validated against ``output_schema`` if there is one, as JSON-able data.
        """
        parsed = self.parse_input(args)
        if is_async(self.execute):
            result = self.execute(parsed, ctx)
        else:
            result = await (threads or _fallback_threads()).call(self.execute, parsed, ctx, late=late)
        if inspect.isawaitable(result):
            result = await result
        if self.output_schema is not None:
            result = self.output_schema.model_validate(result)
        return to_jsonable(result)


@functools.cache
def _fallback_threads() -> ToolThreads:
    return ToolThreads()


def to_jsonable(value: Any) -> Any:
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json")
    return value


def create_tool(
    id: str,
    description: str,
    input_schema: type[BaseModel],
    execute: Execute,
    *,
    output_schema: type[BaseModel] | None = None,
    suspend_schema: type[BaseModel] | None = None,
    resume_schema: type[BaseModel] | None = None,
    require_approval: ApprovalRule = False,
    allow_edited_args: bool = False,
    idempotent: bool = False,
    timeout_s: float | None = None,
) -> Tool:
    """Make a tool an agent's model can call, and say whether its calls wait for a person.

    Args:
        id: The tool's id; an agent given a list of tools names each by it.
        description: What the tool does, for the model.
        input_schema: A pydantic model class: the arguments the model must give, validated before the
            tool runs (and before a person is asked).
        execute: ``execute(input, ctx)``, sync or async: ``input`` is the validated ``input_schema``
            model, ``ctx`` a ``ToolContext``. A sync one runs in a worker thread. It may pause the run
            with ``return await ctx.agent.suspend(payload)``; it is then called again with
            ``ctx.agent.resume_data`` set to the person's answer.
        output_schema: A pydantic model class the result is validated against.
        suspend_schema: A pydantic model class a ``suspend()`` payload must fit.
        resume_schema: A pydantic model class a person's answer must fit (``ResumeDataValidationError``
            otherwise, and the run stays paused).
        require_approval: True pauses every call for a person's approval before it runs; a function
            ``(input, ctx) -> bool`` (sync or async) decides per call, given the validated input as
            ``execute`` is (``input.amount``, not ``args["amount"]``); one that raises means approval is
            required. It overrides the run's ``require_tool_approval`` for this tool.
        allow_edited_args: Whether an approval may change the arguments (``edited_args``, validated
            against ``input_schema``).
        idempotent: Whether a call interrupted by a crash may simply run again (otherwise it is asked
            about again, or reported to the model as interrupted).
        timeout_s: How long one call may run, in seconds (default None, no limit); a call that runs
            longer is cancelled (an async tool) or left to finish in its thread unheard (a sync tool),
            and the model is told it timed out.

    Returns:
        The ``Tool``.

    Raises:
        ValueError: An ``id`` outside ``^[A-Za-z0-9_-]{1,64}$``, the rule OpenAI's and Anthropic's APIs
            hold tool names to.
        TypeError: An ``id`` that is not a non-empty string, a schema that is not a pydantic model
            class, an ``execute`` that is not callable with ``(input, ctx)``, a ``require_approval``
            that is neither a bool nor a function callable with ``(input, ctx)``, or a ``timeout_s``
            that is not a number of seconds above 0 and at most 100 years.

    Example:
        >>> from pydantic import BaseModel
        >>> class Record(BaseModel):
        ...     id: str
        >>> def delete_record(record: Record, ctx: ToolContext) -> dict:
        ...     return {"deleted": record.id}
        >>> delete = create_tool("delete_record", "Delete a record by id", Record, delete_record,
        ...                      require_approval=True)
    """
    if not (isinstance(id, str) and id):
        raise TypeError(
            f"a tool's id must be a non-empty string (the name the model calls it by), got {id!r}"
        )
    check_tool_name(id, f"tool {id!r}: its id")
    if not (isinstance(input_schema, type) and issubclass(input_schema, BaseModel)):
        raise TypeError(f"tool {id!r}: input_schema must be a pydantic model class")
    for label, schema in (("output", output_schema), ("suspend", suspend_schema), ("resume", resume_schema)):
        if schema is not None and not (isinstance(schema, type) and issubclass(schema, BaseModel)):
            raise TypeError(f"tool {id!r}: {label}_schema must be a pydantic model class")
    if not callable(execute):
        raise TypeError(f"tool {id!r}: execute must be callable")
    if not _takes_two(execute):
        raise TypeError(f"tool {id!r}: execute must take (input, ctx), but it is {_shown(execute)}")
    if not (isinstance(require_approval, bool) or callable(require_approval)):
        raise TypeError(f"tool {id!r}: require_approval must be a bool or a function (input, ctx) -> bool")
    if not isinstance(require_approval, bool) and not _takes_two(require_approval):
        raise TypeError(
            f"tool {id!r}: require_approval must take (input, ctx), but it is {_shown(require_approval)}"
        )
    check_timeout(timeout_s, f"tool {id!r}: timeout_s")
    return Tool(
        id=id,
        description=description,
        input_schema=input_schema,
        execute=execute,
        output_schema=output_schema,
        suspend_schema=suspend_schema,
        resume_schema=resume_schema,
        require_approval=require_approval,
        allow_edited_args=allow_edited_args,
        idempotent=idempotent,
        timeout_s=timeout_s,
    )


def _takes_two(fn: Callable[..., Any]) -> bool:
    """Whether ``fn`` can be called as ``fn(input, ctx)``, as every tool function is: a one-argument
    function would otherwise fail only when the model first calls the tool, the TypeError handed to the
    model (or, for ``require_approval``, gating every call). True where Python cannot tell (a builtin)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(None, None)
    except TypeError:
        return False
    return True


def _shown(fn: Callable[..., Any]) -> str:
    return f"{getattr(fn, '__name__', type(fn).__name__)}{inspect.signature(fn)}"


def check_tool_name(name: str, what: str) -> None:
    """Raise ``ValueError`` unless ``name`` keeps the rule for names a model is handed (``names``):
    a name outside it would be accepted here and refused by the provider at the first real run."""
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(
            f"{what} is the name the model calls it by, and {problem} "
            "(the rule OpenAI's and Anthropic's APIs hold tool names to)"
        )


def check_timeout(value: Any, what: str) -> None:
    """Raise ``TypeError`` unless ``value`` is None or a number of seconds (``is_seconds``)."""
    if value is None:
        return
    if not is_seconds(value):
        raise TypeError(f"{seconds_expected(what, value)} (or None)")


__all__ = [
    "AgentContext",
    "SuspendSignal",
    "Tool",
    "ToolContext",
    "ToolInterrupted",
    "check_timeout",
    "check_tool_name",
    "create_tool",
    "is_async",
    "to_jsonable",
]
