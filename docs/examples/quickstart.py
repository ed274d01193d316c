import asyncio

from pydantic import BaseModel
from troupe import Agent, Runtime, SqliteStore, create_tool
from troupe.testing import ScriptedModel, text, tool_call


class RecordId(BaseModel):
    id: str


delete_record = create_tool(
    "delete_record",
    "Delete a record by id",
    RecordId,
    lambda inp, ctx: {"deleted": inp.id},
    require_approval=True,
)

agent = Agent(
    "records",
    instructions="You manage records.",
    model=ScriptedModel([tool_call("delete_record", {"id": "abc-123"}, id="call-1"), text("Deleted.")]),
    # or model="openai/gpt-4o-mini" (OPENAI_API_KEY / OPENAI_BASE_URL for any compatible server)
    tools=[delete_record],
)


async def main():
    runtime = Runtime([agent], storage=SqliteStore("troupe.db"))  # executor="ray" is the default
    stream = await agent.stream("Delete abc-123")
    async for chunk in stream.full_stream:
        if chunk.type == "tool-call-approval":
            print("needs approval:", chunk.payload["tool_name"], chunk.payload["args"])
            call_id = chunk.payload["tool_call_id"]  # "call-1" here; a real model makes up its own
    approved = await agent.approve_tool_call(run_id=stream.run_id, tool_call_id=call_id)
    async for piece in approved.text_stream:
        print(piece, end="")
    print()
    await runtime.shutdown()


asyncio.run(main())
