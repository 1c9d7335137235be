"""execute_code: a short Python script, run in the sandbox, that calls the agent's file tools.

The script imports ``hermes_tools`` (``toolsets/code_client/hermes_tools.py``, generated from the
tools' argument models by ``python -m toolsets.code``); each function there sends one request over
a Unix socket to the agent, which dispatches it like a call of the model's own: the same
approvals, and a tool call in the editor with its diff. Scripts get the file tools only (read,
search, edit), never commands, subagents or another script.

The script runs in the sandbox with the project read-only (its changes go through the edit
tools, shown and approved), no network, a private /tmp, and a time limit (``[code] timeout``)
that does not count time spent in its tool calls. The mode decides like for commands: ask mode
asks, accept-edits and auto run it in the sandbox; without a sandbox every mode asks.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field

from core.config import ConfigError, load_config
from core.events import TextContent, ToolContent, ToolFinished, ToolStarted
from core.host.processes import CommandResult, child_environment
from core.host.sandbox import Confinement, command_argv, command_environment
from core.host.tool_bridge import ToolBridge, run_script
from core.messages import ToolCallPart
from core.policy.approvals import Action
from core.tools.context import ToolContext
from core.tools.dispatch import prepare, run_prepared
from core.tools.errors import ToolError, ToolRejected
from core.tools.registry import Tool, ToolOutput, tool
from toolsets.editor import apply_patch, delete_file, edit_file, glob, grep, list_dir, move_file, read_file, write_file

__all__ = ["CLIENT", "SCRIPT_TOOLS", "client_source", "execute_code"]

# What a script may call: the file tools (reads and searches; edits under their approvals).
SCRIPT_TOOLS: list[Tool] = [read_file, grep, glob, list_dir, edit_file, write_file, apply_patch, delete_file, move_file]
_BY_NAME = {t.name: t for t in SCRIPT_TOOLS}
CLIENT = Path(__file__).with_name("code_client") / "hermes_tools.py"
OUTPUT_LIMIT = 20_000


class ExecuteCodeArgs(BaseModel):
    code: str = Field(description="Python 3 script")
    language: Literal["python"] = "python"


def _title(args: ExecuteCodeArgs) -> str:
    lines = args.code.strip().splitlines()
    first = next((line.strip() for line in lines if line.strip() and not line.lstrip().startswith(("#", "import ", "from "))), "")
    first = first if len(first) <= 60 else first[:59] + "…"
    return f"Run Python ({len(lines)} lines)" + (f": {first}" if first else "")


@tool(kind="execute", read_only=False, title=_title)
async def execute_code(ctx: ToolContext, args: ExecuteCodeArgs) -> ToolOutput:
    """Run a Python script in the sandbox (project read-only, no network) to batch reads, searches
    and edits in one step. It can `from hermes_tools import read_file, grep, glob, list_dir,
    edit_file, write_file, apply_patch, delete_file, move_file` (the tools' arguments; they return
    the text, raise ToolError); edits ask as usual. Returns exit status, output, tool calls."""
    try:
        settings = (await asyncio.to_thread(load_config)).code
    except ConfigError as exc:
        raise ToolError(f"execute_code cannot read the configuration: {exc}") from None
    sandboxed = await _approve(ctx, args.code)
    await ctx.show([TextContent(_fenced(args.code, "python"))])
    calls = _ScriptCalls(ctx)
    temp = Path(await asyncio.to_thread(tempfile.mkdtemp, prefix="hermes-code-"))
    try:
        result = await _run(ctx, args.code, temp, calls, sandboxed, _interpreter(settings.python), settings.timeout)
    finally:
        await asyncio.to_thread(shutil.rmtree, temp, True)
    text = _report(result, calls, settings.timeout)
    content: list[ToolContent] = [TextContent(_fenced(args.code, "python")), TextContent(_fenced(text, ""))]
    if result.exit_code != 0 or result.timed_out or result.signal:
        raise ToolError(text)
    return ToolOutput(text, content=content)


def _interpreter(configured: str | None) -> str:
    """The configured interpreter, else the system's (a version manager's shim on PATH may not work
    in the sandbox's clean environment)."""
    if configured:
        return configured
    return "/usr/bin/python3" if Path("/usr/bin/python3").exists() else "python3"


async def _approve(ctx: ToolContext, code: str) -> bool:
    """Ask as the mode says for commands; returns whether the script runs in the sandbox."""
    policy = ctx.policy
    title = f"Run a Python script ({len(code.splitlines())} lines)"
    if not policy.sandboxed:
        why = f"there is no sandbox to run it in ({policy.sandbox_detail or 'none found'}): it would run with full access to this machine"
        await ctx.approve_call(title, detail=_question(why, code), every_time=why)
        return False
    if policy.mode in ("accept-edits", "auto"):
        ruling = policy.ruling(Action(ctx.tool_name, ctx.tool_kind, False))
        if ruling.verdict == "refuse":
            raise ToolRejected(f"Not allowed: {ruling.reason}.")
        return True
    why = "scripts need your approval in this mode; it runs in the sandbox (project read-only, no network) and its file changes ask on their own"
    await ctx.approve_call(title, detail=_question(why, code))
    return True


QUESTION_LINES = 60


def _question(why: str, code: str) -> str:
    """The reason a question gives, with the script (its first lines) as an indented block."""
    lines = code.strip("\n").splitlines()
    shown = [("    " + line if len(line) <= 200 else "    " + line[:199] + "…").rstrip() for line in lines[:QUESTION_LINES]]
    more = f"{len(lines) - QUESTION_LINES} more lines in the call's input" if len(lines) > QUESTION_LINES else f"{len(lines)} lines"
    return f"{why}:\n\n" + "\n".join(shown) + f"\n\n({more})"


async def _run(ctx: ToolContext, code: str, temp: Path, calls: _ScriptCalls, sandboxed: bool, python: str, timeout: float) -> CommandResult:
    """Write the script and the client module into ``temp`` (the sandbox's /tmp), open the bridge, run."""
    lib = temp / "lib"
    lib.mkdir()
    (lib / "hermes_tools.py").write_text(CLIENT.read_text(encoding="utf-8"), encoding="utf-8")
    (temp / "main.py").write_text(code, encoding="utf-8")
    bridge = ToolBridge(temp, calls.handle)
    inside = Path("/tmp") if sandboxed else temp  # where the sandbox shows the folder
    exports = {
        "PYTHONPATH": str(inside / "lib"),
        "HERMES_TOOLS": str(inside / bridge.path.name),
        "HERMES_TOOLS_TOKEN": bridge.token,
        "PYTHONUNBUFFERED": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    line = " ".join(f"{k}={shlex.quote(v)}" for k, v in exports.items())
    command = f"export {line}; exec {shlex.quote(python)} {shlex.quote(str(inside / 'main.py'))}"
    env = command_environment(child_environment())
    confinement = Confinement(tuple(ctx.roots), temp=temp, read_only=True, sockets=(bridge.path,)) if sandboxed else None
    argv = command_argv(command, ctx.cwd, confinement, env)
    await bridge.start()
    try:
        return await run_script(argv, ctx.cwd, env, timeout=timeout, output_limit=OUTPUT_LIMIT, bridge=bridge)
    finally:
        await bridge.aclose()


class _ScriptCalls:
    """Dispatches a script's requests as calls of their own: shown in the editor, approved like the model's."""

    def __init__(self, ctx: ToolContext) -> None:
        self._ctx = ctx
        self.names: list[str] = []

    async def handle(self, name: str, arguments: dict[str, Any]) -> tuple[bool, str]:
        parent = self._ctx
        if name not in _BY_NAME:
            return False, f"{name} is not offered to scripts; they may call {', '.join(_BY_NAME)}."
        self.names.append(name)
        call_id = f"{parent.call_id}.{len(self.names)}"
        ctx = ToolContext(
            session_id=parent.session_id,
            cwd=parent.cwd,
            roots=parent.roots,
            host=parent.host,
            policy=parent.policy,
            broker=parent.broker,
            emit=parent.emit,
            call_id=call_id,
            remember_rule=parent.remember_rule,
            turn_id=parent.turn_id,
            checkpoints=parent.checkpoints,
            files=parent.files,
            summarize=parent.summarize,
            store=parent.store,
            settings=parent.settings,
        )
        ready = prepare(_BY_NAME, ToolCallPart(id=call_id, name=name, arguments=arguments), ctx)
        await parent.emit(ToolStarted(call_id, name, ready.title, ready.kind, ready.locations, arguments))
        try:
            run = await run_prepared(ready, ctx)
        except asyncio.CancelledError:
            await parent.emit(ToolFinished(call_id, "failed", raw_output="Cancelled: the script was stopped."))
            raise
        await parent.emit(ToolFinished(call_id, "failed" if run.failed else "completed", run.content, run.result.content))
        return not run.failed, run.result.content


def _fenced(text: str, language: str) -> str:
    fence = "```"
    while fence in text:
        fence += "`"
    return f"{fence}{language}\n{text.rstrip()}\n{fence}"


def _report(result: CommandResult, calls: _ScriptCalls, timeout: float) -> str:
    if result.timed_out:
        status = f"timed out after {timeout:g}s and was stopped"
    elif result.signal:
        status = f"killed by {result.signal}"
    else:
        status = f"exit code {result.exit_code}"
    counts = Counter(calls.names)
    listed = ", ".join(f"{name} ×{n}" if n > 1 else name for name, n in counts.items())
    made = f"{len(calls.names)} tool call{'s' if len(calls.names) != 1 else ''}" + (f" ({listed})" if listed else "")
    body = result.output.rstrip("\n") or "(no output)"
    return f"{status}; {made}\n{body}"


# --- the client module ---------------------------------------------------------------------

_CLIENT_HEAD = '''"""The agent's tools for scripts run by execute_code. Generated by ``python -m toolsets.code``; do not edit.

Each function sends one request to the agent over the Unix socket named in $HERMES_TOOLS and
returns the tool's text. A call that fails, or that the user declines, raises ToolError.
Arguments left at None take the tool's default.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any

__all__ = [{names}]


class ToolError(Exception):
    """A tool call failed or was declined; the message says why."""


def _call(tool: str, args: dict[str, Any]) -> str:
    request = {{"token": os.environ.get("HERMES_TOOLS_TOKEN", ""), "tool": tool, "args": {{k: v for k, v in args.items() if v is not None}}}}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(os.environ["HERMES_TOOLS"])
        conn.sendall(json.dumps(request).encode() + b"\\n")
        with conn.makefile("rb") as answers:
            line = answers.readline()
    if not line:
        raise ToolError(f"{{tool}}: the agent closed the connection without an answer")
    answer = json.loads(line)
    if not answer.get("ok"):
        raise ToolError(answer.get("text", "failed"))
    return str(answer.get("text", ""))
'''


def client_source(tools: list[Tool] | None = None) -> str:
    """The text of ``hermes_tools.py`` for ``tools`` (the script tools when None)."""
    tools = SCRIPT_TOOLS if tools is None else tools
    names = ", ".join(f'"{n}"' for n in ["ToolError", *(t.name for t in tools)])
    parts = [_CLIENT_HEAD.format(names=names)]
    for found in tools:
        fields = found.args_model.model_fields
        required = [name for name, f in fields.items() if f.is_required()]
        optional = [name for name, f in fields.items() if not f.is_required()]
        params = ", ".join([*(f"{n}: Any" for n in required), *(f"{n}: Any = None" for n in optional)])
        doc = found.description.split("\n\n")[0].replace("\n", " ")
        parts.append(f'\n\ndef {found.name}({params}) -> str:\n    """{doc}"""\n    return _call("{found.name}", locals())\n')
    return "".join(parts)


if __name__ == "__main__":
    CLIENT.parent.mkdir(exist_ok=True)
    CLIENT.write_text(client_source(), encoding="utf-8")
    sys.stdout.write(f"wrote {CLIENT}\n")
