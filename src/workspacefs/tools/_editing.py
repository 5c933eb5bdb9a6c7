"""What every text-changing tool shares: loading a text file, the stale-write check, and the write itself.

``edit_file``, ``write_file``, the Anthropic text editor and memory tools and the patch tools all load,
check and commit through here, so the rules are the same whatever the model's native tool is: a file the
model never read is not overwritten, a file that changed since it read it is not clobbered (the
refusal says who changed it, when known, and shows what changed), binary files are refused with advice
that can work, and the write is a compare-and-set on the content id the model saw wherever the
backend has conditional writes (``capabilities.conditional_writes``), so no race slips between check
and write.
"""

from __future__ import annotations

import difflib
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from pydantic import BaseModel

from workspacefs.errors import PreconditionFailedError
from workspacefs.paths import MAX_CONVENIENCE_BYTES
from workspacefs.policy import GuardedFilesystem
from workspacefs.protocol import ConditionalWrites, Filesystem
from workspacefs.results import WriteResult
from workspacefs.search import BINARY_SNIFF_BYTES
from workspacefs.streams import ContentHasher, content_id_of
from workspacefs.tools._core import MAX_SEEN_TEXT, ToolContext, ToolResult
from workspacefs.tools._messages import display, failure, human_size
from workspacefs.undo import UndoLog, disown

__all__ = [
    "BOM",
    "MAX_ECHO_CHARS",
    "RefusalError",
    "TextFile",
    "binary_refusal",
    "check_edit_size",
    "check_result_size",
    "commit",
    "current_id",
    "echo",
    "line_numbers",
    "load_text",
    "plain_dict",
    "read_file_call",
    "record_edit",
    "refuse_if_stale",
    "require_fresh",
    "short_diff",
]

BOM = "\ufeff"
MAX_ECHO_CHARS = 400
"""A refusal quotes at most this much of what the model sent."""
MAX_LISTED_LINES = 20
"""A "several matches" refusal names at most this many lines."""


def read_file_call(where: str) -> str:
    """How the file tools tell a model to read ``where`` again."""
    return f'read_file(path="{where}")'


def plain_dict(value: Any, what: str) -> dict[str, Any]:
    """A provider's item as a dict: an SDK object (any pydantic model) or a mapping; ``TypeError`` otherwise."""
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"expected {what}, not {type(value).__name__}")


def echo(text: str) -> str:
    """``text`` as a refusal quotes it: cut after ``MAX_ECHO_CHARS`` characters."""
    return text if len(text) <= MAX_ECHO_CHARS else text[:MAX_ECHO_CHARS] + f"… ({len(text):,} characters)"


def check_edit_size(label: str, text: str | int, limit: int, *, tool: str | None = None) -> None:
    """Refuse new text (or that many characters of it) of more than ``limit`` characters for one edit (the limit
    ``write_file`` has); ``tool`` names the tool to call again for the rest."""
    size = text if isinstance(text, int) else len(text)
    if size > limit:
        rest = f" Make the change in parts, one {tool} call for each." if tool else ""
        raise RefusalError(f"{label} has {size:,} characters; at most {limit:,} fit in one edit.{rest}")


def check_result_size(label: str, characters: int) -> None:
    """Refuse an edit whose result would hold ``characters`` characters, more than a file edited here can hold, before
    it is built (each character is one UTF-8 byte or more: a ``replace_all`` must not grow a file in memory by the
    number of its matches times the new text only for the backend to refuse it)."""
    if characters > MAX_CONVENIENCE_BYTES:
        raise RefusalError(
            f"{label}The edited file would hold at least {human_size(characters)}, more than the "
            f"{human_size(MAX_CONVENIENCE_BYTES)} a file edited here can hold; nothing was changed. Replace fewer "
            "occurrences, or shorter text, at a time.",
            "too_large",
        )


def record_edit(log: UndoLog, path: str, *, create: bool = False) -> None:
    """Record, before a text-changing call, what it may change at ``path``: a missing path (and the parents it may
    make), or (unless it only ``create``s) a file small enough to edit. A directory, a file too large to edit, or a
    file a create would meet is refused before any change, so nothing of it is copied (a walk of a whole tree or a
    copy of a huge file, for a call that fails on its first check, was the cost before)."""
    try:
        info = log.fs.stat(path)
    except FileNotFoundError:
        log.will_create(path)
        return
    if not create and info.is_file and info.size_bytes <= MAX_CONVENIENCE_BYTES:
        log.will_change(path)


def line_numbers(text: str, needle: str) -> tuple[list[int], int]:
    """The 1-based lines where ``needle`` starts (the first ``MAX_LISTED_LINES``), and how many times it
    occurs in all — counted in one pass, however many there are."""
    lines: list[int] = []
    count, line, scanned = 0, 1, 0
    position = text.find(needle)
    while position >= 0:
        count += 1
        if len(lines) < MAX_LISTED_LINES:
            line += text.count("\n", scanned, position)
            scanned = position
            lines.append(line)
        position = text.find(needle, position + max(len(needle), 1))
    return lines, count


class RefusalError(Exception):
    """A handler's early answer to the model: a failed result with this message (and error code)."""

    def __init__(self, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.code = code

    def result(self) -> ToolResult[Any]:
        """The failed tool result a model reads."""
        return failure(self.message, self.code)


@dataclass(frozen=True, slots=True)
class TextFile:
    """A text file as loaded for a change: its text (without a byte-order mark), and the version read."""

    path: str
    where: str
    text: str
    bom: bool
    content_id: str

    @property
    def crlf(self) -> bool:
        """Every line of the file ends in CRLF (edits keep that; a file of mixed endings is left as it is)."""
        return "\r\n" in self.text and self.text.count("\r\n") == self.text.count("\n")

    def encode(self, text: str) -> bytes:
        """New content for this file: keeps its byte-order mark."""
        return ((BOM if self.bom else "") + text).encode("utf-8")


def _beneath(fs: Filesystem) -> Filesystem:
    return fs.unguarded if isinstance(fs, GuardedFilesystem) else fs


@dataclass(frozen=True, slots=True)
class Writer:
    """One write through the tool layer: who made it, the content it wrote, and the ledger (the conversation's
    ``ReadState``) of the context that made it, by identity."""

    actor: str | None
    content_id: str
    ledger: int


class _LastWriters:
    """Who recently wrote each file through the tool layer, per workspace, so a refused stale write can name who
    changed the file when the change came through workspacefs. A write is noted as under way before it is made
    (so a call refused while another call's write is still returning learns who made it) and kept once made."""

    RECENT = 32
    """Writes made kept per path, besides those under way: parallel calls of one turn write one file at once. Kept in
    the order they *ended*, which is not the order they wrote: with 8, the write that made the current content
    could be pushed out by 8 calls that wrote before it but ended after it (under load, 16 parallel edits: the
    refused ones were told "changed outside these tools"). It takes more late enders than parallel calls now."""

    def __init__(self) -> None:
        self._by_fs: weakref.WeakKeyDictionary[Filesystem, dict[str, tuple[tuple[Writer, ...], ...]]] = (
            weakref.WeakKeyDictionary()
        )
        self._lock = threading.Lock()

    def begin(self, fs: Filesystem, path: str, writer: Writer) -> None:
        """Note a write about to be made."""
        with self._lock:
            files = self._by_fs.setdefault(_beneath(fs), {})
            made, under_way = files.pop(path, ((), ()))  # re-inserted last: the oldest paths go first
            files[path] = (made, (*under_way, writer))
            if len(files) > 10_000:
                del files[next(iter(files))]

    def end(self, fs: Filesystem, path: str, writer: Writer, *, made: bool) -> None:
        """The write is over: keep it among the writes made, or forget it."""
        with self._lock:
            files = self._by_fs.get(_beneath(fs), {})
            done, under_way = files.get(path, ((), ()))
            under_way = tuple(noted for noted in under_way if noted is not writer)
            done = (writer, *done[: self.RECENT - 1]) if made else done
            files[path] = (done, under_way)

    def of(self, fs: Filesystem, path: str, content_id: str) -> Writer | None:
        """The newest noted write of ``path`` that wrote ``content_id``."""
        with self._lock:
            done, under_way = self._by_fs.get(_beneath(fs), {}).get(path, ((), ()))
        return next((writer for writer in (*under_way, *done) if writer.content_id == content_id), None)


LAST_WRITERS = _LastWriters()


def binary_refusal(fs: Filesystem, path: str, doing: str) -> RefusalError:
    """Refusing to treat a binary file as text, with advice that can work (it can never be read as lines)."""
    where = display(fs, path)
    try:
        size = human_size(fs.stat(path).size_bytes)
    except OSError:
        size = "unknown size"
    return RefusalError(
        f"'{where}' is a binary file ({size}), not UTF-8 text, so it cannot be {doing} as text and no text "
        "tool can show it. Leave it as it is, or, to replace it entirely, delete it with rm and then create "
        "the new file.",
        "not_text",
    )


def _is_binary(fs: Filesystem, path: str) -> bool:
    try:
        head = fs.read_bytes(path, limit=BINARY_SNIFF_BYTES).content
    except (OSError, ValueError):
        return False
    if b"\x00" in head:
        return True
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as exc:
        return exc.start < len(head) - 3  # a character cut by the limit is not binary
    return False


def current_id(fs: Filesystem, path: str) -> str | None:
    """The content id of ``path`` now, or ``None`` if there is no file (a directory raises
    ``IsADirectoryError``); from the backend where it keeps one, else hashed in fixed memory."""
    try:
        if fs.capabilities.conditional_writes:
            return cast(ConditionalWrites, fs).content_id(path)  # the capability promises it
        hasher = ContentHasher()
        with fs.open_read(path) as reader:
            for chunk in reader:
                hasher.update(chunk)
        return hasher.content_id()
    except FileNotFoundError:
        return None


def load_text(fs: Filesystem, path: str, *, doing: str = "edited") -> TextFile:
    """The whole text of an existing file and the id of exactly that version (``RefusalError`` if it is too
    large or binary; ``FileNotFoundError``/``IsADirectoryError`` as the backend raises them)."""
    where = display(fs, path)
    too_large = RefusalError(
        f"'{where}' is larger than {human_size(MAX_CONVENIENCE_BYTES)}; it cannot be {doing} here.", "too_large"
    )
    if fs.capabilities.conditional_writes:  # metadata, id and content in one step: no separate stat
        versioned = cast(ConditionalWrites, fs).open_versioned(path)
        with versioned.reader as reader:
            if versioned.stat.size_bytes > MAX_CONVENIENCE_BYTES:
                raise too_large
            data = reader.read()
        version = versioned.content_id
    else:
        if fs.stat(path).size_bytes > MAX_CONVENIENCE_BYTES:
            raise too_large
        data = fs.read_bytes(path).content
        version = content_id_of(data)
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise binary_refusal(fs, path, doing)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise binary_refusal(fs, path, doing) from None
    bom = text.startswith(BOM)
    return TextFile(path, where, text[1:] if bom else text, bom, version)


def short_diff(before: str, after: str, where: str, *, limit: int = 40) -> str:
    """A unified diff of two texts, cut after ``limit`` lines."""
    diff = list(
        difflib.unified_diff(before.splitlines(), after.splitlines(), fromfile=where, tofile=where, n=1, lineterm="")
    )
    if len(diff) > limit:
        diff = [*diff[:limit], f"… ({len(diff) - limit} more diff lines)"]
    return "\n".join(diff)


def _who_changed(context: ToolContext, fs: Filesystem, path: str, now: str | None) -> str:
    if now is None:
        return "it has been deleted since"
    # who wrote what the file holds now: a call that loaded it before another call of its own conversation wrote
    # it holds an older version than the one that made it stale
    where = display(fs, path)
    try:
        holds = current_id(fs, path) or now
    except (OSError, ValueError):  # it became a directory, or cannot be read: name the version the call met
        holds = now
    known = LAST_WRITERS.of(fs, where, holds)
    if known is not None and known.ledger == id(context.read_state):
        return "another of your calls, running at the same time, changed it: change one file in one call at a time"
    if known is None:
        return "it was changed outside these tools, by another program, a command or a person"
    if known.actor is not None and known.actor != context.actor:
        return f"{known.actor} changed it"
    return "another conversation changed it"


def _changes_since(context: ToolContext, fs: Filesystem, path: str, where: str) -> str:
    seen = context.read_state.seen_text(fs, path)
    if seen is None:
        return ""
    try:
        if fs.stat(path).size_bytes > MAX_SEEN_TEXT * 4:
            return ""
        now = fs.read_bytes(path).content.decode("utf-8")
    except (OSError, ValueError, UnicodeDecodeError):
        return ""
    diff = short_diff(seen, now.removeprefix(BOM), where, limit=20)
    return f" What changed since you read it:\n{diff}\n" if diff else ""


def stale_refusal(context: ToolContext, fs: Filesystem, path: str, now: str | None, reread: str) -> RefusalError:
    """The file changed since this caller read it: say who changed it (when known) and what changed."""
    where = display(fs, path)
    if now is None:
        return RefusalError(
            f"'{where}' was deleted since you last read it; nothing was written. Create it again if it should exist.",
            "changed_since_read",
        )
    who = _who_changed(context, fs, path, now)
    changes = _changes_since(context, fs, path, where)
    return RefusalError(
        f"'{where}' has changed since you last read it ({who}); nothing was written.{changes} "
        f"Read it again with {reread} and redo your change on its current content, so no edit is lost.",
        "changed_since_read",
    )


def require_fresh(
    context: ToolContext,
    fs: Filesystem,
    path: str,
    now: str | None,
    *,
    expected: str | None = None,
    reread: str,
) -> None:
    """Refuse (``RefusalError``) to change an existing ``path`` whose version ``now`` the caller has not seen.

    ``expected`` (a content id the caller passes explicitly) replaces the read-before-write ledger; without
    it the ledger decides, when ``context.read_before_write`` is on. A file that does not exist yet may
    always be written (``now is None``), unless the caller expected a version of it.
    """
    where = display(fs, path)
    if expected is not None:
        if now is None:
            raise RefusalError(f"'{where}' does not exist, so it cannot have content id {expected}.", "not_found")
        if expected != now:
            raise RefusalError(
                f"'{where}' no longer has content id {expected} (it is {now} now; "
                f"{_who_changed(context, fs, path, now)}); nothing was written. Read it again with {reread}.",
                "changed_since_read",
            )
        return
    if not context.read_before_write or now is None:
        return
    seen = context.read_state.seen(fs, path)
    if seen is None:
        if _is_binary(fs, path):
            raise RefusalError(
                f"'{where}' is a binary file, so read_file cannot show it and nothing was written. To replace it, "
                "pass expected_hash with the content id stat shows, or delete it with rm first.",
                "not_text",
            )
        raise RefusalError(
            f"You have not read '{where}' yet, and it already exists. Read it with {reread} before overwriting "
            "or editing it, so its current content is not lost.",
            "not_read_before_write",
        )
    if seen != now:
        raise stale_refusal(context, fs, path, now, reread)


def refuse_if_stale(context: ToolContext, fs: Filesystem, path: str, now: str | None, reread: str) -> None:
    """Refuse to change or delete a file this caller read and someone changed since, whatever else proves
    the caller's knowledge (a patch's matching context names the lines, not the change made meanwhile)."""
    seen = context.read_state.seen(fs, path)
    if context.read_before_write and seen is not None and seen != now:
        raise stale_refusal(context, fs, path, now, reread)


def commit(
    context: ToolContext,
    fs: Filesystem,
    path: str,
    data: bytes,
    *,
    expect: str | None,
    text: str | None = None,
    reread: str,
) -> WriteResult:
    """Write ``data`` to ``path`` — over exactly version ``expect`` where the backend can compare and set, as a new
    file where ``expect`` is ``None`` (the caller found none) — then remember it as read by this caller (the model
    knows what it just wrote) and who wrote it."""
    written, where = content_id_of(data), display(fs, path)
    writer = Writer(context.actor, written, id(context.read_state))
    LAST_WRITERS.begin(fs, where, writer)
    made = False
    try:
        if expect is not None and fs.capabilities.conditional_writes:
            result = cast(ConditionalWrites, fs).write_bytes_if(path, data, expect=expect)
        else:
            result = fs.write_bytes(path, data, mode="overwrite" if expect is not None else "create")
        made = True
    except PreconditionFailedError:  # changed between the check and the write
        raise stale_refusal(context, fs, path, current_id(fs, path), reread) from None
    except FileExistsError:
        if expect is not None or not _is_file(fs, path):
            raise
        disown(path)  # another caller's file: a rollback of this call must not remove it
        raise _created_meanwhile(context, fs, path, reread) from None  # made by another call since this one looked
    finally:
        LAST_WRITERS.end(fs, where, writer, made=made)
    context.read_state.record(fs, path, written, text)
    return result


def _is_file(fs: Filesystem, path: str) -> bool:
    try:
        return fs.stat(path).is_file
    except (OSError, ValueError):
        return False


def _created_meanwhile(context: ToolContext, fs: Filesystem, path: str, reread: str) -> RefusalError:
    """A file this caller found missing was created before its write landed: it is not overwritten unseen."""
    where = display(fs, path)
    try:
        who = _who_changed(context, fs, path, current_id(fs, path))
    except (OSError, ValueError):
        who = "it was created outside these tools"
    return RefusalError(
        f"'{where}' did not exist when you looked, but was created since ({who}); nothing was written. Read it "
        f"with {reread}, then change it as needed, so its content is not lost.",
        "changed_since_read",
    )


def note_read(context: ToolContext, fs: Filesystem, path: str, version: str, text: str | None) -> None:
    """Remember that the caller has now seen ``path`` at ``version``."""
    context.read_state.record(fs, path, version, text)
