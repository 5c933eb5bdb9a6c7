"""Request and response bodies of the REST API (seed 004's field names), as pydantic models.

They are the OpenAPI schema too: schemathesis fuzzes requests from them and checks every response
against them, so a field added here is a field the service promises.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from workspacefs.paths import strict_path_pattern

__all__ = [
    "AgentList",
    "CreateFileRequest",
    "CreateSessionRequest",
    "CreateSnapshotRequest",
    "DiffResponse",
    "ErrorBody",
    "ErrorResponse",
    "FileList",
    "FileModel",
    "GlobRequest",
    "GlobResponse",
    "GrepFile",
    "GrepLine",
    "GrepRequest",
    "GrepResponse",
    "PathRequest",
    "SessionList",
    "SessionModel",
    "SnapshotList",
    "SnapshotModel",
    "TransferRequest",
    "UpdateFileRequest",
]

ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"
"""Agent, session and snapshot ids: safe in a URL segment without escaping."""


def _unicode(value: str) -> str:
    """JSON can carry lone surrogates (``"\\ud800"``); no database or file name can hold one."""
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid Unicode (it holds a lone surrogate)") from None
    return value


def _path_rule(**rule: Any) -> Any:
    """A path field's constraints, its rule documented in the schema (the service's ``wire_path`` enforces it)."""
    return Field(max_length=4096, json_schema_extra={"pattern": strict_path_pattern(slash="optional", **rule)})


Text = Annotated[str, AfterValidator(_unicode)]
PathText = Annotated[str, _path_rule(), AfterValidator(_unicode)]
SourcePath = Annotated[str, _path_rule(allow_root=False), AfterValidator(_unicode)]
TargetPath = Annotated[str, _path_rule(allow_root=False, reserved="_"), AfterValidator(_unicode)]
Encoding = Literal["text", "base64"]
BASE64_PATTERN = r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$"
BASE64_RULE: dict[str, Any] = {  # documents what the service checks when it decodes ``content``
    "if": {"properties": {"encoding": {"const": "base64"}}, "required": ["encoding"]},
    "then": {"properties": {"content": {"anyOf": [{"type": "string", "pattern": BASE64_PATTERN}, {"type": "null"}]}}},
}


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(BaseModel):
    """What went wrong: a stable machine ``code`` and a sentence for people."""

    code: str
    message: str


class ErrorResponse(BaseModel):
    """Every error the service returns."""

    error: ErrorBody


class FileModel(BaseModel):
    """A file or directory (seed 004's SessionFile); ``content`` only where a body carries it."""

    id: str
    session_id: str
    path: str
    name: str
    content: str | None = None
    encoding: Encoding | None = None
    is_directory: bool
    is_readonly: bool
    size_bytes: int
    created_at: datetime
    updated_at: datetime


class FileList(BaseModel):
    """A directory listing."""

    data: list[FileModel]


class CreateFileRequest(_Request):
    """``POST /fs/{path}``: a file with ``content``, or a directory with ``is_directory: true``."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "allOf": [
                {  # a directory has no content and cannot be read-only
                    "if": {"properties": {"is_directory": {"const": True}}, "required": ["is_directory"]},
                    "then": {"properties": {"content": {"type": "null"}, "is_readonly": {"const": False}}},
                },
                BASE64_RULE,
            ]
        },
    )

    content: Text | None = None
    encoding: Encoding = "text"
    is_directory: bool = False
    is_readonly: bool = False


class UpdateFileRequest(_Request):
    """``PUT /fs/{path}``: new ``content``, and/or a new read-only flag."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"allOf": [BASE64_RULE]})

    content: Text | None = None
    encoding: Encoding = "text"
    is_readonly: bool | None = None


class PathRequest(_Request):
    """An action on one path."""

    path: PathText


class TransferRequest(_Request):
    """Move or copy ``src_path`` to ``dst_path``."""

    src_path: SourcePath
    dst_path: TargetPath
    overwrite: bool = False


class GrepRequest(_Request):
    """Search file contents: ``pattern`` is a regex, ``path_pattern`` a glob over file paths."""

    pattern: Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_unicode)]
    path_pattern: PathText | None = None
    path: PathText = "/"
    case_insensitive: bool = False
    max_matches: Annotated[int, Field(ge=1, le=10_000)] = 1000


class GrepLine(BaseModel):
    """One matching line."""

    path: str
    line_number: int
    line: str


class GrepFile(BaseModel):
    """The matching lines of one file."""

    path: str
    matches: list[GrepLine]


class GrepResponse(BaseModel):
    """Matches grouped by file; ``truncated`` when ``max_matches`` cut the search short."""

    data: list[GrepFile]
    truncated: bool


class GlobRequest(_Request):
    """Find files whose path below ``path`` matches the glob ``pattern``."""

    pattern: Annotated[str, Field(min_length=1, max_length=4096), AfterValidator(_unicode)]
    path: PathText = "/"


class GlobResponse(BaseModel):
    """Matching file paths, sorted."""

    data: list[str]


class SessionModel(BaseModel):
    """A session: one isolated filesystem."""

    id: str
    agent_id: str
    created_at: datetime
    updated_at: datetime


class SessionList(BaseModel):
    """An agent's sessions, oldest first."""

    data: list[SessionModel]


class CreateSessionRequest(_Request):
    """A new session; the service picks an id (UUIDv7) unless one is given."""

    id: Annotated[str, Field(pattern=ID_PATTERN)] | None = None


class AgentList(BaseModel):
    """Agents that have sessions and that the caller may see."""

    data: list[str]


class SnapshotModel(BaseModel):
    """A snapshot of a session's files."""

    id: str
    session_id: str
    tag: str | None
    parent_id: str | None
    file_count: int
    total_bytes: int
    created_at: datetime


class SnapshotList(BaseModel):
    """A session's snapshots, oldest first."""

    data: list[SnapshotModel]


class CreateSnapshotRequest(_Request):
    """A new snapshot, optionally tagged."""

    tag: Annotated[str, Field(min_length=1, max_length=200), AfterValidator(_unicode)] | None = None


class DiffResponse(BaseModel):
    """Files added, modified and deleted from snapshot ``base`` to ``target`` (``null``: now)."""

    base: str
    target: str | None
    added: list[str]
    modified: list[str]
    deleted: list[str]
    unchanged_count: int
