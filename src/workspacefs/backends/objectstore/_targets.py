"""Where a file may be written in a bucket: no directory at its path, a directory (not a file) as its parent.

Object stores accept any key, so these rules are checked before each write, with as few requests as the
answer allows (each one costs a round trip, and on a busy store more than the write itself):

- One ``LIST`` of the parent's first entries (prefix ``parent/``, delimiter ``/``) answers both questions
  where the parent is small: anything listed means the parent is a directory (its marker sorts first, or
  files other tools wrote without one), and a common prefix ``parent/name/`` means a directory at the path.
  A parent with more entries than one page holds, ``name/`` past the page, costs one more ``LIST``
  (prefix ``parent/name/``, one key). In the root (always a directory, often a big one) only that one is
  asked.
- A listing that shows only common prefixes (no marker, no file) is confirmed with one undelimited ``LIST``:
  some stores list a prefix whose objects are all deleted (delete markers in a versioned bucket).
- Only when nothing is under the parent are its ancestors asked about, all at once: a file on the way is
  ``NotADirectoryError``; else the missing markers are put (or ``FileNotFoundError`` without
  ``create_parents``).

Nothing is remembered between calls: other processes share the bucket and may change any of it, so every
write asks afresh (the check and the ``PUT`` stay two steps, as on any object store).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from workspacefs import errors
from workspacefs.backends._objects._client import ObjectClient, ObjectInfo
from workspacefs.backends.objectstore._layout import Layout
from workspacefs.paths import parent

__all__ = ["PAGE_ENTRIES", "Targets"]

PAGE_ENTRIES = 20
"""Entries of the parent read with the target check. Each listed entry costs about a twentieth of a
request (rendered by the store, parsed here, its time stamp above all: measured on moto), so a full page
costs at most about two requests, what the two separate questions would, and answers both at once for
most directories an agent writes into."""

Parallel = Callable[[Callable[[str], object], Iterable[str]], object]
"""Runs one call per item with several requests in flight (the filesystem's thread pool)."""


def _ancestors_of(path: str) -> list[str]:
    """Every directory above ``path``, the root left out, outermost first (``a/b/c`` → ``a``, ``a/b``)."""
    parts = path.split("/")
    return ["/".join(parts[:i]) for i in range(1, len(parts))]


class Targets:
    """The checks before a write, over one workspace's keys."""

    __slots__ = ("_client", "_layout", "_parallel")

    def __init__(self, client: ObjectClient, layout: Layout, parallel: Parallel) -> None:
        self._client = client
        self._layout = layout
        self._parallel = parallel

    def check(self, path: str) -> bool:
        """Raise ``IsADirectoryError`` if a directory is at ``path``; return whether its parent is a
        directory (one request for the root or a parent of up to :data:`PAGE_ENTRIES` entries, else at most
        two)."""
        return self.inspect(path, file=False)[0]

    def inspect(self, path: str, *, file: bool = True) -> tuple[bool, ObjectInfo | None]:
        """As :meth:`check`, and (``file``) the file object at ``path`` too, or ``None``: read off the parent's
        page where it shows (no ``ETag``-to-content-id or version there: a listing carries neither), else asked
        in the same round trip as the question about ``name/`` (a ``HEAD`` beside the ``LIST``)."""
        above = parent(path)
        target = self._layout.dir_key(path)
        key = self._layout.key(path)
        heads = [key] if file else []
        if not above:  # the root is always there: only the path is in question
            found, occupied = self._client.probe(heads, [target])
            if occupied[0]:
                raise errors.is_a_directory(path)
            return True, found[0] if file else None
        page: list[ObjectInfo | str] = list(
            self._client.list(self._layout.dir_key(above), recursive=False, limit=PAGE_ENTRIES)
        )
        if target in page and self._holds_objects(path):  # a common prefix: a marker or objects below
            raise errors.is_a_directory(path)
        if not any(isinstance(item, ObjectInfo) for item in page) and not (page and self._holds_objects(above)):
            return False, None  # an empty prefix is no directory
        last = page[-1]
        on_page = next((item for item in page if isinstance(item, ObjectInfo) and item.key == key), None)
        if len(page) >= PAGE_ENTRIES and (last if isinstance(last, str) else last.key) < target:
            found, occupied = self._client.probe(heads, [target])  # the page ends before ``name/``: ask about it
            if occupied[0]:
                raise errors.is_a_directory(path)
            if file and (last if isinstance(last, str) else last.key) < key:
                return True, found[0]
        return True, on_page

    def _holds_objects(self, directory: str) -> bool:
        """Whether a current object lies below ``directory``: asked again without a delimiter when a delimited
        listing showed only its common prefix, since some stores (moto; SeaweedFS before 2026-07) also show
        a prefix whose every object is deleted in a versioned bucket. Only then: a marker or a file in the
        listing answers the question already."""
        return bool(self._client.probe([], [self._layout.dir_key(directory)])[1][0])

    def parent_exists(self, path: str) -> bool:
        """True if ``path``'s parent is a directory (one request; the root always is)."""
        above = parent(path)
        return not above or self._client.probe([], [self._layout.dir_key(above)])[1][0]

    def missing_parent(self, path: str, *, create: bool) -> None:
        """Called when nothing is under ``path``'s parent: raise ``NotADirectoryError`` if an ancestor is a
        file, else put the markers of the missing directories (``create``) or raise ``FileNotFoundError``.
        One round trip of questions (every ancestor at once), one of markers."""
        self.put_markers(self.missing_dirs(path, create=create))

    def missing_dirs(self, path: str, *, create: bool) -> list[str]:
        """What :meth:`missing_parent` would make, outermost first, without making it (its errors the same)."""
        above = _ancestors_of(path)
        if not above:
            return []
        outer = above[:-1] if create else []  # the parent itself is known to be empty
        found, occupied = self._client.probe(
            [self._layout.key(a) for a in above], [self._layout.dir_key(a) for a in outer]
        )
        if any(info is not None for info in found):
            raise errors.not_a_directory(path)
        if not create:
            raise errors.file_not_found(path)
        return [a for a, there in zip(outer, occupied, strict=True) if not there] + [above[-1]]

    def put_markers(self, directories: list[str]) -> None:
        """Put the markers of ``directories`` (several requests in flight)."""
        self._parallel(lambda directory: self._client.put(self._layout.dir_key(directory), b""), directories)

    def ensure_parents(self, path: str) -> None:
        """Make the missing directories above ``path`` (``NotADirectoryError`` if a file is on the way); one
        request when the parent is there already."""
        if not self.parent_exists(path):
            self.missing_parent(path, create=True)
