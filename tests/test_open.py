"""open_filesystem and the scheme registry."""

from __future__ import annotations

from pathlib import Path
from typing import cast

import pytest

from workspacefs import (
    FileTooLargeError,
    InMemoryFilesystem,
    QuotaExceededError,
    open_filesystem,
    register_backend,
    registered_backends,
)
from workspacefs.backends.base import BaseFilesystem
from workspacefs.protocol import Filesystem
from workspacefs.quota import Quota


def test_memory_url() -> None:
    fs = open_filesystem("memory://")
    assert isinstance(fs, InMemoryFilesystem)
    assert fs.read_only is False and fs.mount_point is None


def test_query_options_and_keyword_overrides() -> None:
    fs = open_filesystem("memory://?read_only=true&mount_point=/workspace")
    assert fs.read_only is True and fs.mount_point == "/workspace"
    assert open_filesystem("memory://?read_only=true", read_only=False).read_only is False


@pytest.mark.parametrize("url", ["memory", "", "/tmp/x", "nosuch://x"])
def test_bad_urls(url: str) -> None:
    with pytest.raises(ValueError):
        open_filesystem(url)


def test_bad_options() -> None:
    with pytest.raises(ValueError, match="read_only"):
        open_filesystem("memory://?read_only=maybe")
    with pytest.raises(ValueError, match="Unknown option"):
        open_filesystem("memory://?colour=blue")


def test_registry_is_read_only_and_names_memory() -> None:
    view = registered_backends()
    assert "memory" in view
    with pytest.raises(TypeError):
        view["x"] = view["memory"]  # type: ignore[index]


def test_register_custom_opener() -> None:
    def opener(url: str, params: dict[str, str]) -> Filesystem:
        return InMemoryFilesystem(mount_point=params.get("mount"))

    register_backend("scratch-test", opener)
    try:
        assert open_filesystem("scratch-test://?mount=/w").mount_point == "/w"
        with pytest.raises(ValueError, match="already registered"):
            register_backend("scratch-test", opener)
    finally:
        register_backend("scratch-test", opener, replace=True)


def test_missing_extra_gives_an_install_hint() -> None:
    register_backend(
        "needs-extra-test", "workspacefs_no_such_module:open", install_hint="pip install 'workspacefs[x]'", replace=True
    )
    with pytest.raises(ImportError, match=r"pip install 'workspacefs\[x\]'"):
        open_filesystem("needs-extra-test://bucket")


@pytest.mark.parametrize("scheme", ["memory", "file", "sqlite"])
def test_every_scheme_takes_a_quota(scheme: str, tmp_path: Path) -> None:
    base = {"memory": "memory://", "file": f"file://{tmp_path}", "sqlite": f"sqlite:///{tmp_path}/q.db?session=s"}
    url = base[scheme] + ("&" if "?" in base[scheme] else "?") + "quota_bytes=10&quota_files=2&quota_file_bytes=8"
    fs = open_filesystem(url)
    try:
        assert cast(BaseFilesystem, fs).quota == Quota(max_bytes=10, max_files=2, max_file_bytes=8)
        fs.write("a.txt", "12345678")
        with pytest.raises(FileTooLargeError):
            fs.write("b.txt", "123456789")
        with pytest.raises(QuotaExceededError):
            fs.write("b.txt", "123")
    finally:
        cast(BaseFilesystem, fs).close()


def test_a_quota_that_is_not_a_number_is_refused() -> None:
    with pytest.raises(ValueError, match="quota_bytes must be a whole number of bytes"):
        open_filesystem("memory://?quota_bytes=10MB")
