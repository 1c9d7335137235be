"""``hermes-editor chat``: a conversation on the terminal, over ACP with ``hermes-acp`` like an editor.

It spawns ``hermes-acp`` in its own process group (so that Ctrl-C reaches only this program,
which turns it into ``session/cancel``), opens or reopens a session in the project, and prints
the session as it streams: text, one line per tool call, diffs, the plan, and permission
questions answered on the terminal. One-shot (``-p``, or a prompt with stdin not a terminal)
runs one turn and exits with a status that says how the turn ended.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
import tempfile
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from hermes_cli.acp_terminal import STDIN_LINES, Console, TerminalClient, find_hermes_acp, request_error_text, show_log

if TYPE_CHECKING:
    from acp.schema import PermissionOption, RequestPermissionResponse, ToolCallUpdate

__all__ = ["EXIT_CODES", "register", "run"]

EXIT_OK = 0  # the turn ended normally (end_turn); interactive: the user left
EXIT_FAILED = 1  # the model or hermes-acp failed, the session could not be opened, nothing to resume
EXIT_USAGE = 2  # bad arguments, an empty prompt
EXIT_STOPPED = 3  # the turn stopped short: the step limit, the model's output limit, or a refusal
EXIT_INTERRUPTED = 130  # Ctrl-C: the turn was cancelled
EXIT_CODES = {
    EXIT_OK: "the turn ended normally (end_turn)",
    EXIT_FAILED: "an error: the model or hermes-acp failed, or the session could not be opened",
    EXIT_USAGE: "a usage error",
    EXIT_STOPPED: "the turn stopped short: step limit, output limit or refusal",
    EXIT_INTERRUPTED: "interrupted: Ctrl-C cancelled the turn",
}
_STOPPED_SHORT = ("max_tokens", "max_turn_requests", "refusal")
_STARTUP_TIMEOUT = 60.0
_LINE_LIMIT = 64 * 1024 * 1024  # one ACP message per line; a diff of a big file is one long line
_LOCAL_EXITS = ("/exit", "/quit")


def register(commands: argparse._SubParsersAction) -> None:
    """Add the ``chat`` subcommand."""
    from core.policy.approvals import MODES

    codes = "\n".join(f"  {code:<4} {text}" for code, text in EXIT_CODES.items())
    chat = commands.add_parser(
        "chat",
        help="talk to the agent on the terminal (or run one prompt with -p)",
        description="A streaming conversation with the agent over ACP, as an editor has it: diffs shown,\n"
        "approvals asked on the terminal, Ctrl-C cancels the turn (again, or Ctrl-D at the prompt, exits).\n"
        "Slash commands (/help, /undo, /model, ...) go to the agent. With -p, or a prompt while stdin is\n"
        "not a terminal, it runs one turn and exits.",
        epilog=f"exit status of a one-shot run:\n{codes}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    chat.add_argument("prompt", nargs="*", help="the first message ('-' reads it from stdin)")
    chat.add_argument("-p", "--print", dest="one_shot", metavar="PROMPT", help="run PROMPT as one turn, print the reply and exit")
    chat.add_argument(
        "--project", type=Path, metavar="DIR", help="the project directory (default: the current one, or the resumed session's)"
    )
    which = chat.add_mutually_exclusive_group()
    which.add_argument("--resume", metavar="ID", help="continue a stored session (an id or a unique prefix of one)")
    which.add_argument("-c", "--continue", dest="continue_", action="store_true", help="continue the latest session of the project")
    chat.add_argument("--mode", choices=MODES, help="the approval mode for this session")
    chat.add_argument("--model", metavar="PROVIDER:MODEL", help="the model for this run")
    chat.add_argument("--json", action="store_true", help="one-shot, printing each ACP session update as a JSON line")


@dataclass(slots=True)
class _Request:
    """What the command line asked for, checked."""

    project: Path
    prompt: str | None
    one_shot: bool
    resume: str | None = None  # a whole session id
    resume_title: str = ""
    mode: str | None = None
    model: str | None = None
    as_json: bool = False


class _Refused(Exception):
    def __init__(self, message: str, code: int = EXIT_FAILED) -> None:
        super().__init__(message)
        self.code = code


def run(args: argparse.Namespace) -> int:
    try:
        request = _request(args)
    except _Refused as exc:
        print(exc, file=sys.stderr)
        return exc.code
    command = find_hermes_acp()
    if command is None:
        print(
            "hermes-acp was not found next to this Python or on PATH. Reinstall hermes-editor (pipx install hermes-editor).",
            file=sys.stderr,
        )
        return EXIT_FAILED
    terminal = _TerminalState.save()
    try:
        return asyncio.run(_chat(request, command))
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    finally:
        terminal.restore()


# -- the command line ------------------------------------------------------------------------


def _request(args: argparse.Namespace) -> _Request:
    stdin_tty = sys.stdin.isatty()
    text: str | None = args.one_shot if args.one_shot is not None else (" ".join(args.prompt) if args.prompt else None)
    one_shot = args.one_shot is not None or args.json or not stdin_tty
    if text == "-" or (text is None and one_shot):
        if stdin_tty:
            raise _Refused("No prompt: give one (chat -p PROMPT), or pipe it to stdin with '-'.", EXIT_USAGE)
        text = sys.stdin.read()
    if text is not None and not text.strip():
        raise _Refused("The prompt is empty: give it as an argument, after -p, or on stdin.", EXIT_USAGE)
    model = _check_model(args.model) if args.model else None
    resume, title, cwd = _find_session(args)
    project = args.project or (Path(cwd) if cwd and args.resume else Path.cwd())
    if not project.is_dir():
        if args.project is None:
            raise _Refused(f"The session's project {project} is not a directory any more; give one with --project DIR.")
        raise _Refused(f"--project {project}: not a directory.", EXIT_USAGE)
    return _Request(
        project=project.resolve(),
        prompt=text,
        one_shot=one_shot,
        resume=resume,
        resume_title=title,
        mode=args.mode,
        model=model,
        as_json=args.json,
    )


def _check_model(spec: str) -> str:
    """``spec`` as a configured model's label (provider:model); _Refused naming the problem otherwise."""
    from core.config import ConfigError, load_config

    try:
        config = load_config(env={k: v for k, v in os.environ.items() if k != "HERMES_MODEL"})
        ref = config.model_ref(spec)
    except ConfigError as exc:
        raise _Refused(f"--model {spec}: {str(exc).split(': ', 1)[-1]}", EXIT_USAGE) from None
    if ref is None:  # pragma: no cover - a non-empty spec always resolves or raises
        raise _Refused(f"--model {spec}: no such model.", EXIT_USAGE)
    return ref.label


def _find_session(args: argparse.Namespace) -> tuple[str | None, str, str | None]:
    """The session to reopen (id, title, cwd) for --resume or --continue; (None, "", None) for a new one."""
    if not args.resume and not args.continue_:
        return None, "", None
    return asyncio.run(_lookup(args.resume, (args.project or Path.cwd()).resolve() if args.continue_ else None))


async def _lookup(prefix: str | None, project: Path | None) -> tuple[str, str, str]:
    from core.config import home
    from core.store import SessionStore
    from core.store.session_admin import AmbiguousPrefixError, find_session
    from hermes_cli.ids import ambiguous, unknown

    path = home() / "state.db"
    if not path.exists():
        raise _Refused("No sessions yet: there is nothing to resume. Start one with 'hermes-editor chat'.")
    async with SessionStore.open(path) as store:
        if prefix is not None:
            try:
                record = await find_session(store, prefix)
            except AmbiguousPrefixError as exc:
                raise _Refused(str(ambiguous(prefix, "session", [(m.id, m.title or "(untitled)") for m in exc.matches]))) from None
            if record is None:
                raise _Refused(str(unknown(prefix, "session", "sessions")))
        else:
            assert project is not None
            found = await store.list_sessions(cwd=str(project), surface="acp", limit=1)
            if not found:
                raise _Refused(f"No earlier session in {project} to continue. Start one with 'hermes-editor chat'.")
            record = found[0]
    return record.id, record.title or "", record.cwd


# -- the terminal ----------------------------------------------------------------------------


class _TerminalState:
    """The terminal's settings at start, put back at the end (a line read may be cut short by exit)."""

    def __init__(self, saved: Any) -> None:
        self._saved = saved

    @classmethod
    def save(cls) -> _TerminalState:
        try:
            import termios

            return cls(termios.tcgetattr(0)) if os.isatty(0) else cls(None)
        except (ImportError, OSError):
            return cls(None)

    def restore(self) -> None:
        if self._saved is None:
            return
        import termios

        with contextlib.suppress(OSError):
            termios.tcsetattr(0, termios.TCSADRAIN, self._saved)


class _LineReader:
    """Lines typed by the user, one question at a time, read by a daemon thread.

    A question given up (Ctrl-C cancelled the turn) leaves its read in flight: the next question
    takes that line. On a terminal lines are read with ``input()`` and readline's editing.
    """

    def __init__(self, console: Console) -> None:
        self.console = console
        self.tty = os.isatty(0)
        self._inflight: asyncio.Future[str | None] | None = None
        if self.tty:
            with contextlib.suppress(ImportError):
                import readline  # noqa: F401  (input() gains line editing and history)

    async def read(self, prompt: str) -> str | None:
        """The next line (without its newline), or None at the end of input."""
        loop = asyncio.get_running_loop()
        if self._inflight is None:
            answer: asyncio.Future[str | None] = loop.create_future()

            def deliver(text: str | None) -> None:
                if not answer.done():
                    answer.set_result(text)

            def work() -> None:
                text = self._blocking(prompt)
                with contextlib.suppress(RuntimeError):  # the loop is gone: the program is ending
                    loop.call_soon_threadsafe(deliver, text)

            if self.tty:
                self.console.after_input(echoed=False)  # input() writes the prompt: the line is open
            else:
                self.console.write(prompt)
            threading.Thread(target=work, name="chat-stdin", daemon=True).start()
            self._inflight = answer
        else:
            self.console.fresh_line()
            self.console.write(prompt)
        inflight = self._inflight
        text = await asyncio.shield(inflight)
        if self._inflight is inflight:
            self._inflight = None
        self.console.after_input(echoed=self.tty)
        return text

    def _blocking(self, prompt: str) -> str | None:
        if self.tty:
            try:
                return input(prompt)
            except (EOFError, OSError):
                return None
        return STDIN_LINES.read()


@dataclass(slots=True)
class _Turns:
    """What Ctrl-C does depends on this: cancel the running turn, or leave at the prompt."""

    interactive: bool
    exit: asyncio.Event = field(default_factory=asyncio.Event)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    running: bool = False
    armed: bool = False  # the last key was Ctrl-C: another one exits
    agent_exit: asyncio.Future[int] | None = None  # hermes-acp's exit status, once it has gone


class ChatClient(TerminalClient):
    """The terminal client of ``chat``: asks permission questions on the terminal or stdin."""

    def __init__(self, console: Console, project: Path, reader: _LineReader, turns: _Turns, *, json_out: TextIO | None = None) -> None:
        super().__init__(console, project, fs=False, speaker="Hermes: " if turns.interactive else None)
        self.separate_notices = True
        self.reader = reader
        self.turns = turns
        self.json_out = json_out
        self.session_id = ""

    def notice_error(self, text: str) -> None:
        # An error is a diagnostic: stderr, whatever stdout carries.
        self.console.fresh_line()
        print(self.console.style(f"Error: {text}", "red"), file=sys.stderr, flush=True)

    def emit(self, payload: dict[str, Any]) -> None:
        if self.json_out is not None:
            self.json_out.write(json.dumps(payload, ensure_ascii=False) + "\n")
            self.json_out.flush()

    async def session_update(self, session_id: str, update: Any, **kwargs: Any) -> None:
        if self.json_out is None:
            await super().session_update(session_id, update, **kwargs)
            return
        self.emit({"sessionId": session_id, "update": update.model_dump(mode="json", by_alias=True, exclude_none=True)})
        text = getattr(getattr(update, "content", None), "text", "") if update.session_update == "agent_message_chunk" else ""
        if text.startswith("\n\n**Error:** "):
            self.errors.append(text.strip().removeprefix("**Error:**").strip())

    async def request_permission(
        self, session_id: str, tool_call: ToolCallUpdate, options: list[PermissionOption], **kwargs: Any
    ) -> RequestPermissionResponse:
        response = await super().request_permission(session_id, tool_call, options, **kwargs)
        if self.json_out is not None:
            self.emit(
                {
                    "sessionId": session_id,
                    "permission": {
                        "toolCall": tool_call.model_dump(mode="json", by_alias=True, exclude_none=True),
                        "outcome": response.outcome.model_dump(mode="json", by_alias=True, exclude_none=True),
                    },
                }
            )
        return response

    async def answer(self, options: list[PermissionOption]) -> str:
        out = self.console
        always = self.choose(options, "allow_always") is not None
        question = asyncio.ensure_future(self.reader.read("    Allow? [y/N/a=always] " if always else "    Allow? [y/N] "))
        cancelled = asyncio.ensure_future(self.turns.cancelled.wait())
        try:
            await asyncio.wait({question, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            cancelled.cancel()
        if not question.done():
            question.cancel()
            out.line(out.style("    → cancelled", "red"))
            return "cancelled"
        reply = question.result()
        if reply is None:
            where = "stdin ended" if self.reader.tty else "stdin is not a terminal and held no answer"
            out.line(out.style(f"    → denied: no answer could be read ({where})", "red"))
            print(f"hermes-editor chat: a permission question was denied because {where}.", file=sys.stderr, flush=True)
            return "reject_once"
        reply = reply.strip().lower()
        if always and reply in ("a", "always"):
            return "allow_always"
        return "allow_once" if reply in ("y", "yes") else "reject_once"


# -- the session -----------------------------------------------------------------------------


async def _chat(request: _Request, command: str) -> int:
    import acp

    json_out = sys.stdout if request.as_json else None
    console = Console(sys.stderr if json_out is not None else sys.stdout)
    turns = _Turns(interactive=not request.one_shot)
    reader = _LineReader(console)
    client = ChatClient(console, request.project, reader, turns, json_out=json_out)
    env = _agent_env(request)
    with tempfile.TemporaryDirectory(prefix="hermes-chat-") as scratch:
        log_path = Path(scratch) / "hermes-acp.stderr.log"
        with open(log_path, "wb") as log:
            try:
                async with _spawn(client, command, env, request.project, log.fileno()) as (conn, process):
                    turns.agent_exit = asyncio.ensure_future(process.wait())
                    _on_ctrl_c(turns, client, conn)
                    sid = await _open(conn, client, request)
                    if request.one_shot:
                        assert request.prompt is not None
                        code = await _one_shot(conn, client, sid, request.prompt)
                    else:
                        code = await _interactive(conn, client, sid, request)
                    return code
            except acp.RequestError as exc:
                print(f"hermes-acp refused: {request_error_text(exc)}", file=sys.stderr)
            except (TimeoutError, OSError, ConnectionError) as exc:
                print(f"The session with hermes-acp failed: {type(exc).__name__}: {exc}", file=sys.stderr)
            finally:
                asyncio.get_running_loop().remove_signal_handler(signal.SIGINT)
        show_log(Console(sys.stderr), log_path)
    return EXIT_FAILED


def _agent_env(request: _Request) -> dict[str, str]:
    env = dict(os.environ)
    bindir = str(Path(sys.executable).parent)
    env["PATH"] = os.pathsep.join([bindir, *(p for p in env.get("PATH", "").split(os.pathsep) if p and p != bindir)])
    env["HERMES_QUIET"] = "1"
    if request.model:
        # The agent's default for this run, so that the session's model picker offers it.
        env["HERMES_MODEL"] = request.model
    return env


@contextlib.asynccontextmanager
async def _spawn(client: ChatClient, command: str, env: dict[str, str], cwd: Path, stderr: int) -> AsyncIterator[Any]:
    """hermes-acp in a process group of its own (a terminal's Ctrl-C is this program's to handle)."""
    import acp

    process = await asyncio.create_subprocess_exec(
        command,
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=stderr,
        env=env,
        cwd=str(cwd),
        start_new_session=True,
        limit=_LINE_LIMIT,
    )
    assert process.stdin is not None and process.stdout is not None
    conn = acp.ClientSideConnection(client, process.stdin, process.stdout)
    try:
        yield conn, process
    finally:
        with contextlib.suppress(Exception):
            await conn.close()
        with contextlib.suppress(Exception):
            process.stdin.close()
        try:
            await asyncio.wait_for(process.wait(), 5)
        except TimeoutError:
            process.terminate()
            try:
                await asyncio.wait_for(process.wait(), 5)
            except TimeoutError:
                process.kill()
                await process.wait()


def _on_ctrl_c(turns: _Turns, client: ChatClient, conn: Any) -> None:
    """Ctrl-C cancels the running turn; a second one, or one at the prompt after another, exits."""
    loop = asyncio.get_running_loop()
    say = Console(sys.stderr)

    def interrupted() -> None:
        if turns.running and not turns.cancelled.is_set():
            turns.cancelled.set()
            client.console.fresh_line()
            say.line(say.style("Cancelling the turn… (Ctrl-C again to quit)", "yellow"))
            loop.create_task(conn.cancel(session_id=client.session_id))
        elif turns.running or not turns.interactive or turns.armed:
            turns.exit.set()
        else:
            turns.armed = True
            client.console.fresh_line()
            client.console.line(client.console.style("(Ctrl-C again or Ctrl-D to exit)", "dim"))
            client.console.write(_PROMPT)

    loop.add_signal_handler(signal.SIGINT, interrupted)


async def _open(conn: Any, client: ChatClient, request: _Request) -> str:
    """Initialize, then open a new session or reopen the one asked for; the session id."""
    import acp

    await asyncio.wait_for(
        conn.initialize(protocol_version=acp.PROTOCOL_VERSION, client_capabilities=client.capabilities()), _STARTUP_TIMEOUT
    )
    cwd = str(request.project)
    out = client.console
    if request.resume is None:
        session = await asyncio.wait_for(conn.new_session(cwd=cwd, mcp_servers=[]), _STARTUP_TIMEOUT)
        sid = session.session_id
    elif request.one_shot:
        # No replay: stdout carries this turn alone.
        sid = request.resume
        session = await asyncio.wait_for(conn.resume_session(session_id=sid, cwd=cwd, mcp_servers=[]), _STARTUP_TIMEOUT)
    else:
        sid = request.resume
        title = f" ({request.resume_title})" if request.resume_title else ""
        out.line(out.style(f"Earlier in session {sid[:8]}{title}:", "dim"))
        session = await conn.load_session(cwd=cwd, session_id=sid, mcp_servers=[])
        out.line()
        out.line(out.style("— continued —", "dim"))
    client.session_id = sid
    client.remember_options(session.config_options)
    if request.mode and client.options.get("mode") != request.mode:
        answer = await conn.set_config_option(config_id="mode", session_id=sid, value=request.mode)
        client.remember_options(answer.config_options)
    if request.model and client.options.get("model") != request.model:
        answer = await conn.set_config_option(config_id="model", session_id=sid, value=request.model)
        client.remember_options(answer.config_options)
    return sid


async def _turn(conn: Any, client: ChatClient, sid: str, text: str) -> tuple[str | None, bool]:
    """Run one prompt; (stop reason, whether hermes-acp reported an error). (None, ...) when the user quit."""
    import acp

    turns = client.turns
    client.new_turn()
    turns.cancelled.clear()
    turns.running = True
    prompt = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block(text)]))
    leaving = asyncio.ensure_future(turns.exit.wait())
    waits: set[asyncio.Future[Any]] = {prompt, leaving}
    if turns.agent_exit is not None:
        waits.add(turns.agent_exit)
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        leaving.cancel()
        turns.running = False
    if not prompt.done():
        prompt.cancel()
        prompt.add_done_callback(lambda t: t.cancelled() or t.exception())
        if turns.agent_exit is not None and turns.agent_exit.done():
            raise ConnectionError(f"hermes-acp exited (status {turns.agent_exit.result()}) during the turn")
        return None, False
    client.console.fresh_line()
    try:
        response = prompt.result()
    except acp.RequestError as exc:
        # A refused prompt (a bad /model, say) ends this turn, not the conversation.
        client.errors.append(request_error_text(exc))
        client.notice_error(f"hermes-acp refused: {client.errors[-1]}")
        return "end_turn", True
    told = (response.field_meta or {}).get("hermes")
    if isinstance(told, dict) and "error" in told:  # hermes-acp says whether the turn failed
        return response.stop_reason, told["error"] is not None
    return response.stop_reason, bool(client.errors)


def _exit_code(stop: str | None, failed: bool) -> int:
    if stop is None or stop == "cancelled":
        return EXIT_INTERRUPTED
    if failed:
        return EXIT_FAILED
    if stop in _STOPPED_SHORT:
        return EXIT_STOPPED
    return EXIT_OK


async def _one_shot(conn: Any, client: ChatClient, sid: str, prompt: str) -> int:
    stop, failed = await _turn(conn, client, sid, prompt)
    code = _exit_code(stop, failed)
    client.emit({"sessionId": sid, "stopReason": stop or "cancelled", "exitCode": code, "errors": client.errors})
    if stop in _STOPPED_SHORT:
        print(f"The turn stopped short ({stop}).", file=sys.stderr)
    if code == EXIT_INTERRUPTED:
        print("Interrupted: the turn was cancelled.", file=sys.stderr)
    print(f"Session {sid}  (continue it: hermes-editor chat --resume {sid[:8]})", file=sys.stderr)
    return code


_PROMPT = "> "


async def _interactive(conn: Any, client: ChatClient, sid: str, request: _Request) -> int:
    out = client.console
    turns = client.turns
    _complete_commands(client)
    model, mode = client.options.get("model", "?"), client.options.get("mode", "?")
    out.line(out.style(f"Hermes in {request.project}  ·  session {sid[:8]}  ·  model {model}  ·  mode {mode}", "dim"))
    out.line(out.style("Ctrl-C cancels a turn; Ctrl-D (or /exit) leaves; /help lists the commands.", "dim"))
    first = request.prompt
    while True:
        if first is not None:
            text, first = first, None
            out.line(f"{_PROMPT}{text}")
        else:
            out.line()
            reading = asyncio.ensure_future(client.reader.read(_PROMPT))
            leaving = asyncio.ensure_future(turns.exit.wait())
            await asyncio.wait({reading, leaving}, return_when=asyncio.FIRST_COMPLETED)
            leaving.cancel()
            if not reading.done():
                reading.cancel()
                out.line()
                return EXIT_OK
            line = reading.result()
            if line is None:  # Ctrl-D
                out.line()
                return EXIT_OK
            text = line
        turns.armed = False
        text = text.strip()
        if not text:
            continue
        if text in _LOCAL_EXITS:
            return EXIT_OK
        stop, failed = await _turn(conn, client, sid, text)
        if stop is None:
            out.line()
            return EXIT_INTERRUPTED
        if stop == "cancelled":
            turns.armed = True  # Ctrl-C cancelled it: another one at the prompt exits
            out.line(out.style("(cancelled)", "yellow"))
        elif stop != "end_turn":
            out.line(out.style(f"(the turn stopped short: {stop})", "yellow"))


def _complete_commands(client: ChatClient) -> None:
    """Tab completes the slash commands the agent offers."""
    if not client.reader.tty:
        return
    try:
        import readline
    except ImportError:
        return

    def complete(text: str, state: int) -> str | None:
        names = [f"/{name}" for name in client.commands] + list(_LOCAL_EXITS)
        matches = [name for name in names if name.startswith(text)] if text.startswith("/") else []
        return matches[state] if state < len(matches) else None

    readline.set_completer_delims(" \t\n")
    readline.set_completer(complete)
    readline.parse_and_bind("tab: complete")
