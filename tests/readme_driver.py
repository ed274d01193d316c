"""Run every fenced shell and Python block of README.md, examples/README.md and the documentation
(docs/**/*.md) the way a user would, and report how each went (``tests/test_readme_blocks.py`` runs
this, and says what failed).

The user: a fresh copy of the repository (its tracked files), the system's PATH, a home of their own,
and each block in a fresh shell. The docs' "Install" page makes ``.venv`` and says every command after it
runs with that virtualenv activated, so a block after it runs as ``source .venv/bin/activate`` and then
the block, as written. A block that starts a server runs in the background until the next blocks that
need it have run; Python blocks are saved to a file and run with ``python``.

A docs page shows a Python program by including its file (``--8<-- "docs/examples/NAME.py"``, MkDocs'
snippets). Those programs run in ``tests/test_docs_examples.py`` (each checked against the output its
page shows), except the ones that talk to the demo server on its fixed port (``RUN_HERE``): those run
here, in their scenario, with the file's text as the block's.

It runs inside a PID namespace of its own (``unshare``, see the test): the blocks use the docs' fixed
ports and ``ray stop`` stops every Ray process it can see, which there is only what the blocks started.
A few blocks are not run, each for a reason in ``NOT_RUN``.

    python tests/readme_driver.py WORKDIR      # writes WORKDIR/report.json
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SYSTEM_PATH = "/usr/local/bin:/usr/bin:/bin"
PORTS = (8000, 8001, 8002, 8003, 6379, 6399, 8265)

# Blocks not run here, found by a line of theirs, and why.
NOT_RUN = {
    "bash scripts/test.sh": "the whole test suite, this test among it: CI runs it (.ci/run)",
    "python tests/fault_harness.py full": "six minutes of crashes: CI runs its bounded form "
    "(tests/test_fault_injection.py)",
    "python scripts/mutation.py": "fifteen minutes of mutants: CI runs `scripts/mutation.py --list` "
    "(scripts/test.sh)",
}


# Programs the docs include that need the demo server (`troupe serve --demo --open`) on port 8000.
RUN_HERE = frozenset({"docs/examples/client.py", "docs/examples/a2a_client.py"})
ELSEWHERE = "tests/test_docs_examples.py runs it and checks what it prints"
_INCLUDE = re.compile(r'^--8<-- "([^"]+)"\s*$')


@dataclass
class Block:
    file: str
    line: int
    lang: str
    text: str
    source: str | None = None  # the file a docs page includes as this block (its text is that file's)
    end: int = 0  # the line after its closing fence

    @property
    def first(self) -> str:
        return self.text.strip().splitlines()[0].split("  #")[0].strip()


@dataclass
class Report:
    results: list[dict[str, Any]] = field(default_factory=list)

    def add(self, block: Block, status: str, detail: str = "") -> None:
        self.results.append(
            {"file": block.file, "line": block.line, "first": block.first, "status": status, "detail": detail}
        )


def documents() -> list[str]:
    """The Markdown files whose blocks a user runs: the READMEs and every docs page."""
    pages = sorted(str(path.relative_to(ROOT)) for path in (ROOT / "docs").rglob("*.md"))
    return ["README.md", "examples/README.md", *pages]


def blocks() -> list[Block]:
    found = []
    for name in documents():
        text = (ROOT / name).read_text()
        for match in re.finditer(r"^( *)```(\w*)\n(.*?)^\1```", text, re.S | re.M):
            indent = len(match.group(1))
            body = "\n".join(line[indent:] for line in match.group(3).splitlines()) + "\n"
            block = Block(name, text[: match.start()].count("\n") + 1, match.group(2), body)
            block.end = text[: match.end()].count("\n") + 1
            included = _INCLUDE.match(body.strip())
            if included:
                block.source = included.group(1)
                block.text = (ROOT / block.source).read_text()
            found.append(block)
    return found


# ---- the user's machine -------------------------------------------------------------------------------


class User:
    """A copy of the repository, a home, and shells (in the copy) that run blocks."""

    def __init__(self, work: Path) -> None:
        self.clone = work / "troupe"
        self.home = work / "home"
        self.home.mkdir(parents=True)
        for name in subprocess.run(
            ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
        ).stdout.split(b"\0"):
            if name:
                source, target = ROOT / name.decode(), self.clone / name.decode()
                target.parent.mkdir(parents=True, exist_ok=True)
                if source.exists():
                    shutil.copy2(source, target)
        ray_tmp = Path("/tmp") / f"trd-{os.getpid()}"  # short: Ray's unix sockets live under it
        ray_tmp.mkdir(mode=0o700, exist_ok=True)
        keep = ("LANG", "LC_ALL", "USER", "LOGNAME", "TERM")
        self.env = {k: os.environ[k] for k in keep if k in os.environ} | {
            "PATH": SYSTEM_PATH,
            "HOME": str(self.home),
            # What is downloaded once need not be again (the machine's pip cache), and Ray's sockets.
            "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
            "RAY_TMPDIR": str(ray_tmp),
            "TERM": "dumb",
        }

    def command(self, block: Block, activated: bool) -> list[str]:
        script = block.text
        if activated:
            script = "source .venv/bin/activate\n" + script
        return ["bash", "-e", "-o", "pipefail", "-c", script]

    def run(
        self, block: Block, activated: bool = True, timeout: float = 900
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            self.command(block, activated),
            cwd=self.clone,
            env=self.env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )

    def python(self, block: Block, name: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        (self.clone / name).write_text(block.text)
        run = Block(block.file, block.line, "bash", f"python {name}\n")
        return self.run(run, timeout=timeout)

    @contextmanager
    def serving(self, block: Block, url: str, headers: dict[str, str] | None = None) -> Iterator[Path]:
        """The block, started in the background until ``url`` answers; stopped (SIGTERM to its process
        group) when the ``with`` ends. Yields the file its output goes to."""
        log = self.clone / f"server-{block.line}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                self.command(block, activated=True),
                cwd=self.clone,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            answers(url, headers, process, log)
            yield log
        finally:
            stop(process)


# What Serve's proxy answers while the application is still deploying: no route yet, no replica yet.
DEPLOYING = (None, 404, 503)


def answers(url: str, headers: dict[str, str] | None, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"the server exited with {process.returncode}:\n{tail(log)}")
        if status(url, headers) not in DEPLOYING:
            return
        time.sleep(0.5)
    raise AssertionError(f"{url} never answered:\n{tail(log)}")


def status(url: str, headers: dict[str, str] | None = None) -> int | None:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=5) as reply:
            return int(reply.status)
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return None


def stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=90)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait(timeout=30)


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


def said(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"


def expect(done: subprocess.CompletedProcess[str], *texts: str) -> None:
    assert done.returncode == 0, said(done)
    for text in texts:
        assert text in done.stdout, f"{text!r} not printed:\n{said(done)}"


# ---- the scenarios --------------------------------------------------------------------------------------


class Walk:
    """Runs the blocks in the docs' order (each scenario the blocks it needs), recording each. A block is
    found by a line of its own (``block``): exactly one block run here may hold it."""

    def __init__(self, user: User, report: Report) -> None:
        self.user = user
        self.report = report
        self.all_blocks = blocks()
        self.elsewhere = [b for b in self.all_blocks if b.source is not None and b.source not in RUN_HERE]
        self.here = [b for b in self.all_blocks if b not in self.elsewhere]

    def block(self, line: str) -> Block:
        found = [b for b in self.here if any(s.strip().startswith(line) for s in b.text.splitlines())]
        assert len(found) == 1, f"{len(found)} blocks hold a line starting {line!r}"
        return found[0]

    def step(self, line: str, check: Callable[[Block], None]) -> None:
        block = self.block(line)
        try:
            check(block)
        except Exception as exc:
            self.report.add(block, "failed", f"{type(exc).__name__}: {exc}")
        else:
            self.report.add(block, "ok")

    def all(self) -> None:
        self.step("bash scripts/demo.sh", self.demo)
        self.step("python3 -m venv .venv", lambda b: expect(self.user.run(b, activated=False, timeout=1200)))
        self.step(".venv/bin/python -m pip wheel --no-deps -w dist .", self.wheel)
        self.step("from troupe import Agent, Runtime, SqliteStore, create_tool", self.quick_start)
        self.demo_server()
        self.keyed_servers()
        self.serve_run()
        self.mcp_stdio()
        self.notebooks()
        self.cluster()
        for line, reason in NOT_RUN.items():
            self.report.add(self.block(line), "not run", reason)
        for block in self.all_blocks:
            if block.lang == "":
                self.report.add(block, "not run", "what a command prints, not a command")
        for block in self.elsewhere:
            self.report.add(block, "elsewhere", f"{block.source}: {ELSEWHERE}")

    def demo(self, block: Block) -> None:
        sys.path.insert(0, str(TESTS))
        from test_demo import Terminal, approve_and_answer, final_answer

        term = Terminal(self.user.command(block, activated=False), self.user.clone, 1200, self.user.env)
        try:
            term.expect(r"Records: abc-123, def-456, ghi-789")
            approve_and_answer(term, "4")
            assert "4" in final_answer(term), term.output
            assert term.wait() == 0, term.output
        finally:
            term.close()

    def wheel(self, block: Block) -> None:
        expect(self.user.run(block, timeout=1200), "<class 'troupe.supervisor.agent.Agent'>")

    def quick_start(self, block: Block) -> None:
        expect(self.user.python(block, "quickstart.py"), "needs approval: delete_record", "Deleted.")

    def demo_server(self) -> None:
        """The demo server, and what the docs do with it: curl, the client, AG-UI, A2A, the operator CLI."""
        server = self.block("troupe serve --demo --open")
        try:
            with self.user.serving(server, "http://127.0.0.1:8000/api/agents"):
                self.report.add(server, "ok")
                self.step(
                    "curl -s -X POST http://127.0.0.1:8000/api/agents/records-assistant/generate \\",
                    lambda b: expect(self.user.run(b), '"finishReason":"suspended"'),
                )
                self.step_client()
                self.step(  # AG-UI: a run that pauses, then its resume
                    "curl -sN http://127.0.0.1:8000/api/agents/records-assistant/agui",
                    lambda b: expect(self.user.run(b), '"type":"interrupt"', '"call-delete","content"'),
                )
                self.step(
                    "RUN=demo-$(date +%s)",
                    lambda b: expect(self.user.run(b), "finished: stop"),
                )
        except Exception as exc:
            self.report.add(server, "failed", f"{type(exc).__name__}: {exc}")

    def step_client(self) -> None:
        self.step(
            'async with AsyncTroupeClient("http://127.0.0.1:8000") as client:',
            lambda b: expect(self.user.python(b, "client.py"), "suspended delete_record"),
        )
        self.step(
            'card = await A2ACardResolver(http, "http://127.0.0.1:8000/a2a/records-assistant").get_agent_card()',
            lambda b: expect(
                self.user.python(b, "a2a_client.py"),
                "input-required: approval delete_record",
                "input-required: suspend book_table",
                "TASK_STATE_COMPLETED",
                "no table today",
            ),
        )

    auth: dict[str, str] = {}

    def keyed_servers(self) -> None:
        """Serving the example app with an API key: uvicorn, Serve replicas, an identity provider's tokens."""
        keyed = self.block("troupe keys new --file keys.json --subject acme-bot --resource acme")
        try:
            with self.user.serving(keyed, "http://127.0.0.1:8001/api/agents") as log:
                key = next(line for line in tail(log).splitlines() if line.startswith("tk_"))
                agents = "http://127.0.0.1:8001/api/agents"
                assert status(agents) == 401, "a request without the key was let in"
                assert status(agents, {"Authorization": f"Bearer {key}"}) == 200, "the printed key is refused"
            self.report.add(keyed, "ok")
        except Exception as exc:
            self.report.add(keyed, "failed", f"{type(exc).__name__}: {exc}")
            return
        auth = {"Authorization": f"Bearer {key}"}
        self.served(
            "troupe serve --app examples.records_app:runtime --keys keys.json --replicas 2", 8002, auth
        )
        self.served(
            "troupe serve --app examples.records_app:runtime --keys keys.json --port 8003", 8003, auth
        )
        self.auth = auth

    def served(self, line: str, port: int, headers: dict[str, str]) -> None:
        url = f"http://127.0.0.1:{port}/api/agents"

        def check(block: Block) -> None:
            with self.user.serving(block, url, headers) as log:
                statuses = (status(url), status(url, headers))
                assert statuses == (401, 200), f"without, with the key: {statuses}\n{tail(log)}"

        self.step(line, check)

    def serve_run(self) -> None:
        auth = self.auth
        self.served("serve run troupe.front_door:app app=examples.records_app:runtime", 8000, auth)
        self.served("cat > serve.yaml <<'EOF'", 8000, auth)

    def mcp_stdio(self) -> None:
        self.step(
            "troupe mcp --app examples.records_app:runtime --as alice < /dev/null",
            lambda b: expect(self.user.run(b)),
        )

    def notebooks(self) -> None:
        """The Notebooks page: its extra, the notebook run headless, its cells shown (the notebook's own)."""
        self.step("pip install -e '.[notebook]'", lambda b: expect(self.user.run(b, timeout=1200)))
        self.step("jupyter execute examples/approvals.ipynb", lambda b: expect(self.user.run(b, timeout=600)))
        cells = notebook_cells()
        for block in self.here:
            if block.file == NOTEBOOKS_PAGE and block.lang == "python":
                self.step(block.text.strip().splitlines()[0], lambda b: _in_notebook(b.text.strip(), cells))

    def cluster(self) -> None:
        """The production tutorial: its extra, then the cluster job from start to stop."""
        self.step("pip install -e '.[cluster]'", lambda b: expect(self.user.run(b, timeout=1200)))
        self.step("export RAY_AUTH_MODE=token", self.cluster_job)
        self.step(
            "export TROUPE_REDIS_URL=redis://127.0.0.1:6399/0",
            lambda b: expect(self.user.run(b, timeout=300), "stop"),
        )
        self.step("ray stop", lambda b: expect(self.user.run(b, timeout=300)))

    def cluster_job(self, block: Block) -> None:
        done = self.user.run(block, timeout=1500)
        expect(done)
        assert done.stdout.count("PAUSED ") >= 3 or done.stderr.count("PAUSED ") >= 3, said(done)


NOTEBOOKS_PAGE = "docs/how-to/notebooks.md"


def notebook_cells() -> list[str]:
    notebook = json.loads((ROOT / "examples" / "approvals.ipynb").read_text())
    return ["".join(c["source"]).strip() for c in notebook["cells"] if c["cell_type"] == "code"]


def _in_notebook(shown: str, cells: list[str]) -> None:
    assert shown in cells, f"not a cell of examples/approvals.ipynb as shown:\n{shown}"


def ports_taken() -> list[int]:
    taken = []
    for port in PORTS:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                taken.append(port)
    return taken


def main(work: Path) -> None:
    report = Report()
    taken = ports_taken()
    if taken:
        (work / "report.json").write_text(json.dumps({"ports_taken": taken}))
        return
    Walk(User(work), report).all()
    (work / "report.json").write_text(json.dumps({"results": report.results}, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
