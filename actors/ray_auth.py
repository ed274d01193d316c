"""Ray's token authentication for Troupe's processes: an embedded Ray nobody else can join, and a clear
error within seconds when joining a cluster without its token.

An embedded Ray listens on loopback only (``troupe.actors.remote``), so its token is the defence against
other users of the machine: without it, anything that reaches a port joins the cluster, runs code as this
user and calls Troupe's actors. A cluster Troupe joins listens wherever it was started to. Ray 2.60
turns token auth on by default for a new local cluster; Troupe keeps it on, makes sure the token file is
private (0600), and hands it to every process it starts through ``RAY_AUTH_TOKEN_PATH`` (Ray's workers
inherit the environment of the process that started the node).

Joining a running cluster uses that cluster's token, from ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH`` or
``~/.ray/auth_token`` (where ``ray start`` keeps it). Ray itself retries a refused connection for about
20 s before failing with a bare ``ConnectionError``; ``check_cluster_token`` asks the cluster's GCS once,
with the token, and says what is wrong at once.

``RAY_AUTH_MODE=disabled`` set by the user is respected (with a warning): it is their cluster.
"""

from __future__ import annotations

import logging
import os
import secrets
import stat
import tempfile
from pathlib import Path

from troupe.core.vocabulary.errors import RayAuthError

log = logging.getLogger(__name__)

MODE_VAR = "RAY_AUTH_MODE"
TOKEN_VAR = "RAY_AUTH_TOKEN"
TOKEN_PATH_VAR = "RAY_AUTH_TOKEN_PATH"
# How long the up-front check waits for the cluster's GCS to answer.
CHECK_TIMEOUT_S = 5.0


def default_token_path() -> Path:
    """Where Ray (``ray start``, ``ray get-auth-token --generate``) keeps the token by default."""
    return Path.home() / ".ray" / "auth_token"


def _token_path() -> Path:
    """The token file this process presents: ``RAY_AUTH_TOKEN_PATH``, else Ray's default."""
    return Path(os.environ.get(TOKEN_PATH_VAR) or default_token_path())


def private_tmpdir() -> str:
    """A temp dir for Ray's sockets and logs inside a folder only this user can enter. Ray makes its own
    temp dir world-writable (0777, to share it between users), and a predictable name in /tmp could be
    made first by another user: the 0700 parent, checked to be ours, is what keeps others out. Short, for
    Ray's unix socket paths."""
    path = Path(tempfile.gettempdir()) / f"troupe-ray-{os.getuid()}"
    path.mkdir(mode=0o700, exist_ok=True)
    info = path.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise RayAuthError(f"{path} is not a directory owned by this user; set RAY_TMPDIR to a private one")
    if info.st_mode & 0o077:
        path.chmod(0o700)
    return str(path / "ray")


def _auth_disabled_by_user() -> bool:
    return os.environ.get(MODE_VAR, "").lower() == "disabled"


def _ensure_private_token_file(path: Path) -> None:
    """Create the token file (0600, in a 0700 folder) if missing; tighten it if others can read it."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        if path.stat().st_mode & 0o077:
            log.warning("Ray's token file %s was readable by other users; made it 0600", path)
            path.chmod(0o600)
        return
    with os.fdopen(fd, "w") as out:
        out.write(secrets.token_hex(32))


def _refresh_ray_config() -> None:
    """Ray caches the auth mode when it is imported; make it read the environment again."""
    from ray._raylet import Config  # type: ignore[attr-defined]

    Config.initialize("")


def prepare_embedded() -> None:
    """Before Troupe starts a local Ray: token auth on, with a private token every child process finds."""
    if _auth_disabled_by_user():
        log.warning(
            "RAY_AUTH_MODE=disabled: the Ray that Troupe starts accepts any process that reaches its "
            "ports, which can run code as this user and decide paused tool calls"
        )
        return
    os.environ[MODE_VAR] = "token"
    if not os.environ.get(TOKEN_VAR):
        path = _token_path()
        _ensure_private_token_file(path)
        os.environ[TOKEN_PATH_VAR] = str(path)  # explicit, so children with another HOME find it too
    _refresh_ray_config()


def _token_to_present() -> str | None:
    if os.environ.get(TOKEN_VAR):
        return os.environ[TOKEN_VAR].strip()
    try:
        return _token_path().read_text().strip() or None
    except OSError:
        return None


def _gcs_address(address: str) -> str | None:
    """The GCS host:port that ``ray.init(address=...)`` would connect to, where it can be told here."""
    if address.startswith("ray://"):
        return None  # Ray Client: another protocol, checked by Ray itself
    if address == "auto":
        from ray._private import services

        try:
            return services.canonicalize_bootstrap_address(address)
        except Exception:
            return None  # no local cluster recorded: ray.init says so itself
    return address.removeprefix("http://")


def check_cluster_token(address: str) -> None:
    """Before joining the cluster at ``address``: make sure a token is there and that the cluster takes
    it, so a missing or wrong token is one clear error now instead of a 20 s hang in ``ray.init``."""
    if _auth_disabled_by_user():
        return
    token = _token_to_present()
    where = f"{TOKEN_VAR}, {TOKEN_PATH_VAR} or {default_token_path()}"
    if token is None:
        raise RayAuthError(
            f"joining the Ray cluster at {address} needs the cluster's auth token: none found in {where} "
            "(copy the head node's token, e.g. from `ray get-auth-token` there)"
        )
    os.environ[MODE_VAR] = "token"
    _refresh_ray_config()
    gcs = _gcs_address(address)
    if gcs is None:
        return
    import grpc
    from ray.core.generated import gcs_service_pb2, gcs_service_pb2_grpc

    with grpc.insecure_channel(gcs) as channel:
        stub = gcs_service_pb2_grpc.NodeInfoGcsServiceStub(channel)
        try:
            stub.GetClusterId(
                gcs_service_pb2.GetClusterIdRequest(),  # type: ignore[attr-defined]
                metadata=[("authorization", f"Bearer {token}")],
                timeout=CHECK_TIMEOUT_S,
            )
        except grpc.RpcError as error:
            if error.code() == grpc.StatusCode.UNAUTHENTICATED:
                raise RayAuthError(
                    f"the Ray cluster at {address} refused this process's auth token (from {where})"
                ) from None
            raise RayAuthError(
                f"no Ray cluster answered at {address} ({error.code().name.lower()})"
            ) from None


__all__ = ["check_cluster_token", "prepare_embedded", "private_tmpdir"]
