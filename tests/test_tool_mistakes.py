"""A corpus of mistakes models make, each with the answer it must get and the files left as they were."""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from workspacefs import HostFilesystem, InMemoryFilesystem
from workspacefs.protocol import Filesystem
from workspacefs.tools import ToolContext, dispatch

FILES = {
    "src/app.py": "def main():\n\tprint('hello')\n\n\ndef helper():\n\tprint('hello')\n",
    "README.md": "# app\n",
    "assets/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00",
}
_count = itertools.count()


@dataclass(frozen=True)
class Mistake:
    tool: str
    arguments: dict[str, Any]
    says: tuple[str, ...]
    success: bool = False
    before: Callable[[ToolContext, Filesystem], None] | None = None
    changes_files: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


def _read_first(path: str) -> Callable[[ToolContext, Filesystem], None]:
    def prepare(context: ToolContext, fs: Filesystem) -> None:
        assert dispatch("read_file", {"path": path}, context).success

    return prepare


def _read_then_someone_edits(context: ToolContext, fs: Filesystem) -> None:
    _read_first("src/app.py")(context, fs)
    fs.write("src/app.py", FILES["src/app.py"].replace("hello", "HELLO"))


def _big_file(context: ToolContext, fs: Filesystem) -> None:
    with fs.open_write("logs/big.log") as writer:
        line = b"2026-11-22 12:00:00 INFO a line of a fifty megabyte log file, padded out ......\n"
        for _ in range(50 * 1024 * 1024 // len(line)):
            writer.write(line)


MISTAKES = {
    "non-unique edit": Mistake(
        "edit_file",
        {"path": "src/app.py", "old_string": "\tprint('hello')", "new_string": "\tprint('bye')"},
        ("occurs more than once", "at line 2, and again at line 6", "replace_all=true"),
        before=_read_first("src/app.py"),
    ),
    "whitespace-mismatched old_string": Mistake(
        "edit_file",
        {"path": "src/app.py", "old_string": "def main():\n    print('hello')", "new_string": "x"},
        ("not found", "match near line 1 if whitespace is ignored", "tabs"),
        before=_read_first("src/app.py"),
    ),
    "old_string with line numbers": Mistake(
        "edit_file",
        {"path": "src/app.py", "old_string": "     1\tdef main():", "new_string": "x"},
        ("line-number prefixes",),
        before=_read_first("src/app.py"),
    ),
    "missing file read": Mistake("read_file", {"path": "src/nope.py"}, ("does not exist", "ls or glob")),
    "missing file edit": Mistake(
        "edit_file", {"path": "src/nope.py", "old_string": "a", "new_string": "b"}, ("does not exist", "write_file")
    ),
    "50 MB file read": Mistake(
        "read_file",
        {"path": "logs/big.log"},
        ("Showing lines 1-2000 of", "offset=2000"),
        success=True,
        before=_big_file,
        changes_files=True,
    ),
    "binary file": Mistake("read_file", {"path": "assets/logo.png"}, ("binary", "stat")),
    "workspace prefix": Mistake(
        "read_file", {"path": "/workspace/README.md"}, ("     1\t# app",), success=True, extra={"mount": True}
    ),
    "workspace prefix without a mount point": Mistake(
        "read_file", {"path": "/workspace/README.md"}, ("'workspace/README.md' does not exist",)
    ),
    "path escape": Mistake("read_file", {"path": "../../etc/passwd"}, ("outside the workspace",)),
    "absolute escape through the mount": Mistake(
        "write_file",
        {"path": "/workspace/../evil.txt", "content": "x"},
        ("outside the workspace",),
        extra={"mount": True},
    ),
    "invalid regex": Mistake("grep", {"pattern": "print(("}, ("Invalid regular expression", "backslash")),
    "editing without reading": Mistake(
        "edit_file", {"path": "README.md", "old_string": "# app", "new_string": "# App"}, ("not read", "read_file")
    ),
    "overwriting without reading": Mistake(
        "write_file", {"path": "README.md", "content": "# clobbered\n"}, ("not read", "read_file")
    ),
    "editing a file changed since it was read": Mistake(
        "edit_file",
        {"path": "src/app.py", "old_string": "def main", "new_string": "def run"},
        ("changed since you last read it",),
        before=_read_then_someone_edits,
        changes_files=True,
    ),
    "writing 60,000 characters": Mistake(
        "write_file", {"path": "src/huge.py", "content": "x" * 60_000}, ("60,000 characters", "48,000", "append=true")
    ),
    "deleting a non-empty directory": Mistake("rm", {"path": "src"}, ("recursive=true",)),
    "a control character in a path": Mistake("read_file", {"path": "src/app.py\n"}, ("control character",)),
    "unknown tool": Mistake("cat", {"path": "README.md"}, ("no tool named 'cat'", "read_file")),
    "wrong argument name": Mistake("read_file", {"file": "README.md"}, ("path: Field required", "It takes: path")),
    "reading a directory": Mistake("read_file", {"path": "src"}, ("is a directory", "ls")),
    "moving onto an existing file": Mistake("mv", {"src": "README.md", "dst": "src/app.py"}, ("overwrite=true",)),
}


def snapshot_tree(fs: Filesystem) -> dict[str, bytes | None]:
    found: dict[str, bytes | None] = {}
    pending = ["."]
    while pending:
        for entry in fs.list(pending.pop()):
            if entry.is_directory:
                found[entry.path] = None
                pending.append(entry.path)
            else:
                found[entry.path] = fs.read_bytes(entry.path, limit=64).content
    return found


@pytest.fixture(params=["memory", "host"])
def backend(request: pytest.FixtureRequest, fast_tmp: Path) -> Iterator[str]:
    yield request.param


def make_fs(kind: str, base: Path, mount: bool) -> Filesystem:
    mount_point = "/workspace" if mount else None
    if kind == "memory":
        fs: Filesystem = InMemoryFilesystem(mount_point=mount_point)
    else:
        index = next(_count)
        (base / f"m-{index}").mkdir()
        fs = HostFilesystem(base / f"m-{index}", mount_point=mount_point, snapshot_dir=base / f"ms-{index}")
    for path, content in FILES.items():
        fs.write_bytes(path, content.encode() if isinstance(content, str) else content)
    return fs


@pytest.mark.parametrize("name", sorted(MISTAKES))
def test_mistake(name: str, backend: str, fast_tmp: Path) -> None:
    mistake = MISTAKES[name]
    fs = make_fs(backend, fast_tmp, mount=bool(mistake.extra.get("mount")))
    context = ToolContext(filesystem=fs)
    if mistake.before is not None:
        mistake.before(context, fs)
    before = snapshot_tree(fs)
    result = dispatch(mistake.tool, json.dumps(mistake.arguments), context)
    assert result.success is mistake.success, result.message
    for fragment in mistake.says:
        assert fragment in result.message, f"{fragment!r} not in {result.message!r}"
    assert snapshot_tree(fs) == before, "the files changed"
    close = getattr(fs, "close", None)
    if close:
        close()
