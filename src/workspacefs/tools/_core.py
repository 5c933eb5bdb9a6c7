"""The tool layer's values: ``Tool``, ``ToolResult``, ``ToolContext`` and the read-before-write ledger."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, TypeVar

from pydantic import BaseModel

from workspacefs.history import Actor, acting_as, current_actor
from workspacefs.paths import normalize_path
from workspacefs.policy import GuardedFilesystem, Policy
from workspacefs.protocol import Filesystem
from workspacefs.snapshots import FilesystemSnapshot
from workspacefs.streams import content_id_of
from workspacefs.undo import UndoLog

__all__ = [
    "EditHistory",
    "EditRecord",
    "ReadState",
    "SnapshotLedger",
    "Tool",
    "ToolContext",
    "ToolResult",
    "acting_for",
    "content_digest",
]

ValueT = TypeVar("ValueT")
ParamsT = TypeVar("ParamsT", bound=BaseModel)


@dataclass(frozen=True, slots=True)
class ToolResult(Generic[ValueT]):
    """What a tool returns: ``message`` is what the model reads; ``value`` is for code. A failure carries the
    stable code of its error type (``errors.ERROR_CODES``) in ``error_code`` when an exception caused it."""

    message: str
    value: ValueT | None = None
    success: bool = True
    error_code: str | None = None


def content_digest(data: bytes) -> str:
    """The content id read-before-write compares: the backends' own (``streams.content_id_of``), so a
    model's ``expected_hash`` and a conditional write name a version the same way."""
    return content_id_of(data)


MAX_SEEN_TEXT = 64 * 1024
"""The text a model read is kept up to this many characters, so a stale write can show what changed."""


class ReadState:
    """Which files a model has read (and the content it saw), so it cannot overwrite what it never saw.

    Keys are normalised paths of one filesystem. Share one ``ReadState`` across the contexts of a
    conversation (a :class:`~workspacefs.agent.Session` carries one).
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[int, str], str] = {}
        self._texts: dict[tuple[int, str], str] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _key(fs: Filesystem, path: str) -> tuple[int, str]:
        beneath = fs.unguarded if isinstance(fs, GuardedFilesystem) else fs  # one workspace, however it is viewed
        return id(beneath), normalize_path(path, mount_point=fs.mount_point)

    def record(self, fs: Filesystem, path: str, digest: str, text: str | None = None) -> None:
        """Remember that the model has seen ``path`` with this content id (and, when small, its text)."""
        key = self._key(fs, path)
        with self._lock:
            self._seen[key] = digest
            if text is not None and len(text) <= MAX_SEEN_TEXT:
                self._texts[key] = text
            else:
                self._texts.pop(key, None)

    def seen(self, fs: Filesystem, path: str) -> str | None:
        """The digest the model last saw, or ``None`` if it never read the file."""
        with self._lock:
            return self._seen.get(self._key(fs, path))

    def seen_text(self, fs: Filesystem, path: str) -> str | None:
        """The text the model last saw of ``path``, when it was small enough to keep."""
        with self._lock:
            return self._texts.get(self._key(fs, path))

    def forget(self, fs: Filesystem, path: str, *, below: bool = True) -> None:
        """Drop what is known of ``path`` and (``below``, for a directory) anything under it; a file's
        entry alone goes in constant time."""
        key = self._key(fs, path)
        with self._lock:
            self._seen.pop(key, None)
            self._texts.pop(key, None)
            if not below:
                return
            for known in [k for k in self._seen if k[0] == key[0] and k[1].startswith(key[1] + "/")]:
                del self._seen[known]
                self._texts.pop(known, None)


@dataclass(frozen=True, slots=True)
class EditRecord:
    """One edit of a file: what it held before (``None``: it did not exist) and the content id it left."""

    before: bytes | None
    after: str


class EditHistory:
    """The content each file had before each edit in one conversation, newest last, for the text editor's
    ``undo_edit`` (bounded: the last ``per_file`` edits of a file, ``max_bytes`` in all; oldest go first)."""

    def __init__(self, *, per_file: int = 20, max_bytes: int = 32 * 1024 * 1024) -> None:
        self._edits: dict[tuple[int, str], list[EditRecord]] = {}
        self._bytes = 0
        self._per_file = per_file
        self._max_bytes = max_bytes
        self._lock = threading.Lock()

    def push(self, fs: Filesystem, path: str, before: bytes | None, after: str) -> None:
        """Remember an edit of ``path``: its content before, and the content id the edit left."""
        key = ReadState._key(fs, path)
        with self._lock:
            edits = self._edits.setdefault(key, [])
            edits.append(EditRecord(before, after))
            self._bytes += len(before or b"")
            if len(edits) > self._per_file:
                self._bytes -= len(edits.pop(0).before or b"")
            while self._bytes > self._max_bytes:  # drop the oldest edit of the file with the most kept
                fullest = max(self._edits.values(), key=lambda kept: sum(len(e.before or b"") for e in kept))
                self._bytes -= len(fullest.pop(0).before or b"")
                if not fullest:
                    self._edits = {k: v for k, v in self._edits.items() if v}

    def last(self, fs: Filesystem, path: str) -> EditRecord | None:
        """The newest edit of ``path`` still remembered, or ``None``."""
        with self._lock:
            edits = self._edits.get(ReadState._key(fs, path))
            return edits[-1] if edits else None

    def drop_last(self, fs: Filesystem, path: str) -> None:
        """Forget the newest edit of ``path`` (once it has been undone)."""
        key = ReadState._key(fs, path)
        with self._lock:
            edits = self._edits.get(key)
            if edits:
                self._bytes -= len(edits.pop().before or b"")
                if not edits:
                    del self._edits[key]


class SnapshotLedger:
    """The snapshots taken through tools in one conversation, by id (thread-safe)."""

    def __init__(self) -> None:
        self._taken: dict[str, FilesystemSnapshot] = {}
        self._lock = threading.Lock()

    def add(self, snapshot: FilesystemSnapshot) -> None:
        """Remember a snapshot."""
        with self._lock:
            self._taken[str(snapshot.snapshot_id)] = snapshot

    def all(self) -> list[FilesystemSnapshot]:
        """Every remembered snapshot, oldest first."""
        with self._lock:
            return sorted(self._taken.values(), key=lambda s: s.created_at)


@dataclass(frozen=True, slots=True)
class ToolContext:
    """Everything a handler may use: the filesystem first of all.

    ``prompt``, ``rendered_prompt``, ``adapter``, ``session``, ``deadline`` and ``budget_tracker`` are
    passed through for handlers that want them. ``snapshots`` remembers the snapshots the model took with
    the ``snapshot`` tool. ``read_before_write`` refuses to overwrite or edit a
    file the model has not read (or that changed since); ``transactional`` makes the dispatcher record
    the before-state of the paths a mutating tool is about to touch (its ``undo`` plan, an
    :class:`~workspacefs.undo.UndoLog`) and put them back if the call fails part way (``None``: on for
    every writable filesystem; it costs what the call changes, never a snapshot of the workspace).
    ``policy`` decides which paths the tools may read, write, delete or run commands in (``None``:
    :meth:`Policy.default() <workspacefs.policy.Policy.default>`); ``filesystem`` is then seen through it,
    so every handler, built-in or not, works under the same rules. ``actor`` names who calls (an agent
    id, "user via browser"), as the caller declares it: a refused stale write tells the next caller who
    changed the file. ``edit_history`` keeps what files held before each edit (the text editor's
    ``undo_edit``).
    """

    filesystem: Filesystem | None = None
    prompt: Any = None
    rendered_prompt: Any = None
    adapter: Any = None
    session: Any = None
    deadline: datetime | None = None
    budget_tracker: Any = None
    read_state: ReadState = field(default_factory=ReadState)
    snapshots: SnapshotLedger = field(default_factory=SnapshotLedger)
    read_before_write: bool = True
    transactional: bool | None = None
    policy: Policy | None = None
    actor: str | None = None
    edit_history: EditHistory = field(default_factory=EditHistory)

    def __post_init__(self) -> None:
        policy = self.policy if self.policy is not None else Policy.default()
        object.__setattr__(self, "policy", policy)  # frozen: settled once, and kept by dataclasses.replace
        if self.filesystem is not None:
            guarded: Filesystem = policy.guard(self.filesystem)  # the view offers the whole protocol
            object.__setattr__(self, "filesystem", guarded)


def acting_for(context: ToolContext, call_id: str | None = None) -> AbstractContextManager[Actor]:
    """Who a tool call's changes are journaled under: the context's ``actor``, the call's id, ``via="tool"``
    (what the caller declared around the call fills the rest: a service's session, MCP's ``via``)."""
    fields: dict[str, str | None] = {"via": current_actor().via or "tool"}
    if call_id is not None:
        fields["tool_call"] = call_id
    return acting_as(context.actor, **fields)


Handler = Callable[[ParamsT, ToolContext], ToolResult[Any]]


@dataclass(frozen=True, slots=True)
class Tool(Generic[ParamsT]):
    """A tool a model can call: a name, a description, typed parameters and a handler.

    ``mutating`` tools change the filesystem; ``destructive`` ones may delete or overwrite data (MCP's
    ``destructiveHint``). ``paths_of`` names the workspace paths a call's raw arguments reach, for tools
    whose paths are not simply their ``path``/``src``/``dst`` arguments (a patch, the memory tool).
    ``undo`` records, before the call, what it may change (``log.will_create``,
    ``will_change``, ``will_move``) so the dispatcher can roll a failed call back; ``None`` means the call
    is one atomic step with nothing to undo part way. ``transactional=False`` never rolls back.
    """

    name: str
    description: str
    params: type[ParamsT]
    handler: Callable[..., ToolResult[Any]]
    mutating: bool = False
    destructive: bool = False
    idempotent: bool = True
    transactional: bool = True
    undo: Callable[[Any, UndoLog], None] | None = None
    paths_of: Callable[[dict[str, Any]], list[str]] | None = None

    def __call__(self, params: ParamsT, *, context: ToolContext) -> ToolResult[Any]:
        """Run the handler with already-validated parameters."""
        result: ToolResult[Any] = self.handler(params, context=context)
        return result
