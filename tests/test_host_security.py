"""A hostile model against HostFilesystem: every protocol operation against every trap.

The outside world is a sibling directory sharing the root's prefix (``ws`` and ``ws-evil``, the
shape of CVE-2025-53110) holding a secret, reached through ``..``, absolute paths, and symlinks
(CVE-2025-53109) to a file, a directory, an intermediate component and the sibling. Whatever the
operation does — fail or succeed — the secret is never returned and the outside never changes.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import signal
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from workspacefs import HostFilesystem

SECRET = b"TOP SECRET: the outside must never leak\n"


def _drain(reader: Any) -> bytes:
    with reader:
        return b"".join(reader)


def _drain_text(fs: HostFilesystem, path: str) -> str:
    with fs.open_text(path) as reader:
        return "".join(reader)


def _stream_write(fs: HostFilesystem, path: str) -> None:
    with fs.open_write(path) as writer:
        writer.write(b"streamed")


OPERATIONS: dict[str, Callable[[HostFilesystem, str], Any]] = {
    "read": lambda fs, p: fs.read(p).content,
    "read_bytes": lambda fs, p: fs.read_bytes(p).content,
    "open_read": lambda fs, p: _drain(fs.open_read(p)),
    "open_text": _drain_text,
    "exists": lambda fs, p: fs.exists(p),
    "stat": lambda fs, p: fs.stat(p),
    "list": lambda fs, p: fs.list(p),
    "glob": lambda fs, p: fs.glob("**", path=p),
    "grep": lambda fs, p: fs.grep("SECRET", path=p),
    "write": lambda fs, p: fs.write(p, "overwritten"),
    "write_create": lambda fs, p: fs.write(p, "created", mode="create"),
    "append": lambda fs, p: fs.write(p, "appended", mode="append"),
    "write_below": lambda fs, p: fs.write(p + "/planted.txt", "planted"),
    "open_write": _stream_write,
    "mkdir": lambda fs, p: fs.mkdir(p + "/newdir"),
    "delete": lambda fs, p: fs.delete(p),
    "delete_recursive": lambda fs, p: fs.delete(p, recursive=True),
    "move_from": lambda fs, p: fs.move(p, "moved-here"),
    "move_onto": lambda fs, p: fs.move("inside.txt", p, overwrite=True),
    "copy_from": lambda fs, p: fs.copy(p, "copied-here"),
    "copy_onto": lambda fs, p: fs.copy("inside.txt", p, overwrite=True),
}

TRAPS = {
    "dotdot": "../ws-evil/secret.txt",
    "dotdot_dir": "../ws-evil",
    "deep_dotdot": "sub/../../ws-evil/secret.txt",
    "absolute": "/etc/passwd",
    "absolute_sibling": "{outside}/secret.txt",
    "file_link": "file-link",
    "dir_link": "dir-link/secret.txt",
    "dir_link_itself": "dir-link",
    "intermediate_link": "sub/inner/secret.txt",
    "relative_sibling_link": "sibling/secret.txt",
    "link_in_deep_path": "sub/inner/deeper/x.txt",
}


def _fingerprint(directory: Path) -> dict[str, str]:
    """Every entry below ``directory`` with a content hash, links read as links."""
    found = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            if path.is_symlink():
                found[str(path)] = "link:" + os.readlink(path)
            elif path.is_file():
                found[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
            else:
                found[str(path)] = "dir"
    return found


def _contains_secret(value: Any) -> bool:
    return "TOP SECRET" in repr(value)


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[HostFilesystem, Path, Path]]:
    root = tmp_path / "ws"
    outside = tmp_path / "ws-evil"
    (outside / "secretdir").mkdir(parents=True)
    (outside / "secret.txt").write_bytes(SECRET)
    (outside / "secretdir" / "secret.txt").write_bytes(SECRET)
    (root / "sub").mkdir(parents=True)
    (root / "inside.txt").write_text("inside\n")
    os.symlink(outside / "secret.txt", root / "file-link")
    os.symlink(outside, root / "dir-link")
    os.symlink(outside / "secretdir", root / "sub" / "inner")
    os.symlink("../ws-evil", root / "sibling")
    fs = HostFilesystem(root, snapshot_dir=tmp_path / "snapshots")
    yield fs, root, outside
    fs.close()


@pytest.mark.parametrize("trap", sorted(TRAPS))
@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_trap(world: tuple[HostFilesystem, Path, Path], operation: str, trap: str) -> None:
    fs, root, outside = world
    before = _fingerprint(outside)
    path = TRAPS[trap].format(outside=outside)
    try:
        result = OPERATIONS[operation](fs, path)
    except (OSError, ValueError) as exc:
        assert "TOP SECRET" not in str(exc)
        if str(root.parent) not in path:  # a message may echo the caller's own path, nothing more
            assert str(root.parent) not in str(exc), f"host path leaked: {exc}"
    else:
        assert not _contains_secret(result), f"{operation} on {trap} leaked {result!r}"
    assert _fingerprint(outside) == before, f"{operation} on {trap} changed the outside"
    assert (outside / "secret.txt").read_bytes() == SECRET


def test_symlinks_are_invisible_to_listing_glob_and_grep(world: tuple[HostFilesystem, Path, Path]) -> None:
    fs, _, _ = world
    assert [e.name for e in fs.list()] == ["inside.txt", "sub"]
    assert list(fs.list("sub")) == []
    assert [m.path for m in fs.glob("**")] == ["inside.txt"]
    assert list(fs.grep("SECRET")) == []
    assert list(fs.grep("SECRET", path="sub")) == []


def test_touching_a_symlink_raises_permission_error(world: tuple[HostFilesystem, Path, Path]) -> None:
    fs, _, _ = world
    for path in ("file-link", "dir-link", "dir-link/secret.txt", "sub/inner/secret.txt"):
        with pytest.raises(PermissionError):
            fs.read(path)
        with pytest.raises(PermissionError):
            fs.stat(path)
        with pytest.raises(PermissionError):
            fs.write(path, "x")


def test_delete_removes_the_link_not_its_target(world: tuple[HostFilesystem, Path, Path]) -> None:
    fs, root, outside = world
    fs.delete("file-link")
    fs.delete("dir-link", recursive=True)
    assert not os.path.lexists(root / "file-link")
    assert not os.path.lexists(root / "dir-link")
    assert (outside / "secret.txt").read_bytes() == SECRET
    assert (outside / "secretdir" / "secret.txt").read_bytes() == SECRET


def test_recursive_delete_of_a_tree_holding_links_spares_their_targets(
    world: tuple[HostFilesystem, Path, Path],
) -> None:
    fs, root, outside = world
    fs.delete("sub", recursive=True)
    assert not (root / "sub").exists()
    assert (outside / "secretdir" / "secret.txt").read_bytes() == SECRET


def test_prefix_sibling_is_outside(tmp_path: Path) -> None:
    (tmp_path / "allowed").mkdir()
    (tmp_path / "allowed-evil").mkdir()
    (tmp_path / "allowed-evil" / "x.txt").write_text("evil")
    with HostFilesystem(tmp_path / "allowed", snapshot_dir=tmp_path / "s") as fs:
        with pytest.raises(PermissionError):
            fs.read("../allowed-evil/x.txt")
        with pytest.raises(FileNotFoundError):
            fs.read(str(tmp_path / "allowed-evil" / "x.txt"))  # root-relative, not the host's path
        fs.write(str(tmp_path / "allowed-evil" / "y.txt"), "stays inside")
    assert not (tmp_path / "allowed-evil" / "y.txt").exists()
    assert (tmp_path / "allowed" / str(tmp_path).lstrip("/") / "allowed-evil" / "y.txt").exists()


@pytest.mark.parametrize("use_ripgrep", [False, None])
def test_race_swapping_a_directory_for_a_symlink(tmp_path: Path, use_ripgrep: bool | None) -> None:
    """A thread keeps swapping ``box`` between a real directory and a link to the outside."""
    root, outside = tmp_path / "ws", tmp_path / "outside"
    (root / "box").mkdir(parents=True)
    (root / "box" / "data.txt").write_text("inside box\n")
    outside.mkdir()
    (outside / "data.txt").write_bytes(SECRET)
    before = _fingerprint(outside)
    stop = threading.Event()

    def swapper() -> None:
        real, parked = root / "box", root / "box-parked"
        while not stop.is_set():
            try:
                os.rename(real, parked)
                os.symlink(outside, real)
                time.sleep(0)
                os.unlink(real)
                os.rename(parked, real)
            except OSError:
                continue

    leaks: list[str] = []
    thread = threading.Thread(target=swapper, daemon=True)
    with HostFilesystem(root, snapshot_dir=tmp_path / "s", use_ripgrep=use_ripgrep) as fs:
        thread.start()
        deadline = time.monotonic() + 2.0
        rounds = 0
        try:
            while time.monotonic() < deadline:
                rounds += 1
                for action in (
                    lambda: fs.read("box/data.txt").content,
                    lambda: fs.read_bytes("box/data.txt").content,
                    lambda: [e.name for e in fs.list("box")],
                    lambda: [m.line_content for m in fs.grep("SECRET|inside")],
                    lambda: fs.write("box/data.txt", "rewritten inside\n"),
                    lambda: fs.write("box/new.txt", "new\n", mode="append"),
                    lambda: fs.delete("box/new.txt"),
                    lambda: fs.copy("box/data.txt", "copy.txt", overwrite=True),
                ):
                    try:
                        result = action()
                    except OSError:
                        continue
                    if _contains_secret(result):
                        leaks.append(repr(result))
        finally:
            stop.set()
            thread.join()
    assert rounds > 10
    assert not leaks
    assert _fingerprint(outside) == before


class _Alarm:
    """Fails the test instead of hanging if an operation blocks (a FIFO opened without O_NONBLOCK)."""

    def __enter__(self) -> None:
        def fire(signum: int, frame: object) -> None:
            raise TimeoutError("operation blocked")

        self._old = signal.signal(signal.SIGALRM, fire)
        signal.alarm(5)

    def __exit__(self, *exc: object) -> None:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, self._old)


def _special_files(root: Path) -> list[str]:
    os.mkfifo(root / "fifo")
    made = ["fifo"]
    try:
        os.mknod(root / "device", 0o600 | stat.S_IFCHR, os.makedev(1, 3))  # a copy of /dev/null
        made.append("device")
    except PermissionError:
        pass  # not root: the FIFO and the socket still cover the rule
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "socket"))
    server.close()
    made.append("socket")
    return made


@pytest.mark.parametrize("operation", sorted(OPERATIONS))
def test_special_files_are_refused_without_blocking(tmp_path: Path, operation: str) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "inside.txt").write_text("inside\n")
    specials = _special_files(root)
    with HostFilesystem(root, snapshot_dir=tmp_path / "s") as fs, _Alarm():
        for name in specials:
            with contextlib.suppress(OSError, ValueError):
                OPERATIONS[operation](fs, name)
            if operation not in ("delete", "delete_recursive", "move_onto", "copy_onto"):
                kind = os.lstat(root / name).st_mode
                assert not stat.S_ISREG(kind), f"{operation} replaced the special file {name}"


def test_special_files_are_skipped_by_listing_and_search(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "inside.txt").write_text("inside\n")
    _special_files(root)
    with HostFilesystem(root, snapshot_dir=tmp_path / "s") as fs, _Alarm():
        assert [e.name for e in fs.list()] == ["inside.txt"]
        assert [m.path for m in fs.glob("**")] == ["inside.txt"]
        assert [m.path for m in fs.grep("inside")] == ["inside.txt"]
        for name in ("fifo", "socket"):
            with pytest.raises(PermissionError):
                fs.read(name)
            with pytest.raises(PermissionError):
                fs.write(name, "x")
            with pytest.raises(PermissionError):
                fs.stat(name)
        fs.delete("fifo")
        assert not os.path.lexists(root / "fifo")


def test_append_refuses_hard_links(tmp_path: Path) -> None:
    root, outside = tmp_path / "ws", tmp_path / "outside.txt"
    root.mkdir()
    outside.write_bytes(SECRET)
    os.link(outside, root / "linked.txt")
    with HostFilesystem(root, snapshot_dir=tmp_path / "s") as fs:
        with pytest.raises(PermissionError):
            fs.write("linked.txt", "more", mode="append")
        fs.write("linked.txt", "replaced")  # overwrite renames a new file in: the other name is untouched
    assert outside.read_bytes() == SECRET
    assert (root / "linked.txt").read_text() == "replaced"


SHELL_NAMES = [
    "$(touch pwned)",
    "; touch pwned",
    "`touch pwned`",
    "a | touch pwned",
    "x && touch pwned",
    "> pwned",
    "'quoted'",
    '"double"',
    "back\\slash",
    "*",
    "?",
    "[abc]",
    "{a,b}",
    "~",
    "#hash",
    "!bang",
    "-rf",
    "--help",
    "%s%n",
]


@pytest.mark.parametrize("name", SHELL_NAMES)
def test_shell_metacharacters_are_literal(tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    monkeypatch.chdir(tmp_path)
    with HostFilesystem(root, snapshot_dir=tmp_path / "s") as fs:
        fs.write(f"{name}/{name}.txt", f"content of {name}\n")
        assert fs.read(f"{name}/{name}.txt").content == f"content of {name}\n"
        assert [e.name for e in fs.list(name)] == [f"{name}.txt"]
        assert [m.path for m in fs.grep("content", path=name)] == [f"{name}/{name}.txt"]
        assert [m.path for m in fs.grep(re.escape(f"of {name}"), path=name)] == [f"{name}/{name}.txt"]
        fs.copy(name, "copy")
        fs.move("copy", f"moved {name}")
        snapshot = fs.snapshot()
        fs.delete(name, recursive=True)
        fs.restore(snapshot)
        assert fs.exists(f"{name}/{name}.txt")
    assert not list(tmp_path.rglob("pwned"))


def test_long_names_and_deep_paths(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=tmp_path / "s") as fs:
        with pytest.raises(ValueError):
            fs.write("n" * 81, "x")
        deep = "/".join(["d"] * 15 + ["f.txt"])
        fs.write(deep, "deep")
        assert fs.read(deep).content == "deep"
        with pytest.raises(ValueError):
            fs.write(deep + "/g.txt", "too deep")
        with pytest.raises(OSError):
            fs.write("😀" * 80, "80 characters, 320 bytes: more than the host allows")
        # a name longer than the path rules allow, made behind our back, is not shown at all
        (root / ("z" * 100)).write_text("hidden")
        assert "z" * 100 not in [e.name for e in fs.list()]


def test_case_variants_are_distinct_and_mount_point_is_case_sensitive(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    with HostFilesystem(root, mount_point="/workspace", snapshot_dir=tmp_path / "s") as fs:
        fs.write("/workspace/Secret.txt", "upper")
        fs.write("/workspace/secret.txt", "lower")
        fs.write("/WORKSPACE/x.txt", "not the mount point")
        assert fs.read("Secret.txt").content == "upper"
        assert fs.read("secret.txt").content == "lower"
        assert fs.read("WORKSPACE/x.txt").content == "not the mount point"
        with pytest.raises(PermissionError):
            fs.read("/workspace/../../etc/passwd")


@pytest.mark.parametrize("bad", ["a\x00b", "a\nb", "a\x1bb", "a\x7fb", "\t"])
def test_nul_and_control_characters(tmp_path: Path, bad: str) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=tmp_path / "s") as fs:
        for operation in OPERATIONS.values():
            with pytest.raises(ValueError):
                operation(fs, bad)
    assert list(root.iterdir()) == []


def test_messages_never_name_the_host_root(world: tuple[HostFilesystem, Path, Path]) -> None:
    fs, root, _ = world
    for action in (lambda: fs.read("missing.txt"), lambda: fs.list("inside.txt"), lambda: fs.read("file-link")):
        with pytest.raises(OSError) as caught:
            action()
        assert str(root) not in str(caught.value)


def test_no_temporary_file_survives_a_failed_or_aborted_write(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    with HostFilesystem(root, snapshot_dir=tmp_path / "s") as fs:
        fs.write("f.txt", "old")
        with pytest.raises(RuntimeError), fs.open_write("f.txt") as writer:
            writer.write(b"partial")
            raise RuntimeError("boom")
        racer = fs.open_write("race.txt", mode="create")
        racer.write(b"mine")
        fs.write("race.txt", "theirs")
        with pytest.raises(FileExistsError):
            racer.close()
        fs.mkdir("d")
        with pytest.raises(IsADirectoryError):
            fs.write("d", "x")
        os.mkfifo(root / "fifo")
        with pytest.raises(PermissionError):
            fs.write("fifo", "x")
        fs.open_write("abandoned.txt").abort()
    assert sorted(p.name for p in root.iterdir()) == ["d", "f.txt", "fifo", "race.txt"]
    assert (root / "f.txt").read_text() == "old"
    assert (root / "race.txt").read_text() == "theirs"


# Names a command in a container, another program or a macOS copy can make on disk, which the path validator
# refuses: listing them would offer the model names it cannot use.
UNUSABLE_ON_DISK = {
    "nfd": "cafe\u0301.txt",  # what macOS writes for café.txt
    "kelvin": "\u212a.txt",
    "bidi_override": "invoice\u202etxt.exe",
    "bidi_isolate": "a\u2066b.txt",
    "not_utf8": os.fsdecode(b"latin1-\xe9.txt"),
}


@pytest.mark.parametrize("use_ripgrep", [False, True])
@pytest.mark.parametrize("kind", sorted(UNUSABLE_ON_DISK))
def test_names_the_validator_refuses_are_never_listed(tmp_path: Path, kind: str, use_ripgrep: bool) -> None:
    root = tmp_path / "ws"
    name = UNUSABLE_ON_DISK[kind]
    (root / name).mkdir(parents=True)
    (root / name / "inner.txt").write_text("needle in a hidden directory\n")
    (root / f"file-{name}").write_text("needle in a hidden file\n")
    (root / "caf\u00e9.txt").write_text("needle in a usable file\n")
    with HostFilesystem(root, snapshot_dir=tmp_path / "s", use_ripgrep=use_ripgrep) as fs:
        assert [e.name for e in fs.list()] == ["caf\u00e9.txt"]
        assert [e.path for e in fs.walk()] == ["caf\u00e9.txt"]
        assert [m.path for m in fs.glob("**")] == ["caf\u00e9.txt"]
        assert [m.path for m in fs.grep("needle")] == ["caf\u00e9.txt"]
        assert [m.path for m in fs.grep("needle", glob="*.txt")] == ["caf\u00e9.txt"]
        with pytest.raises(ValueError):
            fs.read(f"{name}/inner.txt")
        with pytest.raises(ValueError):
            fs.list(name)
        assert fs.snapshot().file_count == 1  # the snapshot walk agrees with the listing


def test_a_name_refused_on_disk_does_not_hide_its_nfc_twin(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "cafe\u0301.txt").write_text("decomposed, made on disk")
    with HostFilesystem(root, snapshot_dir=tmp_path / "s") as fs:
        assert not fs.exists("caf\u00e9.txt")  # Linux keeps both spellings apart: the twin is another name
        fs.write("caf\u00e9.txt", "composed, made through the protocol")
        assert [e.name for e in fs.list()] == ["caf\u00e9.txt"]
        assert fs.read("caf\u00e9.txt").content == "composed, made through the protocol"
    assert (root / "cafe\u0301.txt").read_text() == "decomposed, made on disk"
