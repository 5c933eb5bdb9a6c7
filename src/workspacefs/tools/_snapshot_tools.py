"""``snapshot``, ``restore`` and ``diff``: checkpoints a model can take and return to.

Offered where the filesystem can snapshot (``SNAPSHOT_TOOLS``; see ``tools_for``). Snapshots the model
takes are remembered in the context's ``snapshots`` ledger (an in-memory snapshot exists nowhere else);
those a backend keeps (a host snapshot dir, the SQL database) are found there too. A snapshot is named
by its id, its tag, or a unique prefix of 8 or more characters of its id.
"""

from __future__ import annotations

from typing import Any, cast

from pydantic import Field

from workspacefs.errors import AmbiguousSnapshotError, SnapshotError, SnapshotNotFoundError
from workspacefs.protocol import SnapshotableFilesystem
from workspacefs.results import FilesystemSnapshot
from workspacefs.snapshots import find_snapshot
from workspacefs.tools._core import Tool, ToolContext, ToolResult
from workspacefs.tools._file_tools import _Params
from workspacefs.tools._messages import failure, failure_from, human_size, plural

__all__ = ["DIFF", "RESTORE", "SNAPSHOT"]

_DIFF_SHOWN = 200
_PREFIX_CHARACTERS = 8


def _snapshotable(context: ToolContext) -> SnapshotableFilesystem | ToolResult[Any]:
    fs = context.filesystem
    if fs is None or not fs.capabilities.snapshots:
        return failure(
            "This workspace cannot take snapshots, so snapshot, restore and diff are unavailable.", "unsupported"
        )
    return cast(SnapshotableFilesystem, fs)  # the capability promises the protocol


def _known(fs: SnapshotableFilesystem, context: ToolContext) -> list[FilesystemSnapshot]:
    """Snapshots of ``fs`` the model can name: its own, then those the backend keeps."""
    found = {str(s.snapshot_id): s for s in context.snapshots.all()}
    for kept in fs.snapshots():
        found.setdefault(str(kept.snapshot_id), kept)
    return sorted(found.values(), key=lambda s: s.created_at)


def _find(fs: SnapshotableFilesystem, context: ToolContext, name: str) -> FilesystemSnapshot | ToolResult[Any]:
    known = _known(fs, context)
    try:
        return find_snapshot(known, name, min_prefix=_PREFIX_CHARACTERS)
    except AmbiguousSnapshotError as exc:
        return failure(f"{exc}.", "snapshot_ambiguous")
    except SnapshotNotFoundError:
        pass
    if not known:
        return failure(
            f"There is no snapshot {name!r}: none has been taken yet. Call snapshot first.", "snapshot_not_found"
        )
    listed = ", ".join(f"{s.snapshot_id}" + (f" ({s.tag})" if s.tag else "") for s in known[-5:])
    return failure(f"There is no snapshot {name!r}. Recent ones: {listed}.", "snapshot_not_found")


def _named(context: ToolContext, name: str) -> tuple[SnapshotableFilesystem, FilesystemSnapshot] | ToolResult[Any]:
    """The context's filesystem and the snapshot ``name`` refers to, or the failure explaining why not."""
    fs = _snapshotable(context)
    if isinstance(fs, ToolResult):
        return fs
    found = _find(fs, context, name)
    return found if isinstance(found, ToolResult) else (fs, found)


def _label(snapshot: FilesystemSnapshot) -> str:
    return f"{snapshot.snapshot_id}" + (f" (tag '{snapshot.tag}')" if snapshot.tag else "")


# --- snapshot -------------------------------------------------------------------------------------


class SnapshotParams(_Params):
    tag: str | None = Field(None, max_length=200, description="A name to find it by later, e.g. 'before refactor'.")


def snapshot(params: SnapshotParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Take a snapshot of the whole workspace."""
    fs = _snapshotable(context)
    if isinstance(fs, ToolResult):
        return fs
    try:
        taken = fs.snapshot(tag=params.tag)
    except (OSError, ValueError, SnapshotError) as exc:
        return failure_from(exc, fs, ".", verb="snapshotted")
    context.snapshots.add(taken)
    size = f"{plural(taken.file_count, 'file')}, {human_size(taken.total_bytes)}"
    return ToolResult(
        f"Took snapshot {_label(taken)}: {size}. Return to it with restore(snapshot_id='{taken.snapshot_id}').",
        {"snapshot_id": str(taken.snapshot_id), "tag": taken.tag, "files": taken.file_count},
    )


# --- restore --------------------------------------------------------------------------------------


class RestoreParams(_Params):
    snapshot_id: str = Field(max_length=200, description="The snapshot's id (or its tag) as snapshot returned it.")


def restore(params: RestoreParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Put the whole workspace back as it was when the snapshot was taken."""
    named = _named(context, params.snapshot_id)
    if isinstance(named, ToolResult):
        return named
    fs, target = named
    try:
        undone = fs.diff(target)
        fs.restore(target)
    except (OSError, ValueError, SnapshotError) as exc:
        return failure_from(exc, fs, ".", verb="restored")
    context.read_state.forget(fs, ".")  # every file may differ now: read again before writing
    changed = len(undone.added) + len(undone.modified) + len(undone.deleted)
    return ToolResult(
        f"Restored snapshot {_label(target)}: {plural(changed, 'file')} changed back "
        f"({len(undone.added)} removed, {len(undone.modified)} reverted, {len(undone.deleted)} brought back). "
        "Read files again before editing them.",
        {"snapshot_id": str(target.snapshot_id), "changed": changed},
    )


# --- diff -----------------------------------------------------------------------------------------


class DiffParams(_Params):
    snapshot_id: str = Field(max_length=200, description="The snapshot to compare from (its id or tag).")
    other_snapshot_id: str | None = Field(
        None, max_length=200, description="Compare to this snapshot instead of the current files."
    )


def diff(params: DiffParams, *, context: ToolContext) -> ToolResult[dict[str, object]]:
    """Files added (A), modified (M) and deleted (D) since a snapshot, or between two snapshots."""
    named = _named(context, params.snapshot_id)
    if isinstance(named, ToolResult):
        return named
    fs, base = named
    other = _find(fs, context, params.other_snapshot_id) if params.other_snapshot_id else None
    if isinstance(other, ToolResult):
        return other
    try:
        changes = fs.diff(base, other)
    except (OSError, ValueError, SnapshotError) as exc:
        return failure_from(exc, fs, ".", verb="compared")
    until = f"snapshot {_label(other)}" if other else "now"
    lines = [f"A {p}" for p in changes.added] + [f"M {p}" for p in changes.modified]
    lines += [f"D {p}" for p in changes.deleted]
    value: dict[str, object] = {
        "added": list(changes.added),
        "modified": list(changes.modified),
        "deleted": list(changes.deleted),
    }
    if not lines:
        return ToolResult(f"Nothing changed from snapshot {_label(base)} to {until}.", value)
    shown = lines[:_DIFF_SHOWN]
    more = f"\n… and {len(lines) - _DIFF_SHOWN} more." if len(lines) > _DIFF_SHOWN else ""
    header = f"From snapshot {_label(base)} to {until}: {plural(len(lines), 'file')} changed."
    return ToolResult(header + "\n" + "\n".join(shown) + more, value)


SNAPSHOT = Tool(
    "snapshot",
    "Take a snapshot of the whole workspace, to return to with restore or compare with diff.",
    SnapshotParams,
    snapshot,
    idempotent=False,
)
RESTORE = Tool(
    "restore",
    "Return the whole workspace to a snapshot: later changes are undone.",
    RestoreParams,
    restore,
    mutating=True,
    destructive=True,
    transactional=False,  # a restore replaces the whole state in one step; a snapshot around it adds nothing
)
DIFF = Tool(
    "diff",
    "List files added, modified and deleted since a snapshot (or between two snapshots).",
    DiffParams,
    diff,
)
