"""open_filesystem and the scheme registry."""

from __future__ import annotations

import pytest

from workspacefs import InMemoryFilesystem, open_filesystem, register_backend, registered_backends
from workspacefs.protocol import Filesystem


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
