"""Whole-workspace commands: ``snapshot create|list|restore|diff|delete|prune`` and ``export``/``import`` as tar.

``workspacefs export --fs A | workspacefs import --fs B`` moves a workspace between any two backends,
streamed. Snapshots persist where the backend keeps them (a host directory's snapshot dir, the SQL
database); an in-memory workspace lives only as long as one command.
"""

from __future__ import annotations

import sys
import time
from typing import IO, Any, cast

import click

from workspacefs.archive import ArchiveStats, export_tar, import_tar
from workspacefs.cli._output import (
    EXIT_INVALID,
    emit,
    fail,
    fs_option,
    json_option,
    open_fs,
    reported,
    writing_fs_option,
)
from workspacefs.protocol import Filesystem, SnapshotableFilesystem
from workspacefs.results import FilesystemSnapshot
from workspacefs.snapshots import SnapshotRetentionPolicy, find_snapshot, select_prunable

__all__ = ["register"]


def _snapshotable(fs: Filesystem) -> SnapshotableFilesystem:
    if not fs.capabilities.snapshots:
        fail(EXIT_INVALID, "unsupported", f"{fs!r} cannot take snapshots")
    return cast(SnapshotableFilesystem, fs)  # the capability promises the protocol


def _stored(fs: SnapshotableFilesystem) -> list[FilesystemSnapshot]:
    return list(fs.snapshots())


def _find(fs: SnapshotableFilesystem, wanted: str) -> FilesystemSnapshot:
    """A snapshot by id, tag (the newest with it) or unique id prefix: the rule the REST API and tools share."""
    return find_snapshot(_stored(fs), wanted)


def _snapshot_json(snapshot: FilesystemSnapshot) -> dict[str, Any]:
    return {
        "id": str(snapshot.snapshot_id),
        "tag": snapshot.tag,
        "created_at": snapshot.created_at.isoformat(),
        "file_count": snapshot.file_count,
        "total_bytes": snapshot.total_bytes,
    }


@click.group("snapshot", short_help="Create, list, restore, diff, delete and prune snapshots.")
def snapshot() -> None:
    """Take, list, restore, compare and delete snapshots of a workspace. A snapshot is named by its id,
    its tag (the newest with that tag) or a unique prefix of its id (4+ characters)."""


@snapshot.command("create")
@click.option("--tag", help="A name to find it by later.")
@fs_option
@json_option
@reported
def snapshot_create(tag: str | None, fs_url: str, as_json: bool) -> None:
    """Snapshot the workspace; prints the new snapshot's id."""
    taken = _snapshotable(open_fs(fs_url)).snapshot(tag=tag)
    emit(as_json, _snapshot_json(taken), lambda: click.echo(str(taken.snapshot_id)))


@snapshot.command("list")
@fs_option
@json_option
@reported
def snapshot_list(fs_url: str, as_json: bool) -> None:
    """List the workspace's snapshots, oldest first."""
    found = _stored(_snapshotable(open_fs(fs_url)))

    def text() -> None:
        for item in found:
            click.echo(
                f"{item.snapshot_id}  {item.created_at:%Y-%m-%d %H:%M:%S}  {_count(item.file_count, 'file'):>11}  "
                f"{item.tag or ''}".rstrip()
            )

    emit(as_json, [_snapshot_json(s) for s in found], text)


@snapshot.command("restore")
@click.argument("snapshot_id")
@fs_option
@json_option
@reported
def snapshot_restore(snapshot_id: str, fs_url: str, as_json: bool) -> None:
    """Put the workspace back as it was (SNAPSHOT_ID: an id, a unique prefix of one, or a tag)."""
    fs = _snapshotable(open_fs(fs_url))
    target = _find(fs, snapshot_id)
    fs.restore(target)
    emit(as_json, _snapshot_json(target), lambda: click.echo(f"restored {target.snapshot_id}", err=True))


@snapshot.command("diff")
@click.argument("snapshot_id")
@click.argument("other", required=False)
@fs_option
@json_option
@reported
def snapshot_diff(snapshot_id: str, other: str | None, fs_url: str, as_json: bool) -> None:
    """Files added (A), modified (M) and deleted (D) since a snapshot, or between two."""
    fs = _snapshotable(open_fs(fs_url))
    changes = fs.diff(_find(fs, snapshot_id), _find(fs, other) if other else None)

    def text() -> None:
        for mark, paths in (("A", changes.added), ("M", changes.modified), ("D", changes.deleted)):
            for path in paths:
                click.echo(f"{mark} {path}")

    value = {"added": list(changes.added), "modified": list(changes.modified), "deleted": list(changes.deleted)}
    emit(as_json, {**value, "unchanged_count": changes.unchanged_count}, text)


@snapshot.command("delete")
@click.argument("snapshot_ids", metavar="SNAPSHOT...", nargs=-1, required=True)
@fs_option
@json_option
@reported
def snapshot_delete(snapshot_ids: tuple[str, ...], fs_url: str, as_json: bool) -> None:
    """Delete snapshots (by id, tag or id prefix); content only they held is freed. All are found before any
    is deleted, so a typo deletes nothing."""
    fs = _snapshotable(open_fs(fs_url))
    doomed = {str(s.snapshot_id): s for s in (_find(fs, wanted) for wanted in snapshot_ids)}
    for item in doomed.values():
        fs.delete_snapshot(item)
    emit(
        as_json,
        {"deleted": [_snapshot_json(s) for s in doomed.values()]},
        lambda: click.echo(f"deleted {_count(len(doomed), 'snapshot')}", err=True),
    )


@snapshot.command("prune")
@click.option("--keep", type=click.IntRange(min=0), required=True, help="How many of the newest snapshots to keep.")
@click.option("--include-tagged", is_flag=True, help="Count and delete tagged snapshots too (kept by default).")
@click.option("--dry-run", is_flag=True, help="Only list what would be deleted.")
@fs_option
@json_option
@reported
def snapshot_prune(keep: int, include_tagged: bool, dry_run: bool, fs_url: str, as_json: bool) -> None:
    """Delete all but the newest --keep snapshots (tagged ones are kept and not counted, unless
    --include-tagged); prints what it deleted, oldest first."""
    fs = _snapshotable(open_fs(fs_url))
    doomed = select_prunable(_stored(fs), SnapshotRetentionPolicy(max_count=keep, keep_tagged=not include_tagged))
    if not dry_run:
        for item in doomed:
            fs.delete_snapshot(item)

    def text() -> None:
        for item in doomed:
            click.echo(f"{item.snapshot_id}  {item.created_at:%Y-%m-%d %H:%M:%S}  {item.tag or ''}".rstrip())
        verb = "would delete" if dry_run else "deleted"
        click.echo(f"{verb} {_count(len(doomed), 'snapshot')}", err=True)

    emit(as_json, {"deleted" if not dry_run else "would_delete": [_snapshot_json(s) for s in doomed]}, text)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


class _Progress:
    """A byte counter on stderr for long transfers (only when stderr is a terminal, or when asked)."""

    def __init__(self, enabled: bool, verb: str) -> None:
        self.enabled = enabled
        self.verb = verb
        self.last = 0.0

    def __call__(self, done: int, total: int | None) -> None:
        now = time.monotonic()
        if not self.enabled or (now - self.last < 0.2 and done != total):
            return
        self.last = now
        shown = f"{done / 2**20:,.1f} MiB"
        if total:
            width = 30
            filled = int(width * done / total) if total else width
            shown = f"[{'#' * filled}{'.' * (width - filled)}] {shown} of {total / 2**20:,.1f} MiB"
        click.echo(f"\r{self.verb} {shown}", nl=False, err=True)

    def finish(self) -> None:
        if self.enabled:
            click.echo(err=True)


def _progress_enabled(choice: bool | None) -> bool:
    return sys.stderr.isatty() if choice is None else choice


@click.command("export", short_help="Write the workspace as a tar stream.")
@click.option("-o", "--output", type=click.File("wb"), default="-", help="Tar file to write (default: stdout).")
@click.option("--path", default="/", show_default=True, help="Export only this directory.")
@click.option("--gzip", is_flag=True, help="Compress with gzip.")
@click.option("--progress/--no-progress", default=None, help="Show progress on stderr (default: on a terminal).")
@fs_option
@json_option
@reported
def export(*, output: IO[bytes], path: str, gzip: bool, progress: bool | None, fs_url: str, as_json: bool) -> None:
    """Write the workspace as a tar stream (import it anywhere with workspacefs import)."""
    if output is sys.stdout.buffer and sys.stdout.isatty():
        raise click.UsageError("refusing to write a tar to a terminal; redirect stdout or use -o FILE")
    meter = _Progress(_progress_enabled(progress), "exporting")
    stats = export_tar(open_fs(fs_url), output, path=path, compression="gz" if gzip else "", progress=meter)
    output.flush()
    meter.finish()
    summary = {"files": stats.files, "directories": stats.directories, "bytes": stats.bytes}
    if as_json:
        click.echo(_dump(summary), err=True)  # stdout carries the tar
    else:
        click.echo(f"exported {_summary(stats)}", err=True)


@click.command("import", short_help="Unpack a tar stream into the workspace.")
@click.option("-i", "--input", "source", type=click.File("rb"), default="-", help="Tar file to read (default: stdin).")
@click.option("--path", default="/", show_default=True, help="Import under this directory.")
@click.option("--progress/--no-progress", default=None, help="Show progress on stderr (default: on a terminal).")
@writing_fs_option
@json_option
@reported
def import_(source: IO[bytes], path: str, progress: bool | None, fs_url: str, as_json: bool) -> None:
    """Unpack a tar stream into the workspace (all or nothing where the backend snapshots); makes the workspace
    if it does not exist."""
    if source is sys.stdin.buffer and sys.stdin.isatty():
        raise click.UsageError("refusing to read a tar from a terminal; pipe one in or use -i FILE")
    meter = _Progress(_progress_enabled(progress), "importing")
    stats = import_tar(open_fs(fs_url, create=True), source, path=path, progress=meter)
    meter.finish()
    summary = {"files": stats.files, "directories": stats.directories, "bytes": stats.bytes}
    emit(
        as_json,
        summary,
        lambda: click.echo(f"imported {_summary(stats)}", err=True),
    )


def _summary(stats: ArchiveStats) -> str:
    return f"{_count(stats.files, 'file')}, {_count(stats.directories, 'folder')}, {_count(stats.bytes, 'byte')}"


def _dump(value: Any) -> str:
    import json  # noqa: PLC0415

    return json.dumps(value)


def register(group: click.Group) -> None:
    """Add the workspace commands to the ``workspacefs`` group."""
    group.add_command(snapshot)
    group.add_command(export)
    group.add_command(import_, "import")
