"""Applying a multi-file patch to a workspace all or nothing: every change is planned (read, matched and
computed) before anything is written, then written under an :class:`~workspacefs.undo.UndoLog` that puts
every touched path back if one write fails.

A patch whose context lines match has shown that it knows the lines it changes, so an update needs no
prior read; but a file the caller did read and someone changed since is refused as a stale write, and
each write is a compare-and-set on the version the plan read. A new file that would
replace an existing one follows read-before-write like ``write_file``. Shared by the Codex ``apply_patch``
tool, OpenAI's native ``apply_patch`` calls and ``workspacefs patch``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from workspacefs.errors import error_code
from workspacefs.paths import MAX_CONVENIENCE_BYTES, normalize_path
from workspacefs.policy import GuardedFilesystem
from workspacefs.protocol import Filesystem
from workspacefs.tools._core import ToolContext
from workspacefs.tools._editing import (
    RefusalError,
    commit,
    current_id,
    load_text,
    read_file_call,
    refuse_if_stale,
    require_fresh,
)
from workspacefs.tools._messages import display, explain, human_size
from workspacefs.tools._patch import FileOperation, PatchError, apply_chunks, proves_nothing
from workspacefs.undo import UndoLog

__all__ = ["PatchFailedError", "PlannedChange", "apply_planned", "plan_changes"]

_RACED = "'{where}' changed while the patch was being applied; read it again, then retry."


class PatchFailedError(Exception):
    """The patch was not applied (nothing changed); ``index`` is the operation that failed, ``code`` its kind."""

    def __init__(self, message: str, index: int | None = None, code: str | None = "patch_failed") -> None:
        super().__init__(message)
        self.message = message
        self.index = index
        self.code = code
        self.rolled_back = True  # False when putting back the files written before the failure also failed


@dataclass(frozen=True, slots=True)
class PlannedChange:
    """One file's change, computed and checked, ready to write."""

    kind: Literal["add", "update", "delete"]
    path: str
    where: str
    data: bytes | None
    text: str | None
    expect: str | None
    move_to: str | None = None

    @property
    def summary(self) -> str:
        """``A path``, ``M path`` or ``D path`` (a move names its destination), as Codex reports it."""
        letter = {"add": "A", "update": "M", "delete": "D"}[self.kind]
        return f"{letter} {self.move_to or self.where}"


def _norm(fs: Filesystem, path: str, index: int) -> str:
    try:
        return normalize_path(path, mount_point=fs.mount_point)
    except (ValueError, PermissionError, TypeError) as exc:
        code = error_code(exc) or "invalid_path"
        raise PatchFailedError(explain(exc, fs, path, verb="patched"), index, code) from None


def _fail(exc: BaseException, fs: Filesystem, path: str, index: int, verb: str) -> PatchFailedError:
    if isinstance(exc, OSError) and isinstance(exc.filename, str):
        path = exc.filename  # the path the error is about (a move's destination, say), as the caller named it
    if isinstance(exc, RefusalError):
        return PatchFailedError(exc.message, index, exc.code)
    if isinstance(exc, PatchError):
        return PatchFailedError(str(exc), index, "patch_mismatch")
    return PatchFailedError(explain(exc, fs, path, verb=verb), index, error_code(exc) or "patch_failed")


def _plan_one(context: ToolContext, fs: Filesystem, operation: FileOperation, *, insert_at_end: bool) -> PlannedChange:
    where = display(fs, operation.path)
    reread = read_file_call(where)
    if operation.kind == "delete":
        if fs.stat(operation.path).is_directory:
            raise RefusalError(f"'{where}' is a directory; a patch deletes files only (use rm for directories).")
        now = current_id(fs, operation.path)
        refuse_if_stale(context, fs, operation.path, now, reread)
        return PlannedChange("delete", operation.path, where, None, None, now)
    if operation.kind == "add":
        data = operation.content.encode("utf-8")
        if len(data) > MAX_CONVENIENCE_BYTES:
            raise RefusalError(f"The new '{where}' is larger than {human_size(MAX_CONVENIENCE_BYTES)}.", "too_large")
        now = current_id(fs, operation.path)
        require_fresh(context, fs, operation.path, now, reread=reread)
        return PlannedChange("add", operation.path, where, data, operation.content, now)
    try:
        loaded = load_text(fs, operation.path, doing="patched")
    except FileNotFoundError:
        raise RefusalError(
            f"'{where}' does not exist, so it cannot be updated. To create it, add it as a new file.", "not_found"
        ) from None
    refuse_if_stale(context, fs, operation.path, loaded.content_id, reread)
    if any(proves_nothing(chunk) for chunk in operation.chunks):
        # a section with no line of the file to match proves nothing about it: read-before-write holds
        require_fresh(context, fs, operation.path, loaded.content_id, reread=reread)
    updated = apply_chunks(loaded.text, operation.chunks, where, insert_at_end=insert_at_end)
    move_to = None
    if operation.move_to is not None:
        move_to = display(fs, operation.move_to)
        try:
            target_now = current_id(fs, operation.move_to)
            require_fresh(context, fs, operation.move_to, target_now, reread=read_file_call(move_to))
        except (OSError, ValueError) as exc:  # the message names the destination, not the file moved
            raise RefusalError(explain(exc, fs, operation.move_to, verb="written"), error_code(exc)) from None
    return PlannedChange("update", operation.path, where, loaded.encode(updated), updated, loaded.content_id, move_to)


def plan_changes(
    context: ToolContext, fs: Filesystem, operations: Sequence[FileOperation], *, insert_at_end: bool
) -> list[PlannedChange]:
    """Every operation read, matched and computed, nothing written (``PatchFailedError`` on the first that
    cannot be done, naming it; two operations on one path are refused)."""
    targets: dict[str, int] = {}
    for index, operation in enumerate(operations):
        for path in (operation.path, operation.move_to):
            if path is None:
                continue
            norm = _norm(fs, path, index)
            if norm in targets:
                raise PatchFailedError(
                    f"'{display(fs, path)}' is named by two operations of this patch; give each file once.", index
                )
            targets[norm] = index
    planned = []
    for index, operation in enumerate(operations):
        try:
            planned.append(_plan_one(context, fs, operation, insert_at_end=insert_at_end))
        except (RefusalError, PatchError, OSError, ValueError) as exc:
            raise _fail(exc, fs, operation.path, index, "patched") from None
    return planned


def _record(log: UndoLog, change: PlannedChange) -> None:
    if change.kind == "add":
        log.will_create(change.path) if change.expect is None else log.will_change(change.path)
    else:
        log.will_change(change.path)
    if change.move_to is not None:
        log.will_change(change.move_to)


def _write(context: ToolContext, fs: Filesystem, change: PlannedChange) -> None:
    reread = read_file_call(change.where)
    if change.kind == "delete":
        if current_id(fs, change.path) != change.expect:
            raise RefusalError(_RACED.format(where=change.where))
        fs.delete(change.path)
        context.read_state.forget(fs, change.path, below=False)
        return
    assert change.data is not None
    if change.move_to is None:
        commit(context, fs, change.path, change.data, expect=change.expect, text=change.text, reread=reread)
        return
    if current_id(fs, change.path) != change.expect:
        raise RefusalError(_RACED.format(where=change.where))
    target_now = current_id(fs, change.move_to)
    commit(context, fs, change.move_to, change.data, expect=target_now, text=change.text, reread=reread)
    fs.delete(change.path)
    context.read_state.forget(fs, change.path)


def apply_planned(context: ToolContext, fs: Filesystem, changes: Sequence[PlannedChange]) -> None:
    """Write every planned change, or none: a failure puts back every path written so far
    (``PatchFailedError`` naming the change that failed)."""
    if fs.read_only:
        raise PatchFailedError("This workspace is read-only: nothing can be written, moved or deleted.", 0, "read_only")
    log = UndoLog(fs.unguarded if isinstance(fs, GuardedFilesystem) else fs)
    with log:
        for change in changes:
            _record(log, change)
        for index, change in enumerate(changes):
            try:
                _write(context, fs, change)
            except BaseException as exc:  # whatever stopped it (a bug, an approval that raised): undo first
                if not isinstance(exc, (RefusalError, OSError, ValueError)):
                    log.rollback()
                    raise
                failed = _fail(exc, fs, change.path, index, "patched")
                for written in changes[:index]:  # the model's view of them is the rolled-back one again
                    context.read_state.forget(fs, written.path, below=False)
                try:
                    log.rollback()
                except (OSError, ValueError) as undo_exc:
                    failed.rolled_back = False
                    failed.message += (
                        f" Putting back the files written before it also failed ({type(undo_exc).__name__}); "
                        "check them before going on."
                    )
                raise failed from None
