"""The front door's listening socket, taken before anything else starts.

``troupe serve`` takes its port first, before it starts Ray, builds the runtime or seeds the demo's
store: a port that is in use fails at once, with a message naming it, and changes nothing. The socket
listens from then on, so the port cannot be taken in between; a request that comes while the runtime
is starting waits in the queue and is answered once the server is up.
"""

from __future__ import annotations

import errno
import socket

from troupe.api.errors import ListenError

BACKLOG = 2048  # uvicorn's own default


def listen(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` and listening, ready for uvicorn (``sockets=[...]``).

    Args:
        host: the interface's address (an IPv6 one has a colon; a name is looked up as IPv4, as
            uvicorn does).
        port: the port; 0 lets the system choose one.

    Returns:
        The listening socket; the caller owns it (closes it, or hands it to the server).

    Raises:
        ListenError: the address is in use, not this machine's, or not allowed (a port below 1024
            without the privilege); the message names ``host:port`` and says what to do.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    try:
        # SO_REUSEADDR (set by create_server): a port left in TIME_WAIT by a server that just stopped
        # can be taken again at once; one that is listening cannot.
        return socket.create_server((host, port), family=family, backlog=BACKLOG)
    except OSError as exc:
        raise ListenError(_why(host, port, exc), host=host, port=port) from exc


def _why(host: str, port: int, exc: OSError) -> str:
    where = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    if exc.errno == errno.EADDRINUSE:
        return (
            f"cannot listen on {where}: the port is in use (another server is listening there); "
            f"stop that one, or choose another port with --port"
        )
    if exc.errno == errno.EACCES:
        return f"cannot listen on {where}: not allowed (ports below 1024 need privileges); choose another"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot listen on {where}: {host} is not an address of this machine (check --host)"
    return f"cannot listen on {where}: {exc.strerror or exc}"


__all__ = ["BACKLOG", "listen"]
