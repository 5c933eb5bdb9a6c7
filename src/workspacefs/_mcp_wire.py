"""Answering the MCP requests the SDK's stdio reader cannot parse, so that no client waits for ever.

The SDK parses each line with pydantic's JSON parser, which refuses a lone surrogate escape (``"\\ud800"``)
that JSON's grammar allows and that a JavaScript client's ``JSON.stringify`` sends for a model's broken text.
It then drops the line unanswered, and the client's call hangs. Here the request is read again with Python's
parser, which takes such escapes, and answered by its id: a ``tools/call`` with an ``isError`` result a model
can act on (the tool layer's own refusal), any other request with an invalid-params error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from anyio.streams.memory import MemoryObjectReceiveStream
from mcp.shared._stream_protocols import ReadStream, WriteStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

__all__ = ["relay_answering_unparsed"]

Inbound = SessionMessage | Exception
ToolRefusal = Callable[[str, Any], types.CallToolResult]
"""What ``tools/call`` of a tool (its name, its arguments) answers: the tool layer's refusal of them."""


def _request_of(error: ValidationError) -> dict[str, Any] | None:
    """The JSON-RPC request behind a line the SDK could not parse, if Python's parser reads one with an id."""
    problems = error.errors(include_url=False)
    line = problems[0].get("input") if problems and problems[0]["type"] == "json_invalid" else None
    if not isinstance(line, str | bytes):
        return None
    try:
        request = json.loads(line)
    except ValueError:  # not JSON at all: there is no id to answer
        return None
    if not isinstance(request, dict) or not isinstance(request.get("method"), str):
        return None
    request_id = request.get("id")
    return request if isinstance(request_id, str | int) and not isinstance(request_id, bool) else None


def _answer(request: dict[str, Any], refuse: ToolRefusal) -> types.JSONRPCMessage:
    """The answer to a request the SDK could not parse: a tool's refusal, or an invalid-params error."""
    params = request.get("params")
    name = params.get("name") if isinstance(params, dict) else None
    if request["method"] == "tools/call" and isinstance(name, str):
        result = refuse(name, params.get("arguments") if isinstance(params, dict) else None)
        dumped = result.model_dump(mode="json", by_alias=True, exclude_none=True)
        return types.JSONRPCResponse(jsonrpc="2.0", id=request["id"], result=dumped)
    message = (
        "The request is not valid JSON text for this server (a lone UTF-16 surrogate escape such as \\ud800 is "
        "not a character); send it again as valid Unicode."
    )
    error = types.ErrorData(code=types.INVALID_PARAMS, message=message)
    return types.JSONRPCError(jsonrpc="2.0", id=request["id"], error=error)


async def relay_answering_unparsed(
    inbound: ReadStream[Inbound], outbound: WriteStream[SessionMessage], refuse: ToolRefusal
) -> tuple[MemoryObjectReceiveStream[Inbound], Callable[[], Any]]:
    """A stream of what ``inbound`` carries, less the requests answered here; and the relay to run beside it."""
    send, receive = anyio.create_memory_object_stream[Inbound](0)

    async def relay() -> None:
        async with inbound, send:
            async for item in inbound:
                request = _request_of(item) if isinstance(item, ValidationError) else None
                if request is None:
                    await send.send(item)
                else:
                    await outbound.send(SessionMessage(_answer(request, refuse)))

    return receive, relay
