"""The request, response and state models of the FileManager (pydantic)."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["FileAction", "FileRequest", "FileResponse", "FileState"]


class FileAction(StrEnum):
    """Operations a :class:`~workspacefs.manager.FileManager` performs."""

    READ = "read"
    WRITE = "write"
    APPEND = "append"
    DELETE = "delete"
    CREATE = "create"
    CHUNK = "chunk"
    MOVE = "move"
    COPY = "copy"
    LIST = "list"


class FileState(BaseModel):
    """A file the manager tracks (``path`` is a workspace path, normalised)."""

    file_id: str = Field(..., description="Unique identifier for the file")
    path: str = Field(..., description="Workspace path of the file")
    mode: str = Field("r", description="File mode (r/w/a)")
    temp_path: str | None = Field(None, description="Path of a temporary copy, if any")
    last_accessed: datetime = Field(default_factory=datetime.now)
    is_temp: bool = Field(False, description="Whether this is a temporary file")
    size: int | None = Field(None, description="File size in bytes")
    metadata: dict[str, Any] = Field(default_factory=dict)

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {"file_id": "FILE_123", "path": "docs/file.txt", "mode": "r", "last_accessed": "2024-01-28T11:00:00"}
            ]
        }
    )


class FileRequest(BaseModel):
    """A request to :meth:`FileManager.execute`."""

    action: FileAction
    path: str = Field(..., description="Target file path", examples=["docs/file.txt"])
    content: str | None = Field(None, description="Content for write/append operations")
    options: dict[str, Any] = Field(default_factory=dict, description="Additional operation options")


class FileResponse(BaseModel):
    """The result of an operation; ``error`` names the rule or the failure when ``success`` is false."""

    success: bool = Field(..., description="Whether the operation succeeded")
    file_id: str | None = Field(None, description="ID for referencing the file in future operations")
    doc_id: str | None = Field(None, description="ID of an opened document (a content hash)")
    path: str | None = Field(None, description="The normalised path acted on")
    content: str | None = Field(None, description="File content for read operations")
    entries: list[dict[str, Any]] | None = Field(None, description="Directory entries for list operations")
    error: str | None = Field(None, description="Error message if operation failed")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Additional operation metadata")
