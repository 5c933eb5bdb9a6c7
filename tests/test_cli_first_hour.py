"""What a newcomer hits in the first hour of the command line: reading never creates, ``--create`` and
``?agent=``, snapshot delete/prune and names (tag, id prefix) shared with the REST API, and the hints for
a bare path, a non-empty ``rm``, stdin at a terminal, SIGTERM mid-write and ``memory://``."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from workspacefs import SqlStore, open_filesystem
from workspacefs.cli import main
from workspacefs.errors import AmbiguousSnapshotError, SnapshotNotFoundError
from workspacefs.results import FilesystemSnapshot
from workspacefs.server import SessionCatalog, create_app
from workspacefs.snapshots import find_snapshot

READERS = [
    ["ls"],
    ["cat", "a.txt"],
    ["stat", "a.txt"],
    ["grep", "x"],
    ["glob", "*"],
    ["rm", "a.txt"],
    ["mv", "a.txt", "b.txt"],
    ["snapshot", "list"],
    ["snapshot", "create"],
    ["snapshot", "prune", "--keep", "1"],
    ["export", "-o", os.devnull],
]
"""Commands that must not make a workspace: they read it, or change only what is already there."""


def run(*arguments: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(main, list(arguments), input=stdin, catch_exceptions=False)


def sessions_of(database: Path) -> list[str]:
    store = SqlStore(f"sqlite:///{database}")
    try:
        return [info.session_id for info in store.sessions()]
    finally:
        store.close()


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c[:2]))
def test_reading_a_missing_database_or_directory_creates_nothing(command: list[str], fast_tmp: Path) -> None:
    base = fast_tmp / f"never-{uuid.uuid4().hex[:8]}"
    for url in (f"sqlite:///{base}/sub/x.db?session=a", f"file://{base}/tree"):
        result = run(*command, "--fs", url)
        assert result.exit_code == 3, (url, result.stderr)
        assert "--create" in result.stderr and result.stdout == ""
        assert not base.exists(), url


@pytest.mark.parametrize("command", READERS, ids=lambda c: " ".join(c[:2]))
def test_reading_an_unknown_session_creates_nothing(command: list[str], fast_tmp: Path) -> None:
    database = fast_tmp / f"known-{uuid.uuid4().hex[:8]}.db"
    open_filesystem(f"sqlite:///{database}?session=real").write("a.txt", "x\n")
    result = run(*command, "--fs", f"sqlite:///{database}?session=typo")
    assert result.exit_code == 3 and "typo" in result.stderr and "No such session" in result.stderr
    assert sessions_of(database) == ["real"]  # no session, so no agent "default" in the service either


def test_one_rule_names_a_snapshot_by_id_tag_or_unique_prefix() -> None:
    def taken(hex_id: str, tag: str | None, minute: int) -> FilesystemSnapshot:
        return FilesystemSnapshot(
            snapshot_id=uuid.UUID(hex_id),
            created_at=datetime(2026, 1, 1, 0, minute, tzinfo=UTC),
            root_path="/",
            backend="memory",
            tag=tag,
        )

    a = taken("abcd0000-0000-4000-8000-000000000000", "v1", 1)
    b = taken("abcd1111-0000-4000-8000-000000000000", "v1", 2)
    c = taken("cafe0000-0000-4000-8000-000000000000", None, 3)
    found = [a, b, c]
    assert find_snapshot(found, str(a.snapshot_id)) is a
    assert find_snapshot(found, "v1") is b  # the newest with the tag
    assert find_snapshot(found, "CAFE") is c and find_snapshot(found, "abcd1") is b
    with pytest.raises(AmbiguousSnapshotError, match="abcd0000") as ambiguous:
        find_snapshot(found, "abcd")
    assert isinstance(ambiguous.value, ValueError)
    for unknown in ("caf", "v2", "dead"):
        with pytest.raises(SnapshotNotFoundError):
            find_snapshot(found, unknown)
    assert find_snapshot([*found, taken("ffff0000-0000-4000-8000-000000000000", "cafe", 4)], "cafe").tag == "cafe"


def test_create_and_writing_make_the_workspace(fast_tmp: Path) -> None:
    base = fast_tmp / f"made-{uuid.uuid4().hex[:8]}"
    listed = run("ls", "--create", "--fs", f"sqlite:///{base}/a/x.db?session=new")
    assert listed.exit_code == 0 and listed.stdout == ""
    assert sessions_of(base / "a" / "x.db") == ["new"]
    written = run("write", "n.txt", "--fs", f"sqlite:///{base}/b/y.db?session=fresh", stdin=b"hello\n")
    assert written.exit_code == 0, written.stderr
    assert open_filesystem(f"sqlite:///{base}/b/y.db?session=fresh").read("n.txt").content == "hello\n"
    assert run("ls", "--create", "--fs", f"file://{base}/tree").exit_code == 0 and (base / "tree").is_dir()
    assert run("write", "w.txt", "--fs", f"file://{base}/other", stdin=b"w").exit_code == 0
    assert (base / "other" / "w.txt").read_bytes() == b"w"
    patched = run(
        "patch", "--fs", f"file://{base}/patched", stdin=b"*** Begin Patch\n*** Add File: p.txt\n+p\n*** End Patch\n"
    )
    assert patched.exit_code == 0 and (base / "patched" / "p.txt").read_text() == "p\n"


def test_agent_in_the_url_names_the_services_session(fast_tmp: Path) -> None:
    database = fast_tmp / f"agents-{uuid.uuid4().hex[:8]}.db"
    alice = f"sqlite:///{database}?session=main&agent=alice"
    assert run("ls", "--fs", alice).exit_code == 3 and not database.exists()
    open_filesystem(f"sqlite:///{database}?session=main")  # the agent "default" has a session "main"
    missing = run("ls", "--fs", alice)
    assert missing.exit_code == 3 and "Agent 'alice' has no such session" in missing.stderr
    assert run("write", "notes.md", "--fs", alice, stdin=b"from the CLI\n").exit_code == 0
    assert run("cat", "notes.md", "--fs", alice).stdout == "from the CLI\n"
    assert run("ls", "--fs", f"sqlite:///{database}?session=main&agent=bob").exit_code == 3
    store = SqlStore(f"sqlite:///{database}")
    try:
        entry = SessionCatalog(store).get("alice", "main")
        assert entry is not None and entry.storage_id == "alice/main"  # not the agent "default"'s "main"
        assert not open_filesystem(f"sqlite:///{database}?session=main").list()
        with TestClient(create_app(store, auth=False)) as client:
            served = client.get(
                "/v1/agents/alice/sessions/main/fs/notes.md", headers={"accept": "application/octet-stream"}
            )
            assert served.status_code == 200 and served.content == b"from the CLI\n", served.text
    finally:
        store.close()
    wrong = run("ls", "--fs", f"file://{fast_tmp}?agent=alice")
    assert wrong.exit_code == 6 and "SQL" in wrong.stderr


@pytest.fixture(params=["host", "sqlite"])
def workspace(request: pytest.FixtureRequest, fast_tmp: Path) -> str:
    name = uuid.uuid4().hex[:8]
    if request.param == "host":
        (fast_tmp / f"snap-{name}").mkdir()
        url = f"file://{fast_tmp / f'snap-{name}'}?snapshot_dir={fast_tmp / f'snaps-{name}'}"
    else:
        url = f"sqlite:///{fast_tmp / 'snapshots.db'}?session=s-{name}"
    assert run("write", "a.txt", "--fs", url, stdin=b"one\n").exit_code == 0
    return url


def snapshot_ids(url: str) -> list[str]:
    return [line.split()[0] for line in run("snapshot", "list", "--fs", url).stdout.splitlines()]


def test_snapshot_delete_and_prune(workspace: str) -> None:
    taken = [run("snapshot", "create", *tag, "--fs", workspace).stdout.strip() for tag in ([], ["--tag", "keep"], [])]
    taken += [run("snapshot", "create", "--fs", workspace).stdout.strip() for _ in range(2)]
    assert snapshot_ids(workspace) == taken
    typo = run("snapshot", "delete", taken[0][:8], "no-such-snapshot", "--fs", workspace)
    assert typo.exit_code == 3 and snapshot_ids(workspace) == taken  # all found first: a typo deletes nothing
    deleted = run("snapshot", "delete", taken[0][:8], "--fs", workspace)  # by id prefix
    assert deleted.exit_code == 0 and "deleted 1 snapshot" in deleted.stderr
    assert snapshot_ids(workspace) == taken[1:]
    dry = run("snapshot", "prune", "--keep", "1", "--dry-run", "--fs", workspace)
    assert dry.stdout.split() and [line.split()[0] for line in dry.stdout.splitlines()] == taken[2:4]
    assert snapshot_ids(workspace) == taken[1:]
    assert run("snapshot", "prune", "--keep", "1", "--fs", workspace).exit_code == 0
    assert snapshot_ids(workspace) == [taken[1], taken[4]]  # the tagged one is kept and not counted
    assert run("snapshot", "delete", "keep", "--fs", workspace).exit_code == 0  # by tag
    assert snapshot_ids(workspace) == [taken[4]]
    assert run("snapshot", "prune", "--keep", "0", "--include-tagged", "--fs", workspace).exit_code == 0
    assert snapshot_ids(workspace) == []


def test_rest_names_snapshots_by_tag_and_prefix_like_the_cli(fast_tmp: Path) -> None:
    store = SqlStore(f"sqlite:///{fast_tmp / f'rest-{uuid.uuid4().hex[:8]}.db'}")
    try:
        with TestClient(create_app(store, auth=False)) as client:
            base = "/v1/agents/a/sessions"
            assert client.post(base, json={"id": "s"}).status_code == 201
            session = f"{base}/s"
            octet = {"content-type": "application/octet-stream"}
            assert client.post(f"{session}/fs/f.txt", content=b"v1", headers=octet).status_code == 201
            first = client.post(f"{session}/snapshots", json={"tag": "before"}).json()
            assert client.put(f"{session}/fs/f.txt", content=b"v2", headers=octet).status_code == 200
            by_tag = client.get(f"{session}/snapshots/before")
            assert by_tag.status_code == 200 and by_tag.json()["id"] == first["id"]
            assert client.get(f"{session}/snapshots/{first['id'][:6]}").json()["id"] == first["id"]
            diff = client.get(f"{session}/snapshots/before/diff").json()
            assert diff["base"] == first["id"] and diff["modified"] == ["/f.txt"]
            assert client.post(f"{session}/snapshots/before/restore").status_code == 200
            assert client.get(f"{session}/fs/f.txt", headers={"accept": "application/octet-stream"}).content == b"v1"
            missing = client.get(f"{session}/snapshots/no-such-tag")
            assert missing.status_code == 404 and missing.json()["error"]["code"] == "snapshot_not_found"
            assert client.get(f"{session}/snapshots/{first['id'][:3]}").status_code == 404  # too short a prefix
            assert client.delete(f"{session}/snapshots/before").status_code == 204
            assert client.get(f"{session}/snapshots/{first['id']}").status_code == 404
    finally:
        store.close()


def test_hints_for_paths_rm_and_memory(fast_tmp: Path) -> None:
    bare = run("ls", "--fs", str(fast_tmp))
    assert bare.exit_code == 6 and f"file://{fast_tmp}" in bare.stderr
    database = run("ls", "--fs", "work.db")
    assert database.exit_code == 6 and f"sqlite:///{Path.cwd() / 'work.db'}?session=ID" in database.stderr
    root = fast_tmp / f"rm-{uuid.uuid4().hex[:8]}"
    (root / "dir").mkdir(parents=True)
    (root / "dir" / "f").write_text("x")
    refused = run("rm", "dir", "--fs", f"file://{root}")
    assert refused.exit_code == 4 and "use -r" in refused.stderr and "recursive=True" not in refused.stderr
    memory = run("ls", "--fs", "memory://")
    assert memory.exit_code == 0 and "only while this command runs" in memory.stderr


def test_write_at_a_terminal_says_it_reads_stdin(fast_tmp: Path) -> None:
    root = fast_tmp / f"tty-{uuid.uuid4().hex[:8]}"
    root.mkdir()
    controller, terminal = pty.openpty()
    process = subprocess.Popen(
        [sys.executable, "-m", "workspacefs", "write", "typed.txt", "--fs", f"file://{root}"],
        stdin=terminal,
        stderr=subprocess.PIPE,
    )
    os.close(terminal)
    assert process.stderr is not None
    ready, _, _ = select.select([process.stderr], [], [], 60)  # a budget only a hang reaches
    said = process.stderr.readline() if ready else b""
    assert b"reading typed.txt from the terminal; end with Ctrl-D" in said
    os.write(controller, b"typed by hand\n\x04")  # what a person types after the prompt: Ctrl-D ends it
    _, rest = process.communicate(timeout=60)
    os.close(controller)
    assert process.returncode == 0, rest
    assert (root / "typed.txt").read_bytes() == b"typed by hand\n"
    piped = run("write", "piped.txt", "--fs", f"file://{root}", stdin=b"x")
    assert piped.exit_code == 0 and "Ctrl-D" not in piped.stderr


@pytest.mark.parametrize("backend", ["host", "sqlite"])
def test_sigterm_mid_write_keeps_the_old_content_and_leaves_nothing_behind(backend: str, fast_tmp: Path) -> None:
    name = uuid.uuid4().hex[:8]
    if backend == "host":
        (fast_tmp / f"term-{name}").mkdir()
        url = f"file://{fast_tmp / f'term-{name}'}"
    else:
        url = f"sqlite:///{fast_tmp / f'term-{name}.db'}?session=s"
    assert run("write", "big.bin", "--fs", url, stdin=b"old\n").exit_code == 0
    process = subprocess.Popen(
        [sys.executable, "-m", "workspacefs", "write", "big.bin", "--fs", url],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None
    # the pipe holds 64 KiB: once this returns, the command has read and stored most of it, without an end
    process.stdin.write(b"n" * (16 << 20))
    process.stdin.flush()
    process.send_signal(signal.SIGTERM)
    process.stdin.close()
    assert process.wait(timeout=60) == 128 + signal.SIGTERM
    assert open_filesystem(url).read_bytes("big.bin").content == b"old\n"
    if backend == "host":
        assert sorted(os.listdir(fast_tmp / f"term-{name}")) == ["big.bin"]
    else:
        store = SqlStore(f"sqlite:///{fast_tmp / f'term-{name}.db'}")
        try:
            with store.read() as connection:
                assert connection.exec_driver_sql("SELECT count(*) FROM wsfs_uploads").scalar() == 0
        finally:
            store.close()


def test_token_commands_that_read_do_not_make_a_database(fast_tmp: Path) -> None:
    database = fast_tmp / f"tokens-{uuid.uuid4().hex[:8]}" / "service.db"
    for command in (["token", "list"], ["token", "revoke", "no-such-id"]):
        result = run(*command, "--db", f"sqlite:///{database}")
        assert result.exit_code == 3 and "No such database file" in result.stderr, result.stderr
    assert not database.parent.exists()
    assert run("token", "create", "--agent", "a", "--db", f"sqlite:///{database}").exit_code == 0
    assert run("token", "list", "--db", f"sqlite:///{database}").exit_code == 0


def test_postgresql_reading_an_unknown_session_creates_nothing(postgres_url: str) -> None:
    known = f"known-{uuid.uuid4().hex[:8]}"
    open_filesystem(f"{postgres_url}?session={known}").write("a.txt", "x\n")
    typo = f"{postgres_url}?session={known}-typo"
    for command in (["ls"], ["cat", "a.txt"], ["snapshot", "list"]):
        result = run(*command, "--fs", typo)
        assert result.exit_code == 3 and "No such session" in result.stderr, result.stderr
    store = SqlStore(postgres_url)
    try:
        assert store.session(f"{known}-typo") is None and store.session(known) is not None
    finally:
        store.close()
    assert run("ls", "--create", "--fs", typo).exit_code == 0
    assert run("cat", "a.txt", "--fs", f"{postgres_url}?session={known}&agent=default").stdout == "x\n"


def test_s3_reading_a_missing_prefix_creates_nothing(s3_server: Any) -> None:
    prefix = f"cli-{uuid.uuid4().hex[:8]}"
    url = s3_server.url("wsfs-tests", prefix)
    missing = run("ls", "--fs", url)
    assert missing.exit_code == 3 and "--create" in missing.stderr, missing.stderr
    assert not s3_server.filesystem().exists(f"wsfs-tests/{prefix}")  # nothing was written
    assert run("write", "a.txt", "--fs", url, stdin=b"in s3\n").exit_code == 0
    assert run("cat", "a.txt", "--fs", url).stdout == "in s3\n"
