"""Calling tools by name with provider-shaped arguments, transactionally; tool lists for each provider."""

from __future__ import annotations

import dataclasses
import functools
import json
import logging
import types
from collections.abc import Mapping, Sequence
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from workspacefs.errors import WorkspaceError
from workspacefs.policy import GuardedFilesystem
from workspacefs.tools._core import Tool, ToolContext, ToolResult, acting_for
from workspacefs.tools._messages import MAX_FAILURE_CHARS, cut_long, failure, failure_from, lone_surrogate
from workspacefs.tools._schema import openai_strict_schema, portable_schema, prune_nulls
from workspacefs.tools._sets import ALL_TOOLS, NATIVE_TOOLS, tools_for
from workspacefs.undo import UndoLog

__all__ = ["dispatch", "to_anthropic_tools", "to_openai_tools"]

logger = logging.getLogger("workspacefs.tools")


def _describe_validation(tool: Tool[Any], error: ValidationError) -> str:
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        problems.append(f"{where}: {item['msg']}")
    fields = ", ".join(tool.params.model_fields)
    return f"Invalid arguments for {tool.name}: " + "; ".join(problems) + f". It takes: {fields}."


def surrogate_refusal(name: str, arguments: object) -> ToolResult[Any] | None:
    """The refusal of arguments that hold a lone surrogate anywhere (``None`` when none does); ``name`` is the
    tool's, shown as it is."""
    found = lone_surrogate(arguments)
    if found is None:
        return None
    return failure(
        f"Invalid arguments for {name}: {found}, a lone UTF-16 surrogate, which is not a character and cannot be "
        "stored as UTF-8. Send that text again as valid Unicode.",
        "invalid_argument",
    )


def _numeric(annotation: Any) -> str | None:
    """``"number"`` for a field that takes a number and never ``true``/``false`` (``int``, ``int | None``),
    ``"numbers"`` for a list of such numbers, else ``None``."""
    origin = get_origin(annotation)
    if origin is Union or origin is types.UnionType:
        found = {_numeric(arg) for arg in get_args(annotation) if arg is not type(None)}
        return found.pop() if len(found) == 1 else None
    if origin in (list, tuple):
        items = get_args(annotation)
        return "numbers" if items and all(_numeric(item) == "number" for item in items if item is not ...) else None
    return "number" if annotation in (int, float) else None


@functools.cache
def _numeric_fields(params: type[BaseModel]) -> tuple[tuple[str, str, str], ...]:
    """``(argument name, field name, "number"/"numbers")`` of every field of ``params`` that holds numbers."""
    found = []
    for name, info in params.model_fields.items():
        kind = _numeric(info.annotation)
        if kind is not None:
            found.append((info.alias or name, name, kind))
    return tuple(found)


def _boolean_for_number(tool: Tool[Any], arguments: Mapping[str, Any]) -> ToolResult[Any] | None:
    """The refusal of ``true``/``false`` where a number belongs (validation would read it as 1 or 0: an offset, a
    line, a range a model never meant), or ``None``."""
    params: type[BaseModel] = tool.params
    for key, name, kind in _numeric_fields(params):
        value = arguments.get(key)
        if isinstance(value, bool) or (
            kind == "numbers" and isinstance(value, list) and any(isinstance(item, bool) for item in value)
        ):
            shown = json.dumps(value) if isinstance(value, bool) else "a list holding true or false"
            wanted = "a number" if kind == "number" else "a list of numbers"
            return failure(
                f"Invalid arguments for {tool.name}: {name}: {wanted} is expected, not {shown}. Send {name} as "
                f"{wanted}, or leave it out for its default.",
                "invalid_argument",
            )
    return None


def _parse(tool: Tool[Any], arguments: str | Mapping[str, Any] | None) -> Any:
    """The tool's validated parameters, or the failed result that says what is wrong with ``arguments``."""
    try:
        return _parse_arguments(tool, arguments)
    except RecursionError:  # JSON nested thousands deep: decoding or walking it runs out of stack
        fields = ", ".join(tool.params.model_fields)
        return failure(
            f"The arguments for {tool.name} are nested too deeply to read. Send one JSON object of its fields "
            f"({fields}), each a plain value.",
            "invalid_argument",
        )


def _parse_arguments(tool: Tool[Any], arguments: str | Mapping[str, Any] | None) -> Any:
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError as exc:
            return failure(f"The arguments for {tool.name} are not valid JSON ({exc.msg} at position {exc.pos}).")
    if not isinstance(arguments, Mapping):
        return failure(
            f"The arguments for {tool.name} must be a JSON object, not {type(arguments).__name__}.", "invalid_argument"
        )
    refused = surrogate_refusal(tool.name, arguments) or _boolean_for_number(tool, arguments)
    if refused is not None:
        return refused
    try:
        return tool.params.model_validate(prune_nulls(dict(arguments)))
    except ValidationError as exc:
        return failure(_describe_validation(tool, exc), "invalid_argument")


def _undo_log(tool: Tool[Any], params: Any, context: ToolContext) -> UndoLog | None:
    """A log holding what ``tool`` is about to change, or ``None`` when there is nothing to roll back."""
    fs = context.filesystem
    if fs is None or fs.read_only or tool.undo is None or not tool.transactional or context.transactional is False:
        return None
    log = UndoLog(fs.unguarded if isinstance(fs, GuardedFilesystem) else fs)  # putting back asks no one
    try:
        tool.undo(params, log)
    except (OSError, ValueError):  # a path the tool itself will refuse, with its own message
        log.close()
        return None
    return log


def _run(tool: Tool[Any], params: Any, context: ToolContext) -> ToolResult[Any]:
    try:
        return tool(params, context=context)
    except Exception as exc:
        fs = context.filesystem
        if fs is not None and isinstance(exc, WorkspaceError):  # a typed refusal the handler left to the boundary
            named = params.model_dump()
            return failure_from(exc, fs, str(named.get("path", named.get("src", "."))), verb="used")
        logger.exception("tool %s failed unexpectedly", tool.name)
        return failure(f"Internal error in tool {tool.name}: {type(exc).__name__}: {exc}", "internal_error")


def dispatch(
    name: str,
    arguments: str | Mapping[str, Any] | None,
    context: ToolContext,
    *,
    tools: Sequence[Tool[Any]] | None = None,
    call_id: str | None = None,
) -> ToolResult[Any]:
    """Run tool ``name`` with ``arguments`` (a JSON string or a dict) and return its result.

    ``tools`` defaults to every file tool, the snapshot tools where the filesystem can snapshot, and the
    providers' native tools (``str_replace_based_edit_tool``, ``str_replace_editor``, ``memory``,
    ``apply_patch``) with their native input.

    Never raises for a model's mistake: an unknown tool, bad JSON or invalid arguments come back as a
    failed result saying what to fix. A mutating tool that fails part way is rolled back when the
    context is transactional (see :class:`ToolContext`): only the paths it touched, recorded first.

    Every change the call makes is journaled (where the filesystem keeps history) under ``context.actor``,
    the model's ``call_id`` (its tool-call / tool-use id) and ``via="tool"``.
    """
    with acting_for(context, call_id):
        return _bounded(_dispatch(name, arguments, context, tools))


def _bounded(result: ToolResult[Any]) -> ToolResult[Any]:
    """``result``, with a failure's over-long message cut in the middle (see :func:`cut_long`)."""
    if result.success or len(result.message) <= MAX_FAILURE_CHARS:
        return result
    return dataclasses.replace(result, message=cut_long(result.message))


def _dispatch(
    name: str, arguments: str | Mapping[str, Any] | None, context: ToolContext, tools: Sequence[Tool[Any]] | None
) -> ToolResult[Any]:
    offered = tools if tools is not None else tools_for(context.filesystem, read_only=False)
    available = {tool.name: tool for tool in (offered if tools is not None else (*NATIVE_TOOLS, *offered))}
    tool = available.get(name)
    if tool is None:
        listed = ", ".join(sorted(t.name for t in offered))
        return failure(f"There is no tool named {name!r}. Available tools: {listed}.", "unknown_tool")
    params = _parse(tool, arguments)
    if isinstance(params, ToolResult):
        return params
    log = _undo_log(tool, params, context) if tool.mutating else None
    if log is None:
        return _run(tool, params, context)
    with log:
        result = _run(tool, params, context)
        if result.success:
            return result
        try:
            if log.rollback():
                return failure(result.message + " Changes it made before failing were rolled back.", result.error_code)
        except (OSError, ValueError) as exc:
            logger.warning("rolling back %s failed: %s", tool.name, exc)
            return failure(
                f"{result.message} Rolling back its partial changes also failed ({type(exc).__name__}: {exc}); "
                "check the paths it names before going on.",
                result.error_code,
            )
    return result


def to_openai_tools(
    tools: Sequence[Tool[Any]] | None = None, *, strict: bool = True, api: str = "chat"
) -> list[dict[str, Any]]:
    """Tool definitions for OpenAI: ``api="chat"`` (Chat Completions) or ``"responses"`` (Responses API).

    ``tools`` defaults to the static ``ALL_TOOLS``, the same for every backend; pass ``tools_for(fs)`` to
    offer what fits one filesystem (the snapshot tools where it snapshots, ``run_command`` where it runs
    commands, only reading tools where it is read-only).

    >>> [tool["function"]["name"] for tool in to_openai_tools()][:3]
    ['ls', 'read_file', 'write_file']
    >>> to_openai_tools(api="responses")[0]["name"]
    'ls'

    With ``strict`` (the default) the schemas obey strict mode: every property required, optional
    ones nullable (a null means "use the default"), no other keywords.
    """
    if api not in ("chat", "responses"):
        raise ValueError("api must be 'chat' or 'responses'")
    shaped = []
    for tool in tools if tools is not None else ALL_TOOLS:
        schema = openai_strict_schema(tool.params) if strict else portable_schema(tool.params)
        function = {"name": tool.name, "description": tool.description, "parameters": schema, "strict": strict}
        shaped.append({"type": "function", "function": function} if api == "chat" else {"type": "function", **function})
    return shaped


def to_anthropic_tools(tools: Sequence[Tool[Any]] | None = None) -> list[dict[str, Any]]:
    """Tool definitions for Anthropic's Messages API (``name``, ``description``, ``input_schema``).

    ``tools`` defaults to the static ``ALL_TOOLS``; pass ``tools_for(fs)`` to fit one filesystem (see
    :func:`to_openai_tools`).

    >>> from workspacefs import InMemoryFilesystem, tools_for
    >>> [tool["name"] for tool in to_anthropic_tools(tools_for(InMemoryFilesystem(read_only=True)))]
    ['ls', 'read_file', 'glob', 'grep', 'stat', 'diff']
    """
    return [
        {"name": tool.name, "description": tool.description, "input_schema": portable_schema(tool.params)}
        for tool in (tools if tools is not None else ALL_TOOLS)
    ]
