"""``workspacefs merge BASE OURS THEIRS``: a three-way merge of snapshots into a new snapshot.

The three are named as every snapshot command names them (id, tag or unique id prefix), among the snapshots
the workspace can merge (its own, and its forks' where the backend keeps them together). Prints what the
merged snapshot changes relative to OURS and every conflict; ``--apply`` restores the workspace to it.
Exit 0 when clean, 4 (``EXIT_CONFLICT``) when a path conflicted — the snapshot is made either way.
"""

from __future__ import annotations

import sys
from typing import cast

import click

from workspacefs.cli._output import EXIT_CONFLICT, EXIT_INVALID, emit, fail, fs_option, json_option, open_fs, reported
from workspacefs.merge import MergeResult
from workspacefs.protocol import MergeableFilesystem
from workspacefs.snapshots import find_snapshot

__all__ = ["merge"]


def _text(result: MergeResult, applied: bool) -> None:
    click.echo(str(result.snapshot.snapshot_id))
    for mark, paths in (("A", result.added), ("M", result.modified), ("D", result.deleted)):
        for path in paths:
            click.echo(f"{mark} {path}", err=True)
    for conflict in result.conflicts:
        click.echo(f"C {conflict.path}  ({conflict.kind}) {conflict.message}", err=True)
        for hunk in conflict.hunks:
            click.echo(f"    ours line {hunk.ours_start}, theirs line {hunk.theirs_start}", err=True)
    summary = "clean" if result.clean else f"{len(result.conflicts)} conflict(s)"
    click.echo(f"merged: {summary}{'; applied' if applied else ''}", err=True)


@click.command("merge", short_help="Three-way merge of snapshots into a new snapshot.")
@click.argument("base")
@click.argument("ours")
@click.argument("theirs")
@click.option("--markers", is_flag=True, help="Write git-style conflict markers into text files in conflict.")
@click.option("--apply", "apply_result", is_flag=True, help="Restore the workspace to the merged snapshot.")
@click.option("--tag", help="A tag for the merged snapshot.")
@fs_option
@json_option
@reported
def merge(
    *, base: str, ours: str, theirs: str, markers: bool, apply_result: bool, tag: str | None, fs_url: str, as_json: bool
) -> None:
    """Merge THEIRS into OURS from their common BASE (each an id, a tag or a unique id prefix) into a new
    snapshot; prints its id on stdout, and on stderr what it changes relative to OURS (A/M/D) and each
    conflict (C). A conflicting path keeps OURS unless --markers. Exit 4 when anything conflicted."""
    fs = open_fs(fs_url)
    if not fs.capabilities.merge:
        fail(EXIT_INVALID, "unsupported", f"{fs!r} cannot merge snapshots")
    merging = cast(MergeableFilesystem, fs)  # the capability promises the protocol
    kept = list(merging.mergeable_snapshots())
    named = [find_snapshot(kept, wanted) for wanted in (base, ours, theirs)]
    result = merging.merge(*named, markers=markers, tag=tag)
    if apply_result:
        merging.restore(result.snapshot)
    emit(as_json, {**result.to_dict(), "applied": apply_result}, lambda: _text(result, apply_result))
    if not result.clean:
        sys.exit(EXIT_CONFLICT)
