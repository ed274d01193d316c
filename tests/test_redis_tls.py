"""RedisStore over TLS (``rediss://``, what managed Redis services offer), against a real redis-server
listening on a TLS port with a certificate from a throw-away authority.

Secure by default: the server's certificate is checked against the authority the URL names
(``?ssl_ca_certs=``) or the system's, and its name against the host; a server the store cannot verify is
refused, never used unverified.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from redis_server import RedisServer, free_port
from tls_certs import Certificates, make_certificates
from troupe.core.vocabulary.state import RunState
from troupe.storage import RedisStore
from troupe.storage.redis_wire import WireClient

from troupe.errors import StorageUnavailableError

pytestmark = pytest.mark.redis


@pytest.fixture
def tls_redis(tmp_path: Path) -> Iterator[tuple[int, Certificates]]:
    """A redis-server with a TLS port (clients need no certificate of their own), and its certificates."""
    certs = make_certificates(tmp_path / "tls")
    tls_port = free_port()
    settings = {
        "tls-port": str(tls_port),
        "tls-cert-file": str(certs.cert),
        "tls-key-file": str(certs.key),
        "tls-ca-cert-file": str(certs.ca),
        "tls-auth-clients": "no",
    }
    with RedisServer(tmp_path / "redis", settings=settings):
        yield tls_port, certs


@pytest.mark.parametrize("options", ["", "&socket_timeout=5"], ids=["own", "redis-py"])
async def test_a_store_works_over_tls_with_the_authority_its_url_names(
    tls_redis: tuple[int, Certificates], options: str
):
    port, certs = tls_redis
    store = RedisStore(f"rediss://127.0.0.1:{port}/0?ssl_ca_certs={certs.ca}{options}", prefix="tls:")
    version = await store.create_run(RunState(run_id="r1", agent_id="a"))
    stored = await store.load_run("r1")
    assert stored is not None and stored.version == version == 1
    client = (await store._link()).client
    assert isinstance(client, WireClient) == (options == "")
    await store.close()


@pytest.mark.parametrize(
    "url",
    [
        "rediss://127.0.0.1:{port}/0",  # the system's authorities do not know the test's
        "rediss://localhost:{port}/0?ssl_ca_certs={ca}",  # trusted, but issued for 127.0.0.1
        "redis://127.0.0.1:{port}/0",  # no TLS to a port that speaks only TLS
    ],
    ids=["unknown-authority", "wrong-name", "plaintext"],
)
async def test_a_redis_the_store_cannot_verify_is_refused(tls_redis: tuple[int, Certificates], url: str):
    port, certs = tls_redis
    store = RedisStore(url.format(port=port, ca=certs.ca), prefix="tls:", timeout=2.0)
    with pytest.raises(StorageUnavailableError) as refused:
        await store.create_run(RunState(run_id="r1", agent_id="a"))
    if url.startswith("rediss"):
        assert "CERTIFICATE_VERIFY_FAILED" in str(refused.value), refused.value
    await store.close()
