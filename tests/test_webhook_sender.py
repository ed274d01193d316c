"""Posting webhooks to someone else's server: nothing a receiver does may hold a host up or fill its
memory (actors.webhook_sender). Real sockets on 127.0.0.1; the receivers here misbehave on purpose."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

from test_notifications import SECRET
from troupe.actors.webhook_sender import HttpSender
from troupe.core.notifying.outbox import NotificationTarget

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def receiver(handler: Handler) -> AsyncIterator[int]:
    server = await asyncio.start_server(handler, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()
        await server.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    await reader.readexactly(length)


async def test_a_receiver_that_trickles_its_answer_is_cut_off_at_the_attempts_deadline():
    """One byte at a time, each within any read timeout: the whole attempt still ends at its deadline
    (so it stays within the delivery's lease and is never sent twice at once)."""
    answer = b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
    sent: list[int] = []
    cut = asyncio.Event()

    async def trickle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        try:
            for n, byte in enumerate(answer):
                writer.write(bytes([byte]))
                await writer.drain()
                sent.append(n)
                await asyncio.sleep(0.2)
                if reader.at_eof():
                    break
        except ConnectionError:
            pass
        cut.set()

    async with receiver(trickle) as port:
        target = NotificationTarget(f"http://127.0.0.1:{port}/hook", SECRET, name="slow")
        sender = HttpSender()
        error = await sender.send(target, b"{}", {"content-type": "application/json"}, timeout_s=1.0)
        await sender.close()
        await asyncio.wait_for(cut.wait(), 30)
    assert error == "no answer within 1 s"
    assert len(sent) < len(answer), "the attempt waited for the whole trickled answer"


async def test_the_body_of_an_answer_is_never_read():
    """Only the status counts: a 2xx that announces 400 MB and keeps sending is taken as delivered and
    the connection dropped, after a small part of the body at most."""
    pushed = [0]
    dropped = asyncio.Event()

    async def flood(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 400000000\r\n\r\n")
        chunk = b"x" * 65536
        try:
            while pushed[0] < 400_000_000:
                writer.write(chunk)
                await writer.drain()
                pushed[0] += len(chunk)
        except ConnectionError:
            pass
        dropped.set()

    async with receiver(flood) as port:
        target = NotificationTarget(f"http://127.0.0.1:{port}/hook", SECRET, name="big")
        sender = HttpSender()
        assert await sender.send(target, b"{}", {}, timeout_s=30.0) is None
        await sender.close()
        await asyncio.wait_for(dropped.wait(), 30)
    assert pushed[0] < 50_000_000, f"{pushed[0]} bytes of the answer were taken in"


async def test_no_log_line_carries_a_targets_url(caplog):
    """A chat webhook's URL is its credential (a token in its path or query): no logger, at any level,
    writes it while a webhook is posted."""

    async def ok(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.write(b"HTTP/1.1 204 No Content\r\n\r\n")
        await writer.drain()
        writer.close()

    async with receiver(ok) as port:
        url = f"http://127.0.0.1:{port}/services/T0/B0/s3cretpath?token=s3cretquery"
        target = NotificationTarget(url, SECRET, name="chat")
        sender = HttpSender()
        with caplog.at_level(logging.DEBUG):
            assert await sender.send(target, b"{}", {}, timeout_s=10.0) is None
            await sender.close()
    assert "s3cret" not in caplog.text
