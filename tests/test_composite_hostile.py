"""A composite whose mounts disagree: a move or copy over a tree of another mount that the target refuses part
way (its quota) leaves the target's tree as it was, on memory, host and SQLite targets."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from workspacefs import HostFilesystem, InMemoryFilesystem, Quota, QuotaExceededError, SqlFilesystem
from workspacefs.backends.composite import CompositeFilesystem
from workspacefs.protocol import Filesystem

_count = itertools.count()


@pytest.fixture(params=["memory", "host", "sqlite"])
def target(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[Filesystem]:
    index, quota = next(_count), Quota(max_bytes=100)
    fs: Filesystem
    if request.param == "memory":
        fs = InMemoryFilesystem(quota=quota)
    elif request.param == "host":
        (fast_tmp / f"target-{index}").mkdir()
        fs = HostFilesystem(fast_tmp / f"target-{index}", snapshot_dir=fast_tmp / f"snap-{index}", quota=quota)
    else:
        fs = SqlFilesystem(f"sqlite:///{fast_tmp / 'targets.db'}", f"target-{index}", quota=quota)
    fs.write("d/keep.txt", "k" * 30)
    fs.write("d/sub/deep.txt", "deep")
    fs.mkdir("d/empty")
    yield fs
    getattr(fs, "close", lambda: None)()


def _tree(fs: Filesystem) -> dict[str, bytes | None]:
    return {e.path: None if e.is_directory else fs.read_bytes(e.path).content for e in fs.walk(".")}


@pytest.mark.parametrize("verb", ["move", "copy"])
def test_a_tree_over_a_tree_of_another_mount_refused_part_way_leaves_it_whole(target: Filesystem, verb: str) -> None:
    source = InMemoryFilesystem()
    for name in ("one.txt", "two.txt", "three.txt"):
        source.write(f"dir/{name}", name[0] * 45)  # 135 bytes: the second file passes the target's 100
    composite = CompositeFilesystem({"/a": source, "/b": target})
    before, origin = _tree(target), _tree(source)
    with pytest.raises(QuotaExceededError):
        getattr(composite, verb)("a/dir", "b/d", overwrite=True)
    assert _tree(target) == before
    assert _tree(source) == origin
