"""``AgentStream``: the caller's view of one operation's chunks.

Chunks are pulled from the host as they come (in batches) into a buffer, whether or not anyone reads
them; ``full_stream`` and ``text_stream`` each replay that buffer from the start, so either can be read on
its own, and ``result()`` waits for the end and folds it into a ``RunResult``.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

from troupe.core.vocabulary.chunks import Chunk
from troupe.core.vocabulary.requests import ChunkBatches
from troupe.core.vocabulary.results import ResultBuilder, RunResult


class AgentStream:
    """One operation of a run as it goes: what ``stream()`` and the decision methods return.

    Chunks are gathered as they come, whether or not anyone reads them; ``full_stream`` and
    ``text_stream`` each replay them from the start, so either can be read on its own, and ``result()``
    waits for the end. Made by the run methods, not by hand.

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
        self._pump = asyncio.get_running_loop().create_task(self._pull(batches))

    @classmethod
    async def open(cls, batches: ChunkBatches, run_id: str = "") -> AgentStream:
        """Open a stream: take the first batch (it names the run), and keep pulling the rest.

        Args:
            batches: The operation's chunks, in batches.
            run_id: The run's id, when known (then nothing is waited for: a decision's first chunk
                comes only once its tool has run).

        Returns:
            The stream, reading the rest of ``batches`` in the background.
        """
        first: list[Chunk] = []
        if run_id:
            return cls(run_id, batches)
        async for batch in batches:
            first = batch
            if first:
                break
        return cls(run_id or (first[0].run_id if first else ""), batches, first)

    async def _pull(self, batches: ChunkBatches) -> None:
        try:
            async for batch in batches:
                self._chunks.extend(batch)
                self._builder.feed(batch)
                self._wake()
        except Exception as exc:  # the host or the link to it failed; readers see it after the buffer
            self._error = exc
        finally:
            self._done = True
            self._wake()

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
            while index < len(self._chunks):
                yield self._chunks[index]
                index += 1
            if self._done:
                if self._error is not None:
                    raise self._error
                return
            await self._grew.wait()

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
        await asyncio.shield(self._pump)
        if self._error is not None:
            raise self._error
        return self._builder.result.raise_for_error()

    @property
    def chunks(self) -> list[Chunk]:
        """Chunks received so far."""
        return list(self._chunks)

    def __repr__(self) -> str:
        return f"AgentStream(run_id={self.run_id!r}, chunks={len(self._chunks)}, done={self._done})"


__all__ = ["AgentStream"]
