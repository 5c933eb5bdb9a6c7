"""A command run in a sandbox is journaled (issue 20): one ``exec`` entry with every path it created, changed or
deleted, under the caller's actor; undone as one, all or none; past the keep budget, refused with a typed error."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from fastapi.testclient import TestClient

from workspacefs import ToolContext, UndoConflictError, UndoContentNotKeptError, dispatch
from workspacefs.backends.container import CommandBudget, ContainerFilesystem, ContainerSandbox
from workspacefs.backends.sql import SqlStore
from workspacefs.cli import main
from workspacefs.history import DIRECTORY, NOT_KEPT, Actor, JournalEntry, acting_as
from workspacefs.server import create_app


@pytest.fixture
def sandbox(image: str, tmp_path: Path) -> Iterator[ContainerSandbox]:
    (tmp_path / "ws").mkdir()
    with ContainerSandbox(image, host_dir=tmp_path / "ws", snapshot_dir=tmp_path / "snapshots") as opened:
        yield opened


def _seed(fs: ContainerFilesystem) -> None:
    fs.write("keep.txt", "one\n")
    fs.write("gone.txt", "bye\n")
    fs.write("old/inner.txt", "inner\n")


_COMMAND = "echo two >> keep.txt; rm gone.txt; rm -r old; mkdir -p new/sub; echo hi > new/sub/made.txt"


def _newest(fs: ContainerFilesystem) -> JournalEntry:
    return fs.history(limit=1)[0]


def test_a_command_is_one_exec_entry_with_exactly_its_changes_and_the_actor(sandbox: ContainerSandbox) -> None:
    fs = sandbox.filesystem
    _seed(fs)
    before = _newest(fs).entry_id
    with acting_as(Actor(name="agent-1", session="s1")):
        assert sandbox.exec(_COMMAND).exit_code == 0
    entries = fs.history(since=before)
    assert len(entries) == 1
    entry = entries[0]
    assert (entry.operation, entry.actor.name, entry.actor.session, entry.detail) == ("exec", "agent-1", "s1", _COMMAND)
    kinds = {(c.path, c.kind, DIRECTORY in (c.before, c.after)) for c in entry.changes}
    assert kinds == {
        ("keep.txt", "modified", False),
        ("gone.txt", "deleted", False),
        ("old/inner.txt", "deleted", False),
        ("old", "deleted", True),
        ("new", "created", True),
        ("new/sub", "created", True),
        ("new/sub/made.txt", "created", False),
    }
    sizes = {c.path: (c.size_before, c.size_after) for c in entry.changes}
    assert sizes["keep.txt"] == (4, 8) and sizes["gone.txt"] == (4, 0) and sizes["new/sub/made.txt"] == (0, 3)
    assert entry.size_delta == 4 - 4 - 6 + 3
    assert {c.after for c in entry.changes if c.path == "keep.txt"} == {fs.content_id("keep.txt")}
    assert fs.read_version(entry.entry_id, "keep.txt", side="before") == b"one\n"


def test_an_argv_command_is_recorded_shell_quoted(sandbox: ContainerSandbox) -> None:
    fs = sandbox.filesystem
    assert sandbox.exec(["sh", "-c", "echo x > 'a b.txt'"]).exit_code == 0
    assert _newest(fs).detail == "sh -c 'echo x > '\"'\"'a b.txt'\"'\"''"


def test_undo_of_a_command_puts_every_path_back_as_one_entry(sandbox: ContainerSandbox) -> None:
    fs = sandbox.filesystem
    _seed(fs)
    assert sandbox.exec(_COMMAND).exit_code == 0
    target = _newest(fs).entry_id
    made = fs.undo(target)
    assert len(made) == 1 and (made[0].operation, made[0].undoes) == ("undo", target)
    assert fs.read("keep.txt").content == "one\n"
    assert fs.read("gone.txt").content == "bye\n"
    assert fs.read("old/inner.txt").content == "inner\n"
    assert not fs.exists("new")


def test_a_second_command_reuses_what_the_first_kept_and_is_undone_alike(
    sandbox: ContainerSandbox, monkeypatch: pytest.MonkeyPatch
) -> None:
    # files written a moment ago are "racy" for 2 s (read again each time); without the window the second
    # command reuses what the first kept, reading nothing
    monkeypatch.setattr("workspacefs.backends.host._commands.RACY_WINDOW_NS", 0)
    fs = sandbox.filesystem
    _seed(fs)
    assert sandbox.exec("echo first > first.txt").exit_code == 0
    assert sandbox.exec("echo changed > gone.txt; echo more >> keep.txt").exit_code == 0
    second = _newest(fs)
    assert sorted((c.path, c.kind) for c in second.changes) == [("gone.txt", "modified"), ("keep.txt", "modified")]
    fs.undo(second.entry_id)
    assert (fs.read("gone.txt").content, fs.read("keep.txt").content) == ("bye\n", "one\n")
    assert fs.read("first.txt").content == "first\n"


def test_a_later_write_makes_the_undo_refuse_unless_forced(sandbox: ContainerSandbox) -> None:
    fs = sandbox.filesystem
    _seed(fs)
    assert sandbox.exec(_COMMAND).exit_code == 0
    target = _newest(fs).entry_id
    fs.write("new/sub/made.txt", "edited later\n")
    with pytest.raises(UndoConflictError) as refused:
        fs.undo(target)
    assert refused.value.filename == "new/sub/made.txt" and refused.value.later == (_newest(fs).entry_id,)
    assert fs.read("keep.txt").content == "one\ntwo\n" and not fs.exists("gone.txt")  # nothing changed
    fs.undo(target, force=True)
    assert fs.read("keep.txt").content == "one\n" and fs.exists("gone.txt") and not fs.exists("new")


def test_a_command_that_changes_nothing_makes_no_entry(sandbox: ContainerSandbox) -> None:
    fs = sandbox.filesystem
    _seed(fs)
    newest = _newest(fs).entry_id
    assert sandbox.exec("cat keep.txt; ls -R; true").exit_code == 0
    assert sandbox.exec("touch keep.txt").exit_code == 0  # new times, the same bytes: no change
    assert sandbox.exec("false").exit_code == 1
    assert sandbox.exec("echo changed > keep.txt").exit_code == 0  # and one that does: the only new entry
    assert [(e.operation, [c.path for c in e.changes]) for e in fs.history(since=newest)] == [("exec", ["keep.txt"])]


def test_commands_run_inside_a_group_are_named_in_the_groups_entry(sandbox: ContainerSandbox) -> None:
    """An ``exec`` inside ``fs.grouped()`` is part of the group's entry, and the entry's ``detail`` lists each
    command (the detail an ``exec`` entry of its own would hold), so the log still says what ran."""
    fs = sandbox.filesystem
    _seed(fs)
    with fs.grouped("build"):
        fs.write("notes.txt", "plan\n")
        assert sandbox.exec("echo built > out.txt").exit_code == 0
        assert sandbox.exec(["sh", "-c", "rm gone.txt"]).exit_code == 0
    entry = _newest(fs)
    assert entry.operation == "build"
    assert {"notes.txt", "out.txt", "gone.txt"} <= set(entry.paths)
    assert entry.detail == "exec: echo built > out.txt\nexec: sh -c 'rm gone.txt'"
    fs.undo(entry.entry_id)
    assert not fs.exists("out.txt") and fs.read("gone.txt").content == "bye\n"


def test_a_timed_out_command_still_journals_what_it_changed(sandbox: ContainerSandbox) -> None:
    fs = sandbox.filesystem
    result = sandbox.exec("echo partial > half.txt; sleep 60", timeout=1)
    assert result.timed_out
    entry = _newest(fs)
    assert (entry.operation, [(c.path, c.kind) for c in entry.changes]) == ("exec", [("half.txt", "created")])


def test_over_the_budget_the_prior_content_is_not_kept_and_undo_refuses(image: str, tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    small = CommandBudget(max_bytes=4, max_files=10)
    with ContainerSandbox(
        image, host_dir=tmp_path / "ws", snapshot_dir=tmp_path / "snapshots", exec_budget=small
    ) as sandbox:
        fs = sandbox.filesystem
        _seed(fs)
        assert sandbox.exec("echo two >> keep.txt; echo new > made.txt").exit_code == 0
        entry = _newest(fs)
        befores = {c.path: c.before for c in entry.changes}
        assert befores == {"keep.txt": NOT_KEPT, "made.txt": None}
        assert [c.kind for c in entry.changes if c.path == "keep.txt"] == ["modified"]
        for force in (False, True):
            with pytest.raises(UndoContentNotKeptError) as refused:
                fs.undo(entry.entry_id, force=force)
            assert refused.value.filename == "keep.txt"
        assert fs.read("keep.txt").content == "one\ntwo\n" and fs.exists("made.txt")  # all or none: none
        with pytest.raises(FileNotFoundError):
            fs.read_version(entry.entry_id, "keep.txt", side="before")


def test_run_command_journals_under_the_tool_context_actor(sandbox: ContainerSandbox) -> None:
    fs = sandbox.filesystem
    result = dispatch("run_command", {"command": "echo out > built.txt"}, ToolContext(fs, actor="agent-7"))
    assert result.success, result.message
    entry = _newest(fs)
    assert (entry.operation, entry.actor.name, entry.actor.via) == ("exec", "agent-7", "tool")
    assert [(c.path, c.kind) for c in entry.changes] == [("built.txt", "created")]


def test_a_write_made_meanwhile_is_its_own_entry_and_not_recorded_twice(sandbox: ContainerSandbox) -> None:
    fs = sandbox.filesystem
    ready = threading.Event()

    def write_meanwhile() -> None:
        ready.wait(60)
        fs.write("meanwhile.txt", "from the library\n")

    writer = threading.Thread(target=write_meanwhile)
    writer.start()
    ready.set()
    # the command waits for the library's write, then makes its own file
    result = sandbox.exec("while [ ! -f meanwhile.txt ]; do sleep 0.05; done; echo cmd > cmd.txt", timeout=60)
    writer.join()
    assert result.exit_code == 0
    entries = fs.history(limit=2)
    assert [(e.operation, [c.path for c in e.changes]) for e in entries] == [
        ("exec", ["cmd.txt"]),
        ("write", ["meanwhile.txt"]),
    ]


def test_the_cli_log_shows_the_command(sandbox: ContainerSandbox, tmp_path: Path) -> None:
    assert sandbox.exec("echo x > logged.txt").exit_code == 0
    url = f"file://{tmp_path / 'ws'}?snapshot_dir={tmp_path / 'snapshots'}"
    shown = CliRunner().invoke(main, ["log", "--fs", url])
    assert shown.exit_code == 0, shown.output
    assert "exec" in shown.output and "Ran:   echo x > logged.txt" in shown.output
    assert "created  logged.txt" in shown.output
    entries = json.loads(CliRunner().invoke(main, ["log", "--json", "--fs", url]).output)
    assert (entries[0]["operation"], entries[0]["detail"]) == ("exec", "echo x > logged.txt")


def test_the_service_history_shows_a_command_run_in_the_sessions_directory(image: str, tmp_path: Path) -> None:
    root = tmp_path / "agents"
    store = SqlStore(f"sqlite:///{tmp_path}/service.db")
    try:
        with TestClient(create_app(store, auth=False, sessions_root=f"file://{root}")) as client:
            base = "/v1/agents/alice/sessions/s1"
            assert client.post("/v1/agents/alice/sessions", json={"id": "s1"}).status_code == 201
            assert client.post(f"{base}/fs/a.txt", json={"content": "one\n"}).status_code == 201
            workspace, journal = root / "alice" / "s1", root / ".snapshots" / "alice" / "s1"
            with ContainerSandbox(image, host_dir=workspace, snapshot_dir=journal) as sandbox, acting_as("builder"):
                assert sandbox.exec("echo two >> a.txt").exit_code == 0
            newest = client.get(f"{base}/history").json()["data"][0]
            assert (newest["operation"], newest["detail"], newest["actor"]["name"]) == (
                "exec",
                "echo two >> a.txt",
                "builder",
            )
            assert [(c["path"], c["kind"]) for c in newest["changes"]] == [("/a.txt", "modified")]
            undone = client.post(f"{base}/undo", json={"entry_id": newest["entry_id"]})
            assert undone.status_code == 200, undone.text
            assert client.get(f"{base}/fs/a.txt").json()["content"] == "one\n"
    finally:
        store.close()


def test_a_restore_killed_in_a_container_workspace_is_finished_by_the_next_sandbox(image: str, tmp_path: Path) -> None:
    """A restore's record that nobody holds (its process died) is finished when the next sandbox opens the same
    directory: the finishing open ran inside ``HostFilesystem.__init__``, before the container's filesystem knew its
    sandbox, so it failed ('no attribute _sandbox'), was only logged, and dropped the record for good."""
    root, snapshots = tmp_path / "ws", tmp_path / "snapshots"
    root.mkdir()
    with ContainerSandbox(image, host_dir=root, snapshot_dir=snapshots) as first:
        first.filesystem.write("a.txt", "v1\n")
        target = first.filesystem.snapshot(tag="v1")
        first.filesystem.write("a.txt", "v2\n")
        first.filesystem.write("b.txt", "added since\n")
        record = first.filesystem._restoring.path
    record.parent.mkdir(exist_ok=True)
    record.write_text(json.dumps({"snapshot": str(target.snapshot_id), "before": {}}))  # as a killed restore left
    with ContainerSandbox(image, host_dir=root, snapshot_dir=snapshots) as second:
        reaped = second.filesystem.reaped
        assert (reaped.restores_finished, reaped.restores_failed) == (1, 0)
        assert (root / "a.txt").read_text() == "v1\n" and not (root / "b.txt").exists()
        assert second.exec(["cat", "a.txt"]).stdout == "v1\n"  # the container sees it too
        assert not record.exists()
