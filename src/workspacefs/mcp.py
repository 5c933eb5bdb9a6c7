"""The tool layer as an MCP server over stdio (the official ``mcp`` SDK, low-level server).

Every tool is the Python tool: same handler, same messages, dispatched with one shared
:class:`~workspacefs.tools.ToolContext` (so read-before-write and snapshots span the conversation).
A model's mistake is an ``isError`` result carrying the tool's message, never a protocol error.

MCP roots sent by the client can only narrow access: a ``file://`` root inside the workspace (a host
directory, or under its mount point) limits the tools to that subtree; roots elsewhere grant nothing;
if the client names roots and none falls inside the workspace, no tool may touch any path. Roots are
asked for once (``roots/list`` on 2025 protocol versions; an input request on 2026-07-28) and again
after the client says they changed.
"""

from __future__ import annotations

import functools
import logging
import os
import posixpath
import warnings
from collections.abc import Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import anyio.to_thread
import mcp_types as types
from mcp import MCPDeprecationWarning
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from workspacefs._version import __version__
from workspacefs.open import open_filesystem
from workspacefs.paths import is_within, normalize_path
from workspacefs.protocol import Filesystem
from workspacefs.tools import Tool, ToolContext, dispatch, portable_schema, tools_for

__all__ = ["ERROR_META_KEY", "build_server", "offered_tools", "run_stdio", "serve_stdio"]

logger = logging.getLogger("workspacefs.mcp")

ERROR_META_KEY = "workspacefs/error_code"
"""``_meta`` key of a failed tool call: the stable code of what went wrong (``errors.ERROR_CODES``), so a
client can branch on the kind of failure without reading the message."""
_PATH_ARGUMENTS = ("path", "src", "dst")
"""Tool parameters that name a workspace path (every tool's parameters use these names)."""
_WHOLE_WORKSPACE_TOOLS = ("snapshot", "restore", "diff")
"""Tools that act on, or reveal, the whole workspace: refused while roots narrow access."""


def offered_tools(fs: Filesystem, names: Sequence[str] | None = None, *, read_only: bool = False) -> list[Tool[Any]]:
    """The tools to serve for ``fs``: those that fit it (see ``tools_for``), limited to ``names``.

    Raises:
        ValueError: a name in ``names`` is not a tool that fits ``fs``.
    """
    fitting = {tool.name: tool for tool in tools_for(fs, read_only=read_only or fs.read_only)}
    if not names:
        return list(fitting.values())
    unknown = [name for name in names if name not in fitting]
    if unknown:
        raise ValueError(f"Unknown or unavailable tool(s): {', '.join(unknown)}; available: {', '.join(fitting)}")
    return [fitting[name] for name in names]


def _definition(tool: Tool[Any]) -> types.Tool:
    return types.Tool(
        name=tool.name,
        title=tool.name.replace("_", " ").capitalize(),
        description=tool.description,
        input_schema=portable_schema(tool.params),
        annotations=types.ToolAnnotations(
            title=tool.name.replace("_", " ").capitalize(),
            read_only_hint=not tool.mutating and tool.name != "snapshot",
            destructive_hint=tool.destructive,
            idempotent_hint=tool.idempotent,
            open_world_hint=False,
        ),
    )


def _text(message: str, *, error: bool = False, code: str | None = None) -> types.CallToolResult:
    """A tool result; a failure is ``isError`` (never a protocol error) with its code in ``_meta``."""
    meta = {ERROR_META_KEY: code} if error and code else None
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=error, _meta=meta)


class _Roots:
    """Which parts of the workspace the client's roots allow (``None``: all of it; ``[]``: none)."""

    def __init__(self, fs: Filesystem) -> None:
        self.fs = fs
        self.allowed: list[str] | None = None
        self.known = False
        self.described = ""

    def _bases(self) -> list[str]:
        bases = []
        if self.fs.capabilities.host_directory:  # a file:// root can name the directory itself
            bases += [os.path.abspath(self.fs.root), os.path.realpath(self.fs.root)]
        if self.fs.mount_point:
            bases.append(self.fs.mount_point)
        return list(dict.fromkeys(bases))

    def set(self, uris: Sequence[str]) -> None:
        """Take the client's root URIs (lexically: nothing the client sends is ever resolved)."""
        self.known = True
        self.described = ", ".join(uris) or "(none)"
        bases = self._bases()
        if not uris or not bases:  # no roots, or a workspace no file:// URI can name: nothing to narrow
            self.allowed = None
            return
        allowed: set[str] = set()
        for uri in uris:
            parts = urlsplit(uri)
            if parts.scheme != "file":
                continue
            path = posixpath.normpath(unquote(parts.path))
            for base in bases:
                if path == base or base.startswith(path.rstrip("/") + "/"):
                    allowed.add("")  # the root is the workspace or holds it
                elif path.startswith(base + "/"):
                    allowed.add(path[len(base) + 1 :])
        self.allowed = None if "" in allowed else sorted(allowed)

    def refusal(self, tool: Tool[Any], arguments: dict[str, Any]) -> str | None:
        """Why the roots forbid this call, or ``None`` if they allow it."""
        if self.allowed is None:
            return None
        scope = ", ".join(f"'{a}'" for a in self.allowed) or "nothing in this workspace"
        if tool.name in _WHOLE_WORKSPACE_TOOLS:
            return f"{tool.name} acts on the whole workspace, but the client's roots allow only {scope}."
        for name in _PATH_ARGUMENTS:
            if name not in tool.params.model_fields:
                continue
            given = arguments.get(name, tool.params.model_fields[name].default)
            if not isinstance(given, str):
                continue  # the tool reports a bad argument itself
            try:
                path = normalize_path(given, mount_point=self.fs.mount_point)
            except (ValueError, PermissionError, TypeError):
                continue  # an invalid path reaches nothing; the tool explains why
            if not any(is_within(path, base) for base in self.allowed):
                return f"'{given}' is outside the client's roots ({self.described}); this session may only use {scope}."
        return None


class _ErrorsAsResults:
    """Server middleware: malformed ``tools/call`` params and crashes become ``isError`` results."""

    async def __call__(self, ctx: ServerRequestContext[Any], call_next: Any) -> Any:
        if ctx.method != "tools/call":
            return await call_next(ctx)
        try:
            return await call_next(ctx)
        except MCPError:
            raise  # a real protocol problem (not initialised …) stays one
        except ValidationError as exc:
            message, code = f"Malformed tools/call request: {exc.errors()[0]['msg']}", "invalid_argument"
        except Exception as exc:
            logger.exception("tool call failed unexpectedly")
            message, code = f"The tool failed unexpectedly: {type(exc).__name__}: {exc}", "internal_error"
        legacy = ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS
        return _text(message, error=True, code=code).model_dump(
            by_alias=True, mode="json", exclude_none=True, exclude={"result_type"} if legacy else None
        )


def build_server(
    fs: Filesystem,
    *,
    tools: Sequence[Tool[Any]] | None = None,
    context: ToolContext | None = None,
    name: str = "workspacefs",
) -> Server[Any]:
    """An MCP server offering ``tools`` (default: ``offered_tools(fs)``) on ``fs``."""
    offered = list(tools) if tools is not None else offered_tools(fs)
    by_name = {tool.name: tool for tool in offered}
    shared = context or ToolContext(filesystem=fs)
    roots = _Roots(fs)
    where = fs.mount_point or "the workspace root"

    async def list_tools(
        _ctx: ServerRequestContext[Any], _params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[_definition(tool) for tool in offered])

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        asked = await _learn_roots(ctx, params, roots)
        if asked is not None:
            return asked
        arguments = dict(params.arguments or {})
        tool = by_name.get(params.name)
        if tool is not None:
            refused = roots.refusal(tool, arguments)
            if refused is not None:
                return _text(refused, error=True, code="outside_roots")
        run = functools.partial(dispatch, params.name, arguments, shared, tools=offered)
        result = await anyio.to_thread.run_sync(run)
        return _text(result.message, error=not result.success, code=result.error_code)

    async def roots_changed(_ctx: ServerRequestContext[Any], _params: types.NotificationParams | None) -> None:
        roots.known = False

    with warnings.catch_warnings():  # roots are deprecated in 2026-07-28 but still what 2025 clients send
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        server: Server[Any] = Server(
            name,
            version=__version__,
            title="workspacefs",
            instructions=(
                f"Files of one workspace. Paths are relative to {where}; '..' cannot leave it and symbolic "
                "links are not followed. Read a file before you overwrite or edit it."
            ),
            on_list_tools=list_tools,
            on_call_tool=call_tool,
            on_roots_list_changed=roots_changed,
        )
    server.middleware.append(_ErrorsAsResults())
    return server


async def _learn_roots(
    ctx: ServerRequestContext[Any], params: types.CallToolRequestParams, roots: _Roots
) -> types.InputRequiredResult | None:
    """Fetch the client's roots if it has them and they are not known yet (``None`` when done)."""
    answered = (params.input_responses or {}).get("roots")
    if answered is not None and hasattr(answered, "roots"):
        roots.set([str(root.uri) for root in answered.roots])
        return None
    if roots.known:
        return None
    capabilities = ctx.session.client_capabilities
    if capabilities is None or capabilities.roots is None:
        roots.set([])
        return None
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:  # no server-to-client requests: ask in the reply
        return types.InputRequiredResult(input_requests={"roots": types.ListRootsRequest()})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", MCPDeprecationWarning)
        listed = await ctx.session.list_roots()
    roots.set([str(root.uri) for root in listed.roots])
    return None


async def serve_stdio(fs: Filesystem, *, tools: Sequence[Tool[Any]] | None = None) -> None:
    """Serve ``fs`` over stdio until the client disconnects."""
    server = build_server(fs, tools=tools)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def run_stdio(url: str, *, read_only: bool = False, tool_names: Sequence[str] | None = None) -> None:
    """Open ``url`` and serve it over stdio (what ``workspacefs mcp`` runs)."""
    fs = open_filesystem(url, read_only="true") if read_only else open_filesystem(url)
    tools = offered_tools(fs, tool_names, read_only=read_only)
    anyio.run(functools.partial(serve_stdio, fs, tools=tools))
