"""An MCP server that misbehaves on purpose (stdio; run as a script), for tests/test_mcp_hostile.py.

It lists a good tool beside a tool whose input schema is no JSON schema, one whose name no model can
call, and tools that answer with a result nested 100 deep, one of 2 MB, an error told only in
structured content, and an elicitation whose requested schema is not an object; with ``--stubborn``
it outlives its stdin. Written with the Python MCP SDK's low-level server."""

from __future__ import annotations

import sys
import threading
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

OBJECT = {"type": "object", "properties": {}}
TOOLS = [
    {"name": "good", "description": "Works", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}},
    {"name": "bad_schema", "inputSchema": {"type": "object", "properties": {"x": {"type": "nope"}}}},
    {"name": "bad name!", "inputSchema": OBJECT},
    {"name": "deep", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}},
    {"name": "huge", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}},
    {"name": "ask_string", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}},
    {"name": "ask_bad", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}},
    {"name": "quota", "inputSchema": OBJECT, "annotations": {"readOnlyHint": True}},
]
ASKED = {
    "ask_string": {"type": "string"},
    "ask_bad": {"type": "object", "properties": {"a": {"type": "nope"}}},
}


def nested(depth: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult.model_validate({"tools": TOOLS})


async def call_tool(ctx: Any, params: Any) -> Any:
    name = params.name
    if name == "good":
        return types.CallToolResult.model_validate({"content": [{"type": "text", "text": "fine"}]})
    if name == "deep":
        return types.CallToolResult.model_validate({"content": [], "structuredContent": nested(100)})
    if name == "quota":  # an error told only in structured content
        return types.CallToolResult.model_validate(
            {"content": [], "structuredContent": {"why": "quota"}, "isError": True}
        )
    if name == "huge":
        return types.CallToolResult.model_validate({"content": [{"type": "text", "text": "x" * 2_000_000}]})
    if name in ASKED:
        request = types.ElicitRequest(
            params=types.ElicitRequestFormParams(message="tell me", requested_schema=ASKED[name])
        )
        if params.input_responses:  # the client answered anyway: it should not have
            return types.CallToolResult.model_validate({"content": [{"type": "text", "text": "answered"}]})
        if not ctx.session.can_send_request:
            return types.InputRequiredResult(input_requests={"q": request}, request_state="s")
        try:
            await ctx.session.send_request(request, types.ElicitResult)
        except Exception as exc:
            return types.CallToolResult.model_validate(
                {"content": [{"type": "text", "text": f"elicitation failed: {exc}"}], "isError": True}
            )
        return types.CallToolResult.model_validate({"content": [{"type": "text", "text": "answered"}]})
    return types.CallToolResult.model_validate({"content": [{"type": "text", "text": "?"}], "isError": True})


def stay_after_stdin_ends() -> None:
    """``--stubborn``: keep the process alive after the session ends (a non-daemon thread that never
    returns), as servers with work of their own do: only a signal ends it."""
    threading.Thread(target=threading.Event().wait, name="stubborn").start()


async def main() -> None:
    if "--stubborn" in sys.argv:
        stay_after_stdin_ends()
    server = Server("hostile", on_list_tools=list_tools, on_call_tool=call_tool)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
