"""``AgentStream``: the caller's view of one operation's chunks.

Chunks come from the host in batches into a buffer; ``full_stream`` and ``text_stream`` each replay that
buffer from the start, so either can be read on its own, and ``result()`` waits for the end and folds it
into a ``RunResult``. Batches from another process (an actor, an HTTP server) are pulled by a task of
their own as they come, whether or not anyone reads them, so a slow reader never holds up the link.
Batches from a host in this process (``CallerPulledBatches``) are pulled by the readers themselves when
they run out: the host's outbox keeps what nobody has read yet, and a pull in the reader's own task
saves the two hand-offs between tasks that each batch costs otherwise.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.requests import CallerPulledBatches, ChunkBatches
from troupe.core.vocabulary.results import ResultBuilder, RunResult


class AgentStream:
    """One operation of a run as it goes: what ``stream()`` and the decision methods return.

    ``full_stream`` and ``text_stream`` each replay the operation's chunks from the start, so either can
    be read on its own, and ``result()`` waits for the end. The operation goes on whether or not anyone
    reads. Made by the run methods, not by hand.

    Args:
        run_id: The run's id.
        batches: The operation's chunks, in batches.
        first: A first batch already read.

    Example:
        >>> stream = await agent.stream("Delete abc-123")
        >>> async for chunk in stream.full_stream:
        ...     print(chunk.type)
        >>> result = await stream.result()
    """

    def __init__(self, run_id: str, batches: ChunkBatches, first: list[Chunk] | None = None) -> None:
        self.run_id = run_id
        self._chunks: list[Chunk] = list(first or [])
        self._builder = ResultBuilder(run_id)
        self._builder.feed(self._chunks)
        self._done = False
        self._error: BaseException | None = None
        self._grew = asyncio.Event()
        self._batches = batches
        self._pulling = False
        # From another process, a task of its own takes every batch as it comes; from this one, the
        # readers take them when they need them (see the module's docstring).
        self._pump: asyncio.Task[None] | None = None
        self._check: Callable[[], Awaitable[object]] | None = None
        if not isinstance(batches, CallerPulledBatches):
            self._pump = asyncio.get_running_loop().create_task(self._pull_all())

    @classmethod
    async def open(cls, batches: ChunkBatches, run_id: str = "") -> AgentStream:
        """Open a stream: take the first batch (it names the run), and keep pulling the rest.

        Args:
            batches: The operation's chunks, in batches.
            run_id: The run's id, when known (then nothing is waited for: a decision's first chunk
                comes only once its tool has run).

        Returns:
            The stream, reading the rest of ``batches`` as they come.
        """
        first: list[Chunk] = []
        if run_id:
            return cls(run_id, batches)
        async for batch in batches:
            first = batch
            if first:
                break
        return cls(run_id or (first[0].run_id if first else ""), batches, first)

    def checked_by(self, check: Callable[[], Awaitable[object]]) -> AgentStream:
        """This stream, its readers (``full_stream``, ``text_stream``) awaiting ``check()`` before each
        run of chunks they are about to yield: what ``check`` raises ends their reading there, after the
        chunks before. A server makes sure with it that whoever reads a long run may still see it (a key
        revoked while a slow tool runs gets nothing more). Chunks that came together are checked once, so
        a check costs one per batch from the run, not one per chunk; ``result()`` is not checked.

        Returns:
            This stream.
        """
        self._check = check
        return self

    async def _pull_all(self) -> None:
        try:
            while not self._done:
                await self._pull()
        finally:  # also when the task is cancelled: readers then see the end of what came
            self._done = True
            self._wake()

    async def _pull(self) -> None:
        """Take the next batch into the buffer, or the end, or the failure of the link to the host
        (readers see it after the buffer)."""
        self._pulling = True
        try:
            batch = await anext(self._batches)
        except StopAsyncIteration:
            self._done = True
        except Exception as exc:
            self._error = exc
            self._done = True
        else:
            self._chunks.extend(batch)
            self._builder.feed(batch)
        finally:
            self._pulling = False
            self._wake()

    async def _more(self) -> None:
        """Wait until chunks past the buffer's end (or the end) came: pulled here, if the batches are
        the readers' to pull and no other reader is pulling already. A reader cancelled while it pulls
        loses nothing (``CallerPulledBatches``), and another reader waiting takes over."""
        if self._pump is None and not self._pulling:
            await self._pull()
        else:
            await self._grew.wait()

    def _wake(self) -> None:
        self._grew.set()
        self._grew = asyncio.Event()

    @property
    def full_stream(self) -> AsyncIterator[Chunk]:
        """Every chunk of the operation from its start, as they come (an async iterator).

        Raises:
            TroupeError: The link to the agent failed, after the chunks that came before.
        """
        return self._replay()

    @property
    def text_stream(self) -> AsyncIterator[str]:
        """The model's text from the start, piece by piece as it comes (an async iterator)."""
        return self._texts()

    async def _replay(self) -> AsyncIterator[Chunk]:
        index = 0
        while True:
            came = len(self._chunks)
            if index < came and self._check is not None:
                await self._check()
            while index < came:
                yield self._chunks[index]
                index += 1
            if index < len(self._chunks):
                continue  # more came while these were read: checked before they are yielded
            if self._done:
                if self._error is not None:
                    raise self._error
                return
            await self._more()

    async def _texts(self) -> AsyncIterator[str]:
        async for chunk in self._replay():
            if chunk.type == "text-delta":
                yield chunk.payload["text"]

    async def result(self) -> RunResult:
        """Wait for the operation to end (the run finishes or pauses) and return its result.

        Returns:
            The ``RunResult``.

        Raises:
            RunFailedError: The run ended with an error (or the error's own class).
        """
        while not self._done:  # (cancelling this wait leaves the pulling as it was: see ``_more``)
            await self._more()
        if self._error is not None:
            raise self._error
        return self._builder.result.raise_for_error()

    @property
    def chunks(self) -> list[Chunk]:
        """Chunks received so far (from a host in this process: so far as they were read)."""
        return list(self._chunks)

    def __repr__(self) -> str:
        return f"AgentStream(run_id={self.run_id!r}, chunks={len(self._chunks)}, done={self._done})"


__all__ = ["AgentStream"]
