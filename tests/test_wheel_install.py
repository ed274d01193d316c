"""Troupe as a user gets it: the wheel installed into a new virtualenv outside the repository.

It must add exactly one top-level package to site-packages (an application's own ``core`` or ``api`` is
never shadowed), keep the client Ray-free, and run its commands from the installed files alone: the
terminal demo through a pty, and the inbox page of ``troupe serve`` (package data in the wheel).
"""

from __future__ import annotations

import subprocess
import zipfile
from pathlib import Path

import httpx
import pytest
from installs import build_wheel, clean_env, site_packages, wheel_venv
from test_demo import Terminal, approve_and_answer, final_answer, records
from test_http_serve import Served

pytestmark = pytest.mark.timeout(900)  # the first run on a new machine builds the virtualenv


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    wheel = build_wheel(tmp_path_factory.mktemp("dist"))
    return wheel, wheel_venv(wheel)


@pytest.fixture
def outside(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """A working dir outside the repository and an environment with nothing of the repository in it."""
    env = clean_env()
    env["TERM"] = "dumb"
    env.pop("RAY_ADDRESS", None)
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_MODEL"):
        env.pop(name, None)
    return tmp_path, env


def _python(venv: Path, code: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(venv / "bin" / "python"), "-c", code],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_wheel_holds_one_top_level_package_with_the_inbox_page(installed):
    wheel, venv = installed
    names = zipfile.ZipFile(wheel).namelist()
    assert {name.split("/")[0] for name in names} == {"troupe", f"{wheel.name.split('-py')[0]}.dist-info"}
    for layer in ("core", "storage", "actors", "supervisor", "api"):
        assert f"troupe/{layer}/__init__.py" in names, layer
    assert {
        "troupe/api/static/inbox.html",
        "troupe/api/static/inbox.js",
        "troupe/api/static/inbox.css",
    } <= set(names)

    # What pip put into site-packages for this distribution (its RECORD), scripts aside.
    [dist_info] = site_packages(venv).glob("troupe_runtime-*.dist-info")
    record = (dist_info / "RECORD").read_text().splitlines()
    top = {line.split(",")[0].split("/")[0] for line in record if line and not line.startswith("..")}
    assert top == {"troupe", dist_info.name}


def test_generic_names_stay_free_and_the_client_needs_no_ray(installed, outside):
    _, venv = installed
    cwd, env = outside
    for name in ("core", "api", "storage", "actors", "supervisor"):
        done = _python(venv, f"import {name}", cwd, env)
        assert done.returncode != 0 and f"No module named '{name}'" in done.stderr, (name, done.stderr)
    client = _python(venv, "import troupe.client, sys; assert 'ray' not in sys.modules", cwd, env)
    assert client.returncode == 0, client.stderr
    runtime = _python(venv, "import troupe, sys; troupe.Runtime; assert 'ray' in sys.modules", cwd, env)
    assert runtime.returncode == 0, runtime.stderr


def test_from_a_checkouts_root_its_own_troupe_folder_imports_whole(installed, outside):
    """The working directory comes first on sys.path, so from the repository's root ``import troupe``
    finds the checkout's troupe/ folder before the installed package: it must still import whole."""
    from installs import ROOT

    _, venv = installed
    _, env = outside
    code = "import troupe, troupe.api.app, troupe.core.run.loop; print(troupe.__file__)"
    done = _python(venv, code, ROOT, env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(ROOT / "troupe" / "__init__.py")


def test_the_installed_demo_approves_and_finishes_in_a_terminal(installed, outside, terminals):
    _, venv = installed
    cwd, env = outside
    term = Terminal(
        [str(venv / "bin" / "troupe"), "demo", "--store", "demo.db", "--executor", "local"], cwd, 60, env=env
    )
    terminals.append(term)
    approve_and_answer(term, "4")
    answer = final_answer(term)
    assert term.wait() == 0, term.output
    assert "Deleted record abc-123" in answer and "4 people" in answer
    assert records(cwd) == ["def-456", "ghi-789"]


def test_the_installed_server_serves_the_inbox_page(installed, outside):
    _, venv = installed
    cwd, env = outside
    served = Served(
        cwd,
        "--demo", "--open", "--executor", "local", "--store", str(cwd / "serve.db"),
        troupe=[str(venv / "bin" / "troupe")],
        cwd=cwd,
        env=env,
    )  # fmt: skip
    try:
        served.wait_ready({})
        page = httpx.get(f"http://127.0.0.1:{served.port}/inbox", timeout=10)
        script = httpx.get(f"http://127.0.0.1:{served.port}/inbox/assets/inbox.js", timeout=10)
    finally:
        code, _ = served.stop()
    assert page.status_code == 200 and "text/html" in page.headers["content-type"]
    assert "inbox" in page.text.lower() and "inbox.js" in page.text
    assert script.status_code == 200 and len(script.content) > 100
    assert code == 0, served.output()
