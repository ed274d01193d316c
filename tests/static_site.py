"""A page at a URL of its own: a real HTTP server on 127.0.0.1 (its own thread) answering every GET with
the same body, for tests that need another site or a server that is no Troupe server."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


@contextlib.contextmanager
def answering(content_type: str, body: bytes) -> Iterator[str]:
    """Serve ``body`` as ``content_type`` with status 200 to every GET; yields the server's base URL
    (``http://127.0.0.1:<port>/``)."""

    class Page(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("content-type", content_type)
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    site = ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=site.serve_forever, daemon=True, name="static-site").start()
    try:
        yield f"http://127.0.0.1:{site.server_address[1]}/"
    finally:
        site.shutdown()
        site.server_close()
