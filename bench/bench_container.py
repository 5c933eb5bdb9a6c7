"""Container workspaces beside their floors: ``exec`` against a bare ``podman exec``, the sandbox's files
against a plain ``HostFilesystem``, and snapshot + restore of a 10,000-file workspace per strategy.

- exec: the round trip of ``true`` through ``ContainerSandbox.exec`` (output capture, the process-group
  prologue) against ``podman exec NAME true`` run as a subprocess — the floor any sandbox pays.
- files: 2,000 small writes and reads through ``sandbox.filesystem`` against ``HostFilesystem`` on a plain
  directory on the same disk (target: at most 1.05 times).
- exec journal: what journaling a command costs (the stat-manifest walk before and after it, and keeping the
  files' content the first time) in workspaces of 1,000 and 10,000 files: µs per file, and a journaled exec of
  ``true`` against the same exec unjournaled.
- snapshots: take one snapshot of 10,000 files, change 20 of them from inside the container, restore;
  for ``copy``, ``overlay``, ``container_commit``, and ``reflink`` on a loop-mounted XFS image (root).

Run: ``python bench/bench_container.py [--execs 200] [--files 2000] [--snapshot-files 10000]
[--journal-files 1000 10000] [--only exec_journal]``.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from _workload import make_content

from workspacefs import HostFilesystem
from workspacefs.backends.container import ContainerSandbox
from workspacefs.testing._containers import busybox_image


def _latencies(action: Callable[[], object], count: int) -> list[float]:
    found = []
    for _ in range(count):
        started = time.perf_counter()
        action()
        found.append(time.perf_counter() - started)
    return found


def _row(label: str, seconds: list[float]) -> str:
    ordered = sorted(seconds)
    p95 = ordered[int(len(ordered) * 0.95) - 1]
    return f"{label:<28}{statistics.median(seconds) * 1000:10.1f}{p95 * 1000:10.1f}"


def bench_exec(image: str, count: int) -> None:
    with ContainerSandbox(image) as sandbox:
        bare = _latencies(lambda: subprocess.run(["podman", "exec", sandbox.name, "true"], check=True), count)
        ours = _latencies(lambda: sandbox.exec(["true"]), count)
    print(f"exec round trip of `true`, {count} times       median ms     p95 ms")
    print(_row("podman exec (subprocess)", bare))
    print(_row("ContainerSandbox.exec", ours))
    print(f"{'ratio (median)':<28}{statistics.median(ours) / statistics.median(bare):10.2f}\n")


def _journal_case(image: str, count: int, place: Path, execs: int) -> None:
    """One workspace of ``count`` small files: the first journaled exec (keeps every file), then the steady state."""
    workspace = place / f"journal-{count}"
    workspace.mkdir()
    _fill(workspace, count)
    time.sleep(2.1)  # past the racy window: files this fresh are hashed again after every command
    with ContainerSandbox(image, host_dir=workspace, snapshot_dir=place / f"journal-{count}-s") as sandbox:
        fs = sandbox.filesystem

        def plain_true() -> object:
            return sandbox._run(["true"], workdir=sandbox.workdir, timeout=120, env=None, stdin=None, max_output=2048)

        plain_true()  # a container's first exec is slower: not the journal's cost
        started = time.perf_counter()
        sandbox.exec(["true"])
        first = time.perf_counter() - started
        assert fs._commands is not None
        assert fs._changes is not None
        recorder, journal = fs._commands, fs._changes
        walks = _latencies(lambda: recorder.changes(fs._tree, journal, recorder.before(fs._tree, journal), *_NONE), 20)
        read = recorder.before(fs._tree, journal).read
        plain, ours = [], []
        for _ in range(execs):  # interleaved: a busy machine slows both alike
            plain += _latencies(plain_true, 1)
            ours += _latencies(lambda: sandbox.exec(["true"]), 1)
    walk = statistics.median(walks)
    print(f"{count:>6} files: first exec of `true` (keeps every file) {first * 1000:8.1f} ms")
    print(f"{'':14}manifests before+after {walk * 1000:8.1f} ms, {walk / count * 1e6:6.1f} µs/file, files read: {read}")
    print(f"{'':14}exec `true` plain {statistics.median(plain) * 1000:8.1f} ms, journaled ", end="")
    print(f"{statistics.median(ours) * 1000:8.1f} ms, ratio {statistics.median(ours) / statistics.median(plain):5.2f}")


_NONE = (lambda _: (None, 0), {})
"""A stand-in ``observe`` and no concurrent writes: the walk's cost alone (nothing changed, nothing is read)."""


def bench_exec_journal(image: str, sizes: list[int], execs: int) -> None:
    print(f"exec journal (median of 20 walks, {execs} execs)")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as place:
        for count in sizes:
            _journal_case(image, count, Path(place), execs)
    print()


def _files(fs: HostFilesystem, count: int) -> tuple[float, float]:
    content = make_content(1)
    started = time.perf_counter()
    for index in range(count):
        fs.write_bytes(f"d{index % 20}/f{index}.txt", content)
    written = time.perf_counter() - started
    started = time.perf_counter()
    for index in range(count):
        fs.read_bytes(f"d{index % 20}/f{index}.txt")
    return written / count * 1e6, (time.perf_counter() - started) / count * 1e6


def bench_files(image: str, count: int, rounds: int = 3) -> None:
    plain_best, ours_best = (float("inf"), float("inf")), (float("inf"), float("inf"))
    for _ in range(rounds):
        with tempfile.TemporaryDirectory(dir="/var/tmp") as plain, tempfile.TemporaryDirectory(dir="/var/tmp") as mine:
            with HostFilesystem(plain, snapshot_dir=Path(plain).with_name(Path(plain).name + "-s")) as fs:
                plain_best = tuple(map(min, plain_best, _files(fs, count)))  # type: ignore[assignment]
            with ContainerSandbox(
                image, host_dir=mine, snapshot_dir=Path(mine).with_name(Path(mine).name + "-s")
            ) as sb:
                ours_best = tuple(map(min, ours_best, _files(sb.filesystem, count)))  # type: ignore[assignment]
    print(f"small files ({count} of 1 KiB, best of {rounds}), µs per file    write      read")
    print(f"{'HostFilesystem (plain dir)':<44}{plain_best[0]:10.1f}{plain_best[1]:10.1f}")
    print(f"{'sandbox.filesystem':<44}{ours_best[0]:10.1f}{ours_best[1]:10.1f}")
    print(f"{'ratio':<44}{ours_best[0] / plain_best[0]:10.2f}{ours_best[1] / plain_best[1]:10.2f}\n")


@contextmanager
def _xfs() -> Iterator[Path | None]:
    if shutil.which("mkfs.xfs") is None:
        yield None
        return
    base = Path(tempfile.mkdtemp(prefix="wsfs-bench-xfs-"))
    image, mount = base / "xfs.img", base / "mnt"
    mount.mkdir()
    with open(image, "wb") as handle:
        handle.truncate(1024 * 1024 * 1024)
    made = subprocess.run(["mkfs.xfs", "-q", str(image)], capture_output=True, check=False).returncode == 0
    mounted = made and subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=False).returncode == 0
    try:
        yield mount if mounted else None
    finally:
        if mounted:
            subprocess.run(["umount", "--lazy", str(mount)], check=False)
        shutil.rmtree(base, ignore_errors=True)


def _fill(root: Path, count: int) -> None:
    for index in range(count):
        directory = root / f"d{index % 100}"
        directory.mkdir(exist_ok=True)
        (directory / f"f{index}").write_text(f"file {index}\n")


def _snapshot_case(image: str, strategy: str, count: int, place: Path) -> tuple[float, float]:
    """Snapshot a workspace of ``count`` files (for overlay: a base layer of them), change 20 inside, restore."""
    workspace, snapshots = place / f"ws-{strategy}", place / f"snaps-{strategy}"
    workspace.mkdir()
    _fill(workspace, count)
    time.sleep(2.1)  # past the 2 s "racy" window: files this fresh are compared by content, as git does
    with ContainerSandbox(image, host_dir=workspace, snapshot_strategy=strategy, snapshot_dir=snapshots) as sandbox:
        started = time.perf_counter()
        taken = sandbox.filesystem.snapshot()
        took = time.perf_counter() - started
        sandbox.exec("for i in $(seq 0 19); do echo changed > d$((i % 100))/f$i; done")
        started = time.perf_counter()
        sandbox.filesystem.restore(taken)
        back = time.perf_counter() - started
        sandbox.filesystem.delete_snapshot(taken)  # its data (and a commit's image) go with the sandbox
        return took, back


def bench_snapshots(image: str, count: int) -> None:
    print(f"snapshot + restore after 20 changes, {count} files       snapshot s   restore s")
    with tempfile.TemporaryDirectory(dir="/var/tmp") as place:
        for strategy in ("copy", "overlay", "container_commit"):
            took, back = _snapshot_case(image, strategy, count, Path(place))
            print(f"{strategy:<50}{took:10.3f}{back:12.3f}")
    with _xfs() as xfs:
        if xfs is None:
            print("reflink: needs root and xfsprogs for a loop-mounted XFS image")
            return
        took, back = _snapshot_case(image, "reflink", count, xfs)
        print(f"{'reflink (XFS loop mount)':<50}{took:10.3f}{back:12.3f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--execs", type=int, default=200)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--snapshot-files", type=int, default=10_000)
    parser.add_argument("--journal-files", type=int, nargs="+", default=[1000, 10_000])
    parser.add_argument("--only", choices=("exec", "files", "exec_journal", "snapshots"))
    arguments = parser.parse_args()
    image = busybox_image()
    wanted = {arguments.only} if arguments.only else {"exec", "files", "exec_journal", "snapshots"}
    if "exec" in wanted:
        bench_exec(image, arguments.execs)
    if "files" in wanted:
        bench_files(image, arguments.files)
    if "exec_journal" in wanted:
        bench_exec_journal(image, arguments.journal_files, min(arguments.execs, 50))
    if "snapshots" in wanted:
        bench_snapshots(image, arguments.snapshot_files)


if __name__ == "__main__":
    main()
