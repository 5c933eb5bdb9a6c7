"""The workspacefs tools as LangChain ``StructuredTool``s: ``create_agent(model, tools=workspace_tools(fs))``.

Each tool is ``StructuredTool.from_function`` with the tool layer's description and portable JSON schema as a
dict ``args_schema`` (LangChain passes a model's arguments through as keywords, and ``bind_tools`` sends the
schema unchanged), so plain LangChain and LangGraph agents see the same tools as every other surface. The
return value is the tool layer's message, a failure's included; ``ToolMessage.status`` stays ``success``
because the message, not an exception, is what the model acts on.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workspacefs.integrations._toolbridge import BridgedTool, Target, bridge_tools, install_hint
from workspacefs.tools import Tool

try:
    from langchain_core.tools import StructuredTool
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(install_hint("langchain", "langchain")) from exc

__all__ = ["workspace_tools"]


def _adapt(bridged: BridgedTool) -> StructuredTool:
    def call(**arguments: Any) -> str:
        return bridged.run(arguments).message

    async def acall(**arguments: Any) -> str:
        return (await bridged.arun(arguments)).message

    return StructuredTool.from_function(
        func=call,
        coroutine=acall,
        name=bridged.name,
        description=bridged.description,
        args_schema=bridged.schema,
        infer_schema=False,
    )


def workspace_tools(
    target: Target, *, tools: Sequence[Tool[Any] | str] | None = None, read_only: bool | None = None
) -> list[StructuredTool]:
    """``StructuredTool``s for the workspacefs tools on ``target`` (a filesystem, or a ``ToolContext`` to share),
    one context across them; ``tools``/``read_only`` choose which, as in ``tools_for``."""
    return [_adapt(bridged) for bridged in bridge_tools(target, tools=tools, read_only=read_only)]
