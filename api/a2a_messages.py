"""Reading what an A2A client sends Troupe's agents: the text that starts a task, the decisions an
answer makes, the metadata naming a task's resource, a page token (see ``troupe.api.a2a_server``)."""

from __future__ import annotations

import json
from typing import Any

from a2a.helpers.proto_helpers import get_data_parts, get_text_parts
from a2a.types.a2a_pb2 import Message
from a2a.utils.errors import InvalidParamsError
from google.protobuf.json_format import MessageToDict
from troupe.actors.a2a.pending import AnswerError, DecisionItem, read_answer, whole_numbers
from troupe.api.auth import own_resource
from troupe.api.bodies import MAX_ID_CHARS, MAX_TEXT_CHARS
from troupe.core.vocabulary.identity import Principal


def prompt_of(message: Message) -> str:
    """What a new task asks: its text parts (data parts as JSON), in order."""
    pieces = [*get_text_parts(message.parts)]
    pieces += [json.dumps(whole_numbers(d), ensure_ascii=False) for d in get_data_parts(message.parts)]
    prompt = "\n".join(p for p in pieces if p)
    if not prompt:
        raise InvalidParamsError("a message that starts a task needs a text (or data) part")
    if len(prompt) > MAX_TEXT_CHARS:
        raise InvalidParamsError(f"the message is longer than {MAX_TEXT_CHARS} characters")
    return prompt


def decisions_of(message: Message) -> list[DecisionItem]:
    """The decisions an answer makes: its one data part holding ``decisions``."""
    answers = [d for d in get_data_parts(message.parts) if isinstance(d, dict) and "decisions" in d]
    if len(answers) != 1:
        raise AnswerError(
            'answer with exactly one data part {"decisions": [...]} naming each call by its toolCallId; '
            f"this message has {len(answers)} (text alone does not decide a call)"
        )
    return read_answer(whole_numbers(answers[0])).decisions


def struct_dict(struct: Any) -> dict[str, Any]:
    """A protobuf ``Struct`` (a message's or request's metadata) as a dict; empty if unset."""
    return MessageToDict(struct) if struct is not None and struct.ListFields() else {}


def resource_of(caller: Principal, given: Any) -> str | None:
    """The resource a new run belongs to: as the metadata names it, else the caller's only one."""
    if given is not None and not isinstance(given, str):
        raise InvalidParamsError("metadata.resourceId must be a string")
    if given is None and not caller.admin and len(caller.resources) == 1:
        given = next(iter(caller.resources))
    return own_resource(caller, given)


# The last page a token may name: far past any listing, and well within what a store's offset takes
# (SQLite's is a 64-bit integer).
MAX_PAGE_NUMBER = 10**9


def page_number(token: str) -> int:
    """The page a ``ListTasks`` page token names (the first page without one)."""
    if not token:
        return 0
    if not (token.isascii() and token.isdigit()) or len(token) > 10 or int(token) > MAX_PAGE_NUMBER:
        raise InvalidParamsError(
            f"pageToken must be a page number from an earlier answer, got {token[:40]!r}"
        )
    return int(token)


def context_of_message(message: Message) -> str | None:
    """The context (Troupe's thread) a message names, bounded as ``/api``'s ``threadId`` is."""
    if len(message.context_id) > MAX_ID_CHARS:
        raise InvalidParamsError(f"contextId must be at most {MAX_ID_CHARS} characters")
    return message.context_id or None


__all__ = [
    "MAX_PAGE_NUMBER",
    "context_of_message",
    "decisions_of",
    "page_number",
    "prompt_of",
    "resource_of",
    "struct_dict",
]
