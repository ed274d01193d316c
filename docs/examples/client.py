import asyncio

from troupe.client import AsyncTroupeClient  # or TroupeClient (blocking)


async def main():
    # api_key="<key>" where the server has --keys; the demo server above is --open
    async with AsyncTroupeClient("http://127.0.0.1:8000") as client:
        agent = client.get_agent("records-assistant")
        paused = await agent.generate("Please delete record abc-123")  # same methods as Agent
        print(paused.finish_reason, paused.suspend_payload["tool_name"])
        done = await agent.approve_tool_call_generate(run_id=paused.run_id)
        print(done.text)


asyncio.run(main())
