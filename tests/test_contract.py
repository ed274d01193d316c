"""The public contract: what ``troupe`` exports, errors that cross processes, and one-way layers."""

from __future__ import annotations

import pickle
import shutil
import subprocess
import sys

import pytest

import troupe
from core import errors as core_errors
from troupe import errors


def test_the_public_surface_is_pinned():
    assert set(troupe.__all__) == {
        "Agent",
        "AgentStream",
        "Chunk",
        "Hooks",
        "Memory",
        "MemoryStore",
        "Model",
        "OpenAIModel",
        "PendingToolCall",
        "RedisStore",
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
        if cls.__module__.split(".")[0] in {"core", "storage", "actors", "supervisor", "api", "troupe"}:
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


def test_imports_run_one_way_and_ray_stays_in_actors_and_supervisor():
    lint = shutil.which("lint-imports")
    assert lint, "import-linter is a dev dependency"
    done = subprocess.run([lint], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 kept, 0 broken" in done.stdout


def test_core_and_storage_import_without_ray():
    code = (
        "import sys; import core.engine, core.loop, storage; "
        "assert 'ray' not in sys.modules, sorted(m for m in sys.modules if m.startswith('ray'))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
