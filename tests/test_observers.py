"""A run followed by someone else while its caller reads it (``observe_stream``: an inbox, an A2A
``tasks/resubscribe``, a second client): each of them reads the run from then on, to its end. They read
one operation's chunks, and each batch went to whichever reader asked first: the observer got nothing
(not even the run's end: its result had no finish reason), or split the run with its caller."""

from __future__ import annotations

import asyncio

from blocking import wait_for, worker_agent
from helpers import chunks_of

from troupe.testing import CallLog


async def test_an_observer_and_the_caller_each_read_the_run_to_its_end(make_runtime, tmp_path):
    calls, gate = CallLog(tmp_path / "calls.jsonl"), tmp_path / "gate"
    runtime = make_runtime([worker_agent(calls, str(gate))])
    worker = runtime.get_agent("worker")
    stream = await worker.stream("go")  # its caller reads nothing yet: the run's chunks wait for it
    await wait_for(lambda: calls.count("work") == 1, what="the tool to start")
    gate.touch()
    observed = await worker.observe_stream(run_id=stream.run_id)

    # Bounded: a reader that is never handed the run's end would wait for ever.
    read, seen = await asyncio.wait_for(asyncio.gather(chunks_of(stream), chunks_of(observed)), 30)
    types = [c.type for c in read]
    assert types[:4] == ["start", "step-start", "tool-call", "tool-result"], types
    assert types[-3:] == ["text-end", "step-finish", "finish"], types
    assert [c.type for c in seen][-3:] == ["text-end", "step-finish", "finish"], "the observer saw it end"
    assert (await observed.result()).finish_reason == "stop"
    assert (await stream.result()).text == (await observed.result()).text
