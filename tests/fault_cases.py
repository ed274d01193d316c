"""The fault-injection matrix: for each target, find the run's boundaries with a clean run, then crash at
each one (or every ``every``-th) in a fresh store and check the invariants (see ``fault_harness``)."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from fault_harness import Case, boundaries, crash_site, plan, run_driver, settle
from redis_server import RedisServer

TARGETS = ("driver", "redis", "actor")


@contextmanager
def _case(
    target: str, root: Path, name: str, ray_address: str | None, seed: int | None = None
) -> Iterator[tuple[Case, RedisServer | None]]:
    workdir = root / name
    workdir.mkdir()
    if target == "redis":
        with RedisServer(workdir / "redis") as server:
            yield Case(workdir, server.url, seed=seed), server
        return
    executor = "ray" if target == "actor" else "local"
    address = ray_address if target == "actor" else None
    yield Case(workdir, str(workdir / "store.db"), executor, address, seed), None


def count_boundaries(target: str, root: Path, ray_address: str | None, seed: int | None = None) -> list[str]:
    with _case(target, root, f"{target}-dry", ray_address, seed) as (case, _):
        code = run_driver(case)
        assert code == 0, f"the clean {target} run failed (exit {code})"
        found = boundaries(case.workdir)
        result = asyncio.run(settle(case))
        assert not result["problems"], result
        return found


def crash_at(
    target: str, index: int, label: str, root: Path, ray_address: str | None, seed: int | None = None
) -> dict[str, Any]:
    """Crash ``target`` at boundary ``index`` (``label`` in the clean run), settle, check."""
    with _case(target, root, f"{target}-{index}", ray_address, seed) as (case, server):
        plan(case.workdir, index, target, server.pid if server else None)
        code = run_driver(case)
        if server is not None:
            server.restart()  # whatever was killed comes back, with what it had made durable
        result = asyncio.run(settle(case))
        result.update(target=target, boundary=index, driver_exit=code, at=label)
        result["problems"] += landed(target, index, label, case, code)
        return result


def landed(target: str, index: int, label: str, case: Case, code: int) -> list[str]:
    """The crash happened where it was planned, to the process it was planned for; else the case
    tested some other fault (or none) and its clean result proves nothing."""
    site = crash_site(case.workdir)
    if site is None:
        return [f"C0: no crash happened (the run reached {len(boundaries(case.workdir))} boundaries)"]
    count, pid, reached = site
    problems = []
    if (count, reached) != (index, label):
        problems.append(f"C0: crashed at boundary {count} ({reached}), planned {index} ({label})")
    killed_driver = code == -signal.SIGKILL
    if target == "driver" and not killed_driver:
        problems.append(f"C0: the driver was to be killed but exited with {code}")
    if target == "actor" and (killed_driver or _alive(pid)):
        problems.append(f"C0: the actor (pid {pid}) was to be killed; driver exit {code}")
    if target == "redis" and killed_driver:
        problems.append("C0: redis-server was to be killed, but the driver died")
    return problems


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def run_matrix(
    targets: list[str], every: int = 1, ray_address: str | None = None, seed: int | None = None
) -> list[dict[str, Any]]:
    """Run the matrix, print one line per case, return the failing cases. With ``seed``, the client
    cancels the run at random (the same way in every case) instead of deciding."""
    if "actor" in targets and ray_address is None:
        from troupe.actors.remote import ensure_ray

        ensure_ray()
        import ray

        ray_address = ray.get_runtime_context().gcs_address
    failures = []
    root = Path(tempfile.mkdtemp(prefix="troupe-faults-"))
    try:
        for target in targets:
            points = count_boundaries(target, root, ray_address, seed)
            for index in range(1, len(points) + 1, every):
                result = crash_at(target, index, points[index - 1], root, ray_address, seed)
                status = "ok " if not result["problems"] else "FAIL"
                print(
                    f"{status} {target:<6} boundary {index:>2}/{len(points)} ({points[index - 1]}): "
                    f"charge ran {result['charge_runs']}x, {result['decisions']} settling decision(s)"
                    + ("" if not result["problems"] else f"  {result['problems']}"),
                    flush=True,
                )
                if result["problems"]:
                    failures.append(result)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return failures


__all__ = ["TARGETS", "count_boundaries", "crash_at", "run_matrix"]
