"""The README quickstart, runnable as is: ``python examples/quickstart.py``."""

from workspacefs import InMemoryFilesystem

fs = InMemoryFilesystem(mount_point="/workspace")
fs.write("/workspace/src/app.py", "def main():\n    print('hello')\n")
fs.write("notes/todo.md", "- ship it\n")

print([entry.name for entry in fs.list("/workspace")])  # ['notes', 'src']
print(fs.read("src/app.py", offset=1, limit=1).content, end="")  # "    print('hello')"
print([match.path for match in fs.glob("**/*.py")])  # ['src/app.py']
for match in fs.grep(r"print\("):
    print(f"{match.path}:{match.line_number}: {match.line_content}")

before = fs.snapshot(tag="before-edit")  # O(1), whatever the workspace holds
fs.write("src/app.py", "raise SystemExit\n")
fs.delete("notes", recursive=True)
print(fs.diff(before))  # modified src/app.py, deleted notes/todo.md
fs.restore(before)  # and it is all back
assert fs.read("notes/todo.md").content == "- ship it\n"

with fs.open_write("data/big.bin") as writer:  # streaming: no size cap, atomic on close
    for _ in range(4):
        writer.write(b"\0" * 65536)
print(fs.stat("data/big.bin").size_bytes)  # 262144

branch = fs.fork()  # a branch to explore and throw away (in memory: O(1), copy-on-write)
branch.write("src/app.py", "experiment\n")
assert fs.read("src/app.py").content.startswith("def main")
