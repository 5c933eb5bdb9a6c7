"""``Quota`` and ``Usage``: how much a workspace may hold, and how much it holds.

Pass ``quota=Quota(...)`` to any backend (or ``?quota_bytes=…&quota_files=…&quota_file_bytes=…`` in its
URL). A write, copy or stream that would pass a limit raises ``QuotaExceededError`` (or
``FileTooLargeError`` for the largest-file limit) and leaves the old content: nothing is half-written.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["QUOTA_URL_PARAMETERS", "Quota", "Usage"]


@dataclass(frozen=True, slots=True)
class Usage:
    """What a workspace holds now: bytes in files, and how many files (directories are not counted)."""

    bytes: int = 0
    files: int = 0


def _limit(name: str, value: int | None) -> int | None:
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise ValueError(f"Quota {name} must be a non-negative integer or None, not {value!r}")
    return value


@dataclass(frozen=True, slots=True)
class Quota:
    """Limits for one workspace: total bytes in files, number of files, size of the largest file (``None``:
    no limit)."""

    max_bytes: int | None = None
    max_files: int | None = None
    max_file_bytes: int | None = None

    def __post_init__(self) -> None:
        _limit("max_bytes", self.max_bytes)
        _limit("max_files", self.max_files)
        _limit("max_file_bytes", self.max_file_bytes)

    @property
    def limited(self) -> bool:
        """True if any limit is set."""
        return not (self.max_bytes is None and self.max_files is None and self.max_file_bytes is None)

    @classmethod
    def from_url_parameters(cls, query: Mapping[str, str]) -> Quota | None:
        """The quota named by ``quota_bytes``/``quota_files``/``quota_file_bytes`` in a URL query, or ``None``."""
        values: dict[str, int] = {}
        for parameter, field_name in QUOTA_URL_PARAMETERS.items():
            raw = query.get(parameter)
            if raw is None:
                continue
            if not raw.isdigit():
                unit = "files" if parameter == "quota_files" else "bytes"
                raise ValueError(f"{parameter} must be a whole number of {unit}, not {raw!r}")
            values[field_name] = int(raw)
        return cls(**values) if values else None


QUOTA_URL_PARAMETERS: Mapping[str, str] = {
    "quota_bytes": "max_bytes",
    "quota_files": "max_files",
    "quota_file_bytes": "max_file_bytes",
}
"""URL query parameters every ``open_filesystem`` scheme accepts, and the ``Quota`` field each sets."""
