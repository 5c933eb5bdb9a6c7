"""Conformance: random operation sequences agree with a plain-dict model (hypothesis)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workspacefs.errors import DirectoryNotEmptyError, MoveIntoSelfError
from workspacefs.paths import ancestors, is_within
from workspacefs.protocol import SnapshotableFilesystem
from workspacefs.testing._base import SuiteBase

__all__ = ["ModelSuite", "TreeModel"]


@dataclass
class TreeModel:
    """The reference semantics of DESIGN §3 for the mutating operations, on two plain containers."""

    files: dict[str, bytes] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=set)

    def kind(self, path: str) -> str | None:
        if path in self.files:
            return "file"
        return "dir" if path in self.dirs or path == "" else None

    def _parents(self, path: str) -> None:
        for directory in ancestors(path):
            if directory in self.files:
                raise NotADirectoryError(path)
        for directory in ancestors(path):
            self.dirs.add(directory)

    def _below(self, path: str) -> list[str]:
        return [p for p in [*self.files, *self.dirs] if is_within(p, path) and p != path]

    def write(self, path: str, data: bytes, mode: str) -> None:
        self._parents(path)
        if path in self.dirs:
            raise IsADirectoryError(path)
        if mode == "create" and path in self.files:
            raise FileExistsError(path)
        self.files[path] = self.files.get(path, b"") + data if mode == "append" else data

    def mkdir(self, path: str) -> None:
        if path in self.files:
            raise FileExistsError(path)
        self._parents(path)
        self.dirs.add(path)

    def delete(self, path: str, recursive: bool) -> None:
        kind = self.kind(path)
        if kind is None:
            raise FileNotFoundError(path)
        if kind == "file":
            del self.files[path]
            return
        below = self._below(path)
        if below and not recursive:
            raise DirectoryNotEmptyError(path)
        self._drop([*below, path])

    def _drop(self, paths: list[str]) -> None:
        for victim in paths:
            self.files.pop(victim, None)
            self.dirs.discard(victim)

    def transfer(self, src: str, dst: str, overwrite: bool, *, keep_source: bool) -> None:
        kind = self.kind(src)
        if kind is None:
            raise FileNotFoundError(src)
        if is_within(dst, src):
            raise MoveIntoSelfError(dst)
        target = self.kind(dst)
        if target is None:
            self._parents(dst)
        elif not overwrite:
            raise FileExistsError(dst)
        elif is_within(src, dst):
            raise MoveIntoSelfError(dst)
        elif kind == "dir" and target == "file":
            raise NotADirectoryError(dst)
        elif kind == "file" and target == "dir":
            raise IsADirectoryError(dst)
        elif target == "dir":
            self._drop([*self._below(dst), dst])
        moved = [src, *self._below(src)]
        new_files = {dst + p[len(src) :]: self.files[p] for p in moved if p in self.files}
        new_dirs = {dst + p[len(src) :] for p in moved if p in self.dirs}
        if not keep_source:
            self._drop(moved)
        self.files.update(new_files)
        self.dirs |= new_dirs

    def snapshot(self) -> tuple[dict[str, bytes], set[str]]:
        return dict(self.files), set(self.dirs)

    def restore(self, state: tuple[dict[str, bytes], set[str]]) -> None:
        self.files, self.dirs = dict(state[0]), set(state[1])

    def tree(self) -> dict[str, bytes | None]:
        found: dict[str, bytes | None] = {d: None for d in self.dirs}
        found.update(self.files)
        return found


_SEGMENTS = st.sampled_from(["a", "b", "c.txt", "d.txt"])
_PATHS = st.lists(_SEGMENTS, min_size=1, max_size=3).map("/".join)
_DATA = st.binary(max_size=12)
Operation = tuple[Any, ...]
_OPERATIONS: st.SearchStrategy[Operation] = st.one_of(
    st.tuples(st.just("write"), _PATHS, _DATA, st.sampled_from(["overwrite", "create", "append"])),
    st.tuples(st.just("mkdir"), _PATHS),
    st.tuples(st.just("delete"), _PATHS, st.booleans()),
    st.tuples(st.just("move"), _PATHS, _PATHS, st.booleans()),
    st.tuples(st.just("copy"), _PATHS, _PATHS, st.booleans()),
    st.tuples(st.just("snapshot")),
    st.tuples(st.just("restore"), st.integers(min_value=0, max_value=7)),
)


def _outcome(action: Callable[[], object]) -> str:
    """``ok``, or the exact error type: the typed errors are part of the contract, not only their bases."""
    try:
        action()
    except (OSError, ValueError) as exc:
        return type(exc).__name__
    return "ok"


class ModelSuite(SuiteBase):
    """Random sequences of writes, mkdirs, deletes, moves, copies, snapshots and restores."""

    model_examples: ClassVar[int] = 60

    def _run(self, operations: list[Operation]) -> None:
        fs = self.create_filesystem()
        self._opened.append(fs)
        assert isinstance(fs, SnapshotableFilesystem)
        model = TreeModel()
        snapshots: list[tuple[Any, tuple[dict[str, bytes], set[str]]]] = []
        for step, operation in enumerate(operations):
            name, *args = operation
            if name == "snapshot":
                snapshots.append((fs.snapshot(), model.snapshot()))
                continue
            if name == "restore":
                if snapshots:
                    real, modelled = snapshots[args[0] % len(snapshots)]
                    fs.restore(real)
                    model.restore(modelled)
                continue
            real_action, model_action = self._actions(fs, model, name, args)
            expected, actual = _outcome(model_action), _outcome(real_action)
            assert actual == expected, f"step {step} {operation}: backend {actual}, model {expected}"
            assert self.tree(fs) == model.tree(), f"trees differ after step {step} {operation}"

    @staticmethod
    def _actions(
        fs: SnapshotableFilesystem, model: TreeModel, name: str, args: list[Any]
    ) -> tuple[Callable[[], object], Callable[[], object]]:
        if name == "write":
            path, data, mode = args
            return (lambda: fs.write_bytes(path, data, mode=mode)), (lambda: model.write(path, data, mode))
        if name == "mkdir":
            return (lambda: fs.mkdir(args[0])), (lambda: model.mkdir(args[0]))
        if name == "delete":
            path, recursive = args
            return (lambda: fs.delete(path, recursive=recursive)), (lambda: model.delete(path, recursive))
        src, dst, overwrite = args
        if name == "move":
            return (lambda: fs.move(src, dst, overwrite=overwrite)), (
                lambda: model.transfer(src, dst, overwrite, keep_source=False)
            )
        return (lambda: fs.copy(src, dst, overwrite=overwrite)), (
            lambda: model.transfer(src, dst, overwrite, keep_source=True)
        )

    def test_random_operations_agree_with_the_model(self) -> None:
        runner = settings(
            max_examples=self.model_examples,
            deadline=None,
            suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
        )(given(st.lists(_OPERATIONS, max_size=25))(self._run))
        runner()
