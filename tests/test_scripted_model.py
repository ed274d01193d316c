"""``troupe.testing.ScriptedModel``: plays its turns in order, fails when called past its script, and
says when turns were left unused (``assert_complete``), so a story can check its script was used up."""

from __future__ import annotations

import pytest

from troupe import Agent, MemoryStore, Runtime
from troupe.errors import ModelError
from troupe.testing import ScriptedModel, text


async def test_a_script_is_complete_only_once_every_turn_was_played():
    model = ScriptedModel([text("one"), text("two")])
    agent = Agent("chat", model=model)
    runtime = Runtime([agent], storage=MemoryStore(), executor="local")
    try:
        with pytest.raises(AssertionError, match=r"2 unused turn\(s\) of 2"):
            model.assert_complete()
        assert (await agent.generate("first")).text == "one"
        with pytest.raises(AssertionError, match=r"1 unused turn\(s\) of 2"):
            model.assert_complete()
        assert (await agent.generate("second")).text == "two"
        model.assert_complete()
        # Past the end: the run fails with the model's error, and the script is still complete.
        with pytest.raises(ModelError, match="ScriptedModel called 3 times but scripted for 2 turns"):
            await agent.generate("third")
        model.assert_complete()
    finally:
        await runtime.shutdown()
