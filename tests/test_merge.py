"""Merge and fork beyond the conformance suite: the line merge itself, SQL families, host forks, migration 0007."""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlencode

import pytest
import sqlalchemy as sa
from click.testing import CliRunner, Result
from fastapi.testclient import TestClient

from workspacefs import HostFilesystem, InMemoryFilesystem, open_filesystem
from workspacefs.backends.sql import SqlFilesystem, SqlStore
from workspacefs.backends.sql._store import migration_config
from workspacefs.cli import main
from workspacefs.errors import SnapshotIncompatibleError, SnapshotNotFoundError, UnsupportedOperationError
from workspacefs.merge import is_text, merge_lines, split_lines

_ids = itertools.count()

# --- the line merge ------------------------------------------------------------------------------------------


def test_split_lines_keeps_newlines_and_a_final_unterminated_line() -> None:
    assert split_lines(b"") == []
    assert split_lines(b"a\r\nb\nc") == [b"a\r\n", b"b\n", b"c"]


def test_edits_apart_merge_and_edits_together_conflict() -> None:
    base = b"1\n2\n3\n4\n5\n"
    assert merge_lines(base, b"one\n2\n3\n4\n5\n", b"1\n2\n3\n4\nfive\n").content == b"one\n2\n3\n4\nfive\n"
    adjacent = merge_lines(base, b"one\n2\n3\n4\n5\n", b"1\ntwo\n3\n4\n5\n")
    assert len(adjacent.conflicts) == 1  # no unchanged line between them: as git, a conflict


def test_insertions_at_both_ends_and_a_deletion_merge() -> None:
    base = b"a\nb\nc\n"
    merged = merge_lines(base, b"top\na\nb\nc\n", b"a\nc\nbottom\n")
    assert merged.conflicts == () and merged.content == b"top\na\nc\nbottom\n"


def test_a_conflict_reports_each_version_with_its_own_line_numbers() -> None:
    merged = merge_lines(b"x\ny\n", b"x\nours\nmore\n", b"x\ntheirs\n")
    (hunk,) = merged.conflicts
    assert (hunk.ours_start, hunk.base_start, hunk.theirs_start) == (2, 2, 2)
    assert (hunk.ours, hunk.base, hunk.theirs) == ("ours\nmore\n", "y\n", "theirs\n")


def test_markers_close_lines_without_a_newline() -> None:
    merged = merge_lines(b"", b"ours", b"theirs")
    assert merged.content == b"<<<<<<< ours\nours\n=======\ntheirs\n>>>>>>> theirs\n"


def test_text_means_utf8_without_nul() -> None:
    assert is_text("naïve\n".encode()) and is_text(b"")
    assert not is_text(b"a\x00b") and not is_text(b"\xff\xfe")


# --- any backend --------------------------------------------------------------------------------------------


def test_merge_refuses_snapshots_of_another_kind(tmp_path: Path) -> None:
    memory = InMemoryFilesystem()
    with HostFilesystem(_dir(tmp_path, "ws"), snapshot_dir=tmp_path / "snaps") as host:
        foreign = host.snapshot()
        own = memory.snapshot()
        with pytest.raises(SnapshotIncompatibleError):
            memory.merge(own, own, foreign)


def test_merging_leaves_the_live_files_and_the_lineage_alone() -> None:
    fs = InMemoryFilesystem()
    fs.write("a.txt", "a\n")
    base = fs.snapshot()
    fs.write("a.txt", "b\n")
    ours = fs.snapshot()
    result = fs.merge(base, ours, base, tag="merged")
    assert result.snapshot.tag == "merged" and result.snapshot.parent_id == ours.snapshot_id
    assert fs.read("a.txt").content == "b\n" and fs.current_snapshot_id is None


# --- SQL: families ----------------------------------------------------------------------------------------


@pytest.fixture
def sql_store(service_url: str) -> Iterator[SqlStore]:
    store = SqlStore(service_url)
    yield store
    store.close()


def _session(store: SqlStore) -> SqlFilesystem:
    return SqlFilesystem(store, f"merge-{next(_ids)}")


def test_a_sql_fork_shares_content_and_its_family_shares_snapshots(sql_store: SqlStore) -> None:
    parent = _session(sql_store)
    parent.write_bytes("big.bin", b"x" * 600_000)
    before = sql_store.content_stats()
    child = parent.fork(session_id=f"{parent.session_id}-child")
    assert child.session_id == f"{parent.session_id}-child"
    assert sql_store.content_stats() == before  # rows only: no content copied
    grandchild = child.fork()
    assert set(parent.family()) == {parent.session_id, child.session_id, grandchild.session_id}
    taken = grandchild.snapshot(tag="deep")
    assert any(s.snapshot_id == taken.snapshot_id for s in parent.mergeable_snapshots())
    assert all(s.snapshot_id != taken.snapshot_id for s in parent.snapshots())  # its own catalogue is its own
    grandchild.write("new.txt", "n")
    parent.restore(grandchild.snapshot())
    assert parent.read("new.txt").content == "n"
    with pytest.raises(SnapshotNotFoundError):
        parent.delete_snapshot(taken)  # only the session that took a snapshot deletes it
    grandchild.delete_snapshot(taken)


def test_a_sql_fork_from_a_snapshot_and_strangers_stay_apart(sql_store: SqlStore) -> None:
    parent = _session(sql_store)
    parent.write("a.txt", "old")
    old = parent.snapshot()
    parent.write("a.txt", "new")
    child = parent.fork(old)
    assert child.read("a.txt").content == "old" and parent.read("a.txt").content == "new"
    stranger = _session(sql_store)
    with pytest.raises(SnapshotNotFoundError):
        stranger.restore(old)
    with pytest.raises(SnapshotNotFoundError):
        stranger.merge(old, old, old)
    with pytest.raises(FileExistsError):
        parent.fork(session_id=child.session_id)
    sessions = len(sql_store.sessions())
    with pytest.raises(ValueError, match="session_id"):
        parent.fork(session_id="x" * 201)
    assert len(sql_store.sessions()) == sessions  # refused before anything was made


def test_migration_0007_downgrades_and_upgrades(fast_tmp: Path) -> None:
    from alembic import command

    url = f"sqlite:///{fast_tmp / f'family-{next(_ids)}.db'}"
    store = SqlStore(url)
    parent = _session(store)
    parent.write("a.txt", "a")
    child = parent.fork()
    store.close()
    engine = sa.create_engine(url)
    config = migration_config()
    with engine.connect() as connection, connection.begin():
        config.attributes["connection"] = connection
        command.downgrade(config, "0006")
        assert "family" not in [c["name"] for c in sa.inspect(connection).get_columns("wsfs_sessions")]
        command.upgrade(config, "head")
    engine.dispose()
    SqlStore._migrated.discard(url)
    reopened = SqlStore(url)
    assert SqlFilesystem(reopened, child.session_id).read("a.txt").content == "a"  # a fork outlives its family
    reopened.close()


# --- host: forks --------------------------------------------------------------------------------------------


def _dir(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    path.mkdir()
    return path


def test_a_host_fork_needs_an_empty_root_outside(tmp_path: Path) -> None:
    root = _dir(tmp_path, "ws")
    with HostFilesystem(root, snapshot_dir=tmp_path / "snaps") as fs:
        fs.write("a.txt", "a")
        for bad in (root / "inside", tmp_path / "snaps" / "x", tmp_path):
            with pytest.raises(ValueError, match="outside"):
                fs.fork(root=bad)
        (tmp_path / "full").mkdir()
        (tmp_path / "full" / "f").write_text("f")
        with pytest.raises(ValueError, match="empty"):
            fs.fork(root=tmp_path / "full")
        with fs.fork(root=tmp_path / "fork") as forked:
            assert forked.read("a.txt").content == "a" and forked.snapshot_dir == fs.snapshot_dir


def test_host_roots_sharing_a_snapshot_dir_are_not_a_family_until_forked(tmp_path: Path) -> None:
    snaps = tmp_path / "snaps"
    with (
        HostFilesystem(_dir(tmp_path, "one"), snapshot_dir=snaps) as one,
        HostFilesystem(_dir(tmp_path, "two"), snapshot_dir=snaps) as two,
    ):
        one.write("a.txt", "a")
        taken = one.snapshot()
        with pytest.raises(SnapshotIncompatibleError):
            two.restore(taken)
        with one.fork(root=tmp_path / "three") as three:
            three.restore(taken)
            assert {s.snapshot_id for s in one.mergeable_snapshots()} >= {taken.snapshot_id}
        with pytest.raises(SnapshotIncompatibleError):
            two.restore(taken)


def test_backends_without_merge_refuse_it(tmp_path: Path) -> None:
    from workspacefs import CompositeFilesystem

    composite = CompositeFilesystem({"/": InMemoryFilesystem()})
    assert not composite.capabilities.merge
    taken = composite.snapshot()
    with pytest.raises(UnsupportedOperationError):
        composite.merge(taken, taken, taken)


# --- the command line ---------------------------------------------------------------------------------------


def _cli(fs_url: str, *arguments: str, stdin: bytes | None = None) -> Result:
    return CliRunner().invoke(main, [*arguments, "--fs", fs_url], input=stdin, catch_exceptions=False)


@pytest.fixture(params=["host", "sqlite"])
def cli_url(request: pytest.FixtureRequest, fast_tmp: Path) -> str:
    if request.param == "host":
        root = fast_tmp / f"merge-cli-{next(_ids)}"
        root.mkdir()
        return f"file://{root}?snapshot_dir={fast_tmp / f'merge-cli-snaps-{next(_ids)}'}"
    url = f"sqlite:///{fast_tmp / 'merge-cli.db'}?session=merge-{next(_ids)}"
    open_filesystem(url)
    return url


def _branches(url: str, ours: bytes, theirs: bytes) -> None:
    """Snapshots tagged base, theirs and ours of notes.txt, the workspace left at ours."""
    _cli(url, "write", "notes.txt", stdin=b"1\n2\n3\n4\n5\n")
    _cli(url, "snapshot", "create", "--tag", "base")
    _cli(url, "write", "notes.txt", stdin=theirs)
    _cli(url, "snapshot", "create", "--tag", "theirs")
    _cli(url, "snapshot", "restore", "base")
    _cli(url, "write", "notes.txt", stdin=ours)
    _cli(url, "snapshot", "create", "--tag", "ours")


def test_cli_merge_clean_and_applied(cli_url: str) -> None:
    _branches(cli_url, b"one\n2\n3\n4\n5\n", b"1\n2\n3\n4\nfive\n")
    done = _cli(cli_url, "merge", "base", "ours", "theirs", "--apply", "--json")
    assert done.exit_code == 0, done.stderr
    answer = json.loads(done.stdout)
    assert answer["clean"] and answer["applied"] and answer["merged"] == ["notes.txt"]
    assert _cli(cli_url, "cat", "notes.txt").stdout == "one\n2\n3\n4\nfive\n"


def test_cli_merge_conflict_exits_4_and_applies_markers_when_asked(cli_url: str) -> None:
    _branches(cli_url, b"1\n2\nours\n4\n5\n", b"1\n2\ntheirs\n4\n5\n")
    plain = _cli(cli_url, "merge", "base", "ours", "theirs")
    assert plain.exit_code == 4
    assert "C notes.txt  (content)" in plain.stderr and uuid.UUID(plain.stdout.strip())
    assert _cli(cli_url, "cat", "notes.txt").stdout == "1\n2\nours\n4\n5\n"  # without --apply nothing changes
    marked = _cli(cli_url, "merge", "base", "ours", "theirs", "--markers", "--apply", "--json")
    assert marked.exit_code == 4
    (conflict,) = json.loads(marked.stdout)["conflicts"]
    assert (conflict["path"], conflict["kind"], conflict["hunks"][0]["ours"]) == ("notes.txt", "content", "ours\n")
    assert "<<<<<<< ours\nours\n=======\ntheirs\n>>>>>>> theirs\n" in _cli(cli_url, "cat", "notes.txt").stdout


def test_cli_merge_unknown_snapshot_and_unsupported_backend(cli_url: str) -> None:
    _cli(cli_url, "write", "a.txt", stdin=b"a\n")
    _cli(cli_url, "snapshot", "create", "--tag", "base")
    missing = _cli(cli_url, "merge", "base", "base", "nope")
    assert missing.exit_code == 3 and "nope" in missing.stderr
    unsupported = _cli("composite://?" + urlencode({"/tmp": "memory://"}), "merge", "a", "b", "c")
    assert unsupported.exit_code == 6 and "cannot merge" in unsupported.stderr


# --- the REST API -------------------------------------------------------------------------------------------


@pytest.fixture
def service(store: SqlStore) -> Iterator[TestClient]:
    from workspacefs.server import create_app

    with TestClient(create_app(store, auth=False)) as client:
        yield client


def _rest_branches(client: TestClient, ours: str, theirs: str) -> str:
    """A new session with snapshots tagged base, theirs and ours of /notes.txt; its URL."""
    session = f"merge-{next(_ids)}-{uuid.uuid4().hex[:6]}"
    assert client.post("/v1/agents/agent-1/sessions", json={"id": session}).status_code == 201
    base = f"/v1/agents/agent-1/sessions/{session}"
    assert client.post(f"{base}/fs/notes.txt", json={"content": "1\n2\n3\n4\n5\n"}).status_code == 201
    client.post(f"{base}/snapshots", json={"tag": "base"})
    client.put(f"{base}/fs/notes.txt", json={"content": theirs})
    client.post(f"{base}/snapshots", json={"tag": "theirs"})
    client.post(f"{base}/snapshots/base/restore")
    client.put(f"{base}/fs/notes.txt", json={"content": ours})
    client.post(f"{base}/snapshots", json={"tag": "ours"})
    return base


def test_rest_merge_clean_then_applied(service: TestClient) -> None:
    base = _rest_branches(service, "one\n2\n3\n4\n5\n", "1\n2\n3\n4\nfive\n")
    answer = service.post(f"{base}/merge", json={"base": "base", "ours": "ours", "theirs": "theirs"})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["clean"] and not body["applied"] and body["merged"] == ["/notes.txt"] and body["conflicts"] == []
    assert service.get(f"{base}/fs/notes.txt").json()["content"] == "one\n2\n3\n4\n5\n"  # not applied
    assert service.post(f"{base}/snapshots/{body['snapshot']['id']}/restore").status_code == 200
    assert service.get(f"{base}/fs/notes.txt").json()["content"] == "one\n2\n3\n4\nfive\n"


def test_rest_merge_conflict_with_markers_applied(service: TestClient) -> None:
    base = _rest_branches(service, "1\n2\nours\n4\n5\n", "1\n2\ntheirs\n4\n5\n")
    request = {"base": "base", "ours": "ours", "theirs": "theirs", "markers": True, "apply": True, "tag": "m"}
    body = service.post(f"{base}/merge", json=request).json()
    assert not body["clean"] and body["applied"] and body["snapshot"]["tag"] == "m"
    (conflict,) = body["conflicts"]
    assert (conflict["path"], conflict["kind"]) == ("/notes.txt", "content")
    assert conflict["hunks"] == [
        {"ours_start": 3, "ours": "ours\n", "base_start": 3, "base": "3\n", "theirs_start": 3, "theirs": "theirs\n"}
    ]
    assert (
        "<<<<<<< ours\nours\n=======\ntheirs\n>>>>>>> theirs\n" in service.get(f"{base}/fs/notes.txt").json()["content"]
    )


def test_rest_merge_errors(service: TestClient) -> None:
    base = _rest_branches(service, "a\n", "b\n")
    missing = service.post(f"{base}/merge", json={"base": "base", "ours": "ours", "theirs": "nope"})
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "snapshot_not_found"
    invalid = service.post(f"{base}/merge", json={"base": "base", "ours": "ours"})
    assert invalid.status_code == 422
    other = _rest_branches(service, "a\n", "b\n")  # another session's snapshots are not this one's
    theirs_id = service.get(f"{other}/snapshots").json()["data"][1]["id"]
    stranger = service.post(f"{base}/merge", json={"base": "base", "ours": "ours", "theirs": theirs_id})
    assert stranger.status_code == 404


def test_rest_merge_shows_no_lines_of_a_file_the_policy_keeps_from_reading(
    service: TestClient, store: SqlStore
) -> None:
    """Snapshots taken before and after the user rotated ``.env`` (which the default policy lets no one read
    without approval) conflicted, and the conflict's hunks showed both secrets to any write token."""
    from workspacefs.server import SessionCatalog

    base = _rest_branches(service, "1\n2\nours\n4\n5\n", "1\n2\ntheirs\n4\n5\n")
    agent, _, session = base.removeprefix("/v1/agents/").partition("/sessions/")
    entry = SessionCatalog(store).get(agent, session)
    assert entry is not None
    user = SqlFilesystem(store, entry.storage_id)  # the user, beside the service and its policy
    user.write(".env", "API_KEY=first-secret\n")
    assert service.post(f"{base}/snapshots", json={"tag": "first"}).status_code == 201
    user.write(".env", "API_KEY=rotated-secret\n")
    assert service.post(f"{base}/snapshots", json={"tag": "rotated"}).status_code == 201
    for request in (
        {"base": "base", "ours": "first", "theirs": "rotated"},  # add/add: each side's whole file
        {"base": "first", "ours": "rotated", "theirs": "base"},  # modify/delete
        {"base": "base", "ours": "first", "theirs": "rotated", "markers": True, "tag": "marked"},
    ):
        answer = service.post(f"{base}/merge", json=request)
        assert answer.status_code == 200, answer.text
        assert "secret" not in answer.text, request
        assert "/.env" in [c["path"] for c in answer.json()["conflicts"]], request
    (added,) = [c for c in answer.json()["conflicts"] if c["path"] == "/.env"]
    assert added["kind"] == "add/add" and added["hunks"] == [] and "not shown" in added["message"]
    # a file the policy lets everyone read keeps its hunks
    notes = service.post(f"{base}/merge", json={"base": "base", "ours": "ours", "theirs": "theirs"}).json()
    (conflict,) = notes["conflicts"]
    assert conflict["path"] == "/notes.txt" and conflict["hunks"][0]["ours"] == "ours\n"


def test_a_guarded_merge_withholds_only_what_the_policy_keeps_from_reading() -> None:
    from workspacefs.policy import Policy

    fs = InMemoryFilesystem()
    fs.write("secret.key", "k1\n")
    fs.write("open.txt", "a\n")
    base = fs.snapshot()
    fs.write("secret.key", "k2\n")
    fs.write("open.txt", "b\n")
    ours = fs.snapshot()
    fs.restore(base)
    fs.write("secret.key", "k3\n")
    fs.write("open.txt", "c\n")
    theirs = fs.snapshot()
    rules = {"rules": [{"action": "deny", "operations": ["read"], "pattern": "*.key"}], "include_default": False}
    guarded = Policy.from_dict(rules).guard(fs)
    result = guarded.merge(base, ours, theirs)
    shown = {c.path: c.hunks for c in result.conflicts}
    assert shown["secret.key"] == () and shown["open.txt"][0].ours == "b\n"
    assert {c.path: c.hunks for c in fs.merge(base, ours, theirs).conflicts}["secret.key"][0].ours == "k2\n"


@pytest.mark.anyio
async def test_async_merge() -> None:
    from workspacefs import AsyncFilesystem

    fs = AsyncFilesystem(InMemoryFilesystem())
    await fs.write("a.txt", "1\n2\n3\n")
    base = await fs.snapshot()
    await fs.write("a.txt", "one\n2\n3\n")
    ours = await fs.snapshot()
    result = await fs.merge(base, ours, base)
    assert result.clean and result.snapshot.parent_id == ours.snapshot_id
