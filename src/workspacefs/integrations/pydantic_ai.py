"""The workspacefs tools as a pydantic-ai toolset: ``Agent(model, toolsets=[workspace_toolset(fs)])``.

Each tool is a ``pydantic_ai.Tool.from_schema`` over the shared bridge: the tool layer's name, description and
portable JSON schema, and its message as the return value (a failure too, so the model reads what to do
instead of burning a retry). Mutating tools are ``sequential``: pydantic-ai runs them alone, never beside
another call of the same turn, so a read and an edit of one file cannot interleave.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workspacefs.integrations._toolbridge import BridgedTool, Target, bridge_tools, install_hint
from workspacefs.tools import Tool

try:
    from pydantic_ai import FunctionToolset
    from pydantic_ai import Tool as PydanticTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(install_hint("pydantic_ai", "pydantic-ai")) from exc

__all__ = ["workspace_tools", "workspace_toolset"]


def _adapt(bridged: BridgedTool) -> PydanticTool[Any]:
    async def call(**arguments: Any) -> str:
        return (await bridged.arun(arguments)).message

    call.__name__ = bridged.name
    return PydanticTool.from_schema(
        call, bridged.name, bridged.description, bridged.schema, sequential=not bridged.read_only
    )


def workspace_tools(
    target: Target, *, tools: Sequence[Tool[Any] | str] | None = None, read_only: bool | None = None
) -> list[PydanticTool[Any]]:
    """The tools as ``pydantic_ai.Tool`` objects sharing one context (``tools``/``read_only`` as in
    :func:`~workspacefs.integrations._toolbridge.bridge_tools`), for ``Agent(tools=...)``."""
    return [_adapt(bridged) for bridged in bridge_tools(target, tools=tools, read_only=read_only)]


def workspace_toolset(
    target: Target,
    *,
    tools: Sequence[Tool[Any] | str] | None = None,
    read_only: bool | None = None,
    id: str | None = "workspacefs",
) -> FunctionToolset[Any]:
    """A ``FunctionToolset`` of the workspacefs tools on ``target`` (a filesystem, or a ``ToolContext`` to share
    with other code), for ``Agent(toolsets=[...])``."""
    return FunctionToolset(workspace_tools(target, tools=tools, read_only=read_only), id=id)
