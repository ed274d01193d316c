"""What a newcomer mistypes or misreads gets one line that names what is wrong and what to do, and
changes nothing (issue 33's list, each as a user would meet it; then the first mistakes of code: a plain
function where a tool goes, subagents in a list, a runtime given one agent or an agent's id, and a
feature whose extra is not installed, the MCP SDK's ``troupe-runtime[mcp]``)."""

from __future__ import annotations

import asyncio
import sys
import threading
from pathlib import Path

import httpx
import pytest
from helpers import delete_tool, one_call
from http_server import LiveServer, runtime_factory
from pydantic import BaseModel

from troupe import Agent, MCPStdio, Memory, MemoryStore, RedisStore, Runtime, SqliteStore, create_tool
from troupe.cli import main
from troupe.errors import InvalidOptionError, MCPServerError, StorageUnavailableError
from troupe.testing import CallLog, ScriptedModel, text


@pytest.mark.parametrize("url", ["postgres://x/y", "127.0.0.1:6379", "redis://", "unix://"])
def test_what_is_no_redis_url_is_refused_at_once_naming_the_forms_that_are(url: str):
    with pytest.raises(ValueError, match="not a Redis URL") as refused:
        RedisStore.from_url(url)
    for form in ("redis://", "rediss://", "unix://", "redis+cluster://", "redis+sentinel://"):
        assert form in str(refused.value)


def test_a_refused_url_keeps_its_password_to_itself():
    with pytest.raises(ValueError, match="not a Redis URL") as refused:
        RedisStore.from_url("postgres://admin:hunter2@db/x")
    assert "hunter2" not in str(refused.value)


async def test_an_unreachable_redis_says_so_without_naming_an_internal_operation():
    store = RedisStore.from_url("redis://127.0.0.1:9/0?socket_connect_timeout=1")
    with pytest.raises(StorageUnavailableError) as down:
        await store.touch_owner("host", 10)
    assert "is unavailable (is redis-server running there" in str(down.value)
    assert "touch_owner" not in str(down.value)
    await store.close()


async def test_a_sqlite_store_whose_folder_cannot_be_made_is_unavailable_and_named(tmp_path: Path):
    """A file where the store's folder should be (or a folder it may not make): the store is out of
    reach, said as such (STORAGE_UNAVAILABLE, 503 over HTTP), not an OSError from inside the store."""
    (tmp_path / "taken").write_text("not a folder")
    path = tmp_path / "taken" / "troupe.db"
    calls = CallLog(tmp_path / "calls.jsonl")
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=SqliteStore(path), executor="local")
    try:
        for attempt in (agent.list_suspended_runs(), agent.generate("delete a")):
            with pytest.raises(StorageUnavailableError) as down:
                await attempt
            assert str(path) in str(down.value)
            assert down.value.code == "STORAGE_UNAVAILABLE"
    finally:
        await runtime.shutdown()


@pytest.mark.parametrize("command", [["demo"], ["serve", "--demo", "--open"]])
def test_a_demo_store_in_a_missing_folder_is_one_line_and_creates_nothing(command, tmp_path, capsys):
    missing = tmp_path / "no" / "such" / "folder"
    with pytest.raises(SystemExit) as exited:
        main([*command, "--store", str(missing / "x.db")])
    assert exited.value.code == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert (
        error
        == f"troupe: error: --store {missing / 'x.db'}: the folder {missing} does not exist (create it first)"
    )
    assert not (tmp_path / "no").exists()


@pytest.fixture
def app_runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """An app (tests/operator_app.py) over a SQLite store with one run paused by suspend()."""
    db, calls = tmp_path / "http.db", tmp_path / "calls.jsonl"
    monkeypatch.setenv("TROUPE_TEST_STORE", str(db))
    monkeypatch.setenv("TROUPE_TEST_CALLS", str(calls))
    return {"db": str(db), "calls": str(calls), "tmp": str(tmp_path)}


def _paused_planner(app_runtime: dict[str, str]) -> str:
    async def pause() -> str:
        runtime = runtime_factory(Path(app_runtime["tmp"]), CallLog(app_runtime["calls"]))()
        run_id = (await runtime.get_agent("planner").generate("weather?", resource_id="a1")).run_id
        await runtime.shutdown()
        return run_id

    return asyncio.run(pause())


def test_approving_an_unknown_run_says_it_is_unknown_or_finished(app_runtime, capsys):
    assert main(["approve", "no-such-run", "--app", "operator_app:runtime"]) == 1
    error = capsys.readouterr().err
    assert "run no-such-run is not waiting for a decision: it is unknown here, or it has finished" in error
    assert "troupe runs show no-such-run" in error


def test_approving_a_suspend_pause_names_troupe_resume(app_runtime, capsys):
    run_id = _paused_planner(app_runtime)
    assert main(["approve", run_id, "--app", "operator_app:runtime"]) == 1
    error = capsys.readouterr().err
    assert "waits for an answer (resume data), not an approval" in error and "troupe resume RUN CALL" in error


def test_the_demo_script_names_python3_venv_where_python_cannot_make_a_virtualenv(tmp_path: Path):
    """Stock Debian's Python has no ensurepip until python3-venv is installed: the demo says so in one
    line instead of failing in `python3 -m venv`. (A module named ensurepip that cannot be imported,
    first on PYTHONPATH, is that Python as far as the script can tell.)"""
    import shutil
    import subprocess

    from conftest import ROOT

    (tmp_path / "scripts").mkdir()
    for script in ("demo.sh", "venv.sh"):
        shutil.copy(ROOT / "scripts" / script, tmp_path / "scripts" / script)
    shadow = tmp_path / "no-ensurepip" / "ensurepip"
    shadow.mkdir(parents=True)
    (shadow / "__init__.py").write_text("raise ImportError('ensurepip is not available')\n")
    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "PYTHONPATH": str(shadow.parent), "HOME": str(tmp_path)}
    done = subprocess.run(
        ["bash", "scripts/demo.sh"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 1, done.stdout + done.stderr
    assert "install python3-venv first (sudo apt-get install python3-venv)" in done.stderr
    assert not (tmp_path / ".venv").exists()


class RecordId(BaseModel):
    id: str


def lookup(record: RecordId, ctx: object) -> str:
    return record.id


def model() -> ScriptedModel:
    return ScriptedModel([text("hi")])


@pytest.mark.parametrize(
    ("tools", "says"),
    [
        ([lookup], "agent 'records': tools[0] is a function, not a Tool (make one with create_tool)"),
        ({"lookup": lookup}, "agent 'records': tool 'lookup' is a function, not a Tool"),
        (
            create_tool("lookup", "Look a record up", RecordId, lookup),
            "agent 'records': tools must be a list of Tools or a dict of name -> Tool, got Tool",
        ),
    ],
    ids=["a function in the list", "a function in the dict", "one tool, not a list"],
)
def test_what_is_not_a_tool_is_named(tools, says):
    with pytest.raises(TypeError) as refused:
        Agent("records", model=model(), tools=tools)
    assert says in str(refused.value)


def test_subagents_in_a_list_are_told_they_go_in_a_dict():
    with pytest.raises(TypeError) as refused:
        Agent("boss", model=model(), agents=[Agent("records", model=model())])
    assert str(refused.value) == (
        "agent 'boss': agents must be a dict of key -> Agent (each becomes the tool 'agent-<key>'), got list"
    )


@pytest.mark.parametrize(
    ("agents", "says"),
    [
        (
            Agent("records", model=model()),
            "agents must be a list of Agents or a dict of id -> Agent, got Agent",
        ),
        (["records"], "Runtime: 'records' is a str, not an Agent"),
        ({"records": "records"}, "Runtime: 'records' is a str, not an Agent"),
    ],
    ids=["one agent", "an id in the list", "an id in the dict"],
)
def test_what_is_not_an_agent_is_named_by_the_runtime(agents, says):
    with pytest.raises(TypeError) as refused:
        Runtime(agents, storage=MemoryStore(), executor="local")
    assert says in str(refused.value)


async def test_an_mcp_server_without_the_sdk_says_which_extra_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # as if the extra were not installed
    server = MCPStdio("files", sys.executable, ["-c", "pass"])
    runtime = Runtime(
        [Agent("clerk", model=model(), mcp_servers=[server])], storage=MemoryStore(), executor="local"
    )
    try:
        with pytest.raises(MCPServerError) as refused:
            # Well within the 30 s a server has to open: the missing SDK is known at once.
            await asyncio.wait_for(runtime.get_agent("clerk").generate("hi"), 10)
    finally:
        await runtime.shutdown()
    assert "MCP server 'files' could not be opened" in str(refused.value)
    assert "pip install 'troupe-runtime[mcp]'" in str(refused.value)


def test_troupe_mcp_without_the_sdk_says_which_extra_to_install(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "mcp.server.stdio", None)  # as if the extra were not installed
    with pytest.raises(SystemExit) as stopped:
        main(["mcp", "--demo", "--executor", "local", "--store", str(tmp_path / "demo.db")])
    assert "troupe mcp needs the MCP SDK: pip install 'troupe-runtime[mcp]'" in str(stopped.value.code)


def test_a_server_without_the_a2a_and_mcp_sdks_says_which_extras_serve_those_routes(monkeypatch, tmp_path):
    # As if the extras were not installed (the modules the routes import first, which another test may
    # have loaded already: a loaded submodule is found without its package).
    for sdk in ("a2a.server.request_handlers.response_helpers", "mcp.server.streamable_http_manager"):
        monkeypatch.setitem(sys.modules, sdk, None)
    build = runtime_factory(tmp_path, CallLog(tmp_path / "calls.jsonl"))
    server = LiveServer(build, keys={"k-ops": {"name": "ops", "admin": True}}).start()
    try:
        with httpx.Client(base_url=server.url, headers={"Authorization": "Bearer k-ops"}) as client:
            answers = {
                "card": client.get("/a2a/ops/.well-known/agent-card.json"),
                "a2a": client.post("/a2a/ops", json={"jsonrpc": "2.0", "id": 1, "method": "GetTask"}),
                "mcp": client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}),
            }
            nobody = [
                client.get("/a2a/ops/.well-known/agent-card.json", headers={"Authorization": ""}).status_code,
                client.post("/mcp", json={}, headers={"Authorization": ""}).status_code,
            ]
    finally:
        server.stop()
    extra = {"card": "a2a", "a2a": "a2a", "mcp": "mcp"}
    for name, answer in answers.items():
        assert answer.status_code == 404, (name, answer.text)
        body = answer.json()
        assert body["code"] == "HTTP_ERROR", (name, body)
        assert f"pip install 'troupe-runtime[{extra[name]}]'" in body["error"], (name, body)
    assert nobody == [401, 401]  # behind the same credentials as the routes they stand for


class Payment(BaseModel):
    amount: int


async def pay_one(payment: Payment) -> dict[str, int]:  # no ctx: a tool function takes (input, ctx)
    return {"paid": payment.amount}


def test_a_tool_function_that_cannot_take_input_and_ctx_is_refused_when_the_tool_is_made():
    """Not when the model first calls it: then the TypeError went to the model as the tool's result, and
    a ``require_approval`` that raised gated every call."""
    with pytest.raises(TypeError) as refused:
        create_tool("pay", "Pay", Payment, pay_one)
    assert str(refused.value).startswith(
        "tool 'pay': execute must take (input, ctx), but it is pay_one(payment"
    )
    with pytest.raises(TypeError) as refused:
        create_tool("pay", "Pay", Payment, lambda p, ctx: p.amount, require_approval=lambda payment: True)
    assert "tool 'pay': require_approval must take (input, ctx), but it is <lambda>(payment)" in str(
        refused.value
    )
    # Whatever takes two positional arguments is a tool function (extra ones with defaults, *args).
    create_tool("pay", "Pay", Payment, lambda p, ctx, retries=0: p.amount, require_approval=lambda *a: True)


@pytest.mark.parametrize("option", ["thread_id", "resource_id", "run_id"])
async def test_a_numeric_id_is_an_invalid_option_naming_it_and_starts_nothing(option):
    """A user's numeric id passed as is: the documented ``InvalidOptionError``, not pydantic's error about
    an internal model."""
    runtime = Runtime(
        [Agent("records", model=model(), memory=Memory())], storage=MemoryStore(), executor="local"
    )
    records = runtime.get_agent("records")
    try:
        with pytest.raises(InvalidOptionError) as refused:
            await records.generate("hi", **{option: 42})
        assert str(refused.value) == f"{option} must be a string, got int 42"
        assert refused.value.details == {"option": option}
        # The model's one scripted turn is still there: the refused run never reached it.
        assert (await records.generate("hi", thread_id="t", resource_id="u")).text == "hi"
    finally:
        await runtime.shutdown()


async def test_a_tool_holding_what_cannot_travel_to_its_ray_actor_says_what_and_what_to_do(
    ray_session, tmp_path
):
    """A connection in a tool's closure (a lock here, which no process can take to another): named, with
    the two ways out, instead of pages of Ray's serialization walk."""
    guard = threading.Lock()

    def delete(record: RecordId, ctx: object) -> str:
        with guard:
            return record.id

    agent = Agent("records", model=model(), tools=[create_tool("delete_record", "Delete", RecordId, delete)])
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "troupe.db"), executor="ray")
    try:
        with pytest.raises(TypeError) as refused:
            await runtime.get_agent("records").generate("hi")
    finally:
        await runtime.shutdown()
    said = str(refused.value)
    assert said.startswith(
        "Agent(id='records', tools=['delete_record'], agents=[]) cannot be sent to its Ray"
    )
    assert "cannot pickle '_thread.lock' object" in said
    assert "open connections and clients inside the tool" in said and "executor='local'" in said
    assert "Checking Serializability" not in said  # Ray's walk stays in the cause


@pytest.mark.parametrize(
    "id", [None, "", pay_one], ids=["None", "empty", "the function, as a decorator takes it"]
)
def test_a_tool_id_that_is_no_name_is_refused_when_the_tool_is_made(id):
    with pytest.raises(TypeError) as refused:
        create_tool(id, "Pay", Payment, lambda p, ctx: p.amount)
    assert str(refused.value).startswith(
        f"a tool's id must be a non-empty string (the name the model calls it by), got {id!r}"
    )


@pytest.mark.parametrize(
    ("decide", "option"),
    [
        (lambda agent, run: agent.decline_tool_call_generate(run_id=run, reason=123), "reason"),
        (lambda agent, run: agent.decline_tool_call(run_id=run, tool_call_id=1), "tool_call_id"),
        (lambda agent, run: agent.approve_tool_call(run_id=run, fingerprint=b"f"), "fingerprint"),
        (lambda agent, run: agent.cancel_run(run, reason=["why"]), "reason"),
    ],
    ids=["decline-reason", "call-id", "fingerprint", "cancel-reason"],
)
async def test_a_decision_given_what_is_not_text_is_refused_naming_it_and_the_run_stays_paused(
    decide, option, calls
):
    """``reason=123`` was refused by pydantic's check of an internal audit entry ("1 validation error for
    AuditEntry"); it is the documented ``InvalidOptionError`` naming the option, and the run still waits."""
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=MemoryStore(), executor="local")
    try:
        run = (await agent.generate("delete a")).run_id
        with pytest.raises(InvalidOptionError) as refused:
            await decide(agent, run)
        assert refused.value.details == {"option": option}
        assert str(refused.value).startswith(f"{option} must be a string, got ")
        assert (await agent.approve_tool_call_generate(run_id=run)).finish_reason == "stop"
        assert calls.count("delete_record") == 1
    finally:
        await runtime.shutdown()


@pytest.mark.parametrize(
    ("defaults", "option"),
    [
        ({"approval_timeout": float("nan")}, "approval_timeout"),
        ({"max_steps": 0}, "max_steps"),
        ({"thread_id": 5}, "thread_id"),
    ],
)
def test_default_options_every_run_would_refuse_are_refused_when_the_agent_is_made(defaults, option):
    """They were accepted by ``Agent(...)``, then refused by every call of the agent."""
    with pytest.raises(InvalidOptionError) as refused:
        Agent("records", model=model(), default_options=defaults)
    assert str(refused.value).startswith(f"default_options of agent 'records': {option} must be ")
    assert refused.value.details == {"option": option}


@pytest.mark.parametrize(
    "name",
    ["delete record", "x" * 65, "delete.record", "delete_record\n"],
    ids=["space", "65", "dot", "newline"],
)
def test_a_tool_name_no_model_api_takes_is_refused_where_it_is_given_naming_it_and_the_rule(name):
    """OpenAI's and Anthropic's APIs take only ``^[a-zA-Z0-9_-]{1,64}$`` as a tool name: such a name was
    accepted here and refused by the provider with a 400 at the first real run. It is refused where it is
    given, by the rule an MCP server's tools are held to: as a tool's id, a tools dict's key, and a
    subagent's key (its ``agent-<key>`` tool)."""
    tool = create_tool("pay", "Pay", Payment, lambda p, ctx: p.amount)
    rule = "is not 1-64 letters, digits, '_' or '-'"
    with pytest.raises(ValueError) as refused:
        create_tool(name, "Pay", Payment, lambda p, ctx: p.amount)
    assert f"tool {name!r}: its id is the name the model calls it by, and {name[:80]!r} {rule}" in str(
        refused.value
    )
    with pytest.raises(ValueError) as refused:
        Agent("records", model=model(), tools={name: tool})
    assert f"agent 'records': tool {name!r}'s name is the name the model calls it by" in str(refused.value)
    with pytest.raises(ValueError) as refused:
        Agent("boss", model=model(), agents={name: Agent("records", model=model())})
    assert f"agent 'boss': subagent {name!r}'s tool {('agent-' + name)!r}" in str(refused.value)
    assert rule in str(refused.value)
    # The longest a subagent's key can be is what leaves room for "agent-".
    Agent("boss", model=model(), agents={"k" * 58: Agent("records", model=model())}, tools={"a-b_9": tool})


@pytest.mark.parametrize("id", ["a/b", "desk one", "x" * 65])
def test_an_agent_id_no_route_can_reach_is_refused_naming_the_rule(id):
    """``Agent("a/b")`` was accepted, listed by ``GET /api/agents``, and reachable by no route of its own
    (``/api/agents/a%2Fb/generate`` and ``/a2a/a%2Fb`` are 404s: the ``/`` splits the path). An agent's
    id keeps the rule of tool names, as Troupe's MCP server offers each agent as a tool by its id."""
    with pytest.raises(ValueError) as refused:
        Agent(id, model=model())
    assert str(refused.value).startswith(
        f"agent id {id[:80]!r} is not 1-64 letters, digits, '_' or '-', as an agent's id is a segment of "
        "its URLs (/api/agents/<id>, /a2a/<id>)"
    )


@pytest.mark.parametrize("option", ["thread_id", "resource_id"])
async def test_a_numeric_filter_of_the_suspended_runs_is_an_invalid_option_naming_it(option, calls):
    """``list_suspended_runs(thread_id=5)`` matched no run and said nothing (``resource_id=5``: an
    internal "resources must be strings"): it is the documented ``InvalidOptionError`` naming it."""
    agent = Agent("ops", model=one_call("delete_record", {"id": "a"}), tools=[delete_tool(calls)])
    runtime = Runtime([agent], storage=MemoryStore(), executor="local")
    try:
        await agent.generate("delete a", thread_id="5", resource_id="5")
        with pytest.raises(InvalidOptionError) as refused:
            await agent.list_suspended_runs(**{option: 5})
        assert str(refused.value) == f"{option} must be a string, got int 5"
        assert refused.value.details == {"option": option}
        assert (await agent.list_suspended_runs(**{option: "5"})).total == 1
    finally:
        await runtime.shutdown()


@pytest.mark.parametrize("prefix", ["files.", "files:", "my files ", "p" * 64])
def test_an_mcp_prefix_that_would_leave_every_tool_out_is_refused_when_the_server_is_named(prefix):
    """A prefix such as ``"files."`` was accepted, and at the first run every tool of the server was left
    out (each "not 1-64 letters, digits, '_' or '-'", logged) and the model told they do not exist."""
    with pytest.raises(ValueError) as refused:
        MCPStdio("files", "npx", prefix=prefix)
    assert str(refused.value) == (
        f"MCPStdio 'files': prefix {prefix!r} goes before each of its tools' names, which the model calls "
        "them by, so it must be at most 63 letters, digits, '_' or '-'"
    )
    MCPStdio("files", "npx", prefix="fs_")
    MCPStdio("files", "npx", prefix="p" * 63)
