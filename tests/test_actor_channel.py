"""Calls to a Ray actor on the same node travel over a direct Unix-socket channel (actors.channel), with
Ray still placing, restarting and killing the actor; a broken channel reads as the actor's death."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import pickle
import stat
import struct
import sys
import tempfile
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from channel_actors import Echo
from troupe.actors import channel
from troupe.actors.channel import ChannelClient, ChannelClosed, ChannelServer, Endpoint
from troupe.core.vocabulary.chunks import Chunk, PauseEvent
from troupe.core.vocabulary.errors import AgentUnavailableError


def _same(error: BaseException) -> BaseException:
    return error


# ---- the channel itself, in one process --------------------------------------------------------------


@pytest.fixture
async def served(tmp_path, monkeypatch) -> Any:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    target = Echo()
    server = ChannelServer(target, "node-a", _same)
    endpoint = await server.start()
    yield target, server, endpoint
    await server.close()


async def test_calls_are_answered_by_id_whatever_order_they_finish_in(served):
    _, _, endpoint = served
    client = await ChannelClient.connect(endpoint)
    # The slowest call is sent first: each answer must still reach its own caller.
    delays = [0.05, 0.0, 0.03, 0.01, 0.02] * 4
    results = await asyncio.gather(*(client.call("echo", (i, d), {}) for i, d in enumerate(delays)))
    assert results == list(range(len(delays)))
    await client.close()


async def test_errors_come_back_as_raised_and_functions_travel(served):
    _, _, endpoint = served
    client = await ChannelClient.connect(endpoint)
    with pytest.raises(ValueError, match="bad value"):
        await client.call("fail", ("value",), {})
    assert await client.call("apply", (lambda x: x * 7, 6), {}) == 42  # cloudpickle, as Ray calls
    with pytest.raises(AttributeError, match="cannot be called from outside"):
        await client.call("_serve", (), {})
    with pytest.raises(AttributeError):
        await client.call("no_such_method", (), {})
    assert await client.call("echo", ("still open",), {}) == "still open"
    await client.close()


def test_chunks_and_their_pauses_travel_whole():
    """Chunks pickle as constructor calls (quicker than a frozen dataclass's default): every field of
    the pause, set to a value other than its default, must come back."""
    values = {f.name: f"value-of-{f.name}" for f in dataclasses.fields(PauseEvent)}
    values.update(agent_path=("boss", "worker"), args={"id": 7}, interrupted=True, suspend_payload={"q": 1})
    values.update(expires_at=datetime(2026, 12, 1, tzinfo=UTC), resume_schema={"type": "object"})
    pause = PauseEvent(**values)
    chunk = Chunk.of_pause(pause)
    back = pickle.loads(channel._dumps(chunk))
    assert back == chunk and back.pause == pause
    assert {f.name: getattr(back.pause, f.name) for f in dataclasses.fields(PauseEvent)} == values


def test_functions_of_main_travel_by_value(monkeypatch):
    """Plain pickle would send ``__main__.shout`` by name, which the actor's ``__main__`` (Ray's worker)
    does not have: such a body must go by value, as cloudpickle sends it."""

    def shout(text: str) -> str:
        return text.upper()

    shout.__module__, shout.__qualname__ = "__main__", "shout"
    monkeypatch.setattr(sys.modules["__main__"], "shout", shout, raising=False)
    body = channel._dumps(("apply", (shout, "hi"), {}))
    monkeypatch.delattr(sys.modules["__main__"], "shout")  # as in the actor's process
    _, (sent, arg), _ = pickle.loads(body)
    assert sent(arg) == "HI"


async def test_a_connection_without_the_token_runs_nothing(served):
    target, _, endpoint = served
    with pytest.raises(ChannelClosed, match="refused"):
        await ChannelClient.connect(Endpoint(endpoint.node_id, endpoint.path, b"guess" * 6))
    # Nor does one that announces a huge token (the server reads no more than a handshake's length).
    reader, writer = await asyncio.open_unix_connection(endpoint.path)
    writer.write(struct.pack("!IQ", 1 << 31, 0))
    assert await asyncio.wait_for(reader.read(), 5) == b""  # closed on it
    writer.close()
    assert target.seen == []


async def _raw_hello(endpoint: Endpoint, version: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    reader, writer = await asyncio.open_unix_connection(endpoint.path)
    hello = struct.pack("!H", version) + endpoint.token
    writer.write(struct.pack("!IQ", len(hello), 0) + hello)
    return reader, writer


async def test_the_handshake_carries_the_protocol_version(served):
    from troupe.actors.channel import PROTOCOL_VERSION

    _, _, endpoint = served
    reader, writer = await _raw_hello(endpoint, PROTOCOL_VERSION)
    size, call_id = struct.unpack("!IQ", await reader.readexactly(12))
    assert (call_id, struct.unpack("!H", await reader.readexactly(size))) == (0, (PROTOCOL_VERSION,))
    writer.close()
    # The right token with another version is refused: nothing is answered, the line is closed.
    reader, writer = await _raw_hello(endpoint, PROTOCOL_VERSION + 1)
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()


async def test_a_client_refuses_a_server_that_answers_another_protocol_version(tmp_path):
    """The client checks the version the server answers with: a server of another protocol (an actor of
    another Troupe version on the same node) is never sent a call."""
    from troupe.actors.channel import PROTOCOL_VERSION

    heard: list[bytes] = []

    async def other_version(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        size, _ = struct.unpack("!IQ", await reader.readexactly(12))
        await reader.readexactly(size)
        answer = struct.pack("!H", PROTOCOL_VERSION + 1)
        writer.write(struct.pack("!IQ", len(answer), 0) + answer)
        heard.append(await reader.read())  # whatever the client sends after the handshake
        writer.close()

    path = str(tmp_path / "s")
    server = await asyncio.start_unix_server(other_version, path)
    try:
        with pytest.raises(ChannelClosed, match=f"speaks channel protocol {PROTOCOL_VERSION + 1}"):
            await ChannelClient.connect(Endpoint("node-a", path, b"t" * 32))
        async with asyncio.timeout(5):
            while not heard:
                await asyncio.sleep(0.01)
        assert heard == [b""], "a call went to a server of another protocol"
    finally:
        server.close()
        await server.wait_closed()


async def test_frames_over_the_cap_are_neither_sent_nor_taken(served, monkeypatch):
    import troupe.actors.channel as channel
    from troupe.actors.channel import FrameTooLarge

    target, _, endpoint = served
    client = await ChannelClient.connect(endpoint)
    monkeypatch.setattr(channel, "MAX_FRAME", 4096)
    with pytest.raises(FrameTooLarge, match="cap of 4096"):
        await client.call("echo", ("x" * 5000,), {})
    assert await client.call("echo", ("small",), {}) == "small", "the line is still usable"
    # A peer that sends an oversize frame anyway is cut off before its body is read.
    reader, writer = await _raw_hello(endpoint, channel.PROTOCOL_VERSION)
    await reader.readexactly(12 + 2)
    writer.write(struct.pack("!IQ", 5000, 1) + b"x" * 5000)
    assert await asyncio.wait_for(reader.read(), 5) == b""
    writer.close()
    assert target.seen == ["small"]
    await client.close()


async def test_an_answer_waits_for_a_reader_that_falls_behind(served):
    """Backpressure: the server drains what it writes, so a caller that stops reading holds back the
    answering task instead of making the actor buffer every reply in memory."""
    from ray import cloudpickle

    target, server, endpoint = served
    reader, writer = await _raw_hello(endpoint, 1)
    await reader.readexactly(12 + 2)
    body = cloudpickle.dumps(("echo", ("y" * (8 << 20),), {}), protocol=5)
    writer.write(struct.pack("!IQ", len(body), 7) + body)
    while not target.seen:
        await asyncio.sleep(0.01)
    [answering] = list(server._tasks)
    for _ in range(20):  # many turns of the event loop: the answer is written, then waits to drain
        await asyncio.sleep(0)
    assert not answering.done(), "the reply waits for its reader"
    size, call_id = struct.unpack("!IQ", await reader.readexactly(12))
    await reader.readexactly(size)
    await asyncio.wait_for(answering, 5)
    assert call_id == 7
    writer.close()


async def test_the_socket_is_private_to_its_user(served):
    _, _, endpoint = served
    mode = stat.S_IMODE(os.stat(os.path.dirname(endpoint.path)).st_mode)
    assert mode == 0o700


async def test_callers_waiting_on_a_closed_channel_hear_so(served):
    _, server, endpoint = served
    client = await ChannelClient.connect(endpoint)
    waiting = asyncio.ensure_future(client.call("hold", (30,), {}))
    await asyncio.sleep(0.05)
    await server.close()
    with pytest.raises(ChannelClosed):
        await asyncio.wait_for(waiting, 5)
    with pytest.raises(ChannelClosed):
        await client.call("echo", (1,), {})


async def test_socket_directories_of_dead_processes_are_swept(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    dead = tmp_path / "troupe-ch-999999999-abc"
    dead.mkdir()
    alive = tmp_path / f"troupe-ch-{os.getpid()}-abc"
    alive.mkdir()
    server = ChannelServer(Echo(), "node-a", _same)
    await server.start()
    assert not dead.exists() and alive.exists()
    await server.close()


# ---- through Ray ---------------------------------------------------------------------------------------


@pytest.fixture
def echo_actor(ray_session) -> Any:
    from troupe.actors.remote import RayActor

    actor = RayActor.spawn(Echo, name=f"test-echo-{uuid.uuid4().hex}", max_concurrency=1)
    yield actor
    actor.kill()


async def _until_holding(client: ChannelClient) -> None:
    while not await client.call("is_holding", (), {}):
        await asyncio.sleep(0.01)


async def test_same_node_calls_are_held_to_the_actors_max_concurrency(echo_actor):
    import ray

    # The actor takes one call at a time (max_concurrency=1): a call over the channel waits behind a
    # Ray call that holds the slot, as a call from another node would.
    assert await echo_actor.call("echo", "opens the channel") == "opens the channel"
    assert await echo_actor._line() is not None, "this call goes over the channel"
    held = echo_actor.handle.hold.remote()
    while not await echo_actor.call("is_holding"):  # a plain method: it takes no slot
        await asyncio.sleep(0.01)
    queued = asyncio.ensure_future(echo_actor.call("echo", "queued"))
    # Two round trips on the same line after the echo was sent: unheld, it would have been answered.
    await echo_actor.call("seen_values")
    assert await echo_actor.call("seen_values") == ["opens the channel"]
    assert not queued.done()
    await echo_actor.call("release")
    assert await asyncio.wait_for(queued, 10) == "queued"
    assert await held == "held"
    assert ray.wait([held], timeout=0)[0] != []


async def test_an_error_from_an_actor_it_called_is_not_its_own_death(echo_actor):
    with pytest.raises(ValueError, match="bad value"):
        await echo_actor.call("fail", "value")
    with pytest.raises(AgentUnavailableError, match="an actor this agent called is unavailable"):
        await echo_actor.call("fail", "actor")


async def test_a_killed_actor_reads_as_dead_then_is_reached_again_after_its_restart(echo_actor):
    import ray
    from troupe.actors.remote import RayActorError

    first = await echo_actor.call("pid")
    waiting = asyncio.ensure_future(echo_actor.call("hold", 30))
    await asyncio.sleep(0.1)
    ray.kill(echo_actor.handle, no_restart=False)
    with pytest.raises(RayActorError):
        await asyncio.wait_for(waiting, 20)
    second = await echo_actor.call_while_restarting("pid")
    assert second != first
    assert await echo_actor.call("echo", "after restart") == "after restart"
    assert await echo_actor.call("seen_values") == ["after restart"]  # a fresh process


async def test_with_channels_off_calls_go_through_ray(echo_actor, monkeypatch):
    import troupe.actors.remote as remote

    side = await ChannelClient.connect(await echo_actor.handle.troupe_channel.remote())
    monkeypatch.setattr(remote, "_CHANNELS", False)
    assert await echo_actor._line() is None
    held = echo_actor.handle.hold.remote()
    await _until_holding(side)
    queued = asyncio.ensure_future(echo_actor.call("echo", "queued"))
    await asyncio.sleep(0.3)
    assert not queued.done()  # behind the held Ray call, as every Ray call is
    await side.call("release", (), {})
    assert await asyncio.wait_for(queued, 10) == "queued"
    assert await held == "held"
    await side.close()
