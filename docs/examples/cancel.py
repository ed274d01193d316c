import asyncio

from pydantic import BaseModel
from troupe import Agent, Runtime, create_tool
from troupe.testing import ScriptedModel, text, tool_call


class Report(BaseModel):
    month: str


async def build_report(inp: Report, ctx) -> str:
    await asyncio.sleep(3600)  # a long job
    return f"report for {inp.month}"


report = create_tool("build_report", "Build the monthly report", Report, build_report, timeout_s=7200)
model = ScriptedModel([tool_call("build_report", {"month": "May"}), text("Done.")])
agent = Agent("reports", model=model, tools=[report])


async def main() -> None:
    runtime = Runtime([agent], executor="local")
    stream = await agent.stream("Build the report for May")
    await asyncio.sleep(0.5)  # the tool is running
    cancelled = await agent.cancel_run(stream.run_id, reason="wrong month")
    result = await stream.result()
    print(result.finish_reason, "-", cancelled.reason)  # cancelled - wrong month
    await runtime.shutdown()


asyncio.run(main())
