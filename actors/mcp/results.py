"""What the model sees of an MCP tool's result, and what is refused.

A result is the server's to make, so it is hostile input: it is bounded (size and depth, the bounds
model output has) before it enters a run's state. Structured content is given as it is; otherwise the
text blocks, joined; images, audio and resources are described rather than inlined (their bytes would
only fill the model's context). ``isError`` becomes a tool error the model sees: its text, or its
structured content when it has no text.
"""

from __future__ import annotations

import json
from typing import Any

from troupe.core.vocabulary.storable import args_problem


class MCPToolError(Exception):
    """The server reported the call failed (``isError``), or its result was refused here."""


def _block(block: dict[str, Any]) -> Any:
    kind = block.get("type")
    if kind == "text":
        return block.get("text", "")
    if kind in ("image", "audio"):
        data = block.get("data")
        size = len(data) * 3 // 4 if isinstance(data, str) else 0
        return {"type": kind, "mimeType": block.get("mimeType"), "bytes": size}
    if kind == "resource_link":
        return {key: block.get(key) for key in ("type", "uri", "name", "mimeType") if key in block}
    if kind == "resource":
        resource = block.get("resource") or {}
        if isinstance(resource.get("text"), str):
            return {"type": "resource", "uri": resource.get("uri"), "text": resource["text"]}
        return {"type": "resource", "uri": resource.get("uri"), "mimeType": resource.get("mimeType")}
    return {"type": str(kind)}


def model_view(result: dict[str, Any]) -> Any:
    """The output of a result (``CallToolResult`` as JSON, camelCase): structured content if any (for
    an error, only when it has no text), the text if that is all there is, else the blocks described."""
    structured = result.get("structuredContent")
    blocks = [_block(b) for b in result.get("content") or [] if isinstance(b, dict)]
    # An error's text is what its server wrote for the model; but an error told only in structured
    # content ({"why": "quota"}) would otherwise reach the model as an empty message.
    told = result.get("isError") and any(isinstance(b, str) and b for b in blocks)
    if structured is not None and not told:
        return structured
    if all(isinstance(b, str) for b in blocks):
        return "\n".join(blocks)
    return blocks


def refused(server: str, tool: str, problem: str) -> MCPToolError:
    """The error the model sees for a result of ``tool`` refused for ``problem``."""
    return MCPToolError(f"the result of {tool!r} from MCP server {server!r} was refused: {problem}")


def bounded(server: str, tool: str, output: Any) -> Any:
    """``output`` if a run's state can keep it (the bounds model output has); else why it is refused."""
    problem = args_problem(output)
    if problem is not None:
        raise refused(server, tool, problem)
    return output


def tool_output(server: str, tool: str, result: dict[str, Any]) -> Any:
    """The call's output for the model, or ``MCPToolError`` (the server's error, or a refused result)."""
    output = bounded(server, tool, model_view(result))
    if result.get("isError"):
        raise MCPToolError(output if isinstance(output, str) else json.dumps(output, ensure_ascii=False))
    return output


__all__ = ["MCPToolError", "bounded", "model_view", "refused", "tool_output"]
