"""A scripted "model" drives the filesystem tools through a small coding task, on two backends.

The model's turns are written out exactly as OpenAI (``tool_calls`` with JSON-string arguments) and
Anthropic (``tool_use`` blocks with object inputs) send them. The task: look around, read a buggy
module, fix it with edit_file, grep for the function, write a test file, then make a mistake (wipe
the source directory) and roll it back from a unified session + filesystem snapshot.

Run: ``python examples/scripted_agent.py``; it prints the transcript for the in-memory backend and for
a sandboxed host directory.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from workspacefs.agent import (
    HostWorkspaceSection,
    MarkdownSection,
    Prompt,
    PromptTemplate,
    Session,
    VfsSection,
    build_tool_context,
    create_unified_snapshot,
    restore_unified_snapshot,
)
from workspacefs.protocol import SnapshotableFilesystem
from workspacefs.tools import ToolResult, dispatch

CALC = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"


def openai_turn(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An assistant message as the Chat Completions API returns it."""
    call = {"id": call_id, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def anthropic_turn(call_id: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """An assistant message as the Messages API returns it."""
    return {"role": "assistant", "content": [{"type": "tool_use", "id": call_id, "name": name, "input": arguments}]}


SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("ls", {"path": "/workspace"}),
    ("read_file", {"path": "/workspace/src/calc.py"}),
    ("edit_file", {"path": "/workspace/src/calc.py", "old_string": "return a - b", "new_string": "return a + b"}),
    ("grep", {"pattern": r"def \w+", "path": "/workspace/src"}),
    (
        "write_file",
        {
            "path": "/workspace/tests/test_calc.py",
            "content": "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n",
        },
    ),
    ("CHECKPOINT", {}),
    ("rm", {"path": "/workspace/src", "recursive": True}),
    ("ROLLBACK", {}),
    ("read_file", {"path": "/workspace/src/calc.py", "offset": 0, "limit": 2}),
]


def turns(style: str) -> Iterator[dict[str, Any]]:
    """The script as provider messages (checkpoint and rollback are the agent's own moves)."""
    for index, (name, arguments) in enumerate(SCRIPT):
        if name in ("CHECKPOINT", "ROLLBACK"):
            yield {"role": "agent", "action": name}
        elif style == "openai":
            yield openai_turn(f"call_{index}", name, arguments)
        else:
            yield anthropic_turn(f"toolu_{index}", name, arguments)


def tool_calls(message: dict[str, Any]) -> Iterator[tuple[str, str | dict[str, Any]]]:
    """(name, arguments) of each tool call in a provider message."""
    for call in message.get("tool_calls") or []:
        yield call["function"]["name"], call["function"]["arguments"]
    for block in message.get("content") or []:
        if isinstance(block, dict) and block.get("type") == "tool_use":
            yield block["name"], block["input"]


def run(prompt: Prompt, session: Session, style: str, out: list[str]) -> list[ToolResult[Any]]:
    """Play the script against the prompt's workspace; record a transcript in ``out``."""
    fs = prompt.filesystem()
    assert isinstance(fs, SnapshotableFilesystem)
    results: list[ToolResult[Any]] = []
    checkpoint = None
    for message in turns(style):
        if message.get("action") == "CHECKPOINT":
            checkpoint = create_unified_snapshot(session, fs, "workspace")
            out.append("[agent] checkpoint taken")
            continue
        if message.get("action") == "ROLLBACK":
            assert checkpoint is not None
            restore_unified_snapshot(session, fs, *checkpoint)
            out.append("[agent] that was a mistake: rolled back to the checkpoint")
            continue
        for name, arguments in tool_calls(message):
            context = build_tool_context(prompt, session=session)
            result = dispatch(name, arguments, context)
            results.append(result)
            shown = arguments if isinstance(arguments, dict) else json.loads(arguments)
            out.append(f"> {name}({json.dumps(shown)})")
            out.append(("" if result.success else "FAILED: ") + result.message)
    return results


def seed(root: Path) -> None:
    (root / "src").mkdir(parents=True)
    (root / "src" / "calc.py").write_text(CALC)
    (root / "README.md").write_text("# calc\n")


def main() -> dict[str, list[str]]:
    """Run the task on both backends; return each transcript (and print them)."""
    transcripts: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        seed(base / "seed")
        session = Session()
        from workspacefs import HostMount  # noqa: PLC0415

        vfs = VfsSection(
            mounts=[HostMount(str(base / "seed"), mount_path="/workspace")],
            allowed_host_roots=[base / "seed"],
            session=session,
        )
        memory_prompt = Prompt(PromptTemplate("examples", "coder", [MarkdownSection(title="Task", key="task"), vfs]))
        out: list[str] = []
        run(memory_prompt, session, "openai", out)
        transcripts["memory (OpenAI-shaped calls)"] = out

        seed(base / "host")
        host = HostWorkspaceSection(base / "host", snapshot_dir=base / "host-snapshots")
        host_prompt = Prompt([MarkdownSection(title="Task", key="task", children=[host])])
        out = []
        run(host_prompt, Session(), "anthropic", out)
        transcripts["host (Anthropic-shaped calls)"] = out
    for title, lines in transcripts.items():
        print(f"=== {title} ===")
        print("\n".join(lines))
        print()
    return transcripts


if __name__ == "__main__":
    main()
    sys.exit(0)
