"""Applying patches: workspacefs's ``apply_patch`` (Codex grammar, all or nothing) against ``git apply``.

Two workloads on a host workspace on tmpfs, the same change given to both in each one's own format:
a 200-hunk patch to one 10,000-line file, and a 50-file patch (one hunk each in 200-line files). Each
round restores the original files first; the best of several rounds is reported, and the ratio is ours
divided by ``git apply`` (which pays a process start; ours runs in this process, as a tool call does).

Run: ``make bench`` or ``python bench/bench_patch.py [--rounds R]``.
"""

from __future__ import annotations

import argparse
import difflib
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from workspacefs import HostFilesystem
from workspacefs.tools import ToolContext
from workspacefs.tools._patch_tools import apply_patch_text


def _source(lines: int, seed: str) -> list[str]:
    return [f"value_{seed}_{n} = compute({n}, '{seed}')  # line {n}\n" for n in range(lines)]


def _changed(lines: list[str], every: int) -> list[str]:
    pick = every // 2
    return [line.replace("compute(", "compute_v2(") if n % every == pick else line for n, line in enumerate(lines)]


def _codex_update(path: str, before: list[str], after: list[str]) -> str:
    """The Codex form of a change: one '@@' section per difflib group, 3 lines of context."""
    out = [f"*** Update File: {path}\n"]
    matcher = difflib.SequenceMatcher(a=before, b=after, autojunk=False)
    for group in matcher.get_grouped_opcodes(3):
        out.append("@@\n")
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                out += [" " + line for line in before[i1:i2]]
            else:
                out += ["-" + line for line in before[i1:i2]]
                out += ["+" + line for line in after[j1:j2]]
    return "".join(out)


def _workload(kind: str) -> dict[str, tuple[list[str], list[str]]]:
    if kind == "200 hunks, 10,000 lines":
        before = _source(10_000, "big")
        return {"big.py": (before, _changed(before, 50))}
    files = {}
    for index in range(50):
        before = _source(200, f"f{index}")
        files[f"pkg/mod_{index}.py"] = (before, _changed(before, 200))
    return files


def _reset(root: Path, files: dict[str, tuple[list[str], list[str]]]) -> None:
    shutil.rmtree(root, ignore_errors=True)
    for path, (before, _) in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(before))


def _check(root: Path, files: dict[str, tuple[list[str], list[str]]]) -> None:
    for path, (_, after) in files.items():
        assert (root / path).read_text() == "".join(after), path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    base = Path(tempfile.mkdtemp(prefix="wsfs-bench-patch-", dir="/dev/shm" if Path("/dev/shm").is_dir() else None))
    print(f"{'workload':<26}{'workspacefs ms':>16}{'git apply ms':>14}{'ratio':>8}")
    try:
        for kind in ("200 hunks, 10,000 lines", "50 files, 1 hunk each"):
            files = _workload(kind)
            hunks = "".join(_codex_update(p, b, a) for p, (b, a) in files.items())
            codex = f"*** Begin Patch\n{hunks}*** End Patch\n"
            unified = "".join(
                "".join(difflib.unified_diff(b, a, fromfile=f"a/{p}", tofile=f"b/{p}")) for p, (b, a) in files.items()
            )
            root = base / "ws"
            ours, theirs = [], []
            for _ in range(args.rounds):
                _reset(root, files)
                with HostFilesystem(root) as fs:
                    context = ToolContext(filesystem=fs, read_before_write=False)
                    start = time.perf_counter()
                    result = apply_patch_text(codex, context)
                    ours.append(time.perf_counter() - start)
                assert result.success, result.message
                _check(root, files)
                _reset(root, files)
                start = time.perf_counter()
                subprocess.run(["git", "apply", "--unsafe-paths", "-"], input=unified.encode(), cwd=root, check=True)
                theirs.append(time.perf_counter() - start)
                _check(root, files)
            mine, git = min(ours) * 1000, min(theirs) * 1000
            print(f"{kind:<26}{mine:>16.2f}{git:>14.2f}{mine / git:>8.2f}")
    finally:
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
