"""A Ray job on a real head node (``ray start --head``, ``ray job submit``) starts runs that pause for
approval and ends; the pauses live in Redis, and a separate process (this one, without Ray) lists and
decides them after the job, and the cluster, are gone.

The head runs from a plain virtualenv that has Ray and not Troupe, with Ray's token auth on: the job
carries Troupe to the cluster itself (its wheel, installed by the job's runtime env), exactly as
examples/README.md shows.

The head node is this test's own: its own temp dir (``--temp-dir``, ``RAY_TMPDIR``), its own ports and
its own OS session. It is stopped by signalling its ``ray start --block`` process and then sweeping its
session, never with ``ray stop``, which stops every Ray process on the machine (the test session's own
``ray.init()`` instance included).
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from installs import build_wheel, plain_ray_venv
from redis_server import RedisServer

from troupe import RedisStore, Runtime
from troupe.errors import DecisionConflictError

ROOT = Path(__file__).resolve().parent.parent
JOB_FILES = ("cluster_agents.py", "cluster_job.py")
RECORDS = ("rec-001", "rec-002", "rec-003")
PREFIX = "cluster-job:"

# The first run on a new machine builds the plain-Ray virtualenv, and the job's runtime env installs
# Troupe's dependencies on the head.
pytestmark = [pytest.mark.redis, pytest.mark.timeout(900)]


def free_ports(count: int) -> list[int]:
    """``count`` distinct free ports (all bound at once, so none is handed out twice)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [int(sock.getsockname()[1]) for sock in socks]


def session_members(sid: int) -> list[int]:
    """Every live process of OS session ``sid`` (Ray workers set their own process group, not session).
    A zombie is not live: it is dead and waits for whoever reaps it (in a container, PID 1 may never)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            with contextlib.suppress(OSError):
                if os.getsid(int(entry)) == sid and not _zombie(int(entry)):
                    found.append(int(entry))
    return found


def _zombie(pid: int) -> bool:
    # /proc/<pid>/stat: "pid (command) state ...", and the command may hold spaces or parentheses.
    return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"


class RayHead:
    """``ray start --head --block`` from the virtualenv ``venv``, with a dashboard (job submission needs
    it) and a token of its own, isolated from any other Ray on the machine. ``stop()`` ends exactly the
    processes it started, even if ``start()`` failed."""

    def __init__(self, venv: Path) -> None:
        # Short: Ray's unix sockets live under it (pytest's tmp_path is too long for them).
        self.temp_dir = Path(tempfile.mkdtemp(prefix="trj-", dir="/tmp"))
        self.ray_command = venv / "bin" / "ray"
        ports = free_ports(9)
        self.gcs_port, self.dashboard_port = ports[0], ports[4]
        self.address = f"http://127.0.0.1:{self.dashboard_port}"
        token = self.temp_dir / "auth_token"
        token.write_text(secrets.token_hex(32))
        token.chmod(0o600)
        # Nothing of this test session leaks in (no Troupe venv on PATH, no PYTHONPATH, not its Ray or
        # token): the job finds Troupe only through its runtime env. Every process here presents the
        # head's token, as `ray start` users do.
        keep = ("HOME", "LANG", "LC_ALL", "TMPDIR", "USER")
        self.env = {k: os.environ[k] for k in keep if k in os.environ} | {
            "PATH": f"{venv / 'bin'}:/usr/local/bin:/usr/bin:/bin",
            "RAY_AUTH_MODE": "token",
            "RAY_AUTH_TOKEN_PATH": str(token),
            "RAY_TMPDIR": str(self.temp_dir),
            "RAY_USAGE_STATS_ENABLED": "0",
        }
        self.command = [
            str(self.ray_command),
            "start",
            "--head",
            "--block",
            "--temp-dir", str(self.temp_dir),
            "--num-cpus", "2",
            "--node-ip-address", "127.0.0.1",
            "--port", str(ports[0]),
            "--node-manager-port", str(ports[1]),
            "--object-manager-port", str(ports[2]),
            "--ray-client-server-port", str(ports[3]),
            "--include-dashboard", "true",
            "--dashboard-host", "127.0.0.1",
            "--dashboard-port", str(ports[4]),
            "--dashboard-agent-listen-port", str(ports[5]),
            "--dashboard-agent-grpc-port", str(ports[6]),
            "--runtime-env-agent-port", str(ports[7]),
            "--metrics-export-port", str(ports[8]),
            "--disable-usage-stats",
        ]  # fmt: skip
        self.log_path = self.temp_dir / "ray-start.log"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 90.0) -> None:
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                self.command,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # its own session: what stop() sweeps
            )
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise RuntimeError(f"ray start exited with {self.process.returncode}:\n{self.log_tail()}")
            # The job API answers once the dashboard's job module is up.
            request = urllib.request.Request(f"{self.address}/api/jobs/", headers=self.auth_header())
            with (
                contextlib.suppress(OSError, ValueError),
                urllib.request.urlopen(request, timeout=2) as reply,
            ):
                if reply.status == 200:
                    return
            if time.monotonic() > deadline:
                raise RuntimeError(f"the head's job API did not answer in {timeout}s:\n{self.log_tail()}")
            time.sleep(0.25)

    def stop(self) -> None:
        if self.process is not None:
            sid = self.process.pid
            if self.process.poll() is None:
                self.process.send_signal(signal.SIGTERM)  # ray start --block takes its processes along
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.process.wait(timeout=15)
            deadline = time.monotonic() + 30  # a busy machine takes its time to tear processes down
            while members := session_members(sid):
                if time.monotonic() > deadline:
                    raise RuntimeError(f"processes of the test's Ray head outlived it: {members}")
                for pid in members:  # whatever is left of this head's session, by pid
                    with contextlib.suppress(OSError):
                        os.kill(pid, signal.SIGKILL)
                time.sleep(0.1)
            if self.process.poll() is None:
                self.process.kill()
            self.process.wait(timeout=10)
            self.process = None
        shutil.rmtree(self.temp_dir, ignore_errors=True)

    def auth_header(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {Path(self.env['RAY_AUTH_TOKEN_PATH']).read_text()}"}

    def submit(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        """``ray job submit``, again while the head says it has no agent for jobs yet: its job API answers
        before the node's agent has registered with it, later on a busy machine. Such a refusal comes
        before any job is created."""
        deadline = time.monotonic() + 60
        while True:
            done = self.ray("job", "submit", *args, timeout=timeout)
            refused = "No available agent to submit job" in done.stdout + done.stderr
            if done.returncode == 0 or not refused or time.monotonic() > deadline:
                return done
            time.sleep(1)

    def ray(self, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(self.ray_command), *args],
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def log_tail(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-3000:]
        except FileNotFoundError:
            return "(no log)"


@pytest.fixture
def job_output(tmp_path: Path) -> Iterator[tuple[str, dict[str, str], str]]:
    """Start redis and a plain-Ray head node, submit examples/cluster_job.py with Troupe's wheel, wait for
    it to succeed, stop the head. Yields the Redis URL, ``{record id: run id}`` as the job printed them,
    and the job's output."""
    job_dir = tmp_path / "job"  # the examples folder as README shows it: the job's files and the wheel
    job_dir.mkdir()
    for name in JOB_FILES:
        shutil.copy(ROOT / "examples" / name, job_dir / name)
    wheel = build_wheel(job_dir / "wheels")
    plain = plain_ray_venv()
    probe = subprocess.run(
        [str(plain / "bin" / "python"), "-c", "import troupe"],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert probe.returncode != 0, "the head's Python must not have Troupe"

    with RedisServer(tmp_path / "redis") as redis:
        runtime_env = {
            "pip": [f"${{RAY_RUNTIME_ENV_CREATE_WORKING_DIR}}/wheels/{wheel.name}"],
            "env_vars": {"TROUPE_REDIS_URL": redis.url, "TROUPE_REDIS_PREFIX": PREFIX},
        }
        head = RayHead(plain)
        try:
            started = time.monotonic()
            head.start()
            up = time.monotonic()
            submitted = head.submit(
                "--address", head.address,
                "--working-dir", str(job_dir),
                "--runtime-env-json", json.dumps(runtime_env),
                "--", "python", "cluster_job.py", *RECORDS,
                timeout=400,
            )  # fmt: skip
            output = submitted.stdout + submitted.stderr
            assert submitted.returncode == 0, f"the job failed:\n{output[-5000:]}\n{head.log_tail()}"
            assert "succeeded" in output
            done = time.monotonic()
        finally:
            head.stop()  # before deciding: the pauses must not need the cluster any more
        stopped = time.monotonic()
        print(f"head up {up - started:.1f}s, job {done - up:.1f}s, head stopped {stopped - done:.1f}s")

        paused: dict[str, str] = {}
        for line in output.splitlines():
            if line.startswith("PAUSED "):
                _, run_id, tool, args = line.split(" ", 3)
                assert tool == "delete_record"
                paused[json.loads(args)["id"]] = run_id
        assert sorted(paused) == sorted(RECORDS), output
        yield redis.url, paused, output


async def test_runs_paused_by_a_ray_job_are_decided_after_it_ends_from_another_process(
    job_output: tuple[str, dict[str, str], str], monkeypatch: pytest.MonkeyPatch
):
    redis_url, paused, output = job_output
    monkeypatch.syspath_prepend(str(ROOT / "examples"))  # the same agent definitions the job used
    from cluster_agents import build_ops

    runtime = Runtime([build_ops()], storage=RedisStore.from_url(redis_url, prefix=PREFIX), executor="local")
    ops = runtime.get_agent("ops")
    try:
        listed = await ops.list_suspended_runs(thread_id="cluster-job")
        assert listed.total == 3
        assert {run.run_id for run in listed.runs} == set(paused.values())
        for run in listed.runs:
            [call] = run.pending
            assert call.tool_name == "delete_record"
            assert call.agent_path == ["ops", "records"]
            assert call.tool_call_id == "ask-records"
            assert paused[call.args["id"]] == run.run_id
            assert run.resource_id == call.args["id"]
        assert '"deleted"' not in output, "nothing was deleted inside the job"

        approved = await ops.approve_tool_call_generate(run_id=paused["rec-001"], tool_call_id="ask-records")
        assert approved.finish_reason == "stop"
        assert approved.text == (
            f'Records agent says: delete_record -> {{"deleted": "rec-001", "by": "pid {os.getpid()}"}}'
        ), "the approved tool ran once, here, in the deciding process"

        declined = await ops.decline_tool_call_generate(
            run_id=paused["rec-002"], reason="rec-002 is still referenced by invoice 42"
        )
        assert (
            declined.text == "Records agent says: delete_record -> rec-002 is still referenced by invoice 42"
        )

        stream = await ops.approve_tool_call(run_id=paused["rec-003"])
        streamed = "".join([piece async for piece in stream.text_stream])
        assert '"deleted": "rec-003"' in streamed

        with pytest.raises(DecisionConflictError):  # decided once, for good
            await ops.approve_tool_call_generate(run_id=paused["rec-001"], tool_call_id="ask-records")
        assert (await ops.list_suspended_runs()).total == 0
        kinds = [entry.kind for entry in await runtime.store().list_audit(paused["rec-002"])]
        assert "declined" in kinds
    finally:
        await runtime.shutdown()
