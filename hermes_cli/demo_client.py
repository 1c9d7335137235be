"""The demo's editor stand-in: an ACP client that prints the session as a person would read it.

It offers the file system (reads and writes confined to the throwaway project) but no
terminal, so commands run in hermes-acp's local host and their output arrives with the
finished tool call.
"""

from __future__ import annotations

import asyncio
import difflib
import os
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

__all__ = ["Console", "DemoClient"]

MAX_OUTPUT_LINES = 30


class Console:
    """Line-oriented output that streamed text can interleave with, colored on a terminal."""

    _CODES = {"dim": "2", "bold": "1", "red": "31", "green": "32", "yellow": "33", "cyan": "36"}

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream
        isatty = getattr(stream, "isatty", lambda: False)
        self.color = bool(isatty()) and "NO_COLOR" not in os.environ
        self._mid_line = False
        self._pending = b""  # read from stdin beyond the last answer
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
                    pass  # the loop is gone: the demo was interrupted

            threading.Thread(target=read, name="demo-stdin", daemon=True).start()
            text = await answer
        # A terminal echoed the user's newline; piped input did not.
        self._mid_line = not os.isatty(0)
        return text

    def _read_line(self) -> str:
        while b"\n" not in self._pending:
            try:
                chunk = os.read(0, 4096)
            except OSError:
                chunk = b""
            if not chunk:
                text, self._pending = self._pending, b""
                return text.decode("utf-8", "replace")
            self._pending += chunk
        line, _, self._pending = self._pending.partition(b"\n")
        return line.decode("utf-8", "replace")

    def line(self, text: str = "") -> None:
        """A whole line, starting on a fresh one."""
        if self._mid_line:
            self.stream.write("\n")
            self._mid_line = False
        self.stream.write(text + "\n")
        self.stream.flush()


class DemoClient:
    """Implements the client side of ACP for the demo: updates, permissions, file reads and writes."""

    def __init__(self, console: Console, project: Path, *, interactive: bool = False) -> None:
        self.console = console
        self.project = project.resolve()
        self._roots = sorted({str(project), str(self.project)}, key=len, reverse=True)
        self.interactive = interactive
        self.tools: dict[str, tuple[str, str]] = {}  # tool call id -> (title, kind)
        self.approvals: list[str] = []  # "allow_once" / "allow_always" / "reject_once", in order
        self.failed_tools: list[str] = []
        self._speaking = False

    def on_connect(self, conn: Agent) -> None:
        self.conn = conn

    def capabilities(self) -> ClientCapabilities:
        from acp.schema import ClientCapabilities, FileSystemCapabilities

        return ClientCapabilities(fs=FileSystemCapabilities(read_text_file=True, write_text_file=True), terminal=False)

    # -- what the agent shows --------------------------------------------------------------

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        kind = getattr(update, "session_update", None)
        out = self.console
        if kind == "agent_message_chunk":
            text = getattr(update.content, "text", "")
            if not self._speaking:
                text = text.lstrip("\n")
                if not text:
                    return
                out.line()
                out.write(out.style("Hermes: ", "bold"))
                self._speaking = True
            out.write(text)
            return
        if kind not in ("tool_call", "tool_call_update", "plan"):
            return  # thoughts, usage and the rest are not part of the demo's story
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
            if tool_kind == "execute":
                self._show_output(_output_of(update))
        elif update.status == "failed":
            self.failed_tools.append(title)
            out.line(f"  {out.style('✗', 'red')} {title} {out.style('(failed)', 'red')}")
            self._show_output(_output_of(update), limit=12 if tool_kind == "execute" else 4)

    def _show_output(self, text: str, limit: int = MAX_OUTPUT_LINES) -> None:
        lines = text.rstrip("\n").splitlines()
        for line in lines[:limit]:
            self.console.line(self.console.style(f"      │ {line}", "dim"))
        if len(lines) > limit:
            self.console.line(self.console.style(f"      │ … {len(lines) - limit} more lines", "dim"))

    # -- approvals -------------------------------------------------------------------------

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
                self._show_diff(item.path, item.old_text, item.new_text)
            elif getattr(item, "type", None) == "content":
                self._show_request_text(getattr(item.content, "text", ""))
        kind = "allow_once"
        if self.interactive:
            always = self._choose(options, "allow_always") is not None
            answer = (await out.ask("    Allow? [y/N] (a = always) " if always else "    Allow? [y/N] ")).strip().lower()
            if always and answer in ("a", "always"):
                kind = "allow_always"
            elif answer not in ("y", "yes"):
                kind = "reject_once"
        chosen = self._choose(options, kind)
        if chosen is None:
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
    def _choose(options: list[PermissionOption], kind: str) -> str | None:
        for option in options:
            if option.kind == kind:
                return option.option_id
        return None

    def _show_diff(self, path: str, old: str | None, new: str) -> None:
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
            raise acp.RequestError.invalid_params({"path": f"{path} is outside the demo project"})
        return resolved

    async def read_text_file(
        self, session_id: str, path: str, line: int | None = None, limit: int | None = None, **_: Any
    ) -> ReadTextFileResponse:
        import acp
        from acp.schema import ReadTextFileResponse

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

        target = self._inside(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
        return WriteTextFileResponse()

    # -- what the demo does not offer: a terminal (its capabilities say so), elicitation, extensions --

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
    """The error for a method the demo client does not offer (-32601)."""
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
