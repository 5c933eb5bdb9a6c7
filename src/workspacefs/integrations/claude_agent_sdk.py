"""The workspacefs tools as an in-process Claude Agent SDK MCP server:
``ClaudeAgentOptions(mcp_servers={"workspace": workspace_mcp_server(fs)})``.

Each tool is an ``SdkMcpTool`` over the shared bridge, with the tool layer's description, portable JSON schema
and MCP hints (``readOnlyHint``, ``destructiveHint``, ``idempotentHint``); a model's mistake comes back as an
``isError`` result carrying the tool layer's message. The server runs in this process: no subprocess, and the
workspace can be anything workspacefs opens (a SQLite session, a container, an object store).
Claude Code names the tools ``mcp__<server key>__<tool>``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workspacefs._version import __version__
from workspacefs.integrations._toolbridge import BridgedTool, Target, bridge_tools, install_hint
from workspacefs.tools import Tool

try:
    from claude_agent_sdk import McpSdkServerConfig, SdkMcpTool, ToolAnnotations, create_sdk_mcp_server
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(install_hint("claude_agent_sdk", "claude-agent-sdk")) from exc

__all__ = ["workspace_mcp_server", "workspace_sdk_tools"]


def _adapt(bridged: BridgedTool) -> SdkMcpTool[Any]:
    async def handler(arguments: dict[str, Any]) -> dict[str, Any]:
        result = await bridged.arun(arguments)
        return {"content": [{"type": "text", "text": result.message}], "is_error": not result.success}

    title = bridged.name.replace("_", " ").capitalize()
    hints = ToolAnnotations(
        title=title,
        readOnlyHint=bridged.read_only,
        destructiveHint=bridged.tool.destructive,
        idempotentHint=bridged.tool.idempotent,
        openWorldHint=False,
    )
    return SdkMcpTool(bridged.name, bridged.description, bridged.schema, handler, hints)


def workspace_sdk_tools(
    target: Target, *, tools: Sequence[Tool[Any] | str] | None = None, read_only: bool | None = None
) -> list[SdkMcpTool[Any]]:
    """The tools as ``SdkMcpTool``s sharing one context, to combine with tools of your own in one server."""
    return [_adapt(bridged) for bridged in bridge_tools(target, tools=tools, read_only=read_only)]


def workspace_mcp_server(
    target: Target,
    *,
    name: str = "workspace",
    tools: Sequence[Tool[Any] | str] | None = None,
    read_only: bool | None = None,
) -> McpSdkServerConfig:
    """An in-process SDK MCP server (``create_sdk_mcp_server``) offering the workspacefs tools on ``target``
    (a filesystem, or a ``ToolContext`` to share); pass it in ``ClaudeAgentOptions.mcp_servers``."""
    offered = workspace_sdk_tools(target, tools=tools, read_only=read_only)
    return create_sdk_mcp_server(name, version=__version__, tools=offered)
