"""Imports flow one way (DESIGN §1), with no cycles: checked on the source, every import counted.

``paths/results/errors/protocol`` ← ``streams/search/snapshots`` ← ``backends`` ← ``open/archive`` ←
``tools/agent/manager`` ← ``server/mcp/cli``. A backend never imports another backend, and the tool layer
never imports a backend. Lazy imports inside functions and ``TYPE_CHECKING`` imports count too: a lazy
import against the order is still a dependency against the order.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "workspacefs"

LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "workspacefs._version",
        "workspacefs.errors",
        "workspacefs.capabilities",
        "workspacefs.quota",
        "workspacefs.paths",
        "workspacefs.results",
        "workspacefs.merge",
        "workspacefs.protocol",
    ),
    (
        "workspacefs.streams",
        "workspacefs.search",
        "workspacefs.snapshots",
        "workspacefs.undo",
        "workspacefs.history",
        "workspacefs.policy",
        "workspacefs._hostio",
    ),
    ("workspacefs.backends",),
    ("workspacefs.open", "workspacefs.archive", "workspacefs.asyncfs"),
    ("workspacefs.tools", "workspacefs.agent", "workspacefs.manager", "workspacefs.fsspec"),
    (
        "workspacefs.server",
        "workspacefs.mcp",
        "workspacefs._mcp_resources",
        "workspacefs._mcp_wire",
        "workspacefs.cli",
        "workspacefs.testing",
    ),
    ("workspacefs", "workspacefs.__main__"),
)
"""Each module's layer is its longest prefix here; a module may import only its own layer and those above."""

BACKENDS = (
    "workspacefs.backends.memory",
    "workspacefs.backends.host",
    "workspacefs.backends.sql",
    "workspacefs.backends.container",
    "workspacefs.backends.objectstore",
)
"""Backends proper: none imports another (they share only ``backends.base``, ``backends._objects`` — the
object-store client of ``ObjectStoreFilesystem`` and of the SQL backend's content store — and their parts) …"""
REUSES = {("workspacefs.backends.container", "workspacefs.backends.host")}
"""… except that a container workspace is a ``HostFilesystem`` on its bind mount (DESIGN §1)."""


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in PACKAGE.rglob("*.py")}


def imports(name: str, path: Path, known: set[str]) -> Iterator[tuple[str, int]]:
    """``(imported workspacefs module, line)`` for every import statement, wherever it stands."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "workspacefs":
                    yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            if base.split(".")[0] != "workspacefs":
                continue
            for alias in node.names:  # `from workspacefs import errors` imports the submodule
                submodule = f"{base}.{alias.name}"
                yield (submodule if submodule in known else base), node.lineno


def layer(module: str) -> int:
    best, found = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, found = len(prefix), index
    assert found >= 0, f"{module} is in no layer: add it to LAYERS"
    return found


def backend_of(module: str) -> str | None:
    return next((b for b in BACKENDS if module == b or module.startswith(b + ".")), None)


def violations(graph: dict[str, list[tuple[str, int]]]) -> list[str]:
    """Every import against the order, of one backend from another, or of a backend from the tool layer."""
    found = []
    for source, targets in graph.items():
        for target, line in targets:
            where = f"{source} (line {line}) imports {target}"
            if layer(target) > layer(source):
                found.append(f"{where}: layer {layer(target)} above its own layer {layer(source)}")
            mine, theirs = backend_of(source), backend_of(target)
            if mine and theirs and mine != theirs and (mine, theirs) not in REUSES:
                found.append(f"{where}: a backend imports another backend")
            surface = source.startswith(("workspacefs.tools", "workspacefs.fsspec"))  # over the protocol only
            if surface and target.startswith("workspacefs.backends"):
                found.append(f"{where}: the tool layer imports a backend")
    return found


def cycles(graph: dict[str, list[tuple[str, int]]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target, _ in graph.get(node, []):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def import_graph(sources: dict[str, Path]) -> dict[str, list[tuple[str, int]]]:
    known = set(sources)
    return {name: [(t, line) for t, line in imports(name, path, known) if t != name] for name, path in sources.items()}


def test_every_import_follows_the_layers() -> None:
    assert violations(import_graph(modules())) == []


def test_there_are_no_import_cycles() -> None:
    assert cycles(import_graph(modules())) == []


def test_the_checks_catch_what_they_forbid(tmp_path: Path) -> None:
    """The rules themselves fail on planted imports: upward, backend to backend, tools to a backend, a cycle."""
    planted = {
        "workspacefs.paths": [("workspacefs.snapshots", 1)],
        "workspacefs.backends.memory": [("workspacefs.backends.host._tree", 2)],
        "workspacefs.tools._core": [("workspacefs.backends.memory", 3)],
        "workspacefs.backends.base": [("workspacefs.open", 4)],
    }
    found = violations(planted)
    assert len(found) == 4, found
    assert any("another backend" in f for f in found) and any("tool layer" in f for f in found)
    assert cycles({"workspacefs.a": [("workspacefs.b", 1)], "workspacefs.b": [("workspacefs.a", 1)]}) == [
        ["workspacefs.a", "workspacefs.b"]
    ]
