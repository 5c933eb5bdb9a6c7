"""The tool layer as an MCP server over stdio (the official ``mcp`` SDK, low-level server).

Every tool is the Python tool: same handler, same messages, dispatched with one shared
:class:`~workspacefs.tools.ToolContext` (so read-before-write and snapshots span the conversation).
A model's mistake is an ``isError`` result carrying the tool's message, never a protocol error.

MCP roots sent by the client can only narrow access: a ``file://`` root inside the workspace (a host
directory, or under its mount point) limits the tools to that subtree; roots elsewhere grant nothing;
if the client names roots and none falls inside the workspace, no tool may touch any path. Roots are
asked for once (``roots/list`` on 2025 protocol versions; an input request on 2026-07-28) and again
after the client says they changed.

Files are also resources, ``workspace://<path>`` (list, read, and on 2025 protocol versions subscribe, for
``notifications/resources/updated`` when a file changes where the filesystem can be watched: see
``_mcp_resources.py``). Every change a tool call makes is journaled ``via="mcp"`` with the request's id as the
tool call.

The workspace policy (``Policy.default()`` unless another is given) applies to every call. An ``ask`` rule
becomes a question to the person behind the client, by elicitation, where the client offers it: mid-call on
2025 protocol versions, as an input request (the call is answered "input required" and retried with the
answer) on 2026-07-28. A client without elicitation gets the refusal, which says approval was needed.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import posixpath
import secrets
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from urllib.parse import unquote, urlsplit

import anyio
import anyio.to_thread
import mcp_types as types
from mcp import MCPDeprecationWarning
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import ListenHandler
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from workspacefs._mcp_resources import Resources, path_of
from workspacefs._mcp_wire import relay_answering_unparsed
from workspacefs._version import __version__
from workspacefs.history import acting_as
from workspacefs.open import open_filesystem
from workspacefs.paths import is_within, normalize_path
from workspacefs.policy import ApprovalRequest, Policy
from workspacefs.protocol import Filesystem
from workspacefs.tools import NATIVE_TOOLS, Tool, ToolContext, ToolResult, dispatch, portable_schema, tools_for
from workspacefs.tools._dispatch import surrogate_refusal

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
    # history and undo, like the providers' own tools, are offered only when asked for by name
    fitting = {tool.name: tool for tool in tools_for(fs, read_only=read_only or fs.read_only, history=bool(names))}
    if not names:
        return list(fitting.values())
    if not (read_only or fs.read_only):  # the providers' own tools, by name: offered only when asked for
        fitting.update({tool.name: tool for tool in NATIVE_TOOLS})
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


def _named_paths(tool: Tool[Any], arguments: dict[str, Any]) -> list[str]:
    """The workspace paths a call names: the tool's own answer where it has one, else its path arguments."""
    if tool.paths_of is not None:
        return tool.paths_of(arguments)
    found = []
    for name in _PATH_ARGUMENTS:
        if name in tool.params.model_fields:
            given = arguments.get(name, tool.params.model_fields[name].default)
            if isinstance(given, str):  # otherwise the tool reports a bad argument itself
                found.append(given)
    return found


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
        for given in _named_paths(tool, arguments):
            try:
                path = normalize_path(given, mount_point=self.fs.mount_point)
            except (ValueError, PermissionError, TypeError):
                continue  # an invalid path reaches nothing; the tool explains why
            if not any(is_within(path, base) for base in self.allowed):
                return f"'{given}' is outside the client's roots ({self.described}); this session may only use {scope}."
        return None


_APPROVAL_KEY = "workspacefs/approval"
"""The input request (2026-07-28) that asks the person behind the client about an ``ask`` rule."""
_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Allow it?", "description": "Yes to allow this once."}},
    "required": ["approve"],
}


def _question(request: ApprovalRequest) -> str:
    return f"The agent asks to {request.describe()}. Allow it?"


def _said_yes(answer: Any) -> bool:
    return (
        isinstance(answer, types.ElicitResult)
        and answer.action == "accept"
        and (answer.content or {}).get("approve") is True
    )


class _Approvals:
    """Questions asked through input requests and not answered yet, by the opaque state the client echoes (the
    state names a question; only the client's answer approves it)."""

    def __init__(self) -> None:
        self._asked: dict[str, ApprovalRequest] = {}

    def ask(self, request: ApprovalRequest) -> types.InputRequiredResult:
        if len(self._asked) > 1000:  # questions nobody answered must not pile up forever
            self._asked.clear()
        state = secrets.token_urlsafe(16)
        self._asked[state] = request
        form = types.ElicitRequestFormParams(message=_question(request), requested_schema=_APPROVAL_SCHEMA)
        return types.InputRequiredResult(
            input_requests={_APPROVAL_KEY: types.ElicitRequest(params=form)}, request_state=state
        )

    def answered(self, params: types.CallToolRequestParams) -> tuple[ApprovalRequest | None, bool]:
        """The question this retry answers with a yes (or ``None``), and whether it answers one at all (a
        question answered no is not asked again)."""
        asked = self._asked.pop(params.request_state, None) if params.request_state else None
        answer = (params.input_responses or {}).get(_APPROVAL_KEY)
        return (asked if asked is not None and _said_yes(answer) else None), answer is not None


def _same(request: ApprovalRequest, approved: ApprovalRequest | None) -> bool:
    return approved is not None and (request.operation, request.paths, request.rule) == (
        approved.operation,
        approved.paths,
        approved.rule,
    )


class _Caller:
    """Runs a tool call in a worker thread, asking the person behind the client about ``ask`` rules where the
    client can be asked (elicitation): mid-call on 2025 protocols, by an input request on 2026-07-28."""

    def __init__(self, fs: Filesystem, shared: ToolContext, offered: Sequence[Tool[Any]], policy: Policy) -> None:
        self.fs, self.shared, self.offered, self.policy = fs, shared, list(offered), policy
        self.approvals = _Approvals()

    async def _run(
        self, name: str, arguments: dict[str, Any], context: ToolContext, call_id: str | None = None
    ) -> ToolResult[Any]:
        def run() -> ToolResult[Any]:
            with acting_as(via="mcp"):  # the journal names MCP as the surface, and the request as the call
                return dispatch(name, arguments, context, tools=self.offered, call_id=call_id)

        return await anyio.to_thread.run_sync(run)

    def _asking(self, approve: Callable[[ApprovalRequest], bool | Awaitable[bool]]) -> ToolContext:
        return dataclasses.replace(self.shared, filesystem=self.fs, policy=self.policy.with_approver(approve))

    async def call(
        self, ctx: ServerRequestContext[Any], name: str, arguments: dict[str, Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult | types.InputRequiredResult:
        capabilities = ctx.session.client_capabilities
        call_id = None if ctx.request_id is None else str(ctx.request_id)
        if capabilities is None or capabilities.elicitation is None:
            result = await self._run(name, arguments, self.shared, call_id)
        elif ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:

            async def elicit(request: ApprovalRequest) -> bool:
                return _said_yes(await ctx.session.elicit_form(_question(request), _APPROVAL_SCHEMA))

            result = await self._run(name, arguments, self._asking(elicit), call_id)
        else:
            approved, replied = self.approvals.answered(params)
            unanswered: list[ApprovalRequest] = []

            def known(request: ApprovalRequest) -> bool:
                if _same(request, approved):
                    return True
                unanswered.append(request)
                return False

            result = await self._run(name, arguments, self._asking(known), call_id)
            if not result.success and unanswered and not replied:  # it changed nothing: ask, then retry with the answer
                return self.approvals.ask(unanswered[0])
        return _text(result.message, error=not result.success, code=result.error_code)


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


def _resource_handlers(fs: Filesystem, roots: _Roots) -> dict[str, Any]:
    """The server's resource handlers: list and read, and where ``fs`` can be watched subscribe (2025) and listen
    (2026-07-28), with the lifespan that feeds the listen streams."""

    def allows(path: str) -> bool:
        return roots.allowed is None or any(is_within(path, base) for base in roots.allowed)

    resources = Resources(fs, allows)

    async def list_resources(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        if await _learn_roots(ctx, None, roots) is not None:  # 2026-07-28 asks in a reply, which a list has not
            return types.ListResourcesResult(resources=[])  # read one, or call a tool, and the roots are known
        return await anyio.to_thread.run_sync(resources.list, params.cursor if params is not None else None)

    async def read_resource(
        ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams
    ) -> types.ReadResourceResult | types.InputRequiredResult:
        asked = await _learn_roots(ctx, params, roots)  # the roots narrow resources as they narrow the tools
        if asked is not None:
            return asked
        return await anyio.to_thread.run_sync(resources.read, str(params.uri))

    async def subscribe(ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        await _learn_roots(ctx, None, roots)  # a 2025 protocol (subscribing is one): asked at once
        if not allows(path_of(str(params.uri))):
            raise MCPError(types.INVALID_PARAMS, f"{params.uri} is outside the client's roots")
        resources.subscribe(ctx.session, str(params.uri))
        return types.EmptyResult()

    async def unsubscribe(ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        resources.unsubscribe(ctx.session, str(params.uri))
        return types.EmptyResult()

    handlers: dict[str, Any] = {"on_list_resources": list_resources, "on_read_resource": read_resource}
    if resources.can_subscribe:
        handlers |= {
            "on_subscribe_resource": subscribe,
            "on_unsubscribe_resource": unsubscribe,
            "on_subscriptions_listen": ListenHandler(resources.bus),  # 2026-07-28
            "lifespan": resources.lifespan,
        }
    return handlers


def build_server(
    fs: Filesystem,
    *,
    tools: Sequence[Tool[Any]] | None = None,
    context: ToolContext | None = None,
    name: str = "workspacefs",
    policy: Policy | None = None,
) -> Server[Any]:
    """An MCP server offering ``tools`` (default: ``offered_tools(fs)``) on ``fs`` under ``policy`` (default:
    ``context``'s, else ``Policy.default()``)."""
    offered = list(tools) if tools is not None else offered_tools(fs)
    by_name = {tool.name: tool for tool in offered}
    shared = context or ToolContext(filesystem=fs, policy=policy)
    caller = _Caller(fs, shared, offered, policy or shared.policy or Policy.default())
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
        return await caller.call(ctx, params.name, arguments, params)

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
            **_resource_handlers(shared.filesystem or fs, roots),
        )
    server.middleware.append(_ErrorsAsResults())
    return server


async def _learn_roots(
    ctx: ServerRequestContext[Any],
    params: types.CallToolRequestParams | types.ReadResourceRequestParams | None,
    roots: _Roots,
) -> types.InputRequiredResult | None:
    """Fetch the client's roots if it has them and they are not known yet (``None`` when done)."""
    answered = None if params is None else (params.input_responses or {}).get("roots")
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


async def serve_stdio(
    fs: Filesystem, *, tools: Sequence[Tool[Any]] | None = None, policy: Policy | None = None
) -> None:
    """Serve ``fs`` over stdio until the client disconnects."""
    server = build_server(fs, tools=tools, policy=policy)
    names = {tool.name for tool in (tools if tools is not None else offered_tools(fs, None))}
    async with stdio_server() as (read_stream, write_stream), anyio.create_task_group() as group:
        received, relay = await relay_answering_unparsed(read_stream, write_stream, functools.partial(_unparsed, names))
        group.start_soon(relay)
        await server.run(received, write_stream, server.create_initialization_options())
        group.cancel_scope.cancel()  # the relay ends with the client's stream; never outlive the server


def _unparsed(names: set[str], name: str, arguments: object) -> types.CallToolResult:
    """The answer to a ``tools/call`` the SDK could not parse (its text holds a lone surrogate): the tool layer's
    refusal of the arguments, or of a name that is no tool offered here (never echoed: it may hold the surrogate)."""
    refused = surrogate_refusal(name, arguments) if name in names else None
    if refused is not None:
        return _text(refused.message, error=True, code=refused.error_code)
    message = "The tool call is not valid Unicode text (a lone UTF-16 surrogate escape such as \\ud800); send it again."
    return _text(message, error=True, code="invalid_argument")


def run_stdio(
    url: str | Filesystem,
    *,
    read_only: bool = False,
    tool_names: Sequence[str] | None = None,
    policy: Policy | None = None,
) -> None:
    """Serve a filesystem (or the one ``url`` opens) over stdio: what ``workspacefs mcp`` runs.

    Raises:
        ValueError: a bad URL, or a name in ``tool_names`` that is not a tool fitting the filesystem.
    """
    if isinstance(url, str):
        fs = open_filesystem(url, read_only="true") if read_only else open_filesystem(url)
    else:
        fs = url
    tools = offered_tools(fs, tool_names, read_only=read_only)
    anyio.run(functools.partial(serve_stdio, fs, tools=tools, policy=policy))
