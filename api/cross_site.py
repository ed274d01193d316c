"""Refusing a request that a browser says another site sent (cross-site request forgery).

A decision link's confirmation is a plain HTML form POST, a "simple" request that any page on any site
can make a visitor's browser send, cookies included: under a host app's session (``troupe_router(...,
identity=...)``), a page elsewhere could approve a call as the signed-in person. So its POST is checked
here (``refuse_cross_site``).

The JSON routes take ``application/json``, which a page elsewhere can only send after asking the server
first (a CORS preflight, which Troupe never grants). But a page can send a "simple" request there too:
``fetch(url, {method: "POST", mode: "no-cors", credentials: "include", body: new Blob([json])})`` goes
out with no ``Content-Type`` (or ``text/plain``), no preflight, and the visitor's cookies, and a
framework that parses such a body as JSON (FastAPI before 0.132, or an app that turns its
``strict_content_type`` off) would act on it. ``refuse_simple_cross_site`` refuses every unsafe request
that could have come that way (no JSON type, no ``Authorization``, which a page cannot add without a
preflight either) when the browser says another site sent it.

The check reads what the browser says about where a request comes from, as Go's
``http.CrossOriginProtection`` does:

1. ``Sec-Fetch-Site`` (every current browser sends it, and no page can set it): only ``same-origin``
   (the link's own page) and ``none`` (typed or bookmarked) pass; ``same-site`` and ``cross-site`` are
   refused.
2. Without it (an older browser), ``Origin``: its host must be the ``Host`` the request was sent to
   (scheme aside, as a proxy that ends TLS changes it), or it must be one of ``trusted`` (where
   approvers reach the server, e.g. the links' ``public_url``). ``Origin: null`` (a sandboxed or
   privacy-hidden origin) is refused.
3. With neither, the request did not come from a browser's page (``curl``, a script): it carries no
   ambient credential of a person's, so it passes.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import urlsplit

from starlette.requests import Request
from troupe.api.errors import PermissionDeniedError

ALLOWED_FETCH_SITES = frozenset({"same-origin", "none"})
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
# The content types a page on another site can send without a preflight (a form's, and text).
SIMPLE_TYPES = frozenset({"application/x-www-form-urlencoded", "multipart/form-data", "text/plain"})
_OPEN_THE_LINK = "open the link and use its own page"
_SEND_JSON = "send the body as application/json, or with an Authorization header"


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, lower-cased (how browsers write ``Origin``)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def refuse_cross_site(
    request: Request, trusted: Iterable[str] = (), *, remedy: str = _OPEN_THE_LINK
) -> None:
    """Raise ``PermissionDeniedError`` (403) if the browser says the request came from another site.

    Args:
        request: The incoming request.
        trusted: Other origins (``https://host[:port]``) this server is reached at, e.g. behind a proxy
            that rewrites ``Host``.
        remedy: What the refusal tells the caller to do instead.

    Raises:
        PermissionDeniedError: ``Sec-Fetch-Site`` names another site, or ``Origin`` is neither the
            server's own nor trusted.
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        if fetch_site.lower() not in ALLOWED_FETCH_SITES:
            raise PermissionDeniedError(
                f"this request came from another site (Sec-Fetch-Site: {fetch_site}); {remedy}"
            )
        return
    origin = request.headers.get("origin")
    if origin is None:
        return
    same_host = urlsplit(origin).netloc.lower() == request.headers.get("host", "").lower()
    if not same_host and origin.lower() not in {origin_of(t) for t in trusted}:
        raise PermissionDeniedError(f"this request came from another site (Origin: {origin[:200]}); {remedy}")


def refuse_simple_cross_site(request: Request) -> None:
    """A FastAPI dependency of the JSON routes: refuse (403) an unsafe request that a page on another
    site could have made a browser send without asking first (see above).

    A request that names a content type no form can send (``application/json``) or carries
    ``Authorization`` was preflighted if it came from another site, and passes; so do safe methods.

    Raises:
        PermissionDeniedError: the request is simple, and ``Sec-Fetch-Site`` or ``Origin`` says
            another site sent it.
    """
    if request.method in SAFE_METHODS or "authorization" in request.headers:
        return
    kind = request.headers.get("content-type")
    if kind is not None and kind.split(";", 1)[0].strip().lower() not in SIMPLE_TYPES:
        return
    refuse_cross_site(request, remedy=_SEND_JSON)


__all__ = [
    "ALLOWED_FETCH_SITES",
    "SAFE_METHODS",
    "SIMPLE_TYPES",
    "origin_of",
    "refuse_cross_site",
    "refuse_simple_cross_site",
]
