"""The ``workspacefs`` command line: file commands, snapshots, export/import, JSON output, exit codes."""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from workspacefs import open_filesystem
from workspacefs.cli import main
from workspacefs.protocol import Filesystem

_ids = itertools.count()


def run(fs_url: str, *arguments: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(main, [*arguments, "--fs", fs_url], input=stdin, catch_exceptions=False)


@pytest.fixture(params=["host", "sqlite"])
def fs_url(request: pytest.FixtureRequest, fast_tmp: Path) -> str:
    if request.param == "host":
        root = fast_tmp / f"cli-host-{next(_ids)}"
        root.mkdir()
        return f"file://{root}?snapshot_dir={fast_tmp / f'cli-snaps-{next(_ids)}'}"
    url = f"sqlite:///{fast_tmp / 'cli.db'}?session=cli-{uuid.uuid4().hex[:8]}"
    open_filesystem(url)  # the library makes the session; the command line only reads what exists
    return url


def test_write_cat_ls_stat(fs_url: str) -> None:
    assert run(fs_url, "write", "src/app.py", stdin=b"print('hi')\n").exit_code == 0
    assert run(fs_url, "write", "src/app.py", "--append", stdin=b"print('again')\n").exit_code == 0
    binary = bytes(range(256)) * 4
    assert run(fs_url, "write", "data/blob.bin", stdin=binary).exit_code == 0
    assert run(fs_url, "cat", "src/app.py").stdout == "print('hi')\nprint('again')\n"
    assert run(fs_url, "cat", "data/blob.bin").stdout_bytes == binary
    as_json = json.loads(run(fs_url, "cat", "data/blob.bin", "--json").stdout)
    assert as_json["encoding"] == "base64" and as_json["path"] == "data/blob.bin"
    assert run(fs_url, "ls").stdout.splitlines() == ["data/", "src/"]
    long = run(fs_url, "ls", "-l", "src").stdout
    assert "app.py" in long and "27" in long
    listed = json.loads(run(fs_url, "ls", "src", "--json").stdout)
    assert [(e["name"], e["size_bytes"], e["is_directory"]) for e in listed] == [("app.py", 27, False)]
    stat = json.loads(run(fs_url, "stat", "src/app.py", "--json").stdout)
    assert stat["size_bytes"] == 27 and stat["modified_at"]
    assert "file, 27 bytes" in run(fs_url, "stat", "src/app.py").stdout
    created = run(fs_url, "write", "src/app.py", "--create", stdin=b"x")
    assert created.exit_code == 4 and "exists" in created.stderr.lower()
    assert run(fs_url, "cat", "src/app.py").stdout.startswith("print('hi')")


def test_rm_mv_cp_grep_glob(fs_url: str) -> None:
    run(fs_url, "write", "src/a.py", stdin=b"def needle():\n    pass\n")
    run(fs_url, "write", "src/b.txt", stdin=b"no match here\n")
    assert run(fs_url, "cp", "src", "backup").exit_code == 0
    assert run(fs_url, "mv", "backup/a.py", "moved/a.py").exit_code == 0
    assert run(fs_url, "glob", "**/*.py").stdout.splitlines() == ["moved/a.py", "src/a.py"]
    assert json.loads(run(fs_url, "glob", "*.py", "src", "--json").stdout) == ["src/a.py"]
    found = run(fs_url, "grep", "def \\w+", "--glob", "*.py")
    assert found.exit_code == 0 and found.stdout.splitlines() == [
        "moved/a.py:1:def needle():",
        "src/a.py:1:def needle():",
    ]
    matches = json.loads(run(fs_url, "grep", "NEEDLE", "-i", "--json", "src").stdout)
    assert matches == [{"path": "src/a.py", "line_number": 1, "line_content": "def needle():", "line": "def needle():"}]
    nothing = run(fs_url, "grep", "absent")
    assert nothing.exit_code == 1 and nothing.stdout == ""
    assert run(fs_url, "rm", "moved").exit_code == 4  # a directory needs -r
    assert run(fs_url, "rm", "-r", "moved", "backup").exit_code == 0
    assert run(fs_url, "ls").stdout.splitlines() == ["src/"]


@pytest.mark.parametrize(
    ("arguments", "code", "fragment"),
    [
        (["cat", "missing.txt"], 3, "missing.txt"),
        (["cat", "../../etc/passwd"], 5, "escapes"),
        (["grep", "(unclosed"], 6, "regular expression"),
        (["ls", "a\nb"], 6, "control character"),
        (["mv", "nothing", "else"], 3, "nothing"),
        (["snapshot", "restore", "no-such-tag"], 3, "no-such-tag"),
    ],
)
def test_errors_go_to_stderr_with_exit_codes(fs_url: str, arguments: list[str], code: int, fragment: str) -> None:
    result = run(fs_url, *arguments)
    assert result.exit_code == code, (result.stdout, result.stderr)
    assert fragment in result.stderr and result.stdout == ""
    as_json = run(fs_url, *arguments, "--json")
    assert as_json.exit_code == code
    assert fragment in json.loads(as_json.stderr)["error"]["message"]


def test_bad_urls_and_usage() -> None:
    bad = CliRunner().invoke(main, ["ls", "--fs", "nope://x"])
    assert bad.exit_code == 6 and "Unknown filesystem scheme" in bad.stderr
    no_session = CliRunner().invoke(main, ["ls", "--fs", "sqlite:///x.db"])
    assert no_session.exit_code == 6 and "session" in no_session.stderr
    missing_fs = CliRunner(env={"WORKSPACEFS_FS": ""}).invoke(main, ["ls"])
    assert missing_fs.exit_code == 2 and "--fs" in missing_fs.stderr
    from_env = CliRunner(env={"WORKSPACEFS_FS": "memory://"}).invoke(main, ["ls"])
    assert from_env.exit_code == 0
    helped = CliRunner().invoke(main, ["--help"])
    for word in ("serve", "mcp", "export", "import", "snapshot", "Exit codes", "WORKSPACEFS_FS"):
        assert word in helped.stdout, word


def test_snapshots_persist_between_commands(fs_url: str) -> None:
    run(fs_url, "write", "plan.md", stdin=b"v1\n")
    first = run(fs_url, "snapshot", "create", "--tag", "v1").stdout.strip()
    assert uuid.UUID(first)
    run(fs_url, "write", "plan.md", stdin=b"v2\n")
    run(fs_url, "write", "extra.md", stdin=b"new\n")
    listed = json.loads(run(fs_url, "snapshot", "list", "--json").stdout)
    assert [s["tag"] for s in listed if s["tag"]] == ["v1"]
    assert run(fs_url, "snapshot", "diff", "v1").stdout.splitlines() == ["A extra.md", "M plan.md"]
    second = run(fs_url, "snapshot", "create", "--json").stdout
    between = json.loads(run(fs_url, "snapshot", "diff", first[:8], json.loads(second)["id"], "--json").stdout)
    assert between["added"] == ["extra.md"] and between["modified"] == ["plan.md"]
    assert run(fs_url, "snapshot", "restore", "v1").exit_code == 0
    assert run(fs_url, "cat", "plan.md").stdout == "v1\n"
    assert run(fs_url, "cat", "extra.md").exit_code == 3


def _tree(fs: Filesystem) -> dict[str, str | None]:
    """Every path with a hash of its content (``None`` for directories)."""
    found: dict[str, str | None] = {}
    pending = [""]
    while pending:
        for entry in fs.list(pending.pop() or "."):
            if entry.is_directory:
                found[entry.path] = None
                pending.append(entry.path)
            else:
                found[entry.path] = hashlib.sha256(fs.read_bytes(entry.path).content).hexdigest()
    return found


@pytest.fixture
def populated(fast_tmp: Path) -> Iterator[str]:
    root = fast_tmp / f"cli-origin-{next(_ids)}"
    (root / "src" / "pkg").mkdir(parents=True)
    (root / "empty" / "dir").mkdir(parents=True)
    (root / "src" / "pkg" / "__init__.py").write_text("")
    (root / "src" / "main.py").write_text("print('main')\n" * 100)
    (root / "data.bin").write_bytes(os.urandom(3 * 1024 * 1024 + 5))
    (root / "名前 with spaces.txt").write_text("unicode\n")
    yield f"file://{root}"


def test_export_import_between_backends_and_back(populated: str, fast_tmp: Path, postgres_url: str) -> None:
    """host → SQLite → PostgreSQL → a new host directory, through real pipes between processes."""
    sqlite_url = f"sqlite:///{fast_tmp / 'moves.db'}?session=move-{uuid.uuid4().hex[:8]}"
    postgres = f"{postgres_url}?session=move-{uuid.uuid4().hex[:8]}"
    target = fast_tmp / f"cli-target-{next(_ids)}"
    target.mkdir()
    chain = [populated, sqlite_url, postgres, f"file://{target}"]
    command = [sys.executable, "-m", "workspacefs"]
    for source, destination in itertools.pairwise(chain):
        exporter = subprocess.Popen(
            [*command, "export", "--fs", source], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        importer = subprocess.run(
            [*command, "import", "--fs", destination, "--json"],
            stdin=exporter.stdout,
            capture_output=True,
            timeout=120,
            check=False,
        )
        assert exporter.stdout is not None
        exporter.stdout.close()
        assert exporter.wait(timeout=120) == 0, exporter.stderr.read() if exporter.stderr else ""
        assert importer.returncode == 0, importer.stderr.decode()
        stats = json.loads(importer.stdout)
        assert stats["files"] == 4 and stats["directories"] == 4
    original = _tree(open_filesystem(populated))
    assert original["data.bin"] is not None and "empty/dir" in original
    for url in chain[1:]:
        assert _tree(open_filesystem(url)) == original, url


def test_export_to_a_file_with_progress_and_gzip(populated: str, fast_tmp: Path) -> None:
    archive = fast_tmp / f"ws-{next(_ids)}.tar.gz"
    exported = CliRunner().invoke(main, ["export", "--fs", populated, "-o", str(archive), "--gzip", "--progress"])
    assert exported.exit_code == 0, exported.stderr
    assert "exporting [" in exported.stderr and "MiB" in exported.stderr and "exported 4 files" in exported.stderr
    target = f"sqlite:///{fast_tmp / 'gz.db'}?session=gz-{uuid.uuid4().hex[:8]}"
    imported = CliRunner().invoke(main, ["import", "--fs", target, "-i", str(archive), "--progress"])
    assert imported.exit_code == 0 and "importing" in imported.stderr
    assert _tree(open_filesystem(target)) == _tree(open_filesystem(populated))
    refused = CliRunner().invoke(main, ["import", "--fs", target, "-i", str(fast_tmp)])
    assert refused.exit_code != 0


def test_patch_applies_all_or_nothing_from_stdin(fs_url: str) -> None:
    run(fs_url, "write", "app.py", stdin=b"def main():\n    return 1\n")
    good = b"*** Begin Patch\n*** Update File: app.py\n@@ def main():\n-    return 1\n+    return 2\n*** Add File: docs/a.md\n+# A\n*** End Patch\n"
    applied = run(fs_url, "patch", stdin=good)
    assert applied.exit_code == 0 and "M app.py" in applied.output and "A docs/a.md" in applied.output
    half = b"*** Begin Patch\n*** Add File: b.md\n+b\n*** Update File: app.py\n-return 9\n+x\n*** End Patch\n"
    refused = run(fs_url, "patch", stdin=half)
    assert refused.exit_code == 4 and "Failed to find expected lines" in refused.stderr
    assert run(fs_url, "cat", "app.py").output == "def main():\n    return 2\n"
    assert run(fs_url, "stat", "b.md").exit_code == 3
    malformed = run(fs_url, "patch", "--json", stdin=b"not a patch")
    assert malformed.exit_code == 6 and '"invalid_patch"' in malformed.stderr
