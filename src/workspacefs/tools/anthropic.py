"""Anthropic's own file tools on any workspace: the text editor (``text_editor_20250728``,
``text_editor_20250124``) and the memory tool (``memory_20250818``).

Pass ``text_editor_tool()`` / ``memory_tool()`` in ``tools=[…]``; answer each ``tool_use`` block with
``handle_tool_use(block, context)`` and send back the ``tool_result`` block it returns. The Anthropic SDK is
not needed here: its objects are accepted (any pydantic model), and so are plain dicts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from workspacefs.tools._core import ToolContext
from workspacefs.tools._dispatch import dispatch
from workspacefs.tools._editing import plain_dict
from workspacefs.tools._memory_tool import MEMORY
from workspacefs.tools._text_editor import TEXT_EDITOR_20250124, TEXT_EDITOR_20250728, with_view_limit

__all__ = ["ANTHROPIC_TOOLS", "handle_tool_use", "memory_tool", "text_editor_tool"]

ANTHROPIC_TOOLS = (TEXT_EDITOR_20250728, TEXT_EDITOR_20250124, MEMORY)
"""The Anthropic-native tools, by their native names."""

_VERSIONS = {
    "20250728": ("text_editor_20250728", "str_replace_based_edit_tool"),
    "20250124": (
        "text_editor_20250124",
        "str_replace_editor",
    ),
}
_MEMORY_COMMANDS = ("delete", "rename")


def text_editor_tool(version: str = "20250728", *, max_characters: int | None = None) -> dict[str, Any]:
    """The text editor's definition for ``tools=[…]``: ``"20250728"`` (``str_replace_based_edit_tool``,
    optional ``max_characters`` for views) or ``"20250124"`` (``str_replace_editor``, with ``undo_edit``)."""
    if version not in _VERSIONS:
        raise ValueError(f"Unknown text editor version {version!r}; known: {', '.join(_VERSIONS)}")
    kind, name = _VERSIONS[version]
    definition: dict[str, Any] = {"type": kind, "name": name}
    if max_characters is not None:
        if version != "20250728":
            raise ValueError("max_characters needs text_editor_20250728")
        definition["max_characters"] = max_characters
    return definition


def memory_tool() -> dict[str, Any]:
    """The memory tool's definition for ``tools=[…]``."""
    return {"type": "memory_20250818", "name": "memory"}


def _infer_name(given: dict[str, Any]) -> str:
    path = given.get("path") or given.get("old_path") or ""
    if given.get("command") in _MEMORY_COMMANDS or (isinstance(path, str) and path.startswith("/memories")):
        return MEMORY.name
    return TEXT_EDITOR_20250728.name


def handle_tool_use(block: Any, context: ToolContext, *, max_characters: int | None = None) -> dict[str, Any]:
    """Run one ``tool_use`` block (SDK object or dict) — or just its ``input`` — and return the
    ``tool_result`` block: ``tool_use_id``, ``content`` (text) and ``is_error: true`` on failure.

    ``max_characters`` is the text editor definition's, if you set one there (views are cut at it).
    """
    given = plain_dict(block, "a tool_use block or its input (a dict)")
    if given.get("type") == "tool_use" or "input" in given:
        name, raw, use_id = str(given.get("name", "")), given.get("input"), given.get("id")
    else:
        name, raw, use_id = _infer_name(given), given, None
    arguments: Any = dict(raw) if isinstance(raw, Mapping) else raw  # anything else: dispatch explains it
    tools = ANTHROPIC_TOOLS
    if max_characters is not None:  # the definition's cut, which a model's own max_characters cannot raise
        tools = (with_view_limit(TEXT_EDITOR_20250728, max_characters), *ANTHROPIC_TOOLS[1:])
    result = dispatch(name, arguments, context, tools=tools, call_id=use_id if isinstance(use_id, str) else None)
    answer: dict[str, Any] = {"type": "tool_result", "content": result.message}
    if use_id is not None:
        answer["tool_use_id"] = use_id
    if not result.success:
        answer["is_error"] = True
    return answer
