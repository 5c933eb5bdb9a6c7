"""OpenAI's native ``apply_patch`` tool (Responses API) on any workspace.

Offer ``apply_patch_tool()`` in ``tools=[…]``; pass the ``apply_patch_call`` items of a response to
``handle_apply_patch_calls(calls, context)`` and send back the ``apply_patch_call_output`` items it returns.
The calls of one turn apply all or nothing: if one fails, none is applied and every output says why.
The OpenAI SDK is not needed here: its objects are accepted (any pydantic model), and so are plain dicts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pydantic import BaseModel

from workspacefs.tools._core import ToolContext, acting_for
from workspacefs.tools._editing import plain_dict
from workspacefs.tools._messages import cut_long, display, lone_surrogate
from workspacefs.tools._patch import FileOperation, PatchError, parse_v4a_create, parse_v4a_update
from workspacefs.tools._patching import PatchFailedError, apply_planned, plan_changes

__all__ = ["apply_patch_tool", "handle_apply_patch_calls"]

_DONE = {"add": "Created", "update": "Updated", "delete": "Deleted"}


def apply_patch_tool() -> dict[str, Any]:
    """The tool definition for ``tools=[…]``."""
    return {"type": "apply_patch"}


def _operation(call: dict[str, Any]) -> FileOperation:
    operation = call.get("operation")
    if not isinstance(operation, Mapping):
        raise PatchError("The call has no operation object (with type, path and diff).")
    kind, path, diff = operation.get("type"), operation.get("path"), operation.get("diff") or ""
    if not isinstance(path, str) or not path:
        raise PatchError("The operation has no path.")
    if not isinstance(diff, str):
        raise PatchError("The operation's diff is not text.")
    surrogate = lone_surrogate({"path": path, "diff": diff})
    if surrogate is not None:
        raise PatchError(f"The operation's {surrogate}, a lone UTF-16 surrogate, not a character; send valid text.")
    if kind == "create_file":
        return FileOperation("add", path, content=parse_v4a_create(diff))
    if kind == "update_file":
        return FileOperation("update", path, chunks=parse_v4a_update(diff))
    if kind == "delete_file":
        return FileOperation("delete", path)
    raise PatchError(f"Unknown operation type {kind!r}: use create_file, update_file or delete_file.")


def _output(call_id: Any, status: str, output: str) -> dict[str, Any]:
    """One call's output; a failure's over-long text (quoting lines the model sent) is cut in the middle."""
    text = cut_long(output) if status == "failed" else output
    return {"type": "apply_patch_call_output", "call_id": call_id, "status": status, "output": text}


def handle_apply_patch_calls(calls: Iterable[Any] | Any, context: ToolContext) -> list[dict[str, Any]]:
    """One ``apply_patch_call_output`` per ``apply_patch_call`` in ``calls`` (other items are skipped, so a
    response's whole ``output`` may be passed; a single call may be passed alone), applied all or nothing
    across the list."""
    given = [calls] if isinstance(calls, (Mapping, BaseModel)) else calls  # a single call passed alone
    items = [plain_dict(call, "an apply_patch_call item") for call in given]
    items = [item for item in items if item.get("type", "apply_patch_call") == "apply_patch_call"]
    fs = context.filesystem
    if fs is None:
        return [_output(i.get("call_id"), "failed", "No filesystem is available; nothing was applied.") for i in items]
    failed: tuple[int, str] | None = None
    operations: list[FileOperation] = []
    for index, item in enumerate(items):
        try:
            operations.append(_operation(item))
        except PatchError as exc:
            failed = (index, f"The diff was not applied: {exc} No operation of this turn was applied.")
            break
    if failed is None:
        try:
            changes = plan_changes(context, fs, operations, insert_at_end=False)
            ids = ",".join(str(item["call_id"]) for item in items if item.get("call_id"))
            with acting_for(context, ids or None):  # journaled under the actor and the turn's call ids
                apply_planned(context, fs, changes)
        except PatchFailedError as exc:
            settled = " No operation of this turn was applied." if exc.rolled_back else ""
            failed = (exc.index or 0, exc.message + settled)
    if failed is None:
        return [
            _output(item.get("call_id"), "completed", f"{_DONE[op.kind]} {display(fs, op.path)}")
            for item, op in zip(items, operations, strict=True)
        ]
    index, reason = failed
    operation = items[index].get("operation")
    culprit = operation.get("path", "?") if isinstance(operation, Mapping) else "?"
    outputs = []
    for position, item in enumerate(items):
        if position == index:
            text = reason
        else:
            text = (
                f"Not applied: the operation on '{culprit}' in the same turn failed, and a turn's operations apply "
                "all or nothing. Fix that one, then send these again."
            )
        outputs.append(_output(item.get("call_id"), "failed", text))
    return outputs
