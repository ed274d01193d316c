"""An MCP server spoken by hand (JSON-RPC, no SDK), for what an SDK-made server cannot send: a tool whose
input schema is not an object, a result nested deeper than a JSON parser's limit, a call never answered.

    python raw_mcp_server.py LOG             # over stdio
    python raw_mcp_server.py LOG --http      # streamable HTTP on a free loopback port (printed first)
    python raw_mcp_server.py LOG --objects-only   # without the tool whose schema is not an object
    python raw_mcp_server.py LOG --unlisted       # never answering tools/list

Every message it receives is appended to LOG (one JSON line each), so a test sees what a client sent it
(``notifications/cancelled``, say). Tools: ``good`` answers "fine"; ``string_input`` is listed with
``inputSchema: {"type": "string"}``; ``deep`` answers structured content nested 200 deep; ``slow`` is
never answered; ``null_result``, ``list_result`` and ``no_result`` answer JSON that is no JSON-RPC
response (``"result": null``, ``"result": [1, 2]``, no ``result`` at all). Over stdio only (it needs the
server's own requests): ``odd_ask`` asks for input with a message holding a lone UTF-16 surrogate
(``\\ud800``, which JSON can spell and no UTF-8 can hold), then answers with what it was given;
``odd_text`` answers text holding one.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

OBJECT = {"type": "object", "properties": {}}
READ_ONLY = {"readOnlyHint": True}
TOOLS = [
    {"name": name, "inputSchema": schema, "annotations": READ_ONLY}
    for name, schema in [
        ("good", OBJECT),
        ("string_input", {"type": "string"}),
        ("deep", OBJECT),
        ("slow", OBJECT),
        ("null_result", OBJECT),
        ("list_result", OBJECT),
        ("no_result", OBJECT),
        ("odd_ask", OBJECT),
        ("odd_text", OBJECT),
    ]
]
# A lone surrogate as JSON spells it: json.dumps writes "\\ud800" for it (ensure_ascii).
LONE = "\ud800"
# The elicitation ``odd_ask`` sends, and the call it is for (the id of its tools/call), until answered.
ASKING: dict[str, Any] = {}
# What the answer to a call of these tools holds beside "jsonrpc" and "id".
MALFORMED: dict[str, dict[str, Any]] = {
    "null_result": {"result": None},
    "list_result": {"result": [1, 2]},
    "no_result": {},
}


def nested(depth: int) -> Any:
    return json.loads('{"a":' * depth + "0" + "}" * depth)


def result_of(method: str, params: dict[str, Any]) -> Any:
    """The result for a request, None for one never answered; KeyError for an unknown method."""
    if method == "initialize":
        info = {"name": "raw", "version": "1"}
        return {
            "protocolVersion": params["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": info,
        }
    if method == "tools/list":
        if "--unlisted" in sys.argv:
            return None
        unlisted = "string_input" if "--objects-only" in sys.argv else None
        return {"tools": [tool for tool in TOOLS if tool["name"] != unlisted]}
    if method == "tools/call":
        name = params["name"]
        if name == "deep":
            return {"content": [], "structuredContent": nested(200)}
        if name == "odd_text":
            return {"content": [{"type": "text", "text": f"odd {LONE} text"}]}
        return None if name == "slow" else {"content": [{"type": "text", "text": "fine"}]}
    return {} if method == "ping" else {}[method]


def answer(line: str, log: str) -> str | None:
    """The reply to one JSON-RPC message: None for a notification, "" for a call left unanswered."""
    message = json.loads(line)
    with open(log, "a") as out:
        out.write(json.dumps(message) + "\n")
    if message.get("id") == "odd-ask":  # the answer to odd_ask's question: the call's answer is it
        content = [{"type": "text", "text": json.dumps(message.get("result"))}]
        return json.dumps({"jsonrpc": "2.0", "id": ASKING.pop("call"), "result": {"content": content}})
    if "id" not in message or "method" not in message:
        return None
    if message["method"] == "tools/call" and message["params"]["name"] == "odd_ask":
        ASKING["call"] = message["id"]
        schema = {"type": "object", "properties": {"approved": {"type": "boolean"}}}
        params = {"mode": "form", "message": f"proceed {LONE}?", "requestedSchema": schema}
        asking = {"jsonrpc": "2.0", "id": "odd-ask", "method": "elicitation/create", "params": params}
        return json.dumps(asking)
    if message["method"] == "tools/call" and message["params"]["name"] in MALFORMED:
        return json.dumps({"jsonrpc": "2.0", "id": message["id"], **MALFORMED[message["params"]["name"]]})
    try:
        result = result_of(message["method"], message.get("params") or {})
    except KeyError:
        error = {"code": -32601, "message": f"no method {message['method']}"}
        return json.dumps({"jsonrpc": "2.0", "id": message["id"], "error": error})
    return "" if result is None else json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result})


class Http(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        reply = answer(self.rfile.read(int(self.headers["Content-Length"])).decode(), sys.argv[1])
        if reply == "":
            threading.Event().wait()  # never answered: the request stays open
        self.send_response(202 if reply is None else 200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write((reply or "").encode())

    def do_GET(self) -> None:  # no stream for server-sent messages
        self.send_response(405)
        self.end_headers()

    do_DELETE = do_GET

    def log_message(self, *args: Any) -> None:
        pass


if __name__ == "__main__":
    if "--http" in sys.argv:
        server = ThreadingHTTPServer(("127.0.0.1", 0), Http)
        print(server.server_address[1], flush=True)
        server.serve_forever()
    for line in sys.stdin:
        reply = answer(line, sys.argv[1])
        if reply:
            print(reply, flush=True)
