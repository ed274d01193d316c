"""A real Redis master with one replica, watched by a real Sentinel, on 127.0.0.1, each with a password
(the Sentinel its own): what a ``redis+sentinel://`` store URL points at. Stopped by the processes it
started."""

from __future__ import annotations

import secrets
import time
from pathlib import Path
from typing import Any

from redis_server import RedisServer

SERVICE = "troupe-master"
_READY_TIMEOUT_S = 30.0


class RedisSentinelSetup:
    def __init__(self, directory: Path) -> None:
        self.password = secrets.token_hex(16)
        self.sentinel_password = secrets.token_hex(16)
        auth = {"requirepass": self.password, "masterauth": self.password}
        self.master = RedisServer(directory / "master", settings=auth)
        self.replica = RedisServer(
            directory / "replica", settings={**auth, "replicaof": f"127.0.0.1 {self.master.port}"}
        )
        watch = {
            "sentinel monitor": f"{SERVICE} 127.0.0.1 {self.master.port} 1",
            "sentinel auth-pass": f"{SERVICE} {self.password}",
            # A master silent for a second is down (30 s by default), so a test's failover is quick.
            "sentinel down-after-milliseconds": f"{SERVICE} 1000",
            "requirepass": self.sentinel_password,
        }
        self.sentinel = RedisServer(directory / "sentinel", settings=watch, flags=("--sentinel",))

    @property
    def url(self) -> str:
        return (
            f"redis+sentinel://:{self.password}@127.0.0.1:{self.sentinel.port}/{SERVICE}"
            f"?sentinel_password={self.sentinel_password}"
        )

    def start(self) -> None:
        try:
            for server in (self.master, self.replica, self.sentinel):
                server.start()
            self._wait(lambda s: len(s.sentinel_slaves(SERVICE)) == 1, "the Sentinel did not see the replica")
        except BaseException:
            self.stop()
            raise

    def master_port(self) -> int:
        with self.sentinel.client(decode_responses=True) as client:
            _, port = client.sentinel_get_master_addr_by_name(SERVICE)
        return int(port)

    def kill_master(self) -> int:
        """SIGKILL the master, as in a crash, and wait until Sentinel has promoted the replica; returns
        the new master's port."""
        before = self.master_port()
        next(server for server in (self.master, self.replica) if server.port == before).kill()
        self._wait(lambda s: int(s.sentinel_get_master_addr_by_name(SERVICE)[1]) != before, "no new master")
        # Until Sentinel has reached the new master it calls it down, and clients find no master (the
        # store raises StorageUnavailableError meanwhile, as for any outage).
        self._wait(lambda s: _up(s.sentinel_master(SERVICE)), "the new master was not seen up")
        return self.master_port()

    def _wait(self, done: Any, what: str) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        with self.sentinel.client(decode_responses=True) as client:
            while True:
                try:
                    if done(client):
                        return
                except Exception:  # "not yet" (say, NOGOODSLAVE while the replica syncs)
                    pass
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{what} in {_READY_TIMEOUT_S}s")
                time.sleep(0.05)

    def stop(self) -> None:
        for server in (self.sentinel, self.replica, self.master):
            server.stop()


def _up(state: dict[str, Any]) -> bool:
    return bool(state["is_master"] and not state["is_sdown"] and not state["is_odown"])


__all__ = ["SERVICE", "RedisSentinelSetup"]
