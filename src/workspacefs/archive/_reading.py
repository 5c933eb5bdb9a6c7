"""Reading a tar from an untrusted stream: what tarfile would take on trust is refused with ``UnsafeArchiveError``.

tarfile holds every PAX header and GNU long name whole, keeps growing sparse maps, takes a damaged header for the
end of the archive, and never checks a streamed gzip's CRC; :func:`open_archive` gives a tarfile that refuses each.
"""

from __future__ import annotations

import gzip
import lzma
import tarfile
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from tarfile import GNUTYPE_LONGLINK, GNUTYPE_LONGNAME, GNUTYPE_SPARSE, SOLARIS_XHDTYPE, XGLTYPE, XHDTYPE
from typing import IO, Any, Self, cast

__all__ = ["UnsafeArchiveError", "check_gzip_end", "open_archive", "reading"]

_COPY_BLOCK = 1024 * 1024
_MAX_METADATA = 1024 * 1024
"""Bytes of PAX headers and GNU long names one member may carry (tarfile holds them whole; names need 4 KiB)."""
_MAX_TRAILING = 16 * 1024 * 1024
"""Bytes a gzip may hold after the tar's end (tar pads to its record size, 10 KiB by default; ``-b 2048``: 1 MiB)."""
_END_OF_ARCHIVE: tuple[type[Exception], ...] = (
    getattr(tarfile, "EOFHeaderError"),  # noqa: B009 - not in typeshed: a zero block ends the archive
    getattr(tarfile, "EmptyHeaderError"),  # noqa: B009 - the stream ended where a header would start
)
_METADATA_TYPES = frozenset({XHDTYPE, XGLTYPE, SOLARIS_XHDTYPE, GNUTYPE_LONGNAME, GNUTYPE_LONGLINK})


class UnsafeArchiveError(ValueError):
    """An archive refused: a member that could leave the target directory, that is not a file or directory, or
    that contradicts an earlier member; or an archive that is not a readable tar."""


class _Reading(tarfile.TarFile):
    """A streamed tar whose headers hold at most ``_MAX_METADATA`` bytes of metadata at a time (see ``_Header``)."""

    chain_bytes = 0
    """Bytes of extended headers and long names read for the member being read."""
    global_bytes = 0
    """Bytes of global extended headers read so far (they apply to every member after them)."""


class _Header(tarfile.TarInfo):
    """A member header that refuses what the reader would have to hold whole: metadata (PAX headers, GNU long
    names) past ``_MAX_METADATA`` bytes, and sparse files (their maps grow with the archive, not its headers).

    tarfile reads every extended header into memory in one piece; a gzip of a few hundred KiB can claim a
    header of GBs. ``_proc_member`` is tarfile's documented hook for subclasses, called before any is read.
    """

    @classmethod
    def fromtarfile(cls, archive: tarfile.TarFile) -> Self:
        """The next header, or a refusal where tarfile would take a damaged one for the end of the archive (a
        member whose content runs past its declared size: the rest of the archive was silently dropped)."""
        try:
            return super().fromtarfile(archive)
        except _END_OF_ARCHIVE:
            raise
        except tarfile.HeaderError as exc:
            raise UnsafeArchiveError(
                f"Refusing the archive: the block at byte {archive.offset} is no tar header ({exc}); the member "
                "before it may hold more than its header says"
            ) from None

    def _proc_member(self, archive: tarfile.TarFile) -> tarfile.TarInfo:
        reading = cast(_Reading, archive)
        if self.type == GNUTYPE_SPARSE:
            raise UnsafeArchiveError(f"Refusing archive member {self.name!r}: sparse files are not imported")
        if self.type in _METADATA_TYPES:
            if self.type == XGLTYPE:
                reading.global_bytes += self.size
            else:
                reading.chain_bytes += self.size
            if reading.chain_bytes + reading.global_bytes > _MAX_METADATA:
                raise UnsafeArchiveError(
                    f"Refusing the archive: its headers at byte {self.offset} hold more than "
                    f"{_MAX_METADATA} bytes of metadata for one member"
                )
        else:
            reading.chain_bytes = 0
        processed: tarfile.TarInfo = cast(Any, super())._proc_member(archive)
        return processed

    def _proc_gnusparse_10(self, following: tarfile.TarInfo, pax_headers: dict[str, str], _tar: object) -> None:
        name = pax_headers.get("GNU.sparse.name", following.name)
        raise UnsafeArchiveError(f"Refusing archive member {name!r}: sparse files are not imported")


class _Peeked:
    """A stream whose first bytes were read to recognise it, handed out again before the rest."""

    def __init__(self, stream: IO[bytes], head: bytes) -> None:
        self._stream = stream
        self._head = head

    def read(self, size: int = -1) -> bytes:
        if not self._head:
            return self._stream.read(size)
        if size < 0:
            head, self._head = self._head, b""
            return head + self._stream.read()
        head, self._head = self._head[:size], self._head[size:]
        return head + self._stream.read(size - len(head)) if size > len(head) else head


def _decompressed(stream: IO[bytes]) -> IO[bytes] | gzip.GzipFile:
    """``stream`` as tar bytes: gzip through :mod:`gzip`, which checks the CRC that tarfile's own streamed
    gunzip skips (a damaged archive imported altered content); other kinds as tarfile recognises them."""
    head = stream.read(2)
    peeked = _Peeked(stream, head)
    if head == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=cast(IO[bytes], peeked), mode="rb")
    return cast(IO[bytes], peeked)


def check_gzip_end(source: gzip.GzipFile) -> None:
    """Read on to gzip's checksum, which tarfile stops short of (only a gzip is read past the archive's end: a
    plain stream may stay open after it); more than ``_MAX_TRAILING`` bytes after the end is refused."""
    with reading("after its last member"):
        trailing = 0
        while block := source.read(_COPY_BLOCK):
            trailing += len(block)
            if trailing > _MAX_TRAILING:
                raise UnsafeArchiveError(f"Refusing the archive: more than {_MAX_TRAILING} bytes follow its end")


@contextmanager
def reading(where: str) -> Iterator[None]:
    """Refuse an archive that is not a readable tar (truncated, corrupt, not compressed as it claims) with
    ``UnsafeArchiveError``; wraps only what reads the archive, so the target's own errors pass unchanged."""
    try:
        yield
    except (tarfile.TarError, gzip.BadGzipFile, zlib.error, lzma.LZMAError, EOFError) as exc:
        raise UnsafeArchiveError(f"Refusing the archive: it is not a readable tar {where} ({exc})") from None


def open_archive(stream: IO[bytes]) -> tuple[tarfile.TarFile, IO[bytes] | gzip.GzipFile]:
    """A streamed tarfile over ``stream`` (plain or compressed) that refuses what it cannot hold safely, and the
    stream it reads (a gzip: give it to :func:`check_gzip_end` once the archive has ended)."""
    with reading("at its start"):
        source = _decompressed(stream)
        # a gzip is read to its end anyway: in blocks of a MiB, not tarfile's 10 KiB (each a call through gzip)
        bufsize = _COPY_BLOCK if isinstance(source, gzip.GzipFile) else tarfile.RECORDSIZE
        return _Reading.open(fileobj=source, mode="r|*", tarinfo=_Header, bufsize=bufsize), source
