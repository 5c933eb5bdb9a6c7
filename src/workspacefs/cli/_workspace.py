"""Whole-workspace commands: ``snapshot create|list|restore|diff`` and ``export``/``import`` as tar.

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
from workspacefs.cli._output import EXIT_INVALID, EXIT_NOT_FOUND, emit, fail, fs_option, json_option, open_fs, reported
from workspacefs.protocol import Filesystem, SnapshotableFilesystem
from workspacefs.results import FilesystemSnapshot

__all__ = ["register"]


def _snapshotable(fs: Filesystem) -> SnapshotableFilesystem:
    if not fs.capabilities.snapshots:
        fail(EXIT_INVALID, "unsupported", f"{fs!r} cannot take snapshots")
    return cast(SnapshotableFilesystem, fs)  # the capability promises the protocol


def _stored(fs: SnapshotableFilesystem) -> list[FilesystemSnapshot]:
    return list(fs.snapshots())


def _find(fs: SnapshotableFilesystem, wanted: str) -> FilesystemSnapshot:
    """A snapshot by id, unique id prefix, or tag (the newest with that tag)."""
    found = _stored(fs)
    exact = [s for s in found if str(s.snapshot_id) == wanted]
    prefixed = [s for s in found if str(s.snapshot_id).startswith(wanted)] if len(wanted) >= 4 else []
    tagged = [s for s in found if s.tag == wanted]
    for candidates in (exact, prefixed if len(prefixed) == 1 else [], tagged[-1:]):
        if candidates:
            return candidates[0]
    return fail(EXIT_NOT_FOUND, "snapshot_not_found", f"no snapshot {wanted!r} (workspacefs snapshot list shows them)")


def _snapshot_json(snapshot: FilesystemSnapshot) -> dict[str, Any]:
    return {
        "id": str(snapshot.snapshot_id),
        "tag": snapshot.tag,
        "created_at": snapshot.created_at.isoformat(),
        "file_count": snapshot.file_count,
        "total_bytes": snapshot.total_bytes,
    }


@click.group("snapshot", short_help="Create, list, restore and diff snapshots.")
def snapshot() -> None:
    """Take, list, restore and compare snapshots of a workspace."""


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
                f"{item.snapshot_id}  {item.created_at:%Y-%m-%d %H:%M:%S}  {item.file_count:>6} files  {item.tag or ''}"
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
@fs_option
@json_option
@reported
def import_(source: IO[bytes], path: str, progress: bool | None, fs_url: str, as_json: bool) -> None:
    """Unpack a tar stream into the workspace (all or nothing where the backend snapshots)."""
    meter = _Progress(_progress_enabled(progress), "importing")
    stats = import_tar(open_fs(fs_url), source, path=path, progress=meter)
    meter.finish()
    summary = {"files": stats.files, "directories": stats.directories, "bytes": stats.bytes}
    emit(
        as_json,
        summary,
        lambda: click.echo(f"imported {_summary(stats)}", err=True),
    )


def _summary(stats: ArchiveStats) -> str:
    def count(number: int, noun: str) -> str:
        return f"{number} {noun}" if number == 1 else f"{number} {noun}s"

    return f"{count(stats.files, 'file')}, {count(stats.directories, 'folder')}, {count(stats.bytes, 'byte')}"


def _dump(value: Any) -> str:
    import json  # noqa: PLC0415

    return json.dumps(value)


def register(group: click.Group) -> None:
    """Add the workspace commands to the ``workspacefs`` group."""
    group.add_command(snapshot)
    group.add_command(export)
    group.add_command(import_, "import")
