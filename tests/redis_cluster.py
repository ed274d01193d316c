"""A real three-master Redis Cluster for tests, on 127.0.0.1, with a password (as a managed one would
have): three ``redis-server --cluster-enabled yes`` (``redis_server.RedisServer``, each in its own
directory) joined by ``redis-cli --cluster create``, stopped by the processes it started."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import time
from pathlib import Path

import redis
from redis_server import RedisServer, free_port

_READY_TIMEOUT_S = 30.0


class RedisClusterNodes:
    def __init__(self, directory: Path, masters: int = 3) -> None:
        self.password = secrets.token_hex(16)
        self.nodes: list[RedisServer] = []
        for n in range(masters):
            home = directory / f"node-{n}"
            settings = {
                "cluster-enabled": "yes",
                # The bus port is otherwise the client port + 10000, which may be taken (or past 65535).
                "cluster-port": str(free_port()),
                "cluster-config-file": str(home / "nodes.conf"),
                "requirepass": self.password,
                "masterauth": self.password,
            }
            self.nodes.append(RedisServer(home, settings=settings))

    @property
    def url(self) -> str:
        """The store URL: any one node is enough for the client to find the others."""
        return f"redis+cluster://:{self.password}@127.0.0.1:{self.nodes[0].port}"

    def start(self) -> None:
        try:
            for node in self.nodes:
                node.start()
            self._create()
            self._wait_until_ready()
        except BaseException:
            self.stop()
            raise

    def _create(self) -> None:
        cli = shutil.which("redis-cli")
        if cli is None:
            raise RuntimeError(
                "redis-cli is not installed (it comes with redis-server; apt-get install redis-tools)"
            )
        addresses = [f"127.0.0.1:{node.port}" for node in self.nodes]
        # The password goes by environment, not argv (where ``ps`` shows it to everyone).
        env = {**os.environ, "REDISCLI_AUTH": self.password}
        command = [cli, "--cluster", "create", *addresses, "--cluster-replicas", "0", "--cluster-yes"]
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode != 0:
            raise RuntimeError(
                f"redis-cli --cluster create failed: {done.stdout[-2000:]} {done.stderr[-2000:]}"
            )

    def _wait_until_ready(self) -> None:
        """Until every node says ``cluster_state:ok`` (all slots served, every node agreeing)."""
        deadline = time.monotonic() + _READY_TIMEOUT_S
        clients = [node.client(decode_responses=True) for node in self.nodes]
        try:
            while not all(self._ready(client) for client in clients):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"the Redis Cluster was not ready in {_READY_TIMEOUT_S}s")
                time.sleep(0.05)
        finally:
            for client in clients:
                client.close()

    def _ready(self, client: redis.Redis) -> bool:
        info = client.cluster("info")
        return bool(info["cluster_state"] == "ok" and int(info["cluster_known_nodes"]) == len(self.nodes))

    def masters(self) -> list[redis.Redis]:
        """A plain client per master (the caller closes them)."""
        return [node.client(decode_responses=True) for node in self.nodes]

    def stop(self) -> None:
        for node in self.nodes:
            node.stop()


__all__ = ["RedisClusterNodes"]
