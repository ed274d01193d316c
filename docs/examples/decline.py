import asyncio

from pydantic import BaseModel
from troupe import Agent, Runtime, create_tool
from troupe.testing import FunctionModel, last_tool_message, text, tool_call


class RecordId(BaseModel):
    id: str


def delete(inp: RecordId, ctx) -> dict:
    print("the tool ran!")  # never printed: a declined call never runs
    return {"deleted": inp.id}


delete_record = create_tool("delete_record", "Delete a record by id", RecordId, delete, require_approval=True)


def model(messages, tools):
    """A stand-in for a real model: ask to delete, then repeat what the tool message said."""
    told = last_tool_message(messages)
    if told is None:
        return tool_call("delete_record", {"id": "abc-123"}, id="call-1")
    return text(f"I did not delete it: {told['content']}")


agent = Agent("records", model=FunctionModel(model), tools=[delete_record])


async def main():
    runtime = Runtime([agent], executor="local")  # in this process: no Ray to start
    paused = await agent.generate("Delete abc-123")
    print(paused.finish_reason, paused.suspend_payload["tool_name"], paused.suspend_payload["args"])
    done = await agent.decline_tool_call_generate(
        run_id=paused.run_id,
        tool_call_id=paused.suspend_payload["tool_call_id"],
        reason="abc-123 is still referenced by invoice 42",
    )
    print(done.finish_reason, "-", done.text)
    await runtime.shutdown()


asyncio.run(main())
