"""The Ray that Troupe starts for itself runs what Troupe uses: its GCS and raylet, the raylet's two
agents (Ray 2.60's raylet neither starts nor lives without them) and the agents' actors. No dashboard
(API server), no autoscaler monitor, no log monitor, no idle workers waiting for tasks Troupe never
runs (troupe.actors.remote._lean_node)."""

from __future__ import annotations

from typing import Any

import psutil
import pytest

pytestmark = pytest.mark.ray

# What each process of a Ray node is, by its command line (Ray's agents and workers rename
# themselves: "ray::DashboardAgent", "ray::IDLE", "ray::<actor class>").
KINDS = {
    "gcs_server": "ray/gcs/gcs_server",
    "raylet": "ray/raylet/raylet",
    "dashboard agent": "ray::DashboardAgent",
    "runtime_env agent": "ray::RuntimeEnvAgent",
    "dashboard": "dashboard/dashboard.py",
    "autoscaler monitor": "autoscaler/_private/monitor.py",
    "log monitor": "_private/log_monitor.py",
    "idle worker": "ray::IDLE",
}
UNWANTED = {"dashboard", "autoscaler monitor", "log monitor", "idle worker"}


def _command(process: psutil.Process) -> str:
    try:
        return " ".join(process.cmdline())
    except psutil.Error:  # gone meanwhile, or a zombie
        return ""


def _node_processes(ray: Any) -> dict[int, str]:
    """The embedded node's processes, pid -> command line: those this process started for it (they
    name its session directory: other tests' clusters, started from subprocesses, do not), and
    whatever its raylet started (agents and workers)."""
    session = ray._private.worker._global_node.get_session_dir_path()
    found = {p.pid: _command(p) for p in psutil.Process().children() if session in _command(p)}
    raylets = [pid for pid, command in found.items() if KINDS["raylet"] in command]
    assert len(raylets) == 1, found
    found |= {p.pid: _command(p) for p in psutil.Process(raylets[0]).children(recursive=True)}
    return found


def _kind(command: str) -> str:
    return next((kind for kind, needle in KINDS.items() if needle in command), "other")


def test_the_embedded_ray_runs_only_what_troupe_uses(ray_session):
    # The session's Ray, started as Troupe starts it (tests/conftest.py: troupe.actors.remote.ensure_ray).
    processes = _node_processes(ray_session)
    kinds = [_kind(command) for command in processes.values()]
    shown = {pid: command[:100] for pid, command in processes.items()}
    for kind in ("gcs_server", "raylet", "dashboard agent", "runtime_env agent"):
        assert kinds.count(kind) == 1, (kind, shown)
    assert sorted(kind for kind in kinds if kind in UNWANTED) == [], shown
    # Anything else is an actor's worker (tests before this one made some): running ("ray::<class>"),
    # still starting (default_worker.py, until it takes its name) or already gone (no command line).
    others = [command for command in processes.values() if _kind(command) == "other" and command]
    assert all(command.startswith("ray::") or "default_worker.py" in command for command in others), shown
