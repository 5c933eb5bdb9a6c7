"""paths.py: the one normaliser, checked directly and by property."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from workspacefs.paths import (
    MAX_PATH_DEPTH,
    MAX_SEGMENT_LENGTH,
    ancestors,
    basename,
    is_within,
    join,
    normalize_mount_point,
    normalize_path,
    parent,
    relative_to,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", ""),
        (".", ""),
        ("/", ""),
        ("a", "a"),
        ("/a/b/", "a/b"),
        ("a/./b", "a/b"),
        ("a//b", "a/b"),
        ("a/b/../c", "a/c"),
        ("a/..", ""),
        ("...", "..."),
        ("a/.../b", "a/.../b"),
        (".hidden", ".hidden"),
        (" spaced name ", " spaced name "),
    ],
)
def test_normalize(raw: str, expected: str) -> None:
    assert normalize_path(raw) == expected


@pytest.mark.parametrize("raw", ["..", "../a", "a/../..", "/..", "a/b/../../../c"])
def test_escapes(raw: str) -> None:
    with pytest.raises(PermissionError):
        normalize_path(raw)


def test_escape_message_does_not_leak_anything_but_the_input() -> None:
    with pytest.raises(PermissionError) as caught:
        normalize_path("../../etc/shadow")
    assert "../../etc/shadow" in str(caught.value)


def test_mount_point() -> None:
    assert normalize_path("/workspace/a.txt", mount_point="/workspace") == "a.txt"
    assert normalize_path("/workspace", mount_point="/workspace") == ""
    assert normalize_path("/workspacex/a", mount_point="/workspace") == "workspacex/a"
    assert normalize_path("workspace/a", mount_point="/workspace") == "workspace/a"
    with pytest.raises(PermissionError):
        normalize_path("/workspace/../x", mount_point="/workspace")


@pytest.mark.parametrize(
    ("raw", "expected"), [(None, None), ("/", None), ("/workspace", "/workspace"), ("/a/b/", "/a/b")]
)
def test_normalize_mount_point(raw: str | None, expected: str | None) -> None:
    assert normalize_mount_point(raw) == expected


@pytest.mark.parametrize("raw", ["workspace", "", "./x"])
def test_mount_point_must_be_absolute(raw: str) -> None:
    with pytest.raises(ValueError):
        normalize_mount_point(raw)


def test_overlong_input_is_refused_before_parsing() -> None:
    with pytest.raises(ValueError):
        normalize_path("a/" * 5000)


def test_helpers() -> None:
    assert join("", "a") == "a" and join("a", "b") == "a/b"
    assert parent("a/b/c") == "a/b" and parent("a") == "" and parent("") == ""
    assert basename("a/b/c") == "c" and basename("a") == "a"
    assert list(ancestors("a/b/c")) == ["a", "a/b"]
    assert list(ancestors("a")) == []
    assert is_within("a/b", "a") and is_within("a", "a") and is_within("x", "")
    assert not is_within("ab", "a") and not is_within("a", "a/b")
    assert relative_to("a/b/c", "a") == "b/c" and relative_to("a", "a") == "" and relative_to("x", "") == "x"


_SEGMENT = st.one_of(
    st.sampled_from(["", ".", "..", "a", "b", "é", "x y"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="/"), max_size=90),
)


@given(st.lists(_SEGMENT, max_size=24).map("/".join), st.booleans())
def test_normalised_paths_are_safe(raw: str, leading_slash: bool) -> None:
    path = ("/" if leading_slash else "") + raw
    try:
        normalized = normalize_path(path)
    except (ValueError, PermissionError):
        return
    segments = normalized.split("/") if normalized else []
    assert not normalized.startswith("/")
    assert all(s not in ("", ".", "..") for s in segments)
    assert len(segments) <= MAX_PATH_DEPTH
    assert all(len(s) <= MAX_SEGMENT_LENGTH for s in segments)
    assert not any(ord(c) < 32 or ord(c) == 127 for c in normalized)
    assert normalize_path(normalized) == normalized
