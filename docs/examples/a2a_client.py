import asyncio

import httpx
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.helpers.proto_helpers import get_data_parts, new_data_part, new_text_part
from a2a.types.a2a_pb2 import Message, Role, SendMessageRequest, TaskState


async def send(client, message):
    async for event in client.send_message(SendMessageRequest(message=message)):
        task = event.task  # a blocking send answers once: the task where it stands
    if task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
        call = get_data_parts(task.status.message.parts)[0]["pendingToolCalls"][0]
        print("input-required:", call["kind"], call["toolName"], call["args"])
        return task, call
    print(TaskState.Name(task.status.state), task.artifacts[0].parts[0].text)
    return task, None


def answer(task, decision):
    parts = [new_data_part({"decisions": [decision]})]
    return Message(message_id=decision["toolCallId"], role=Role.ROLE_USER, task_id=task.id, parts=parts)


async def main():
    async with httpx.AsyncClient(timeout=30) as http:  # headers={"Authorization": "Bearer <key>"} with --keys
        card = await A2ACardResolver(http, "http://127.0.0.1:8000/a2a/records-assistant").get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        ask = Message(message_id="m1", role=Role.ROLE_USER, parts=[new_text_part("Delete record abc-123")])
        task, call = await send(client, ask)  # the run pauses: the task is input-required
        task, call = await send(client, answer(task, {"toolCallId": call["toolCallId"], "approved": True}))
        no = {"toolCallId": call["toolCallId"], "approved": False, "reason": "no table today"}
        await send(client, answer(task, no))


asyncio.run(main())
