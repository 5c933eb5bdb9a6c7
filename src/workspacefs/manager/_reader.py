"""``ReaderTool``: open documents by content hash, read them by character offsets, stream chunks."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import anyio.to_thread

from workspacefs.manager._models import FileAction, FileResponse
from workspacefs.manager._services import ManagerServices

__all__ = ["ReaderTool"]

_BLOCK_CHARS = 64 * 1024


@dataclass(frozen=True, slots=True)
class _Document:
    path: str
    length: int
    size: int
    modified_at: datetime | None


class ReaderTool:
    """Reads documents for agents that work by character offsets.

    ``open`` returns a ``doc_id`` derived from the content (SHA-256), so the same content has the same
    id in any process. ``read`` takes ``[start_offset, end_offset)`` in characters (not bytes, even
    for multi-byte UTF-8), clamped to the document. Memory stays fixed whatever the file's size.
    """

    name = "reader"

    def __init__(self, manager: ManagerServices) -> None:
        self._manager = manager
        self._documents: dict[str, _Document] = {}

    async def execute(
        self,
        action: Literal["open", "read"] = "open",
        path: str | None = None,
        *,
        doc_id: str | None = None,
        start_offset: int | None = None,
        end_offset: int | None = None,
        chunk_size: int | None = 1000,
    ) -> FileResponse:
        """``action="open"`` with ``path``, or ``action="read"`` with ``doc_id`` and offsets."""
        if action == "open":
            if path is None:
                return FileResponse(success=False, error="open needs a path")
            return await self.open(path, chunk_size=chunk_size or 1000)
        if action == "read":
            if doc_id is None:
                return FileResponse(success=False, error="read needs a doc_id from open")
            return await self.read(doc_id, start_offset, end_offset)
        return FileResponse(success=False, error=f"unknown reader action {action!r} (use 'open' or 'read')")

    async def open(self, path: str, *, chunk_size: int = 1000) -> FileResponse:
        """Register a document; its ``doc_id`` is a hash of its content."""
        refusal = await self._manager.refuse(FileAction.READ, path)
        if refusal is not None:
            return refusal
        try:
            digest, length, size, modified = await anyio.to_thread.run_sync(self._measure, path)
        except (OSError, ValueError) as exc:
            return self._manager.failure(exc, path)
        doc_id = "DOC_" + digest[:32]
        norm = self._manager.normalize(path)
        self._documents[doc_id] = _Document(norm, length, size, modified)
        file_id = await self._manager.register_file(norm, "r", doc_id=doc_id)
        chunks = -(-length // max(chunk_size, 1))
        return FileResponse(
            success=True,
            doc_id=doc_id,
            file_id=file_id,
            path=norm,
            metadata={"length": length, "size_bytes": size, "chunks": chunks, "chunk_size": chunk_size},
        )

    def _measure(self, path: str) -> tuple[str, int, int, datetime | None]:
        """(sha256 of the bytes, length in characters, size in bytes, modification time), one pass."""
        fs = self._manager.filesystem
        info = fs.stat(path)
        digest = hashlib.sha256()
        length = 0
        with fs.open_read(path) as reader:
            decoder_bytes = b""
            for chunk in reader:
                digest.update(chunk)
                data = decoder_bytes + chunk
                try:
                    text = data.decode("utf-8")
                    decoder_bytes = b""
                except UnicodeDecodeError as exc:
                    if exc.start < len(data) - 3:
                        raise
                    text, decoder_bytes = data[: exc.start].decode("utf-8"), data[exc.start :]
                length += len(text)
            if decoder_bytes:
                decoder_bytes.decode("utf-8")  # a truncated character at the very end: raise
        return digest.hexdigest(), length, info.size_bytes, info.modified_at

    async def read(self, doc_id: str, start_offset: int | None = None, end_offset: int | None = None) -> FileResponse:
        """Characters ``[start_offset, end_offset)`` of an opened document, clamped to its length."""
        document = self._documents.get(doc_id)
        if document is None:
            return FileResponse(success=False, doc_id=doc_id, error=f"unknown doc_id {doc_id!r}: open the file first")
        start = min(max(start_offset or 0, 0), document.length)
        end = document.length if end_offset is None else min(max(end_offset, start), document.length)
        try:
            info = await self._manager.fs.stat(document.path)
            if (info.size_bytes, info.modified_at) != (document.size, document.modified_at):
                return FileResponse(
                    success=False, doc_id=doc_id, error=f"'{document.path}' changed since it was opened; open it again"
                )
            text = await anyio.to_thread.run_sync(self._slice, document.path, start, end)
        except (OSError, ValueError) as exc:
            return self._manager.failure(exc, document.path)
        await self._manager.touch(document.path)
        metadata: dict[str, Any] = {"start_offset": start, "end_offset": end, "length": document.length}
        return FileResponse(success=True, doc_id=doc_id, path=document.path, content=text, metadata=metadata)

    def _slice(self, path: str, start: int, end: int) -> str:
        with self._manager.filesystem.open_text(path) as reader:
            skipped = 0
            while skipped < start:
                skipped += len(reader.read(min(_BLOCK_CHARS, start - skipped)))
            return reader.read(end - start) if end > start else ""

    async def stream_chunks(self, path: str, chunk_size: int = 1000) -> AsyncIterator[str]:
        """The document as chunks of ``chunk_size`` characters, read in fixed memory."""
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        await self._manager.admit(FileAction.CHUNK, path)  # raises the typed error of the refusing rule
        text_reader = await self._manager.fs.open_text(path)
        block = max(chunk_size, _BLOCK_CHARS)  # one worker-thread hop per block, not per chunk
        pending = ""
        try:
            while text := await text_reader.read(block):
                pending += text
                while len(pending) >= chunk_size:
                    yield pending[:chunk_size]
                    pending = pending[chunk_size:]
            if pending:
                yield pending
        finally:
            await text_reader.aclose()

    async def list_dir(self, path: str = ".") -> FileResponse:
        """Entries of a directory."""
        refusal = await self._manager.refuse(FileAction.LIST, path)
        if refusal is not None:
            return refusal
        try:
            entries = await self._manager.fs.list(path)
        except (OSError, ValueError) as exc:
            return self._manager.failure(exc, path)
        rows = [
            {"name": e.name, "path": e.path, "is_directory": e.is_directory, "size_bytes": e.size_bytes}
            for e in entries
        ]
        return FileResponse(success=True, path=self._manager.normalize(path), entries=rows)

    def close(self) -> None:
        """Forget every opened document."""
        self._documents.clear()
