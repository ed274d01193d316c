"""Refusing a request that a browser says another site sent (cross-site request forgery).

A decision link's confirmation is a plain HTML form POST, a "simple" request that any page on any site
can make a visitor's browser send, cookies included: under a host app's session (``troupe_router(...,
identity=...)``), a page elsewhere could approve a call as the signed-in person. The JSON routes are out
of its reach (a form cannot send ``application/json``, and a script needs CORS, which Troupe never
grants); a link's form is not, so its POST is checked here.

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


def origin_of(url: str) -> str:
    """``scheme://host[:port]`` of a URL, lower-cased (how browsers write ``Origin``)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def refuse_cross_site(request: Request, trusted: Iterable[str] = ()) -> None:
    """Raise ``PermissionDeniedError`` (403) if the browser says the request came from another site.

    Args:
        request: The incoming request.
        trusted: Other origins (``https://host[:port]``) this server is reached at, e.g. behind a proxy
            that rewrites ``Host``.

    Raises:
        PermissionDeniedError: ``Sec-Fetch-Site`` names another site, or ``Origin`` is neither the
            server's own nor trusted.
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        if fetch_site.lower() not in ALLOWED_FETCH_SITES:
            raise PermissionDeniedError(
                f"this request came from another site (Sec-Fetch-Site: {fetch_site}); open the link and "
                "use its own page"
            )
        return
    origin = request.headers.get("origin")
    if origin is None:
        return
    same_host = urlsplit(origin).netloc.lower() == request.headers.get("host", "").lower()
    if not same_host and origin.lower() not in {origin_of(t) for t in trusted}:
        raise PermissionDeniedError(
            f"this request came from another site (Origin: {origin[:200]}); open the link and use its "
            "own page"
        )


__all__ = ["ALLOWED_FETCH_SITES", "origin_of", "refuse_cross_site"]
