"""An ACP client for a terminal: it renders a session as a person reads it.

Shared by ``hermes-editor demo`` and ``hermes-editor chat``: streamed text, one line per tool
call, unified diffs (coloured on a terminal), the plan, and permission questions whose answer
a subclass decides (``answer``). Also the helpers both use to find and report on ``hermes-acp``.
"""

from __future__ import annotations

import asyncio
import difflib
import os
import shutil
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    from acp.interfaces import Agent
    from acp.schema import (
        ClientCapabilities,
        CreateElicitationResponse,
        CreateTerminalResponse,
        ElicitationMode,
        EnvVariable,
        KillTerminalResponse,
        PermissionOption,
        ReadTextFileResponse,
        ReleaseTerminalResponse,
        RequestPermissionResponse,
        TerminalOutputResponse,
        ToolCallUpdate,
        WaitForTerminalExitResponse,
        WriteTextFileResponse,
    )

__all__ = ["ERROR_MARK", "STDIN_LINES", "Console", "StdinLines", "TerminalClient", "find_hermes_acp", "request_error_text", "show_log"]

MAX_OUTPUT_LINES = 30
# hermes-acp sends a turn's error (the model failed, an internal error) as one message chunk with this start.
ERROR_MARK = "\n\n**Error:** "
NOTE_MARK = "\n\n**Note:** "
# What an answer to a permission question may be; "cancelled" answers with no option at all.
ANSWERS = ("allow_once", "allow_always", "reject_once", "cancelled")


def find_hermes_acp() -> str | None:
    """The ``hermes-acp`` installed with this Python, else the one on PATH."""
    beside = Path(sys.executable).parent / "hermes-acp"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("hermes-acp")


def request_error_text(exc: Exception) -> str:
    """What an ACP error says: its ``details`` when it has them, else the error itself."""
    data = getattr(exc, "data", None)
    if isinstance(data, dict) and data:
        if data.get("details"):
            return str(data["details"])
        return "; ".join(f"{key}: {value}" for key, value in data.items())
    return str(exc)


def show_log(console: Console, path: Path, lines: int = 15) -> None:
    """The last lines hermes-acp wrote to its stderr log, when there are any."""
    try:
        tail = path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return
    if tail:
        console.line("hermes-acp said (stderr):")
        for line in tail:
            console.line(f"  {line}")


class StdinLines:
    """Lines of standard input read unbuffered, one buffer for the whole process (every reader of
    fd 0 shares it, so a line read ahead by one is not lost to another)."""

    def __init__(self) -> None:
        self._pending = b""

    def read(self) -> str | None:
        """The next line without its newline; the rest at end of input; None when nothing is left."""
        while b"\n" not in self._pending:
            try:
                chunk = os.read(0, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                text, self._pending = self._pending, b""
                return text.decode("utf-8", "replace") if text else None
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode("utf-8", "replace")


STDIN_LINES = StdinLines()


class Console:
    """Line-oriented output that streamed text can interleave with, colored on a terminal."""

    _CODES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        isatty = getattr(stream, "isatty", lambda: False)
        self.color = bool(isatty()) and "NO_COLOR" not in os.environ
        self._mid_line = False
        self._asking = asyncio.Lock()

    def style(self, text: str, *styles: str) -> str:
        if not self.color or not styles:
            return text
        codes = ";".join(self._CODES[s] for s in styles)
        return f"\033[{codes}m{text}\033[0m"

    def write(self, text: str) -> None:
        """Streamed text, as it arrives."""
        if text:
            self.stream.write(text)
            self.stream.flush()
            self._mid_line = not text.endswith("\n")

    def fresh_line(self) -> None:
        """End a line that streamed text left open."""
        if self._mid_line:
            self.stream.write("\n")
            self.stream.flush()
            self._mid_line = False

    def after_input(self, *, echoed: bool) -> None:
        """A line was read after a prompt: a terminal echoed its newline, piped input did not."""
        self._mid_line = not echoed

    async def ask(self, prompt: str) -> str:
        """A line typed on stdin ("" at end of input).

        It is read by a daemon thread with ``os.read``, so Ctrl-C while waiting for an answer
        leaves no thread or lock behind that could hold up the exit.
        """
        async with self._asking:
            self.write(prompt)
            loop = asyncio.get_running_loop()
            answer: asyncio.Future[str] = loop.create_future()

            def deliver(text: str) -> None:
                if not answer.done():
                    answer.set_result(text)

            def read() -> None:
                text = self._read_line()
                try:
                    loop.call_soon_threadsafe(deliver, text)
                except RuntimeError:
                    pass  # the loop is gone: the program was interrupted

            threading.Thread(target=read, name="console-stdin", daemon=True).start()
            text = await answer
        # A terminal echoed the user's newline; piped input did not.
        self._mid_line = not os.isatty(0)
        return text

    def _read_line(self) -> str:
        text = STDIN_LINES.read()
        return text if text is not None else ""

    def line(self, text: str = "") -> None:
        """A whole line, starting on a fresh one."""
        if self._mid_line:
            self.stream.write("\n")
            self._mid_line = False
        self.stream.write(text + "\n")
        self.stream.flush()


class TerminalClient:
    """The client side of ACP, printing what the agent shows; subclasses decide permission answers.

    With ``fs`` the client offers file reads and writes, confined to ``project``; without it
    hermes-acp reads and writes the files itself. No terminal is offered: commands run in
    hermes-acp's own host and their output arrives with the finished tool call.
    """

    def __init__(self, console: Console, project: Path, *, fs: bool = True, speaker: str | None = "Hermes: ") -> None:
        self.console = console
        self.project = project.resolve()
        self._roots = sorted({str(project), str(self.project)}, key=len, reverse=True)
        self.fs = fs
        self.speaker = speaker  # printed before each reply; None prints the text alone
        self.separate_notices = False  # errors and notes from hermes-acp as lines of their own, not as reply text
        self.errors: list[str] = []  # error notices of the current turn
        self.tools: dict[str, tuple[str, str]] = {}  # tool call id -> (title, kind)
        self.approvals: list[str] = []  # "allow_once" / "allow_always" / "reject_once", in order
        self.failed_tools: list[str] = []
        self.commands: list[str] = []  # slash commands the agent offers
        self.options: dict[str, str] = {}  # config option id -> current value (model, mode, ...)
        self._diffs_shown: set[str] = set()
        self._speaking = False

    def on_connect(self, conn: Agent) -> None:
        self.conn = conn

    def capabilities(self) -> ClientCapabilities:
        from acp.schema import ClientCapabilities, FileSystemCapabilities

        return ClientCapabilities(fs=FileSystemCapabilities(read_text_file=self.fs, write_text_file=self.fs), terminal=False)

    def new_turn(self) -> None:
        """Forget the last turn's errors; the next reply starts with the speaker's name again."""
        self.errors.clear()
        self._speaking = False

    def remember_options(self, options: list[Any] | None) -> None:
        """Note the current value of each session config option (from a session answer or an update)."""
        for option in options or []:
            inner = getattr(option, "root", option)
            value = getattr(inner, "current_value", None)
            if getattr(inner, "id", None) and value is not None:
                self.options[inner.id] = str(value)

    # -- what the agent shows --------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        kind = getattr(update, "session_update", None)
        out = self.console
        if kind == "agent_message_chunk":
            self._say(getattr(update.content, "text", ""))
            return
        if kind == "user_message_chunk":
            # A replayed conversation (session/load): the user's words as they were typed.
            text = getattr(update.content, "text", "").strip()
            if text:
                self._speaking = False
                out.line()
                out.line(f"{out.style('You:', 'bold')} {text}")
            return
        if kind == "available_commands_update":
            self.commands = [command.name for command in update.available_commands]
            return
        if kind == "config_option_update":
            self.remember_options(update.config_options)
            return
        if kind == "current_mode_update":
            self.options["mode"] = update.current_mode_id
            return
        if kind not in ("tool_call", "tool_call_update", "plan"):
            return  # thoughts, usage and the rest are not part of the story
        self._speaking = False
        if kind == "plan":
            out.line(out.style("  Plan:", "dim"))
            for entry in update.entries:
                out.line(out.style(f"    [{entry.status}] {entry.content}", "dim"))
            return
        call_id = update.tool_call_id
        if kind == "tool_call":
            title = self.relative(update.title or "tool")
            self.tools[call_id] = (title, update.kind or "other")
            status = f"({update.kind or 'other'}, {update.status or 'pending'})"
            out.line(f"  {out.style('⚙', 'cyan')} {title} {out.style(status, 'dim')}")
            return
        title, tool_kind = self.tools.get(call_id, ("tool", "other"))
        if update.title:
            title = self.relative(update.title)
            self.tools[call_id] = (title, tool_kind)
        if update.status == "completed":
            out.line(f"  {out.style('✓', 'green')} {title} {out.style('(completed)', 'dim')}")
            if call_id not in self._diffs_shown:
                for item in update.content or []:
                    if getattr(item, "type", None) == "diff":
                        self.show_diff(item.path, item.old_text, item.new_text)
                self._diffs_shown.add(call_id)
            if tool_kind == "execute":
                self._show_output(_output_of(update))
        elif update.status == "failed":
            self.failed_tools.append(title)
            out.line(f"  {out.style('✗', 'red')} {title} {out.style('(failed)', 'red')}")
            self._show_output(_output_of(update), limit=12 if tool_kind == "execute" else 4)

    def _say(self, text: str) -> None:
        out = self.console
        if self.separate_notices and text.startswith((ERROR_MARK, NOTE_MARK)):
            self._speaking = False
            body = text.strip()
            if text.startswith(ERROR_MARK):
                body = body.removeprefix("**Error:**").strip()
                self.errors.append(body)
                self.notice_error(body)
            else:
                out.line(out.style(f"Note: {body.removeprefix('**Note:**').strip()}", "yellow"))
            return
        if not self._speaking:
            text = text.lstrip("\n")
            if not text:
                return
            if self.speaker:
                out.line()
                out.write(out.style(self.speaker, "bold"))
            else:
                out.fresh_line()
            self._speaking = True
        out.write(text)

    def notice_error(self, text: str) -> None:
        """An error hermes-acp reported for the turn (with ``separate_notices``)."""
        self.console.line(self.console.style(f"Error: {text}", "red"))

    def _show_output(self, text: str, limit: int = MAX_OUTPUT_LINES) -> None:
        lines = text.rstrip("\n").splitlines()
        for line in lines[:limit]:
            self.console.line(self.console.style(f"      │ {line}", "dim"))
        if len(lines) > limit:
            self.console.line(self.console.style(f"      │ … {len(lines) - limit} more lines", "dim"))

    # -- approvals -------------------------------------------------------------------------

    async def answer(self, options: list[PermissionOption]) -> str:
        """Decide a permission question: one of ANSWERS. The base client allows once."""
        return "allow_once"

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **_: Any
    ) -> RequestPermissionResponse:
        from acp.schema import AllowedOutcome, DeniedOutcome, RequestPermissionResponse

        out = self.console
        self._speaking = False
        out.line(
            f"  {out.style('?', 'yellow')} {out.style('Permission needed:', 'yellow')} {self.relative(tool_call.title or 'a tool call')}"
        )
        for item in tool_call.content or []:
            if getattr(item, "type", None) == "diff":
                self.show_diff(item.path, item.old_text, item.new_text)
                if tool_call.tool_call_id:
                    self._diffs_shown.add(tool_call.tool_call_id)
            elif getattr(item, "type", None) == "content":
                self._show_request_text(getattr(item.content, "text", ""))
        kind = await self.answer(options)
        chosen = self.choose(options, kind) if kind != "cancelled" else None
        if chosen is None:
            if kind != "cancelled":
                out.line(out.style("    → cancelled (no matching option)", "red"))
            return RequestPermissionResponse(outcome=DeniedOutcome(outcome="cancelled"))
        self.approvals.append(kind)
        said = {
            "allow_once": out.style("    → approved (allow once)", "green"),
            "allow_always": out.style("    → approved (always)", "green"),
            "reject_once": out.style("    → rejected", "red"),
        }
        out.line(said[kind])
        return RequestPermissionResponse(outcome=AllowedOutcome(outcome="selected", option_id=chosen))

    @staticmethod
    def choose(options: list[PermissionOption], kind: str) -> str | None:
        for option in options:
            if option.kind == kind:
                return option.option_id
        return None

    def show_diff(self, path: str, old: str | None, new: str) -> None:
        rel = self.relative(path)
        before = (old or "").splitlines(keepends=True)
        after = new.splitlines(keepends=True)
        lines = difflib.unified_diff(before, after, "/dev/null" if old is None else f"a/{rel}", f"b/{rel}", n=2)
        for line in lines:
            line = line.rstrip("\n")
            color = "green" if line.startswith("+") else "red" if line.startswith("-") else "cyan" if line.startswith("@@") else None
            if line.startswith(("+++", "---")):
                color = "bold"
            self.console.line("      " + (self.console.style(line, color) if color else line))

    def _show_request_text(self, text: str) -> None:
        body = text.strip()
        if body.startswith("```"):
            # A command, sent fenced for editors that render Markdown.
            inner = body.split("\n", 1)[1] if "\n" in body else ""
            for line in inner.rsplit("```", 1)[0].strip().splitlines():
                self.console.line(f"      $ {line}")
        elif body:
            self.console.line(self.console.style(f"      {self.relative(body)}", "dim"))

    # -- the file system, confined to the project -------------------------------------------

    def _inside(self, path: str) -> Path:
        import acp

        resolved = Path(path).resolve()
        if resolved != self.project and self.project not in resolved.parents:
            raise acp.RequestError.invalid_params({"path": f"{path} is outside the project {self.project}"})
        return resolved

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **_: Any
    ) -> ReadTextFileResponse:
        import acp
        from acp.schema import ReadTextFileResponse

        if not self.fs:
            raise _not_offered("fs/read_text_file")
        target = self._inside(path)
        try:
            text = target.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise acp.RequestError.resource_not_found(path) from None
        if line is not None or limit is not None:
            lines = text.splitlines(keepends=True)
            start = max((line or 1) - 1, 0)
            text = "".join(lines[start : start + limit] if limit is not None else lines[start:])
        return ReadTextFileResponse(content=text)

    async def write_text_file(self, session_id: str, path: str, content: str, **_: Any) -> WriteTextFileResponse:
        from acp.schema import WriteTextFileResponse

        if not self.fs:
            raise _not_offered("fs/write_text_file")
        target = self._inside(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return WriteTextFileResponse()

    # -- what is not offered: a terminal (the capabilities say so), elicitation, extensions --

    async def create_terminal(
        self,
        session_id: str,
        command: str,
        args: list[str] | None = None,
        env: list[EnvVariable] | None = None,
        cwd: str | None = None,
        output_byte_limit: int | None = None,
        **_: Any,
    ) -> CreateTerminalResponse:
        raise _not_offered("terminal/create")

    async def terminal_output(self, session_id: str, terminal_id: str, **_: Any) -> TerminalOutputResponse:
        raise _not_offered("terminal/output")

    async def release_terminal(self, session_id: str, terminal_id: str, **_: Any) -> ReleaseTerminalResponse | None:
        raise _not_offered("terminal/release")

    async def wait_for_terminal_exit(self, session_id: str, terminal_id: str, **_: Any) -> WaitForTerminalExitResponse:
        raise _not_offered("terminal/wait_for_exit")

    async def kill_terminal(self, session_id: str, terminal_id: str, **_: Any) -> KillTerminalResponse | None:
        raise _not_offered("terminal/kill")

    async def create_elicitation(self, message: str, mode: ElicitationMode, **_: Any) -> CreateElicitationResponse:
        raise _not_offered("elicitation/create")

    async def complete_elicitation(self, elicitation_id: str, **_: Any) -> None:
        return None

    async def ext_method(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        raise _not_offered(f"_{method}")

    async def ext_notification(self, method: str, params: dict[str, Any]) -> None:
        return None

    def relative(self, text: str) -> str:
        """Paths inside the project, shown relative to it."""
        for root in self._roots:
            text = text.replace(root + os.sep, "")
        return text


def _not_offered(method: str) -> Exception:
    """The error for a method this client does not offer (-32601)."""
    import acp

    return acp.RequestError.method_not_found(method)


def _output_of(update: Any) -> str:
    raw = update.raw_output
    if isinstance(raw, dict) and isinstance(raw.get("output"), str):
        return raw["output"]
    if isinstance(raw, str):
        return raw
    texts = [getattr(c.content, "text", "") for c in update.content or [] if getattr(c, "type", None) == "content"]
    return "\n".join(t for t in texts if t)
