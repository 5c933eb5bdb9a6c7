"""A scripted "model" writes a program in a container workspace, runs it, sees it fail, fixes it, runs it
again, and finally returns the workspace to its first snapshot.

The model's turns are OpenAI-shaped tool calls through ``dispatch``; the workspace is a ``ContainerSandbox``
(real Podman, no network), so ``run_command`` is offered because the backend declares it can run commands.
The program is a shell script: the small image this example builds has BusyBox and nothing else.

Run: ``python examples/container_agent.py [IMAGE]`` (as root, with Podman and busybox-static installed; by
default it builds and uses the test image).
"""

from __future__ import annotations

import json
import sys
from typing import Any

from workspacefs import ContainerSandbox, ToolContext, dispatch, tools_for

PROGRAM = """#!/bin/sh
# Sums the numbers in numbers.txt, one per line.
total=0
while read -r n; do
  total=$((total + n))
done < numbers.txt
echo "sum: $total"
test "$total" -eq 60 || { echo "expected 60" >&2; exit 1; }
"""

SCRIPT: list[tuple[str, dict[str, Any]]] = [
    ("write_file", {"path": "/workspace/sum.sh", "content": PROGRAM}),
    ("write_file", {"path": "/workspace/numbers.txt", "content": "10\n20\n3O\n"}),  # a typo: 3O, not 30
    ("snapshot", {"tag": "first draft"}),
    ("run_command", {"command": "sh sum.sh"}),
    ("read_file", {"path": "/workspace/numbers.txt"}),
    ("edit_file", {"path": "/workspace/numbers.txt", "old_string": "3O", "new_string": "30"}),
    ("run_command", {"command": "sh sum.sh && echo all good > result.txt"}),
    ("ls", {"path": "/workspace"}),
    ("restore", {"snapshot_id": "first draft"}),
    ("run_command", {"command": "ls; cat numbers.txt"}),
]


def run(image: str) -> list[str]:
    """Play the script in a fresh sandbox; the transcript, one line per call and result."""
    transcript: list[str] = []
    with ContainerSandbox(image) as sandbox:
        context = ToolContext(filesystem=sandbox.filesystem)
        offered = [tool.name for tool in tools_for(sandbox.filesystem)]
        transcript.append(f"tools offered: {', '.join(offered)}")
        for number, (name, arguments) in enumerate(SCRIPT, start=1):
            call = {"id": f"call_{number}", "type": "function", "function": {"name": name, "arguments": ""}}
            call["function"]["arguments"] = json.dumps(arguments)  # as the Chat Completions API sends it
            result = dispatch(name, call["function"]["arguments"], context)
            status = "ok" if result.success else "FAILED"
            transcript.append(f">>> {name} {json.dumps(arguments)[:80]}  [{status}]")
            transcript.extend(result.message.splitlines())
    return transcript


def main(argv: list[str] | None = None) -> list[str]:
    arguments = sys.argv[1:] if argv is None else argv
    if arguments:
        image = arguments[0]
    else:
        from workspacefs.testing._containers import busybox_image  # noqa: PLC0415 - only without an image given

        image = busybox_image()
    transcript = run(image)
    print("\n".join(transcript))
    return transcript


if __name__ == "__main__":
    main()
