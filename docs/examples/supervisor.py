import asyncio

from pydantic import BaseModel
from troupe import Agent, Runtime, create_tool
from troupe.testing import ScriptedModel, text, tool_call


class RecordId(BaseModel):
    id: str


delete_record = create_tool(
    "delete_record", "Delete a record", RecordId, lambda inp, ctx: {"deleted": inp.id}, require_approval=True
)
data = Agent(
    "data",
    model=ScriptedModel([tool_call("delete_record", {"id": "abc-123"}, id="d1"), text("Deleted.")]),
    tools=[delete_record],
)
supervisor = Agent(  # agents= gives it the tool "agent-data", taking {"prompt": ...}
    "supervisor",
    model=ScriptedModel([tool_call("agent-data", {"prompt": "delete abc-123"}, id="s1"), text("Done.")]),
    agents={"data": data},
)


async def main():
    runtime = Runtime([supervisor], executor="local")
    paused = await supervisor.generate("Clean up abc-123")
    print(paused.suspend_payload["agent_path"], paused.suspend_payload["tool_name"])  # the leaf's call
    done = await supervisor.approve_tool_call_generate(run_id=paused.run_id)  # decided at the top
    print(done.text)
    await runtime.shutdown()


asyncio.run(main())
