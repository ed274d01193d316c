"""Decision links over HTTP: ``GET /decide/{token}`` shows what the link would decide, ``POST`` decides.

GET never decides (mail and chat link scanners open links), it only shows a confirmation page with the
call's context. POST decides once through the ordinary decision path: the token names a record the
server issued (troupe.core.notifying.links), which says which call, fingerprint and action the link is
for, until when, and to whom it was issued; a call already decided refuses it. Whoever uses the link
decides as who they say they are: an API key or token typed into the page, an ``Authorization`` header,
or the host app's session; a link issued to one named approver decides only as them. Nobody said: the
link's anonymous holder, ``decision-link``, who decides only calls no approver policy governs. Each
person's use of a link is claimed in the store before deciding (and given back if the decision is
refused), so one person never decides twice through one link. A POST that a browser says came from
another site is refused (troupe.api.cross_site). Pages are plain HTML with no script; every value is
escaped.
"""

from __future__ import annotations

import html
import json
import logging
import re
import time
from typing import Any
from urllib.parse import parse_qs

from fastapi import APIRouter, Request
from fastapi.responses import Response
from starlette.requests import ClientDisconnect
from troupe.api.auth import Principal
from troupe.api.bodies import MAX_TEXT_CHARS
from troupe.api.cross_site import refuse_cross_site
from troupe.api.identity import optional_caller
from troupe.api.routing import TroupeRoute
from troupe.api.service import Service, ServiceDep
from troupe.core.notifying.links import LinkSigner, approver_of
from troupe.core.vocabulary.errors import (
    ApprovalPolicyError,
    DecisionConflictError,
    DecisionLinkError,
    DecisionRejectedError,
    SnapshotNotFoundError,
    ToolCallNotSuspendedError,
    TroupeError,
)
from troupe.core.vocabulary.hidden_chars import visible
from troupe.core.vocabulary.state import Pause, RunState
from troupe.core.vocabulary.store import LinkRecord

router = APIRouter(include_in_schema=False, route_class=TroupeRoute)
log = logging.getLogger(__name__)

LINK_PRINCIPAL = "decision-link"
# Whoever holds a link and says nothing more: one anonymous principal, so it counts once and never meets
# an approver policy (which needs someone who says who they are).
LINK_HOLDER = Principal(LINK_PRINCIPAL, "troupe:link", LINK_PRINCIPAL, anonymous=True)
HEADERS = {
    "Content-Security-Policy": "default-src 'none'; form-action 'self'; base-uri 'none'; "
    "frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    # The token in the URL is a credential: never sent to another origin as a referrer, never cached.
    # (Not no-referrer: that makes a browser send "Origin: null" with the page's own POST, which a
    # browser without Sec-Fetch-Site could then not tell from another site's; see cross_site.)
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
_REFUSED = (DecisionConflictError, ToolCallNotSuspendedError, SnapshotNotFoundError, ApprovalPolicyError)


@router.get("/decide/{token}")
async def confirm_page(token: str, service: ServiceDep) -> Response:
    """The confirmation page: what would be decided, and a button that POSTs the decision."""
    try:
        claim = await _open(service, token)
        state = await _paused_state(service, claim)
    except TroupeError as error:
        return _page("This link cannot be used", str(error), error.http_status)
    call = next(c for c in state.calls if c.tool_call_id == claim.tool_call_id)
    pause = next(p for p in call.pauses if p.fingerprint == claim.fingerprint)
    rows = {
        "Agent": " \u203a ".join(pause.agent_path),
        "Tool": pause.tool_name,
        "Arguments": json.dumps(pause.args, indent=2, ensure_ascii=False),
        "Run": state.run_id,
        "Resource": state.resource_id or "-",
        "Thread": state.thread_id or "-",
        "Started by": state.started_by or "-",
        "Approved so far": ", ".join(a.display for a in pause.approvals) or "-",
    }
    table = "".join(f"<tr><th>{_e(k)}</th><td><pre>{_shown(v)}</pre></td></tr>" for k, v in rows.items())
    reason = (
        '<p><label>Reason <textarea name="reason"></textarea></label></p>'
        if claim.action == "decline"
        else ""
    )
    button = f'<button type="submit">{_e(claim.action.capitalize())}</button>'
    form = f'<form method="post">{reason}{_who_form(service, claim, pause)}{button}</form>'
    return _page(f"{claim.action.capitalize()} this tool call?", "", 200, f"<table>{table}</table>{form}")


def _who_form(service: Service, claim: LinkRecord, pause: Pause) -> str:
    """What the page says about who decides, and the field to say it with."""
    named = approver_of(claim)
    if named is not None:
        return f"<p>This link was issued to {_e(named.display)} and decides as them only.</p>"
    policies = service.runtime.approver_policies
    must = policies is not None and policies.for_pause(pause) is not None
    return (
        f"<p>{'This call is decided only by someone who says who they are: ' if must else ''}"
        "sign in, or give your API key or token.</p>"
        '<p><label>API key or token <input type="password" name="key" autocomplete="off"></label></p>'
    )


@router.post("/decide/{token}")
async def decide(token: str, request: Request, service: ServiceDep) -> Response:
    """Decide the call the link is for, once."""
    try:
        refuse_cross_site(request, trusted=[_signer(service).public_url])
        # The token first: parsing a form costs CPU on the event loop, spent only for a genuine link.
        claim = await _open(service, token)
        form = _form(await request.body())
        reason = _reason(form) if claim.action == "decline" else None
        decider = await _decider(service, claim, request, (form.get("key") or [""])[0].strip())
        stream = await _decide_once(service, claim, decider, reason)
    except _REFUSED as error:
        status = 403 if isinstance(error, ApprovalPolicyError) else 409
        return _page("Not decided", f"This link was not used: {error}", status)
    except DecisionRejectedError as error:  # not decided now (wrong, or not yet): the link still works
        waits = f"This link was not used: {error}; the call still waits"
        return _page("Not decided", waits, error.http_status)
    except TroupeError as error:
        return _page("This link cannot be used", str(error), error.http_status)
    except ClientDisconnect:
        raise
    except Exception as error:  # the store failed, say: the page says so, the token stays out of logs
        log.exception("unexpected error on POST %s", redact_links(request.url.path), exc_info=error)
        return _page(
            "Not decided", _FAILED, 500
        )
    service.spawn(stream.result())  # the run carries on without this page
    done = "Approved" if claim.action == "approve" else "Declined"
    return _page(done, f"{done} by {decider.display}; the run carries on.", 200)


async def _decide_once(service: Service, claim: LinkRecord, decider: Principal, reason: str | None) -> Any:
    """Claim the link for ``decider`` (a second use by the same person is refused, even at once), then
    decide; a refused decision gives the claim back, so the page's "not used" is true."""
    store = service.runtime.store()
    if await store.use_link(claim.id, decider.id, time.time()) is None:
        raise DecisionConflictError(
            f"{decider.display!r} has used this link already (or it just expired)", run_id=claim.run_id
        )
    agent = service.agent(claim.agent_id)
    options: dict[str, Any] = {
        "run_id": claim.run_id,
        "tool_call_id": claim.tool_call_id,
        "fingerprint": claim.fingerprint,
        "decided_by": decider,
        "surface": "link",
    }
    try:
        if claim.action == "approve":
            return await agent.approve_tool_call(**options)
        return await agent.decline_tool_call(**options, reason=reason)
    except Exception:
        # Whatever stopped it (a refusal, a store that failed), the person may use the link again: the
        # run's own claim keeps a decision that did land from landing twice.
        await store.release_link(claim.id, decider.id)
        raise


_FAILED = (
    "Something went wrong on the server before the decision was confirmed. The link still works: use it "
    "again (a decision that did land is never taken twice)."
)
# The longest form a link's page sends: a reason (MAX_TEXT_CHARS characters, each at most 4 UTF-8 bytes
# written as %XX) and an API key or token; a few fields at most.
MAX_FORM_BYTES = MAX_TEXT_CHARS * 12 + 16_384
MAX_FORM_FIELDS = 8


def _form(body: bytes) -> dict[str, list[str]]:
    """The page's form, bounded so that a large or many-field body costs little before it is refused."""
    if len(body) > MAX_FORM_BYTES:
        raise DecisionRejectedError(f"the form is longer than {MAX_FORM_BYTES:,} bytes")
    try:
        return parse_qs(body.decode("utf-8", "replace"), max_num_fields=MAX_FORM_FIELDS)
    except ValueError as exc:  # more fields than that
        raise DecisionRejectedError(f"the form has more than {MAX_FORM_FIELDS} fields") from exc


def _reason(form: dict[str, list[str]]) -> str | None:
    """The decline's reason, held to the same bound as the API's (it is stored and sent to the model)."""
    reason = next(iter(form.get("reason", [])), None)
    if reason is not None and len(reason) > MAX_TEXT_CHARS:
        raise DecisionRejectedError(f"the reason is longer than {MAX_TEXT_CHARS:,} characters")
    return reason


async def _open(service: Service, token: str) -> LinkRecord:
    """The record a genuine, unexpired token names."""
    return await _signer(service).open(service.runtime.store(), token)


def _signer(service: Service) -> LinkSigner:
    notifications = service.runtime.notifications
    signer = notifications.links if notifications is not None else None
    if not isinstance(signer, LinkSigner):
        raise DecisionLinkError("decision links are not enabled on this server")
    return signer


async def _paused_state(service: Service, claim: LinkRecord) -> RunState:
    """The run, if the link's call is still paused exactly as it was when the link was made."""
    stored = await service.runtime.store().load_run(claim.run_id)
    call = None if stored is None else stored.state.call(claim.tool_call_id)
    if stored is None or call is None or not call.pauses:
        raise DecisionConflictError(
            "this call was already decided (or its run has ended)", run_id=claim.run_id
        )
    if all(p.fingerprint != claim.fingerprint for p in call.pauses):
        raise DecisionConflictError("this call has changed since the link was made", run_id=claim.run_id)
    return stored.state


async def _decider(service: Service, claim: LinkRecord, request: Request, credential: str) -> Principal:
    """Who the link decides as. Someone who says who they are (a key or token in the form or the
    Authorization header, or the host app's session) decides as themselves, checked like any caller; a
    link issued to one approver decides only as them; anyone else is the link's anonymous holder, who
    decides only calls no approver policy governs (the core refuses the rest)."""
    named = approver_of(claim)
    who = await service.gate.credential(credential) if credential else await optional_caller(request)
    if named is not None:
        if who is not None and who.id != named.id:
            raise ApprovalPolicyError(
                f"this link was issued to {named.display!r}; {who.display!r} cannot use it",
                run_id=claim.run_id,
            )
        return named
    if who is None:
        return LINK_HOLDER
    await service.check_run(who, service.agent(claim.agent_id), claim.run_id)
    return who


def _page(title: str, message: str, status: int, body: str = "") -> Response:
    text = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        f"<title>{_e(title)} - Troupe</title></head><body><h1>{_e(title)}</h1>"
        f"{f'<p>{_e(message)}</p>' if message else ''}{body}</body></html>"
    )
    return Response(text, status_code=status, media_type="text/html; charset=utf-8", headers=HEADERS)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _shown(value: Any) -> str:
    """A caller's or model's text, escaped, with each invisible or direction-changing character shown as
    a mark naming it (as the inbox page shows them)."""
    return "".join(
        f'<span class="invisible" title="an invisible or direction-changing character">{_e(part)}</span>'
        if part.startswith("\u27e6U+")
        else _e(part)
        for part in _MARKS.split(visible(str(value), keep="\n"))
    )


_MARKS = re.compile("(\u27e6U\\+[0-9A-F]{4,6}\u27e7)")


class RedactLinks(logging.Filter):
    """Access logs name the path; a decision link's token is a credential, so it is cut out."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact_links(a) if isinstance(a, str) else a for a in record.args)
        return True


def redact_links(text: str) -> str:
    """``text`` (a path, a log line's argument) with a decision link's token cut out."""
    head, found, _ = text.partition("/decide/")
    return f"{head}/decide/<token>" if found else text


__all__ = [
    "LINK_HOLDER",
    "LINK_PRINCIPAL",
    "MAX_FORM_BYTES",
    "MAX_FORM_FIELDS",
    "RedactLinks",
    "redact_links",
    "router",
]
