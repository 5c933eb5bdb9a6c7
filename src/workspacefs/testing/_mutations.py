"""Conformance: delete, mkdir, move and copy (DESIGN §3)."""

from __future__ import annotations

import pytest

from workspacefs.testing._base import SuiteBase

__all__ = ["CopySuite", "DeleteSuite", "MkdirSuite", "MoveSuite"]


class DeleteSuite(SuiteBase):
    """``delete``: files, empty directories, whole trees with ``recursive=True``; never the root."""

    def test_delete_file(self) -> None:
        fs = self.make({"a.txt": "a", "b.txt": "b"})
        fs.delete("a.txt")
        assert not fs.exists("a.txt")
        assert fs.exists("b.txt")

    def test_delete_missing_raises(self) -> None:
        fs = self.make()
        with pytest.raises(FileNotFoundError):
            fs.delete("missing.txt")
        with pytest.raises(FileNotFoundError):
            fs.delete("missing", recursive=True)

    def test_delete_below_a_file_raises(self) -> None:
        fs = self.make({"f.txt": "x"})
        with pytest.raises(FileNotFoundError):
            fs.delete("f.txt/child")
        assert fs.exists("f.txt")

    def test_delete_empty_directory_without_flags(self) -> None:
        fs = self.make(dirs=("empty",))
        fs.delete("empty")
        assert not fs.exists("empty")

    def test_delete_non_empty_directory_needs_recursive(self) -> None:
        fs = self.make({"dir/f.txt": "x"})
        with pytest.raises(IsADirectoryError) as caught:
            fs.delete("dir")
        assert isinstance(caught.value, OSError)
        assert "not empty" in str(caught.value).lower()
        assert fs.read("dir/f.txt").content == "x"

    def test_recursive_delete_removes_the_tree(self) -> None:
        fs = self.make({"dir/a.txt": "a", "dir/sub/b.txt": "b", "dir/sub/deeper/c.txt": "c"}, dirs=("dir/empty",))
        fs.delete("dir", recursive=True)
        assert not fs.exists("dir")
        assert not fs.exists("dir/sub/deeper/c.txt")
        assert list(fs.list()) == []

    def test_recursive_flag_on_a_file(self) -> None:
        fs = self.make({"f.txt": "x"})
        fs.delete("f.txt", recursive=True)
        assert not fs.exists("f.txt")

    def test_recursive_delete_spares_prefix_siblings(self) -> None:
        fs = self.make({"a/x.txt": "1", "ab.txt": "2", "a_b/y.txt": "3", "a%/z.txt": "4", "a-b/w.txt": "5"})
        fs.delete("a", recursive=True)
        assert sorted(e.name for e in fs.list()) == ["a%", "a-b", "a_b", "ab.txt"]

    @pytest.mark.parametrize("root", ["", ".", "/", "a/.."])
    def test_delete_root_raises_permission_error(self, root: str) -> None:
        fs = self.make({"keep.txt": "x"})
        with pytest.raises(PermissionError):
            fs.delete(root, recursive=True)
        assert fs.exists("keep.txt")

    def test_parent_survives_deleting_its_last_child(self) -> None:
        fs = self.make({"dir/only.txt": "x"})
        fs.delete("dir/only.txt")
        assert fs.stat("dir").is_directory
        assert list(fs.list("dir")) == []


class MkdirSuite(SuiteBase):
    """``mkdir``: parents and ``exist_ok`` default to true."""

    def test_mkdir_creates_directory(self) -> None:
        fs = self.make()
        fs.mkdir("new")
        assert fs.stat("new").is_directory
        assert [e.name for e in fs.list()] == ["new"]

    def test_mkdir_creates_parents_by_default(self) -> None:
        fs = self.make()
        fs.mkdir("a/b/c")
        assert fs.stat("a/b").is_directory and fs.stat("a/b/c").is_directory

    def test_mkdir_without_parents_needs_parent(self) -> None:
        fs = self.make()
        with pytest.raises(FileNotFoundError):
            fs.mkdir("a/b", parents=False)
        assert not fs.exists("a")

    def test_mkdir_existing_directory_is_fine_by_default(self) -> None:
        fs = self.make({"d/f.txt": "x"})
        fs.mkdir("d")
        assert fs.read("d/f.txt").content == "x"

    def test_mkdir_existing_directory_with_exist_ok_false_raises(self) -> None:
        fs = self.make(dirs=("d",))
        with pytest.raises(FileExistsError):
            fs.mkdir("d", exist_ok=False)

    def test_mkdir_on_existing_file_raises_file_exists(self) -> None:
        fs = self.make({"f.txt": "x"})
        with pytest.raises(FileExistsError):
            fs.mkdir("f.txt")
        with pytest.raises(FileExistsError):
            fs.mkdir("f.txt", exist_ok=False)
        assert fs.read("f.txt").content == "x"

    @pytest.mark.parametrize("parents", [True, False])
    def test_mkdir_under_a_file_raises_not_a_directory(self, parents: bool) -> None:
        fs = self.make({"f.txt": "x"})
        with pytest.raises(NotADirectoryError):
            fs.mkdir("f.txt/sub", parents=parents)

    def test_mkdir_deep_under_a_file_raises_not_a_directory(self) -> None:
        fs = self.make({"f.txt": "x"})
        with pytest.raises(NotADirectoryError):
            fs.mkdir("f.txt/a/b")

    def test_mkdir_root(self) -> None:
        fs = self.make()
        fs.mkdir("/")
        with pytest.raises(FileExistsError):
            fs.mkdir("", exist_ok=False)


class MoveSuite(SuiteBase):
    """``move``: files and trees; refuses to overwrite unless asked, and never into itself."""

    def test_move_file(self) -> None:
        fs = self.make({"a.txt": "content"})
        fs.move("a.txt", "b.txt")
        assert not fs.exists("a.txt")
        assert fs.read("b.txt").content == "content"

    def test_move_creates_destination_parents(self) -> None:
        fs = self.make({"a.txt": "content"})
        fs.move("a.txt", "x/y/z.txt")
        assert fs.read("x/y/z.txt").content == "content"

    def test_move_directory_tree(self) -> None:
        fs = self.make({"src/a.txt": "a", "src/sub/b.txt": "b"}, dirs=("src/empty",))
        fs.move("src", "dst")
        assert not fs.exists("src")
        assert self.tree(fs) == {
            "dst": None,
            "dst/a.txt": b"a",
            "dst/empty": None,
            "dst/sub": None,
            "dst/sub/b.txt": b"b",
        }

    def test_move_preserves_binary_content(self) -> None:
        data = bytes(range(256))
        fs = self.make({"a.bin": data})
        fs.move("a.bin", "b.bin")
        assert fs.read_bytes("b.bin").content == data

    def test_move_missing_raises(self) -> None:
        fs = self.make()
        with pytest.raises(FileNotFoundError):
            fs.move("missing", "x")

    def test_move_refuses_existing_destination(self) -> None:
        fs = self.make({"a.txt": "a", "b.txt": "b"})
        with pytest.raises(FileExistsError):
            fs.move("a.txt", "b.txt")
        assert fs.read("a.txt").content == "a" and fs.read("b.txt").content == "b"

    def test_move_overwrite_replaces_file(self) -> None:
        fs = self.make({"a.txt": "a", "b.txt": "b"})
        fs.move("a.txt", "b.txt", overwrite=True)
        assert not fs.exists("a.txt")
        assert fs.read("b.txt").content == "a"

    def test_move_overwrite_replaces_directory_with_directory(self) -> None:
        fs = self.make({"a/new.txt": "new", "b/old.txt": "old"})
        fs.move("a", "b", overwrite=True)
        assert self.tree(fs) == {"b": None, "b/new.txt": b"new"}

    def test_move_overwrite_refuses_file_over_directory(self) -> None:
        fs = self.make({"a.txt": "a", "d/x.txt": "x"})
        with pytest.raises(IsADirectoryError):
            fs.move("a.txt", "d", overwrite=True)
        assert fs.read("d/x.txt").content == "x"

    def test_move_overwrite_refuses_directory_over_file(self) -> None:
        fs = self.make({"d/x.txt": "x", "f.txt": "f"})
        with pytest.raises(NotADirectoryError):
            fs.move("d", "f.txt", overwrite=True)
        assert fs.read("f.txt").content == "f"

    @pytest.mark.parametrize("dst", ["d/inside", "d/a/b", "d"])
    def test_move_into_itself_raises(self, dst: str) -> None:
        fs = self.make({"d/x.txt": "x"})
        with pytest.raises(ValueError):
            fs.move("d", dst)
        assert fs.read("d/x.txt").content == "x"

    @pytest.mark.parametrize("src", ["d/sub", "d/f.txt", "d/sub/deeper"])
    def test_overwrite_refuses_to_replace_an_ancestor_of_the_source(self, src: str) -> None:
        fs = self.make({"d/f.txt": "f", "d/sub/deeper/g.txt": "g"})
        with pytest.raises(ValueError):
            fs.move(src, "d", overwrite=True)
        with pytest.raises(ValueError):
            fs.copy(src, "d", overwrite=True)
        assert self.tree(fs, "d") == {"d/f.txt": b"f", "d/sub": None, "d/sub/deeper": None, "d/sub/deeper/g.txt": b"g"}

    def test_move_to_prefix_sibling_is_not_into_itself(self) -> None:
        fs = self.make({"a/x.txt": "x"})
        fs.move("a", "ab")
        assert fs.read("ab/x.txt").content == "x"

    def test_move_root_raises(self) -> None:
        fs = self.make({"a.txt": "a"})
        with pytest.raises(PermissionError):
            fs.move("/", "elsewhere")
        with pytest.raises(PermissionError):
            fs.move("a.txt", "/", overwrite=True)

    def test_move_below_a_file_raises(self) -> None:
        fs = self.make({"a.txt": "a", "f.txt": "f"})
        with pytest.raises(NotADirectoryError):
            fs.move("a.txt", "f.txt/a.txt")
        assert fs.exists("a.txt")


class CopySuite(SuiteBase):
    """``copy``: files, and directories recursively; independent of the source afterwards."""

    def test_copy_file(self) -> None:
        fs = self.make({"a.txt": "content"})
        fs.copy("a.txt", "b.txt")
        assert fs.read("a.txt").content == "content"
        assert fs.read("b.txt").content == "content"

    def test_copy_is_independent(self) -> None:
        fs = self.make({"a.txt": "original"})
        fs.copy("a.txt", "b.txt")
        fs.write("b.txt", "changed")
        fs.write("a.txt", "also changed", mode="append")
        assert fs.read("a.txt").content == "originalalso changed"
        assert fs.read("b.txt").content == "changed"

    def test_copy_directory_recursively(self) -> None:
        fs = self.make({"src/a.txt": "a", "src/sub/b.bin": b"\x00\x01"}, dirs=("src/empty",))
        fs.copy("src", "dst")
        assert self.tree(fs, "dst") == {
            "dst/a.txt": b"a",
            "dst/empty": None,
            "dst/sub": None,
            "dst/sub/b.bin": b"\x00\x01",
        }
        assert fs.read("src/a.txt").content == "a"

    def test_copy_creates_destination_parents(self) -> None:
        fs = self.make({"a.txt": "a"})
        fs.copy("a.txt", "x/y/a.txt")
        assert fs.read("x/y/a.txt").content == "a"

    def test_copy_missing_raises(self) -> None:
        fs = self.make()
        with pytest.raises(FileNotFoundError):
            fs.copy("missing", "x")

    def test_copy_refuses_existing_destination(self) -> None:
        fs = self.make({"a.txt": "a", "b.txt": "b"})
        with pytest.raises(FileExistsError):
            fs.copy("a.txt", "b.txt")
        assert fs.read("b.txt").content == "b"

    def test_copy_overwrite_replaces(self) -> None:
        fs = self.make({"a.txt": "a", "b.txt": "b", "d1/x.txt": "x", "d2/y.txt": "y"})
        fs.copy("a.txt", "b.txt", overwrite=True)
        assert fs.read("b.txt").content == "a"
        fs.copy("d1", "d2", overwrite=True)
        assert self.tree(fs, "d2") == {"d2/x.txt": b"x"}

    @pytest.mark.parametrize("dst", ["d/inside", "d"])
    def test_copy_into_itself_raises(self, dst: str) -> None:
        fs = self.make({"d/x.txt": "x"})
        with pytest.raises(ValueError):
            fs.copy("d", dst)
        assert self.tree(fs) == {"d": None, "d/x.txt": b"x"}

    def test_copy_root_raises(self) -> None:
        fs = self.make({"a.txt": "a"})
        with pytest.raises(PermissionError):
            fs.copy("/", "backup")
