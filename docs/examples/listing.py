import asyncio

from pydantic import BaseModel
from troupe import Agent, Runtime, create_tool
from troupe.testing import FunctionModel, text, tool_call


class RecordId(BaseModel):
    id: str


def ask_to_delete(messages, tools):
    # Each run asks once to delete the record its prompt names, then says it is done.
    if messages[-1]["role"] == "tool":
        return text("Done.")
    return tool_call("delete_record", {"id": messages[-1]["content"]}, id="call-1")


delete_record = create_tool(
    "delete_record", "Delete a record by id", RecordId, lambda inp, ctx: "deleted", require_approval=True
)
agent = Agent("records", model=FunctionModel(ask_to_delete), tools=[delete_record])


async def main():
    runtime = Runtime([agent], executor="local")
    for n in range(5):
        await agent.generate(f"rec-{n}", run_id=f"run-{n}")

    # One agent's paused runs, newest pause first, two at a time.
    cursor, pages = None, []
    while True:
        page = await agent.list_suspended_runs(per_page=2, cursor=cursor)
        pages.append([run.run_id for run in page.runs])
        cursor = page.next_cursor
        if cursor is None:
            break
    print("total", page.total, "pages", pages)

    # Everything waiting for a person across the runtime's agents, oldest first: the inbox's listing.
    first = await runtime.list_pending(per_page=3)
    print("inbox", [run.run_id for run in first.runs], "more:", first.next_cursor is not None)
    await runtime.shutdown()


asyncio.run(main())
