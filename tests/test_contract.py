"""The public contract: what ``troupe`` exports, errors that cross processes, and one-way layers."""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from troupe.core.vocabulary import errors as core_errors

import troupe
from troupe import errors

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent  # tools come from the test's own virtualenv, never from PATH


def test_the_public_surface_is_pinned():
    assert set(troupe.__all__) == {
        "A2AAgent",
        "Agent",
        "AgentStream",
        "ApproverPolicy",
        "Chunk",
        "DelegatedBy",
        "Hooks",
        "LinkSigner",
        "MCPHttp",
        "MCPStdio",
        "Memory",
        "MemoryStore",
        "Model",
        "NotificationTarget",
        "Notifications",
        "OpenAIModel",
        "PendingToolCall",
        "Principal",
        "RedisStore",
        "RetrySchedule",
        "Runtime",
        "RunResult",
        "SqliteStore",
        "StepResult",
        "SuspendedRun",
        "SuspendedRunList",
        "Tool",
        "ToolCallOverride",
        "ToolContext",
        "create_tool",
        "client",
        "errors",
        "testing",
    }
    for name in troupe.__all__:
        assert getattr(troupe, name) is not None


def _error_classes() -> list[type[errors.TroupeError]]:
    """Troupe's own error classes (Ray derives wrapper classes from them at run time; those don't count)."""
    found, stack = [], [errors.TroupeError]
    while stack:
        cls = stack.pop()
        if cls.__module__.split(".")[0] == "troupe":
            found.append(cls)
        stack.extend(cls.__subclasses__())
    return found


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_pickles_with_its_code_message_and_details(cls):
    error = cls("something specific went wrong", run_id="r1")
    copy = pickle.loads(pickle.dumps(error))
    assert type(copy) is cls
    assert str(copy) == "something specific went wrong"
    assert copy.details == {"run_id": "r1"}
    assert copy.code == cls.code
    assert isinstance(copy, errors.TroupeError)


def test_error_codes_are_stable_and_unique():
    codes = [cls.code for cls in _error_classes()]
    assert len(codes) == len(set(codes))
    assert errors.SnapshotNotFoundError.code == "AGENT_RESUME_NO_SNAPSHOT_FOUND"
    assert errors.ToolCallNotSuspendedError.code == "AGENT_RESUME_TOOL_CALL_NOT_SUSPENDED"
    rebuilt = core_errors.error_from_dict(errors.DecisionConflictError("x", a=1).to_dict())
    assert type(rebuilt) is errors.DecisionConflictError and rebuilt.details == {"a": 1}


def _package_tree(dest: Path) -> Path:
    """The package in its installed shape (troupe/core/, ...), as scripts/package_tree.py lays it out."""
    spec = importlib.util.spec_from_file_location("package_tree", ROOT / "scripts" / "package_tree.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.build(dest, copy=True)


def test_imports_run_one_way_and_ray_stays_in_actors_and_supervisor(tmp_path):
    tree = _package_tree(tmp_path / "tree")
    lint = VENV_BIN / "lint-imports"
    assert lint.exists(), "import-linter is a dev dependency of the test's virtualenv"
    # Run from inside the tree: import-linter puts its working directory first on sys.path.
    done = subprocess.run(
        [str(lint), "--no-cache", "--config", str(ROOT / "pyproject.toml")],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "3 kept, 0 broken" in done.stdout


def _python_passes(code: str) -> None:
    """Run ``code`` in a fresh interpreter (a clean ``sys.modules``); it must exit 0."""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize(
    "modules",
    [
        "troupe.core.run.engine, troupe.core.run.loop, troupe.storage",
        "troupe, troupe.client, troupe.errors, troupe.testing",
        "troupe; troupe.client.AsyncTroupeClient; troupe.errors.TroupeError; troupe.testing.ScriptedModel",
    ],
    ids=["core", "face", "face-attributes"],
)
def test_the_ray_free_parts_import_without_ray(modules):
    code = (
        f"import sys; import {modules}; "
        "assert 'ray' not in sys.modules, sorted(m for m in sys.modules if m.startswith('ray'))"
    )
    _python_passes(code)


def test_using_the_runtime_is_what_imports_ray():
    code = "import sys, troupe; troupe.Runtime; assert 'ray' in sys.modules"
    _python_passes(code)


def test_every_logger_lives_under_troupe():
    code = (
        "import logging, troupe.api.app, troupe.api.serve, troupe.supervisor, troupe.actors.remote; "
        "names = [n for n in logging.root.manager.loggerDict "
        "if n.split('.')[0] in {'core', 'storage', 'actors', 'supervisor', 'api'}]; "
        "assert not names, names"
    )
    _python_passes(code)


def test_an_agents_actor_loads_neither_redis_py_nor_httpx_until_it_uses_them():
    """Each agent is an actor process of its own, so what its host imports is paid once per agent: a
    host on SQLite (the store unpickled there) never loads redis-py, and httpx waits for the first
    webhook (about 8 MiB of each actor together, bench/embedded_ray.py)."""
    code = (
        "import sys, pickle, troupe; from troupe import SqliteStore; import troupe.actors.host; "
        "pickle.loads(pickle.dumps(SqliteStore(':memory:'))); "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in {'redis', 'httpx'}); "
        "assert not loaded, loaded; "
        "from troupe import RedisStore; assert 'redis' in sys.modules"
    )
    _python_passes(code)


def test_mcp_is_imported_only_once_a_session_opens_or_mcp_is_served():
    """``mcp`` is an extra: importing Troupe, defining MCP servers, an agent host and the HTTP app's
    module never import it (the sessions and /mcp do, when they are made)."""
    code = (
        "import sys, troupe; from troupe import MCPStdio, Agent, Runtime; "
        "import troupe.actors.host, troupe.actors.mcp.sources, troupe.api.app, troupe.cli; "
        "MCPStdio('s', 'cmd'); "
        "assert 'mcp' not in sys.modules, sorted(m for m in sys.modules if m.startswith('mcp'))"
    )
    _python_passes(code)
