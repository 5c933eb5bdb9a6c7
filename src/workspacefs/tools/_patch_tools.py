"""``apply_patch`` for open models and Codex: one string argument holding a ``*** Begin Patch`` text."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from workspacefs.tools._core import Tool, ToolContext, ToolResult
from workspacefs.tools._messages import failure
from workspacefs.tools._patch import PatchError, parse_patch
from workspacefs.tools._patching import PatchFailedError, apply_planned, plan_changes

__all__ = ["APPLY_PATCH", "ApplyPatchParams", "apply_patch_text", "patch_paths"]

_GRAMMAR = """Apply a patch to files of the workspace (all files change, or none). Format:
*** Begin Patch
*** Add File: path/new.py
+every line of the new file, each starting with +
*** Update File: path/old.py
*** Move to: path/renamed.py   (optional)
@@ def a_function():          (a line near the change, to find the place)
 context line (starts with a space)
-line to remove
+line to add
*** Delete File: path/gone.py
*** End Patch
Give 3 lines of context around each change; paths are relative to the workspace."""


class ApplyPatchParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: str = Field(description="The whole patch, from '*** Begin Patch' to '*** End Patch'.")


def apply_patch_text(text: str, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Apply a Codex patch on ``context.filesystem``: all of it, or nothing (the message says which line or
    file failed, quoting the context that did not match)."""
    fs = context.filesystem
    if fs is None:
        return failure("No filesystem is available in this context; the tool cannot run.")
    try:
        operations = parse_patch(text)
        changes = plan_changes(context, fs, operations, insert_at_end=True)
        apply_planned(context, fs, changes)
    except PatchError as exc:
        return failure(f"The patch was not applied: {exc}", "invalid_patch")
    except PatchFailedError as exc:
        unchanged = ", and no file was changed" if exc.rolled_back else ""
        return failure(f"The patch was not applied{unchanged}. {exc.message}", exc.code)
    lines = [c.summary for c in changes]
    value: dict[str, object] = {"files": [{"operation": c.kind, "path": c.move_to or c.where} for c in changes]}
    return ToolResult("Success. Updated the following files:\n" + "\n".join(lines), value)


def _apply_patch(params: ApplyPatchParams, *, context: ToolContext) -> ToolResult[Any]:
    return apply_patch_text(params.input, context)


def patch_paths(arguments: dict[str, Any]) -> list[str]:
    """The paths a patch names (for MCP roots); a patch that does not parse names none."""
    text = arguments.get("input")
    if not isinstance(text, str):
        return []
    try:
        operations = parse_patch(text)
    except PatchError:
        return []
    return [p for op in operations for p in (op.path, op.move_to) if p is not None]


APPLY_PATCH = Tool(
    name="apply_patch",
    description=_GRAMMAR,
    params=ApplyPatchParams,
    handler=_apply_patch,
    mutating=True,
    destructive=True,
    idempotent=False,
    paths_of=patch_paths,
)
