"""Conformance: path normalisation, validation and limits (DESIGN §3 "Paths")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from workspacefs.errors import InvalidPathError, InvalidTextError, UnsafeNameError
from workspacefs.protocol import Filesystem
from workspacefs.testing._base import SuiteBase

__all__ = ["PathSuite"]

# Every method that takes a path, called with that path in the first position that takes one.
PATH_CALLS: dict[str, Callable[[Filesystem, str], Any]] = {
    "read": lambda fs, p: fs.read(p),
    "read_bytes": lambda fs, p: fs.read_bytes(p),
    "write": lambda fs, p: fs.write(p, "x"),
    "write_bytes": lambda fs, p: fs.write_bytes(p, b"x"),
    "open_read": lambda fs, p: fs.open_read(p),
    "open_write": lambda fs, p: fs.open_write(p),
    "open_text": lambda fs, p: fs.open_text(p),
    "exists": lambda fs, p: fs.exists(p),
    "stat": lambda fs, p: fs.stat(p),
    "list": lambda fs, p: fs.list(p),
    "glob": lambda fs, p: fs.glob("*", path=p),
    "grep": lambda fs, p: fs.grep("x", path=p),
    "delete": lambda fs, p: fs.delete(p),
    "mkdir": lambda fs, p: fs.mkdir(p),
    "move_src": lambda fs, p: fs.move(p, "dst.txt"),
    "move_dst": lambda fs, p: fs.move("a.txt", p),
    "copy_src": lambda fs, p: fs.copy(p, "dst.txt"),
    "copy_dst": lambda fs, p: fs.copy("a.txt", p),
}
METHODS = sorted(PATH_CALLS)

# Unicode's Bidi_Control characters: each can make a name display as another ("txt.exe" shown as "exe.txt").
BIDI_CONTROLS = [
    "\u061c",
    "\u200e",
    "\u200f",
    "\u202a",
    "\u202b",
    "\u202c",
    "\u202d",
    "\u202e",
    "\u2066",
    "\u2067",
    "\u2068",
    "\u2069",
]
# Names that are not in NFC form, each with its NFC twin: it would display the same.
NOT_NFC = {
    "cafe\u0301.txt": "caf\u00e9.txt",  # e + combining acute (what macOS file names hold)
    "\u212a.txt": "K.txt",  # KELVIN SIGN
    "\u212b.txt": "\u00c5.txt",  # ANGSTROM SIGN
    "\u1112\u1161\u11ab.txt": "\ud55c.txt",  # Hangul jamo, decomposed
    "\u0041\u030a.txt": "\u00c5.txt",  # A + combining ring above
}


class PathSuite(SuiteBase):
    """Paths are root-relative, lexically normalised, and validated before any storage is touched."""

    @pytest.mark.parametrize("root", ["", ".", "/", "./", "//", "a/.."])
    def test_root_spellings_list_the_root(self, root: str) -> None:
        fs = self.make({"a.txt": "a"})
        assert [e.name for e in fs.list(root)] == ["a.txt"]

    def test_leading_slash_is_root_relative(self) -> None:
        fs = self.make()
        fs.write("/etc/passwd", "not the host's")
        assert fs.read("etc/passwd").content == "not the host's"
        assert fs.exists("/etc/passwd")

    @pytest.mark.parametrize("spelling", ["./a/./b.txt", "a//b.txt", "a/b.txt/", "/a/b.txt", "a/x/../b.txt"])
    def test_dots_and_empty_segments_vanish(self, spelling: str) -> None:
        fs = self.make({"a/b.txt": "hi"})
        assert fs.read(spelling).content == "hi"
        assert fs.read(spelling).path == "a/b.txt"

    @pytest.mark.parametrize("method", METHODS)
    def test_escape_raises_permission_error_everywhere(self, method: str) -> None:
        fs = self.make({"a.txt": "a"})
        with pytest.raises(PermissionError):
            PATH_CALLS[method](fs, "../outside.txt")

    @pytest.mark.parametrize("path", ["..", "../", "a/../../x", "/../etc/passwd", "a/b/../../../x"])
    def test_escape_spellings(self, path: str) -> None:
        fs = self.make({"a/b/c.txt": "c"})
        with pytest.raises(PermissionError):
            fs.read(path)
        with pytest.raises(PermissionError):
            fs.exists(path)

    @pytest.mark.parametrize("method", METHODS)
    def test_nul_raises_value_error_everywhere(self, method: str) -> None:
        fs = self.make({"a.txt": "a"})
        with pytest.raises(ValueError):
            PATH_CALLS[method](fs, "a\x00b.txt")

    @pytest.mark.parametrize("char", ["\x01", "\x1f", "\x7f", "\n", "\t", "\r"])
    def test_control_characters_raise_value_error(self, char: str) -> None:
        fs = self.make()
        with pytest.raises(ValueError):
            fs.write(f"bad{char}name.txt", "x")
        with pytest.raises(ValueError):
            fs.exists(f"bad{char}name.txt")
        assert list(fs.list(".")) == []

    def test_sixteen_segments_allowed(self) -> None:
        fs = self.make()
        path = "/".join(["d"] * 15 + ["f.txt"])
        fs.write(path, "deep")
        assert fs.read(path).content == "deep"

    def test_seventeen_segments_refused(self) -> None:
        fs = self.make()
        with pytest.raises(ValueError):
            fs.write("/".join(["d"] * 16 + ["f.txt"]), "too deep")
        with pytest.raises(ValueError):
            fs.exists("/".join(["d"] * 17))

    def test_depth_counts_after_normalisation(self) -> None:
        fs = self.make()
        path = "/".join(["d"] * 15 + ["x", "..", "f.txt"])
        fs.write(path, "ok")
        assert fs.exists("/".join(["d"] * 15 + ["f.txt"]))

    def test_eighty_character_segment_allowed(self) -> None:
        fs = self.make()
        name = "n" * 76 + ".txt"
        fs.write(name, "ok")
        assert fs.read(name).content == "ok"

    def test_eighty_one_character_segment_refused(self) -> None:
        fs = self.make()
        with pytest.raises(ValueError):
            fs.write("n" * 77 + ".txt", "no")
        with pytest.raises(ValueError):
            fs.mkdir("d" * 81)

    def test_segment_limit_counts_characters_not_bytes(self) -> None:
        fs = self.make()
        name = "é" * 76 + ".txt"  # 80 characters, 156 bytes
        fs.write(name, "ok")
        assert fs.read(name).content == "ok"
        with pytest.raises(ValueError):
            fs.write("é" * 77 + ".txt", "no")

    def test_non_string_path_raises_type_error(self) -> None:
        fs = self.make()
        with pytest.raises(TypeError):
            fs.read(123)  # type: ignore[arg-type]

    def test_returned_paths_are_normalised(self) -> None:
        fs = self.make()
        assert fs.write("/x/./y//z.txt", "line\n").path == "x/y/z.txt"
        assert fs.read("/x/y/z.txt").path == "x/y/z.txt"
        assert fs.read_bytes("./x/y/z.txt").path == "x/y/z.txt"
        assert fs.stat("x//y/z.txt").path == "x/y/z.txt"
        assert [e.path for e in fs.list("/x")] == ["x/y"]
        assert [m.path for m in fs.glob("**/*.txt", path="/")] == ["x/y/z.txt"]
        assert [m.path for m in fs.grep("line", path="/x/")] == ["x/y/z.txt"]

    def test_messages_name_the_path_as_given(self) -> None:
        fs = self.make()
        with pytest.raises(FileNotFoundError) as caught:
            fs.read("./docs//missing.txt")
        assert "./docs//missing.txt" in str(caught.value)

    def test_unicode_names_round_trip(self) -> None:
        fs = self.make()
        fs.write("données/été 2024/naïve café.txt", "olé")
        assert fs.read("données/été 2024/naïve café.txt").content == "olé"
        assert [e.name for e in fs.list("données")] == ["été 2024"]

    @pytest.mark.parametrize("method", METHODS)
    def test_bidi_override_raises_unsafe_name_everywhere(self, method: str) -> None:
        fs = self.make({"a.txt": "a"})
        with pytest.raises(UnsafeNameError):
            PATH_CALLS[method](fs, "invoice\u202etxt.exe")
        assert [e.name for e in fs.list(".")] == ["a.txt"]

    @pytest.mark.parametrize("method", METHODS)
    def test_a_name_reserved_for_workspacefs_is_refused_everywhere(self, method: str) -> None:
        """A host hides its temporary files and directories (``.wsfs-tmp-…``) from every listing: a file written
        under such a name would be kept out of view. Every backend refuses the names alike, in any case (on a
        case-insensitive host directory ``.WSFS-TMP-x`` is the same name; U+017F long s folds to ``s``)."""
        fs = self.make({"a.txt": "a"})
        for path in (".wsfs-tmp-1.trash/x.txt", "d/.wsfs-tmp-", "/.wsfs-tmp-abc", "d/.WSFS-Tmp-x", ".w\u017ffs-tmp-y"):
            with pytest.raises(InvalidPathError) as caught:
                PATH_CALLS[method](fs, path)
            assert "reserved" in str(caught.value)
        fs.write("d/x.wsfs-tmp-y", "a name that only holds it")
        assert {e.path for e in fs.walk(".")} == {"a.txt", "d", "d/x.wsfs-tmp-y"}

    @pytest.mark.parametrize("char", BIDI_CONTROLS, ids=lambda c: f"U+{ord(c):04X}")
    def test_every_bidi_control_character_is_refused(self, char: str) -> None:
        fs = self.make()
        for path in (f"a{char}b.txt", f"dir{char}/x.txt", f"x/{char}", f"{char}/../a.txt"):
            with pytest.raises(UnsafeNameError) as caught:
                fs.write(path, "x")
            assert f"U+{ord(char):04X}" in str(caught.value)  # the message shows the invisible character
            with pytest.raises(UnsafeNameError):
                fs.exists(path)
        assert list(fs.list(".")) == []

    @pytest.mark.parametrize("name", sorted(NOT_NFC), ids=ascii)
    def test_names_not_in_nfc_are_refused(self, name: str) -> None:
        fs = self.make({"d/a.txt": "a"})
        for call in (
            lambda: fs.write(name, "x"),
            lambda: fs.write(f"d/{name}/x.txt", "x"),
            lambda: fs.mkdir(name),
            lambda: fs.exists(name),
            lambda: fs.read(f"d/{name}"),
            lambda: fs.copy("d/a.txt", name),
            lambda: fs.move("d/a.txt", f"d/{name}"),
        ):
            with pytest.raises(UnsafeNameError) as caught:
                call()
            assert ascii(name).strip("'") in str(caught.value)  # the decomposed spelling, visibly escaped
        assert self.tree(fs) == {"d": None, "d/a.txt": b"a"}

    @pytest.mark.parametrize("name", sorted(NOT_NFC), ids=ascii)
    def test_nfc_twins_cannot_arise(self, name: str) -> None:
        composed = NOT_NFC[name]
        fs = self.make({composed: "composed"})
        with pytest.raises(UnsafeNameError) as caught:
            fs.write(name, "decomposed twin")
        assert repr(composed) in str(caught.value)  # the message gives the spelling that works
        assert [e.name for e in fs.list(".")] == [composed]
        assert fs.read(composed).content == "composed"
        assert [m.path for m in fs.glob("*")] == [composed]
        assert [m.path for m in fs.grep("composed")] == [composed]

    @pytest.mark.parametrize(
        "name", ["文档.md", "한국어.txt", "\u00e9\u0301.txt", "\ufb01le.txt", "\u0301", "😀.txt", "ǅ.txt"], ids=ascii
    )
    def test_names_in_nfc_are_accepted(self, name: str) -> None:
        # NFC only, not NFKC: a ligature or a lone combining mark displays as itself and has no twin
        fs = self.make()
        fs.write(f"{name}/{name}", "ok")
        assert fs.read(f"{name}/{name}").content == "ok"
        assert [e.name for e in fs.list(name)] == [name]

    def test_lone_surrogate_is_refused(self) -> None:
        fs = self.make()
        with pytest.raises(ValueError):
            fs.write("a\udc80.txt", "not Unicode text")
        with pytest.raises(ValueError):
            fs.exists("a\udc80.txt")
        assert list(fs.list(".")) == []

    @pytest.mark.parametrize(
        ("argument", "call"),
        [
            ("content", lambda fs: fs.write("a.txt", "not \ud800 text")),
            ("content", lambda fs: fs.write("a.txt", "\udc80", mode="append")),
            ("tag", lambda fs: fs.snapshot(tag="v\ud800")),
            ("pattern", lambda fs: fs.grep("a\ud800")),
            ("glob pattern", lambda fs: fs.glob("*\udfff")),
            ("glob filter", lambda fs: fs.grep("a", glob="\ud800*.txt")),
        ],
        ids=["write", "append", "tag", "grep", "glob", "grep-glob"],
    )
    def test_lone_surrogate_in_text_is_refused_by_name(self, argument: str, call: Any) -> None:
        """JSON carries ``"\\ud800"``, UTF-8 cannot encode it: every backend refuses it the same way, before it
        reaches storage (it was a raw ``UnicodeEncodeError`` from deep inside, or a tag kept in memory only)."""
        fs = self.make_snapshotable({"a.txt": "a"})
        with pytest.raises(InvalidTextError) as raised:
            call(fs)
        assert str(raised.value).startswith(f"{argument} is not valid Unicode text")
        assert fs.read("a.txt").content == "a"
        assert [s.tag for s in fs.snapshots()] == []

    def test_unicode_rule_applies_under_the_mount_point(self) -> None:
        fs = self.make(mount_point="/workspace")
        with pytest.raises(UnsafeNameError):
            fs.write("/workspace/cafe\u0301.txt", "x")
        with pytest.raises(UnsafeNameError):
            fs.write("/workspace/a\u2067b.txt", "x")
        assert list(fs.list("/workspace")) == []

    @pytest.mark.parametrize("name", ["100%.txt", "a_b.txt", "star*.txt", "q?.txt", "[x].txt", "back\\slash.txt"])
    def test_special_characters_are_literal(self, name: str) -> None:
        fs = self.make({name: "special", "other.txt": "other"})
        assert fs.read(name).content == "special"
        assert fs.exists(name)
        fs.delete(name)
        assert not fs.exists(name)
        assert fs.read("other.txt").content == "other"


class MountPointSuite(SuiteBase):
    """With ``mount_point="/workspace"``, absolute paths under it are root-relative paths."""

    def test_mount_point_property(self) -> None:
        assert self.make(mount_point="/workspace").mount_point == "/workspace"
        assert self.make().mount_point is None

    def test_mount_point_prefix_is_stripped(self) -> None:
        fs = self.make(mount_point="/workspace")
        fs.write("/workspace/src/a.py", "print(1)\n")
        assert fs.read("src/a.py").content == "print(1)\n"
        assert fs.read("/workspace/src/a.py").path == "src/a.py"
        assert [e.name for e in fs.list("/workspace")] == ["src"]
        assert [m.path for m in fs.glob("*.py", path="/workspace/src")] == ["src/a.py"]

    def test_other_absolute_paths_are_root_relative(self) -> None:
        fs = self.make(mount_point="/workspace")
        fs.write("/tmp/x.txt", "x")
        assert fs.exists("tmp/x.txt")
        fs.write("/workspacex/y.txt", "y")
        assert fs.exists("workspacex/y.txt")

    def test_mount_point_cannot_be_escaped(self) -> None:
        fs = self.make(mount_point="/workspace")
        with pytest.raises(PermissionError):
            fs.read("/workspace/../etc/passwd")

    def test_invalid_mount_point_refused(self) -> None:
        with pytest.raises(ValueError):
            self.create_filesystem(mount_point="workspace")
