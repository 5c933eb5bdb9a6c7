"""InMemoryFilesystem.hydrate_from_host: only inside the allowed roots, never through a symlink."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from workspacefs import FileTooLargeError, HostMount, InMemoryFilesystem, Quota, QuotaExceededError, Usage


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    for path, text in {
        "src/main.py": "print('main')\n",
        "src/util.py": "def util(): ...\n",
        "src/notes.md": "# notes\n",
        "src/pkg/deep.py": "DEEP = 1\n",
        "docs/guide.md": "guide\n",
    }.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    secret = tmp_path / "project-evil"
    secret.mkdir()
    (secret / "secret.txt").write_text("TOP SECRET")
    return root


def test_relative_mount_lands_at_its_own_path(project: Path) -> None:
    fs = InMemoryFilesystem()
    result = fs.hydrate_from_host(HostMount("src/", include_glob=("*.py",)), allowed_roots=[project])
    assert (result.files, result.skipped) == (3, 0)
    assert sorted(m.path for m in fs.glob("**")) == ["src/main.py", "src/pkg/deep.py", "src/util.py"]
    assert fs.read("src/main.py").content == "print('main')\n"


def test_absolute_mount_with_mount_path_and_exclude(project: Path) -> None:
    fs = InMemoryFilesystem(mount_point="/workspace")
    fs.hydrate_from_host(
        HostMount(str(project / "src"), mount_path="/workspace/code", exclude_glob=("pkg/**",)),
        allowed_roots=[str(project)],
    )
    assert sorted(m.path for m in fs.glob("**")) == ["code/main.py", "code/notes.md", "code/util.py"]


def test_mount_outside_allowed_roots_is_refused(project: Path, tmp_path: Path) -> None:
    fs = InMemoryFilesystem()
    with pytest.raises(PermissionError):
        fs.hydrate_from_host(HostMount(str(tmp_path / "project-evil")), allowed_roots=[project])
    with pytest.raises(PermissionError):
        fs.hydrate_from_host(HostMount("../project-evil"), allowed_roots=[project])
    with pytest.raises(PermissionError):
        fs.hydrate_from_host(HostMount("src"), allowed_roots=[])
    assert list(fs.list()) == []


def test_symlinks_are_never_followed(project: Path, tmp_path: Path) -> None:
    os.symlink(tmp_path / "project-evil", project / "src" / "evil-dir")
    os.symlink(tmp_path / "project-evil" / "secret.txt", project / "src" / "evil.txt")
    os.symlink(tmp_path / "project-evil", project / "linked-mount")
    fs = InMemoryFilesystem()
    fs.hydrate_from_host(HostMount("src"), allowed_roots=[project])
    assert not any("secret" in m.path or "evil" in m.path for m in fs.glob("**"))
    assert list(fs.grep("SECRET")) == []
    with pytest.raises(PermissionError):
        fs.hydrate_from_host(HostMount("linked-mount"), allowed_roots=[project])


def test_special_files_are_skipped_without_blocking(project: Path) -> None:
    os.mkfifo(project / "src" / "fifo")
    fs = InMemoryFilesystem()
    result = fs.hydrate_from_host(HostMount("src"), allowed_roots=[project])
    assert not fs.exists("src/fifo")
    assert result.files == 4


def test_max_bytes_is_all_or_nothing(project: Path) -> None:
    fs = InMemoryFilesystem()
    with pytest.raises(ValueError, match="max_bytes"):
        fs.hydrate_from_host(HostMount("src", max_bytes=20), allowed_roots=[project])
    assert list(fs.list()) == []


def test_missing_mount_and_read_only(project: Path) -> None:
    with pytest.raises(FileNotFoundError):
        InMemoryFilesystem().hydrate_from_host(HostMount("nope"), allowed_roots=[project])
    with pytest.raises(PermissionError):
        InMemoryFilesystem(read_only=True).hydrate_from_host(HostMount("src"), allowed_roots=[project])


def test_hydration_counts_against_the_quota_all_or_nothing(project: Path) -> None:
    """Loading host files is a growing change like a write: past a limit it is refused, and nothing is loaded."""
    fs = InMemoryFilesystem(quota=Quota(max_files=4))
    fs.write("kept.txt", "k")
    with pytest.raises(QuotaExceededError):
        fs.hydrate_from_host(HostMount("src/"), allowed_roots=[project])  # 4 files: 5 with kept.txt
    assert [m.path for m in fs.glob("**")] == ["kept.txt"] and fs.usage() == Usage(1, 1)
    fs.hydrate_from_host(HostMount("src/", include_glob=("*.py",)), allowed_roots=[project])  # 3 files: 4 in all
    assert fs.usage().files == 4
    with pytest.raises(QuotaExceededError):  # the loaded files count: the workspace is full
        fs.write("more.txt", "m")
    fs.hydrate_from_host(HostMount("src/", include_glob=("*.py",)), allowed_roots=[project])  # replaced: no growth
    assert fs.usage().files == 4
    sizes = sum(len(p.read_bytes()) for p in (project / "src").rglob("*") if p.is_file())
    small = InMemoryFilesystem(quota=Quota(max_bytes=sizes - 1))
    with pytest.raises(QuotaExceededError):
        small.hydrate_from_host(HostMount("src/"), allowed_roots=[project])
    assert small.usage() == Usage(0, 0) and list(small.list()) == []
    one_file = InMemoryFilesystem(quota=Quota(max_file_bytes=10))
    with pytest.raises(FileTooLargeError):
        one_file.hydrate_from_host(HostMount("src/"), allowed_roots=[project])
    assert list(one_file.list()) == []
