"""The one bridge from workspacefs tools to agent frameworks: each tool's name, description, JSON schema and a
call that runs :func:`~workspacefs.tools.dispatch` with one shared :class:`~workspacefs.tools.ToolContext`.

The pydantic-ai, LangChain, Claude Agent SDK and OpenAI Agents SDK adapters only re-shape what is here, so every
framework offers the tool layer's own schemas and the model reads the tool layer's own messages, word for word.
A call never raises for a model's mistake: a bad argument, a missing file or a refused path comes back as the
failed result's message, and ``dispatch`` rolls a half-done mutating call back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio.to_thread

from workspacefs.backends.container import ContainerSandbox
from workspacefs.protocol import Filesystem
from workspacefs.tools import (
    NATIVE_TOOLS,
    Tool,
    ToolContext,
    ToolResult,
    dispatch,
    openai_strict_schema,
    portable_schema,
    tools_for,
)

__all__ = ["BridgedTool", "bridge_tools", "install_hint", "tool_context"]

Target = Filesystem | ToolContext | ContainerSandbox
"""What an adapter is built on: a filesystem or a sandbox (a fresh context is made for it), or a context to share."""


def install_hint(module: str, extra: str) -> str:
    """The ImportError message of an adapter whose framework is missing."""
    return f"workspacefs.integrations.{module} needs the {extra} extra, which is not installed; " + (
        f"pip install 'workspacefs[{extra}]'"
    )


def tool_context(target: Target) -> ToolContext:
    """The context calls share (read-before-write and snapshots span the conversation): ``target`` itself, or
    a new one on the filesystem (a sandbox's workspace) under ``Policy.default()``."""
    if isinstance(target, ToolContext):
        return target
    return ToolContext(filesystem=target.filesystem if isinstance(target, ContainerSandbox) else target)


@dataclass(frozen=True, slots=True)
class BridgedTool:
    """One workspacefs tool, bound to a context and to the set it is offered in (``dispatch`` accepts only
    those, so a model cannot reach a tool the framework never showed it)."""

    tool: Tool[Any]
    context: ToolContext
    offered: tuple[Tool[Any], ...]

    @property
    def name(self) -> str:
        """The tool's name, as the tool layer gives it."""
        return self.tool.name

    @property
    def description(self) -> str:
        """The tool layer's description, verbatim."""
        return self.tool.description

    @property
    def schema(self) -> dict[str, Any]:
        """The portable JSON schema (what Anthropic and MCP take): refs inlined, objects closed."""
        return portable_schema(self.tool.params)

    @property
    def strict_schema(self) -> dict[str, Any]:
        """The OpenAI strict-mode schema: every property required, optional ones nullable."""
        return openai_strict_schema(self.tool.params)

    @property
    def read_only(self) -> bool:
        """True when the call changes nothing (MCP's ``readOnlyHint``; a snapshot is not a change of files)."""
        return not self.tool.mutating and self.tool.name != "snapshot"

    def run(self, arguments: Mapping[str, Any] | str | None) -> ToolResult[Any]:
        """Dispatch one call (a dict, or the JSON text a model sent); never raises for a model's mistake."""
        return dispatch(self.tool.name, arguments, self.context, tools=self.offered)

    async def arun(self, arguments: Mapping[str, Any] | str | None) -> ToolResult[Any]:
        """:meth:`run` in a worker thread, so a framework's event loop is never blocked by file or exec I/O."""
        return await anyio.to_thread.run_sync(self.run, arguments)

    def __call__(self, arguments: Mapping[str, Any] | str | None) -> str:
        """The message the model reads, success or failure."""
        return self.run(arguments).message


def _select(fs: Filesystem | None, tools: Sequence[Tool[Any] | str] | None, read_only: bool | None) -> list[Tool[Any]]:
    fitting = {tool.name: tool for tool in tools_for(fs, read_only=read_only)}
    if tools is None:
        return list(fitting.values())
    known = dict(fitting)
    if not (read_only if read_only is not None else bool(fs is not None and fs.read_only)):
        known.update({tool.name: tool for tool in NATIVE_TOOLS})  # the providers' own tools, by name when asked
    chosen = []
    for given in tools:
        if isinstance(given, Tool):
            chosen.append(given)
        elif given in known:
            chosen.append(known[given])
        else:
            raise ValueError(f"Unknown or unavailable tool {given!r}; available: {', '.join(known)}")
    return chosen


def bridge_tools(
    target: Target, *, tools: Sequence[Tool[Any] | str] | None = None, read_only: bool | None = None
) -> list[BridgedTool]:
    """The tools to offer on ``target``, each bound to one shared context.

    ``tools`` defaults to ``tools_for(fs)`` (the file tools, snapshot tools where the backend snapshots,
    ``run_command`` where it runs commands); names pick among those and the providers' native tools, ``Tool``
    objects are taken as given. ``read_only=True`` offers only tools that change nothing.

    Raises:
        ValueError: a name that is not a tool fitting the filesystem.
    """
    context = tool_context(target)
    chosen = tuple(_select(context.filesystem, tools, read_only))
    return [BridgedTool(tool, context, chosen) for tool in chosen]
