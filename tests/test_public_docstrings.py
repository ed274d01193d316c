"""The public API documents itself (issue 45): ``help()``, an IDE's hover and the reference pages (which
mkdocstrings renders from these docstrings) are where a user first reads it.

Every public name (``troupe.__all__`` and the ``__all__`` of ``troupe.client``, ``troupe.errors`` and
``troupe.testing``) has a docstring of its own; every public method and property of those classes has
one, and a method that takes arguments says more than one line and names each of them; a class names
the arguments of its constructor; each error says its ``code`` and HTTP status. The run methods of
``Agent``, ``Runtime`` and the clients show their keyword arguments (no ``**options`` hiding
``tool_call_id`` from an IDE), and the HTTP clients refuse, before sending anything, who-acts arguments
that only an in-process agent takes."""

from __future__ import annotations

import inspect
import re
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from test_serve_lifecycle import _nobody_listens
from troupe.core.vocabulary.agent_api import AgentAPI
from troupe.core.vocabulary.options import StreamOptions
from troupe.core.vocabulary.run_methods import RunMethods
from troupe.core.vocabulary.store import Store

import troupe
import troupe.client
import troupe.errors
import troupe.testing

MODULES: dict[str, types.ModuleType] = {
    "troupe": troupe,
    "troupe.client": troupe.client,
    "troupe.errors": troupe.errors,
    "troupe.testing": troupe.testing,
}
# Whose every public method must show its keyword arguments: a fixed set, written out.
RUN_SURFACES = (
    troupe.Agent,
    troupe.Runtime,
    troupe.client.AsyncTroupeClient,
    troupe.client.AsyncAgentClient,
    troupe.client.TroupeClient,
    troupe.client.AgentClient,
)
STORES = (troupe.MemoryStore, troupe.SqliteStore, troupe.RedisStore)
DECIDING = ("tool_call_id", "fingerprint", "decided_by", "roles", "surface")


def _public() -> Iterator[tuple[str, Any]]:
    """Every public name, with what it is (type aliases such as ``AsyncAgentAPI`` are described in
    their module's docstring: an alias has no docstring of its own)."""
    for module_name, module in MODULES.items():
        for name in module.__all__:
            value = getattr(module, name)
            if isinstance(value, types.ModuleType | type) or inspect.isfunction(value):
                yield f"{module_name}.{name}", value


def _classes() -> dict[str, type]:
    return {where: value for where, value in _public() if isinstance(value, type)}


def _own_doc(obj: Any) -> str:
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type | types.ModuleType) else obj.__doc__
    if isinstance(obj, type) and doc and doc.startswith(f"{obj.__name__}("):
        return ""  # the signature a dataclass writes for itself when it has no docstring
    return inspect.cleandoc(doc or "")


def _members(cls: type) -> dict[str, Any]:
    """The public methods and properties of ``cls`` that Troupe defines (not pydantic's or object's)."""
    found: dict[str, Any] = {}
    for base in reversed(cls.__mro__):
        if base.__module__.startswith("troupe.") and base is not AgentAPI:
            found.update({k: v for k, v in vars(base).items() if not k.startswith("_")})
    return {
        name: value.__func__ if isinstance(value, staticmethod | classmethod) else value
        for name, value in found.items()
        if isinstance(value, property | staticmethod | classmethod) or inspect.isfunction(value)
    }


def _arguments(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    return [p for p in inspect.signature(fn).parameters.values() if p.name not in ("self", "cls")]


def _undocumented(doc: str, fn: Callable[..., Any]) -> list[str]:
    """What is wrong with a function's docstring: missing, one line though it takes arguments, or
    silent about one of them."""
    if not doc:
        return ["no docstring"]
    arguments = _arguments(fn)
    problems = []
    if arguments and len(doc.splitlines()) < 2:
        problems.append("one line, though it takes arguments")
    silent = [p.name for p in arguments if not re.search(rf"\b{re.escape(p.name)}\b", doc)]
    if silent:
        problems.append(f"does not name {silent}")
    return problems


def test_every_public_name_has_a_docstring_of_its_own():
    missing = [where for where, value in _public() if not _own_doc(value)]
    assert missing == []


def test_every_public_method_and_property_is_documented_with_its_arguments():
    problems = []
    for where, cls in _classes().items():
        for name, member in _members(cls).items():
            if isinstance(member, property):
                if not inspect.getdoc(member):
                    problems.append(f"{where}.{name}: no docstring")
                continue
            doc = inspect.getdoc(member) or ""
            if issubclass(cls, STORES) and hasattr(Store, name):
                # A store's other methods are the store protocol's, which the runtime calls: each is
                # specified once, on the protocol.
                if not doc and not inspect.getdoc(getattr(Store, name)):
                    problems.append(f"{where}.{name}: not specified on the Store protocol")
                continue
            problems += [f"{where}.{name}: {p}" for p in _undocumented(doc, member)]
    assert problems == []


def test_the_protocol_of_the_run_methods_is_documented_where_they_are_written():
    """``AgentAPI`` only types the run methods; ``RunMethods`` (which ``Agent`` and the async client
    inherit) documents them, so each of the protocol's methods is one documented there."""
    declared = {name for name in vars(AgentAPI) if not name.startswith("_")} - {"id"}
    assert len(declared) == 11
    for name in declared:
        assert not _undocumented(inspect.getdoc(getattr(RunMethods, name)) or "", getattr(RunMethods, name))


def test_every_class_names_the_arguments_of_its_constructor():
    problems = []
    for where, cls in _classes().items():
        if getattr(cls, "_is_protocol", False):
            continue  # a protocol is not made, only implemented
        # The class whose constructor it is documents it (an error's is ``TroupeError``'s).
        owner = next(c for c in cls.__mro__ if "__init__" in vars(c) or "__dataclass_fields__" in vars(c))
        doc = _own_doc(cls) + "\n" + _own_doc(owner)
        init = vars(owner).get("__init__")
        if init is not None and init.__doc__:
            doc += "\n" + inspect.getdoc(init)
        try:
            arguments = _arguments(cls)
        except (TypeError, ValueError):
            continue  # a builtin's constructor (object, Exception)
        silent = [p.name for p in arguments if not re.search(rf"\b{re.escape(p.name)}\b", doc)]
        if silent and owner.__module__.startswith("troupe."):
            problems.append(f"{where} (constructor of {owner.__name__}): {silent}")
    assert problems == []


def test_every_error_says_its_code_and_http_status():
    errors = [
        e
        for e in vars(troupe.errors).values()
        if isinstance(e, type) and issubclass(e, troupe.errors.TroupeError)
    ]
    assert len(errors) >= 35
    wrong = [
        e.__name__
        for e in errors
        if f"``{e.code}``" not in _own_doc(e) or f"HTTP {e.http_status}" not in _own_doc(e)
    ]
    assert wrong == []


def test_the_run_methods_show_their_keyword_arguments():
    hidden = []
    for cls in RUN_SURFACES:
        for name, member in _members(cls).items():
            if isinstance(member, property):
                continue
            for parameter in _arguments(member):
                if parameter.kind is parameter.VAR_KEYWORD or "Unpack" in str(parameter.annotation):
                    hidden.append(f"{cls.__name__}.{name}(**{parameter.name})")
    assert hidden == []
    # The options a start takes are the keyword arguments of stream and generate, every one.
    for method in (troupe.Agent.stream, troupe.Agent.generate):
        keywords = {p.name for p in _arguments(method) if p.kind is p.KEYWORD_ONLY}
        assert keywords == StreamOptions.__optional_keys__
    for name in ("approve_tool_call", "decline_tool_call_generate", "resume_stream", "resume_generate"):
        for cls in (troupe.Agent, troupe.client.AsyncAgentClient, troupe.client.AgentClient):
            shown = inspect.signature(getattr(cls, name)).parameters
            assert set(DECIDING) <= set(shown), (cls.__name__, name)


def test_help_of_agent_reads_as_a_manual():
    text = inspect.getdoc(troupe.Agent) or ""
    assert text.startswith("An agent: a model with instructions, tools and subagents")
    for section in ("Args:", "Raises:", "Example:"):
        assert section in text
    rendered = _help(troupe.Agent)
    for method in ("approve_tool_call(self, *, run_id: 'str', tool_call_id: 'str | None' = None",):
        assert method in rendered
    assert "Unpack" not in rendered and "**options" not in rendered


def _help(obj: Any) -> str:
    import pydoc

    return pydoc.plain(pydoc.render_doc(obj))


async def test_the_async_client_refuses_who_acts_before_sending_anything():
    """Over HTTP who acts is the credential's principal: a name given for it is refused here, not sent
    (the server at this URL is not there, so anything sent would be ``ServerUnreachableError``)."""
    async with troupe.client.AsyncTroupeClient(_nobody_listens()) as client:
        agent = client.get_agent("records-assistant")
        calls = {
            "decided_by": agent.approve_tool_call(run_id="r1", decided_by="alice"),
            "roles": agent.decline_tool_call_generate(run_id="r1", roles=frozenset({"ops"})),
            "surface": agent.resume_stream({}, run_id="r1", surface="cli"),
            "cancelled_by": agent.cancel_run("r1", cancelled_by="alice"),
            "started_by": agent.stream("hello", started_by="alice"),
        }
        for name, call in calls.items():
            with pytest.raises(TypeError, match=f"{name} cannot be given over HTTP"):
                await call
        with pytest.raises(troupe.client.ServerUnreachableError):
            await agent.approve_tool_call(run_id="r1", tool_call_id="c1", fingerprint="f")


def test_the_blocking_client_refuses_who_acts_too():
    with troupe.client.TroupeClient(_nobody_listens()) as client:
        agent = client.get_agent("records-assistant")
        with pytest.raises(TypeError, match="decided_by cannot be given over HTTP"):
            agent.send_tool_approval(thread_id="t1", resource_id=None, approved=True, decided_by="alice")


def test_the_blocking_client_reads_as_blocking_in_help():
    """``AgentClient``'s methods are ``AsyncAgentClient``'s, waited for: ``help()`` shows them without
    ``await`` (an example a reader copies must run as written) and says a stream is a ``SyncAgentStream``."""
    blocking = troupe.client.AgentClient
    awaited = []
    for name, member in _members(blocking).items():
        if isinstance(member, property):
            continue
        doc = inspect.getdoc(member) or ""
        awaited += [
            f"{name}: {line.strip()}"
            for line in doc.splitlines()
            if re.search(r"\bawait\b|\basync (for|with)\b", line)
        ]
        if "``AgentStream``" in doc:
            awaited.append(f"{name}: says it returns an AgentStream")
    assert awaited == []
    for name in ("stream", "approve_tool_call", "decline_tool_call", "resume_stream", "send_tool_approval"):
        assert inspect.signature(getattr(blocking, name)).return_annotation == "SyncAgentStream", name
    doc = inspect.getdoc(blocking.approve_tool_call) or ""
    assert ">>> approved.result().text" in doc  # ``(await approved.result()).text``, blocking
