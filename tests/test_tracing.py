"""Tracing: OpenTelemetry spans for run, step, model call, tool call, approval wait and delegation, joined
across agents and across a pause and its decision (in-memory exporter; console exporter from the env)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helpers import delete_tool, echo_model
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from troupe import Agent, Runtime, SqliteStore
from troupe.testing import CallLog, FunctionModel, text, tool_call

_EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def installed() -> InMemorySpanExporter:
    # A process gets one tracer provider; install ours unless this process already has one.
    if not isinstance(trace.get_tracer_provider(), TracerProvider):
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(_EXPORTER))
        trace.set_tracer_provider(provider)
    return _EXPORTER


@pytest.fixture
def spans(installed: InMemorySpanExporter) -> Iterator[InMemorySpanExporter]:
    installed.clear()
    yield installed
    installed.clear()


def named(found: tuple[ReadableSpan, ...] | list[ReadableSpan], name: str) -> list[ReadableSpan]:
    return [s for s in found if s.name == name]


def supervisor(log: CallLog) -> Agent:
    data = Agent(
        "data",
        model=echo_model(tool_call("delete_record", {"id": "u1"}, id="leaf-1")),
        tools=[delete_tool(log)],
    )

    def turn(messages, tools):
        if messages[-1]["role"] == "tool":
            return text("done")
        return tool_call("agent-data", {"prompt": "delete u1"}, id="d1")

    return Agent("sup", model=FunctionModel(turn), agents={"data": data})


async def test_a_paused_delegated_run_is_one_trace_from_start_to_decision(spans, tmp_path: Path):
    log = CallLog(tmp_path / "calls.jsonl")
    sup = supervisor(log)
    runtime = Runtime([sup], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        paused = await sup.generate("go")
        done = await sup.approve_tool_call_generate(
            run_id=paused.run_id, tool_call_id="d1", decided_by="alice"
        )
        assert done.text == "done"
    finally:
        await runtime.shutdown()

    found = spans.get_finished_spans()
    runs = named(found, "troupe.run")
    operations = sorted((s.attributes["troupe.agent_id"], s.attributes["troupe.operation"]) for s in runs)
    assert operations == [("data", "decision"), ("data", "start"), ("sup", "decision"), ("sup", "start")]
    assert len({s.context.trace_id for s in found}) == 1, "start, pause and decision, both agents: one trace"

    by_id = {s.context.span_id: s for s in found}
    sub_start = next(
        s
        for s in runs
        if s.attributes["troupe.agent_id"] == "data" and s.attributes["troupe.operation"] == "start"
    )
    assert by_id[sub_start.parent.span_id].name == "troupe.delegation"

    waits = named(found, "troupe.approval_wait")
    assert {w.attributes["troupe.run_id"] for w in waits} == {
        paused.run_id,
        sub_start.attributes["troupe.run_id"],
    }
    top_wait = next(w for w in waits if w.attributes["troupe.run_id"] == paused.run_id)
    assert top_wait.attributes["troupe.decision"] == "approved"
    assert top_wait.attributes["troupe.fingerprint"] == paused.suspend_payload["fingerprint"]
    assert top_wait.attributes["troupe.decided_by"] == "alice"
    assert top_wait.end_time > top_wait.start_time

    tools = {s.attributes["troupe.tool"]: s for s in named(found, "troupe.tool")}
    assert set(tools) == {"agent-data", "delete_record"}
    assert tools["delete_record"].attributes["troupe.outcome"] == "done"
    assert named(found, "troupe.model") and named(found, "troupe.step")
    model_parent = by_id[named(found, "troupe.model")[0].parent.span_id]
    assert model_parent.name == "troupe.step"


async def test_a_run_starts_under_the_callers_span(spans, tmp_path: Path):
    agent = Agent("chat", model=FunctionModel(lambda m, t: text("hi")))
    runtime = Runtime([agent], storage=SqliteStore(tmp_path / "t.db"), executor="local")
    try:
        with trace.get_tracer("app").start_as_current_span("handle-request") as outer:
            await agent.generate("hello")
    finally:
        await runtime.shutdown()

    [run] = named(spans.get_finished_spans(), "troupe.run")
    assert run.parent is not None and run.parent.span_id == outer.get_span_context().span_id


_ONE_RUN = textwrap.dedent("""
    import asyncio
    from troupe import Agent, Runtime, SqliteStore
    from troupe.testing import FunctionModel, text

    async def main():
        agent = Agent("chat", model=FunctionModel(lambda m, t: text("hi")))
        runtime = Runtime([agent], storage=SqliteStore("t.db"), executor="local")
        await agent.generate("hello")
        await runtime.shutdown()

    asyncio.run(main())
""")


def _one_run(tmp_path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """One run in a fresh process whose environment configures tracing."""
    done = subprocess.run(
        [sys.executable, "-c", _ONE_RUN],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done


def test_the_console_exporter_is_configured_from_the_environment(tmp_path: Path):
    done = _one_run(tmp_path, OTEL_TRACES_EXPORTER="console", OTEL_SERVICE_NAME="troupe-test")

    assert '"name": "troupe.run"' in done.stdout
    assert '"service.name": "troupe-test"' in done.stdout


class _Collector(BaseHTTPRequestHandler):
    received: list[tuple[str, str, bytes]]

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["content-length"]))
        self.received.append((self.path, self.headers["content-type"], body))
        self.send_response(200)
        self.send_header("content-type", "application/x-protobuf")
        self.send_header("content-length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def collector() -> Iterator[tuple[str, list[tuple[str, str, bytes]]]]:
    """An OTLP/HTTP collector endpoint on 127.0.0.1 that keeps what it is sent."""
    received: list[tuple[str, str, bytes]] = []
    handler = type("Collector", (_Collector,), {"received": received})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", received
    server.shutdown()
    server.server_close()


def test_the_otlp_exporter_sends_the_runs_spans_to_the_collector(collector, tmp_path: Path):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    endpoint, received = collector
    _one_run(
        tmp_path,
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_SERVICE_NAME="troupe-otlp-test",
    )

    assert received, "nothing reached the collector"
    names, services = set(), set()
    for path, content_type, body in received:
        assert (path, content_type) == ("/v1/traces", "application/x-protobuf")
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            for attribute in resource_spans.resource.attributes:
                if attribute.key == "service.name":
                    services.add(attribute.value.string_value)
            for scope in resource_spans.scope_spans:
                names.update(span.name for span in scope.spans)
    assert services == {"troupe-otlp-test"}
    assert {"troupe.run", "troupe.step", "troupe.model"} <= names


def test_asking_for_spans_without_the_sdk_says_so_once(monkeypatch, caplog):
    """OTEL_TRACES_EXPORTER set without the `tracing` extra: one warning naming the extra, not silence."""
    import sys

    import troupe.core.tracing as tracing

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "console")
    monkeypatch.setattr(tracing, "_configured", False)
    monkeypatch.setattr(tracing, "_sdk_missing", False)
    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)  # as if not installed
    with caplog.at_level("WARNING", logger="troupe.core.tracing"):
        assert tracing.configure() is False
        assert tracing.configure() is False
    warnings = [r.getMessage() for r in caplog.records if r.name == "troupe.core.tracing"]
    assert len(warnings) == 1 and "pip install 'troupe-runtime[tracing]'" in warnings[0], warnings
