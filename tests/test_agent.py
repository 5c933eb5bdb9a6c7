"""Sections, prompts, tool contexts and sessions (seeds 001/002)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from workspacefs import FilesystemSnapshot, HostMount, InMemoryFilesystem
from workspacefs.agent import (
    FilesystemSnapshotRef,
    HostWorkspaceSection,
    MarkdownSection,
    Prompt,
    PromptTemplate,
    Session,
    VfsSection,
    WorkspaceSection,
    build_tool_context,
    create_unified_snapshot,
    replace_latest,
    restore_unified_snapshot,
)
from workspacefs.tools import FILESYSTEM_TOOLS, dispatch


@dataclass(frozen=True)
class Note:
    text: str
    at: uuid.UUID
    tags: tuple[str, ...] = ()


def test_prompt_finds_the_workspace_section_anywhere(tmp_path: Path) -> None:
    vfs = VfsSection()
    nested = MarkdownSection(
        title="Outer", key="outer", children=[MarkdownSection(title="Inner", key="inner", children=[vfs])]
    )
    prompt = Prompt(
        PromptTemplate("ns", "key", [MarkdownSection(title="Intro", key="intro", template="Hi $name"), nested])
    )
    assert prompt.filesystem() is vfs.filesystem
    assert isinstance(vfs, WorkspaceSection)
    assert not isinstance(MarkdownSection(title="x", key="x"), WorkspaceSection)
    assert [t.name for t in prompt.tools()] == [t.name for t in FILESYSTEM_TOOLS]
    text = prompt.render(name="model")
    assert "## Intro\n\nHi model" in text and "#### Workspace" in text and "/workspace" in text
    assert Prompt([MarkdownSection(title="No workspace", key="none")]).filesystem() is None


def test_vfs_section_hydrates_from_host_mounts(tmp_path: Path) -> None:
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "main.py").write_text("print(1)\n")
    (tmp_path / "src" / "notes.txt").write_text("skip\n")
    vfs = VfsSection(mounts=[HostMount("src", include_glob=("*.py",))], allowed_host_roots=[tmp_path])
    fs = vfs.filesystem
    assert fs.exists("src/main.py") and not fs.exists("src/notes.txt")
    assert fs.read("/workspace/src/main.py").content == "print(1)\n"


def test_host_workspace_section(tmp_path: Path) -> None:
    (tmp_path / "ws").mkdir()
    section = HostWorkspaceSection(tmp_path / "ws", snapshot_dir=tmp_path / "snaps")
    prompt = Prompt([section])
    context = build_tool_context(prompt)
    assert dispatch("write_file", {"path": "/workspace/a.txt", "content": "a"}, context).success
    assert (tmp_path / "ws" / "a.txt").read_text() == "a"


def test_tool_contexts_share_the_sessions_read_ledger() -> None:
    session = Session()
    prompt = Prompt([VfsSection(session=session)])
    fs = prompt.filesystem()
    assert fs is not None
    fs.write("a.txt", "a\n")
    assert dispatch("read_file", {"path": "a.txt"}, build_tool_context(prompt, session=session)).success
    # a brand-new context for the next call still knows the file was read
    assert dispatch(
        "write_file", {"path": "a.txt", "content": "b"}, build_tool_context(prompt, session=session)
    ).success
    fresh = build_tool_context(prompt)  # no session: nothing is known
    assert not dispatch("write_file", {"path": "a.txt", "content": "c"}, fresh).success


def test_slices_and_reducers() -> None:
    session = Session()
    first, second = Note("one", uuid.uuid4()), Note("two", uuid.uuid4())
    session[Note].append(first)
    session[Note].append(second)
    assert session[Note].all() == (first, second) and session[Note].latest() == second
    session[Note].register(Note, replace_latest)
    session[Note].append(first)
    assert session[Note].all() == (first,)
    session[Note].clear()
    assert session[Note].latest() is None


def test_session_snapshot_and_rollback_include_in_memory_files() -> None:
    session = Session()
    fs = InMemoryFilesystem()
    session.attach_filesystem("vfs", fs)
    fs.write("a.txt", "before")
    session[Note].append(Note("kept", uuid.uuid4()))
    snapshot = session.snapshot()
    fs.write("a.txt", "after")
    fs.write("b.txt", "new")
    session[Note].append(Note("dropped", uuid.uuid4()))
    session.rollback(snapshot)
    assert fs.read("a.txt").content == "before" and not fs.exists("b.txt")
    assert [n.text for n in session[Note].all()] == ["kept"]


def test_session_save_and_load_carry_files(tmp_path: Path) -> None:
    session = Session()
    fs = InMemoryFilesystem(mount_point="/workspace")
    session.attach_filesystem("vfs", fs)
    fs.write("src/a.py", "print('a')\n")
    fs.write_bytes("bin/blob", bytes(range(256)))
    fs.mkdir("empty")
    note = Note("persisted", uuid.uuid4(), ("x", "y"))
    session[Note].append(note)
    snapshot = fs.snapshot(tag="t")
    session[FilesystemSnapshot].append(snapshot)
    session.save(tmp_path / "session.json")
    with pytest.raises(ValueError, match="types="):
        Session.load(tmp_path / "session.json")
    loaded = Session.load(tmp_path / "session.json", types=[Note])
    assert loaded[Note].all() == (note,)
    assert loaded[FilesystemSnapshot].latest() == snapshot  # metadata survives; in-memory payloads do not
    restored = loaded.filesystem("vfs")
    assert restored.mount_point == "/workspace"
    assert restored.read("src/a.py").content == "print('a')\n"
    assert restored.read_bytes("bin/blob").content == bytes(range(256))
    assert restored.stat("empty").is_directory


def test_unified_snapshots() -> None:
    session = Session()
    fs = InMemoryFilesystem()
    fs.write("config.py", "DEBUG = True")
    session_snapshot, fs_snapshot = create_unified_snapshot(session, fs, "vfs")
    [ref] = session[FilesystemSnapshotRef].all()
    assert ref == FilesystemSnapshotRef("vfs", fs_snapshot.snapshot_id, "InMemoryFilesystem")
    fs.write("config.py", "DEBUG = False")
    session[Note].append(Note("later", uuid.uuid4()))
    restore_unified_snapshot(session, fs, session_snapshot, fs_snapshot)
    assert fs.read("config.py").content == "DEBUG = True"
    assert session[Note].all() == ()
    assert session[FilesystemSnapshotRef].all() == (ref,)
