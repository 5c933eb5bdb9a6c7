"""Every error type through every surface: tool message, HTTP status and code, CLI exit code, MCP result.

Each surface maps exceptions by *type* in one table. Here every type of ``errors.ERROR_TYPES`` is raised
by a real filesystem (an in-memory one whose ``ls`` of ``boom`` fails with it) and followed through the
tool layer, the real MCP server (in process, through the official SDK's client), the real CLI, and the
service's error translation; each table must hold an explicit row for it.
"""

from __future__ import annotations

import errno
import itertools
import json
from collections.abc import Sequence
from typing import Any

import pytest
from click.testing import CliRunner

from workspacefs import InMemoryFilesystem, ToolContext, dispatch, errors, register_backend
from workspacefs.cli import main
from workspacefs.cli._output import EXIT_CODES
from workspacefs.errors import ERROR_CODES, ERROR_TYPES, SnapshotIncompatibleError
from workspacefs.mcp import ERROR_META_KEY, build_server
from workspacefs.protocol import Filesystem
from workspacefs.results import FileEntry
from workspacefs.server._errors import HTTP_STATUS, translate
from workspacefs.tools import TOOL_MESSAGES

_schemes = itertools.count()


def sample(kind: type[BaseException]) -> BaseException:
    """An instance of ``kind`` as a backend would raise it, naming the path ``boom``."""
    if issubclass(kind, UnicodeDecodeError):
        return UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
    if issubclass(kind, errors._PathOSError):
        return kind("boom")
    if issubclass(kind, OSError):
        return kind(errno.EIO, "Something failed", "boom")
    if issubclass(kind, SnapshotIncompatibleError):
        return kind("Snapshot was taken by another kind of filesystem")
    return kind(f"{kind.__name__} happened")


class FaultyFilesystem(InMemoryFilesystem):
    """A real in-memory filesystem whose listing of ``boom`` raises a chosen error (fault injection)."""

    def __init__(self, fault: BaseException, **options: Any) -> None:
        super().__init__(**options)
        self.fault = fault
        self.mkdir("boom")

    def _list_dir(self, path: str) -> Sequence[FileEntry]:
        if path == "boom":
            raise self.fault
        return super()._list_dir(path)


def test_every_surface_table_has_a_row_for_every_type() -> None:
    for table in (TOOL_MESSAGES, HTTP_STATUS, EXIT_CODES, ERROR_CODES):
        assert set(table) == set(ERROR_TYPES), set(ERROR_TYPES) ^ set(table)
    assert len(set(ERROR_CODES.values())) >= len(ERROR_TYPES) - 2  # codes name types (read-only twins aside)


@pytest.mark.parametrize("kind", ERROR_TYPES, ids=lambda kind: kind.__name__)
def test_the_tool_layer_maps_the_type(kind: type[BaseException]) -> None:
    result = dispatch("ls", {"path": "boom"}, ToolContext(filesystem=FaultyFilesystem(sample(kind))))
    assert not result.success
    assert result.error_code == ERROR_CODES[kind]
    assert "Internal error" not in result.message and result.message.strip()


@pytest.mark.parametrize("kind", ERROR_TYPES, ids=lambda kind: kind.__name__)
def test_the_service_maps_the_type(kind: type[BaseException]) -> None:
    mapped = translate(sample(kind))
    assert mapped is not None
    assert (mapped.status, mapped.code) == (HTTP_STATUS[kind], ERROR_CODES[kind])
    assert mapped.message


@pytest.mark.parametrize("kind", ERROR_TYPES, ids=lambda kind: kind.__name__)
def test_the_command_line_maps_the_type(kind: type[BaseException]) -> None:
    scheme = f"faulty{next(_schemes)}"

    def open_faulty(_url: str, _params: dict[str, str]) -> Filesystem:
        return FaultyFilesystem(sample(kind))

    register_backend(scheme, open_faulty)
    result = CliRunner().invoke(main, ["ls", "boom", "--fs", f"{scheme}://", "--json"], catch_exceptions=False)
    assert result.exit_code == EXIT_CODES[kind], result.stderr
    assert json.loads(result.stderr)["error"]["code"] == ERROR_CODES[kind]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ERROR_TYPES, ids=lambda kind: kind.__name__)
async def test_mcp_maps_the_type(kind: type[BaseException]) -> None:
    from mcp import Client

    server = build_server(FaultyFilesystem(sample(kind)))
    async with Client(server) as client:
        result = await client.call_tool("ls", {"path": "boom"})
    assert result.is_error
    assert result.meta is not None and result.meta[ERROR_META_KEY] == ERROR_CODES[kind]
    assert result.content and "Internal error" not in result.content[0].text  # type: ignore[union-attr]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
