"""workspacefs in the OpenAI Agents SDK: ``Agent(tools=workspace_tools(fs))``.

- :class:`WorkspaceEditor` is an ``ApplyPatchEditor`` for the SDK's ``ApplyPatchTool``: each ``create_file``,
  ``update_file`` or ``delete_file`` goes through the native ``apply_patch`` adapter
  (:func:`workspacefs.tools.openai.handle_apply_patch_calls`, V4A diffs), on any backend, with its path rules,
  policy, limits and stale-write checks. A patch's context lines prove what it changes, so an update needs no
  prior read; a new file over an existing one does, as ``write_file``.
- :class:`WorkspaceShell` is a ``ShellExecutor`` for the SDK's ``ShellTool``: each command runs by ``sh -c``
  *inside* the workspace's container (``ContainerSandbox.exec``), never on the machine the agent runs on.
- :func:`function_tools` gives the workspacefs tools as ``FunctionTool``s (strict schemas) over the shared bridge.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import anyio.to_thread

from workspacefs.errors import SandboxError
from workspacefs.integrations._toolbridge import BridgedTool, Target, bridge_tools, install_hint, tool_context
from workspacefs.protocol import CommandRunner
from workspacefs.tools import Tool, ToolContext, tools_for
from workspacefs.tools._exec_tool import DEFAULT_TIMEOUT, MAX_SHOWN_CHARS, MAX_TIMEOUT
from workspacefs.tools._messages import display, explain
from workspacefs.tools._patch import FileOperation, PatchError, parse_v4a_update
from workspacefs.tools._patching import PatchFailedError, apply_planned, plan_changes
from workspacefs.tools.openai import handle_apply_patch_calls

try:
    from agents import (
        ApplyPatchOperation,
        ApplyPatchResult,
        ApplyPatchTool,
        FunctionTool,
        ShellCallOutcome,
        ShellCommandOutput,
        ShellCommandRequest,
        ShellResult,
        ShellTool,
    )
    from agents.tool_context import ToolContext as AgentsToolContext
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ImportError(install_hint("openai_agents", "openai-agents")) from exc

__all__ = ["WorkspaceEditor", "WorkspaceShell", "function_tools", "workspace_tools"]

_WHOLE_TURN = " No operation of this turn was applied."
"""What the native adapter adds to a failure: true of its calls, which apply together, not of the SDK's."""


class WorkspaceEditor:
    """An ``ApplyPatchEditor`` over any workspacefs filesystem (or a ``ToolContext`` shared with other tools).

    Results are ``ApplyPatchResult(status, output)`` with the native adapter's words; a diff that does not
    apply is a ``failed`` result saying why, never an exception. The SDK hands over one operation at a time, so
    each applies (or fails) on its own.
    """

    def __init__(self, target: Target) -> None:
        self.context: ToolContext = tool_context(target)

    async def create_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        """Create ``operation.path`` from a V4A diff whose every line starts with ``+``."""
        return await anyio.to_thread.run_sync(self._apply, operation)

    async def update_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        """Apply a V4A diff (``@@`` anchors, then `` ``/``-``/``+`` lines) to ``operation.path`` (and move it to
        ``operation.move_to`` when set)."""
        return await anyio.to_thread.run_sync(self._apply, operation)

    async def delete_file(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        """Delete the file ``operation.path``."""
        return await anyio.to_thread.run_sync(self._apply, operation)

    def _apply(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        if operation.move_to is not None and operation.type == "update_file":
            return self._update_and_move(operation)
        call = {"type": "apply_patch_call", "call_id": "editor", "operation": _operation(operation)}
        output = handle_apply_patch_calls([call], self.context)[0]
        # the SDK applies a turn's operations one by one, so the adapter's all-or-nothing note would mislead
        return ApplyPatchResult(status=output["status"], output=output["output"].removesuffix(_WHOLE_TURN))

    def _update_and_move(self, operation: ApplyPatchOperation) -> ApplyPatchResult:
        """An update that also renames (the SDK's ``move_to``, which the native call items never carry): the same
        V4A parser and the same all-or-nothing planner as the native adapter."""
        fs = self.context.filesystem
        if fs is None:
            return ApplyPatchResult(status="failed", output="No filesystem is available; nothing was applied.")
        try:
            chunks = parse_v4a_update(operation.diff or "")
            moved = FileOperation("update", operation.path, chunks=chunks, move_to=operation.move_to)
            apply_planned(self.context, fs, plan_changes(self.context, fs, [moved], insert_at_end=False))
        except PatchError as exc:
            return ApplyPatchResult(status="failed", output=f"The diff was not applied: {exc}")
        except PatchFailedError as exc:
            return ApplyPatchResult(status="failed", output=exc.message)
        target = display(fs, operation.move_to or "")
        return ApplyPatchResult(status="completed", output=f"Updated {display(fs, operation.path)} (moved to {target})")


def _operation(operation: ApplyPatchOperation) -> dict[str, Any]:
    return {"type": operation.type, "path": operation.path, "diff": operation.diff or ""}


class WorkspaceShell:
    """A ``ShellExecutor`` for the SDK's ``ShellTool``, backed by a ``ContainerSandbox``: each command of a call
    runs in turn by ``sh -c`` inside the container, in the workspace root (or ``cwd``), under the context's
    policy. A timed-out command ends the call (its ``outcome`` says ``timeout``); a refused one (the policy, a
    closed sandbox) reads as its message on stderr, with no exit code.
    """

    def __init__(self, target: Target, *, timeout: float = DEFAULT_TIMEOUT, cwd: str | None = None) -> None:
        self.context: ToolContext = tool_context(target)
        fs = self.context.filesystem
        if fs is None or not fs.capabilities.exec:
            raise ValueError("WorkspaceShell needs a workspace that runs commands (a ContainerSandbox)")
        self.timeout = timeout
        self.cwd = cwd

    async def __call__(self, request: ShellCommandRequest) -> ShellResult:
        """Run the call's commands; what the SDK sends back to the model."""
        action = request.data.action
        timeout = self.timeout if not action.timeout_ms else min(max(action.timeout_ms / 1000, 1), MAX_TIMEOUT)
        limit = action.max_output_length or MAX_SHOWN_CHARS // 2
        outputs: list[ShellCommandOutput] = []
        for command in action.commands:
            output = await anyio.to_thread.run_sync(self._run, command, timeout, limit)
            outputs.append(output)
            if output.outcome.type == "timeout" or output.exit_code is None:
                break  # the commands after it were written expecting it to finish
        return ShellResult(output=outputs)

    def _run(self, command: str, timeout: float, limit: int) -> ShellCommandOutput:
        fs = self.context.filesystem
        assert fs is not None  # checked when built
        try:
            done = cast(CommandRunner, fs).exec(command, timeout=timeout, cwd=self.cwd, max_output=limit)
        except (OSError, ValueError, SandboxError) as exc:
            message = explain(exc, fs, self.cwd or ".", verb="used as the working directory")
            return ShellCommandOutput(stderr=message, outcome=ShellCallOutcome(type="exit"), command=command)
        if done.timed_out:
            outcome = ShellCallOutcome(type="timeout")
        else:
            outcome = ShellCallOutcome(type="exit", exit_code=done.exit_code)
        return ShellCommandOutput(stdout=done.stdout, stderr=done.stderr, outcome=outcome, command=command)


def _function_tool(bridged: BridgedTool) -> FunctionTool:
    async def invoke(_context: AgentsToolContext[Any], arguments: str) -> str:
        return (await bridged.arun(arguments)).message

    return FunctionTool(
        name=bridged.name,
        description=bridged.description,
        params_json_schema=bridged.strict_schema,
        on_invoke_tool=invoke,
        strict_json_schema=True,
    )


def function_tools(
    target: Target, *, tools: Sequence[Tool[Any] | str] | None = None, read_only: bool | None = None
) -> list[FunctionTool]:
    """The workspacefs tools as ``FunctionTool``s with the tool layer's strict-mode schemas and messages, sharing
    one context (``tools``/``read_only`` as in ``tools_for``)."""
    return [_function_tool(bridged) for bridged in bridge_tools(target, tools=tools, read_only=read_only)]


def workspace_tools(target: Target, *, shell: bool | None = None) -> list[Any]:
    """Everything an Agents SDK agent needs on one workspace, sharing one context: ``ApplyPatchTool`` for every
    change to a file, the tools that only look (``ls``, ``read_file``, ``glob``, ``grep``, ``stat``, ``diff``) as
    function tools, and a ``ShellTool`` where the workspace runs commands (``shell=False`` leaves it out). A
    read-only workspace gets only the looking tools, as ``tools_for`` offers.
    """
    context = tool_context(target)
    fs = context.filesystem
    writable = fs is not None and not fs.read_only
    offered: list[Any] = [ApplyPatchTool(editor=WorkspaceEditor(context))] if writable else []
    offered += function_tools(context, tools=list(tools_for(fs, read_only=True)))
    runs = writable and fs is not None and fs.capabilities.exec
    if shell or (shell is None and runs):
        offered.append(ShellTool(executor=WorkspaceShell(context)))
    return offered
