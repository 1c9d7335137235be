"""Commands run as processes on this machine: the environment they get (no credentials), a
guardian process that ends each command's process group when we die, output capture with a size
limit, and background jobs read while they run.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import itertools
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from core.redaction import SECRET_ENV_VARS
from core.state_home import user_umask

__all__ = [
    "CommandResult",
    "EndedCommand",
    "KeptOutputJob",
    "LocalJob",
    "OutputCapture",
    "child_environment",
    "next_job_id",
    "run_to_end",
    "is_background_note",
    "notice_of_note",
    "spawn",
    "take_ended",
]


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None
    output: str
    truncated: bool = False
    signal: str | None = None
    timed_out: bool = False
    omitted: int = 0  # bytes cut from the middle (head and tail kept); -1: an unknown amount


def child_environment(secrets: Sequence[str] = ()) -> dict[str, str]:
    """The environment for commands the agent runs: ours, minus every credential."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV_VARS}
    if secrets:
        env = {k: v for k, v in env.items() if v not in secrets}
    env.setdefault("PAGER", "cat")
    env["GIT_PAGER"] = "cat"
    env.setdefault("NO_COLOR", "1")
    return env


_job_ids = itertools.count(1)


# Process groups of background commands still running: ended when this process exits.
_LIVE_GROUPS: set[int] = set()


def next_job_id() -> str:
    """A short id for a background command, unique in this process."""
    return str(next(_job_ids))


@atexit.register
def _end_background_groups() -> None:
    for pgid in list(_LIVE_GROUPS):
        _signal_group(pgid, signal.SIGTERM)


def _end_on_termination() -> None:
    """On SIGTERM or SIGHUP, stop every command group we started, then die as the signal says.

    Only where nobody else handles the signal (the gateway stops gracefully by itself)."""
    if threading.current_thread() is not threading.main_thread():
        return
    for sig in (signal.SIGTERM, signal.SIGHUP):
        if signal.getsignal(sig) is not signal.SIG_DFL:
            continue

        def end(signum: int, _frame: object) -> None:
            _end_background_groups()
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

        signal.signal(sig, end)


_exit_handlers = False


# What ends a command's process group when we die, however we die (SIGKILL included): one small
# guardian process per server, started with the first command. It reads the groups to guard from
# a pipe whose only writer is us; when that pipe closes (we exited or were killed) it kills every
# group still registered. A group is registered while its leader runs. The command itself first
# waits for a go-ahead on its stdin, written only once the guardian has its group, so no part of
# a command ever runs unguarded; if we die before that, it exits without running anything.
_GUARDIAN = """
import os, signal
groups = set()
def end(*_):
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass
    os._exit(0)
signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGHUP, end)
signal.signal(signal.SIGINT, signal.SIG_IGN)
pending = b""
while True:
    try:
        chunk = os.read(0, 4096)
    except InterruptedError:
        continue
    if not chunk:
        end()
    *lines, pending = (pending + chunk).split(b"\\n")
    for line in lines:
        (groups.add if line[:1] == b"+" else groups.discard)(int(line[1:]))
"""

# The command's first step: wait for the go-ahead, then become the command, stdin /dev/null.
_WAIT_FOR_GO = 'IFS= read -r go || exit 125; exec "$@" </dev/null'


class _Guardian:
    """Our side of the guardian: the groups it guards, and the pipe it reads them from."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._proc: subprocess.Popen[bytes] | None = None
        self._pipe: int | None = None
        self.groups: set[int] = set()

    def _start(self) -> None:
        self._close()
        read, write = os.pipe()
        try:
            self._proc = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _GUARDIAN, "hermes-command-guardian"],
                stdin=read,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                cwd="/",
                env={},
                start_new_session=True,  # out of reach of the terminal's ^C and of our own group
            )
        except BaseException:
            os.close(write)
            raise
        finally:
            os.close(read)
        # Never blocking us: a guardian that stops reading (stopped, stuck) counts as dead.
        os.set_blocking(write, False)
        self._pipe = write
        if self.groups:
            self._send("".join(f"+{group}\n" for group in self.groups))

    def _close(self) -> None:
        """Let go of a guardian that died or stopped reading. One still alive is killed first:
        closing its pipe would tell it we died, and it would kill every command."""
        if self._proc is not None and self._proc.poll() is None:
            self._proc.kill()
            self._proc.wait()
        self._proc = None
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.close(self._pipe)
            self._pipe = None

    def _send(self, text: str) -> None:
        assert self._pipe is not None
        os.write(self._pipe, text.encode())

    def add(self, group: int) -> None:
        """Guard ``group`` from now on; the guardian is (re)started when it is not running."""
        with self._lock:
            self.groups.add(group)
            if self._proc is None or self._proc.poll() is not None:
                self._start()  # registers every group, this one included
                return
            try:
                self._send(f"+{group}\n")
            except OSError:  # it died since the poll, or stopped reading
                self._start()

    def discard(self, group: int) -> None:
        with self._lock:
            if group not in self.groups:
                return
            self.groups.discard(group)
            if self._pipe is not None:
                with contextlib.suppress(OSError):
                    self._send(f"-{group}\n")

    def forget(self) -> None:
        """In a forked child: the guardian and its pipe are the parent's."""
        self._lock = threading.Lock()
        if self._pipe is not None:
            with contextlib.suppress(OSError):
                os.close(self._pipe)
        self._proc, self._pipe, self.groups = None, None, set()


_guardian = _Guardian()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_guardian.forget)


def _guarded(argv: list[str]) -> list[str]:
    """``argv`` behind the go-ahead step (Linux: commands elsewhere run as they are)."""
    if not sys.platform.startswith("linux"):
        return argv
    return ["/bin/sh", "-c", _WAIT_FOR_GO, "/bin/sh", *argv]


class OutputCapture:
    """Keeps the first and last ``limit / 2`` bytes of a stream; says how much was cut between."""

    def __init__(self, limit: int) -> None:
        self.half = max(limit // 2, 1)
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.half - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.half:
                del self.tail[: len(self.tail) - self.half]

    @property
    def omitted(self) -> int:
        return self.total - len(self.head) - len(self.tail)

    def text(self) -> str:
        head = self.head.decode("utf-8", errors="replace")
        tail = self.tail.decode("utf-8", errors="replace")
        if self.omitted <= 0:
            return (self.head + self.tail).decode("utf-8", errors="replace")
        return f"{head}\n[... {self.omitted} bytes of output omitted ...]\n{tail}"


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _wrapped_code(proc: asyncio.subprocess.Process) -> int | None:
    """The command's own exit code: the sandbox reports a signal that killed it as 128 + N, as
    the shell does for a command it did not replace itself with."""
    code = proc.returncode
    if code is not None and 128 < code < 128 + signal.NSIG:
        try:
            return -signal.Signals(code - 128)
        except ValueError:
            return code
    return code


def _result(code: int | None, output: str, *, omitted: int = 0, timed_out: bool = False) -> CommandResult:
    sig = signal.Signals(-code).name if code is not None and code < 0 else None
    return CommandResult(
        exit_code=None if sig else code,
        output=output,
        truncated=omitted > 0,
        signal=sig,
        timed_out=timed_out,
        omitted=omitted,
    )


class KeptOutputJob:
    """What every host's background command shares: its id and command, whom its end was told
    to, and the newest ``limit`` bytes of its output, kept until read. A host's job feeds
    ``_keep`` from ``_read_output`` and says how it ended in ``_result``."""

    def __init__(self, job_id: str, command: str, limit: int) -> None:
        self.id = job_id
        self.command = command
        # Whom its end was announced to (see ``take_ended``).
        self.told: set[str] = set()
        self._limit = limit
        self._unread = bytearray()
        self._dropped = 0
        self._changed = asyncio.Event()
        self._pump = asyncio.create_task(self._read_output())

    async def _read_output(self) -> None:
        raise NotImplementedError

    def _result(self, text: str) -> CommandResult:
        raise NotImplementedError

    def _keep(self, data: bytes) -> None:
        self._unread += data
        if len(self._unread) > self._limit:
            cut = len(self._unread) - self._limit
            del self._unread[:cut]
            self._dropped += cut
        self._changed.set()

    @property
    def ended(self) -> CommandResult | None:
        """How it ended (exit code or signal, no output); None while it runs."""
        return self._result("") if self._pump.done() else None

    def _take(self) -> str:
        text = bytes(self._unread).decode("utf-8", errors="replace")
        if self._dropped:
            text = f"[... {self._dropped} bytes of earlier output dropped ...]\n{text}"
        self._unread.clear()
        self._dropped = 0
        self._changed.clear()
        return text

    async def read(self, wait: float = 0) -> tuple[str, CommandResult | None]:
        """The output since the last read (waiting up to ``wait`` s for some), and how it ended once it has."""
        if wait > 0 and not self._unread and not self._pump.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), wait)
        text = self._take()
        if not self._pump.done():
            return text, None
        return text, self._result(text)


class LocalJob(KeptOutputJob):
    """A background command on this machine, its output kept (the newest ``limit`` bytes)."""

    def __init__(self, job_id: str, command: str, proc: asyncio.subprocess.Process, limit: int) -> None:
        self._proc = proc
        super().__init__(job_id, command, limit)
        _LIVE_GROUPS.add(proc.pid)

    async def _read_output(self) -> None:
        assert self._proc.stdout is not None
        while data := await self._proc.stdout.read(65536):
            self._keep(data)
        await self._proc.wait()
        _LIVE_GROUPS.discard(self._proc.pid)
        self._changed.set()

    def _result(self, text: str) -> CommandResult:
        return _result(_wrapped_code(self._proc), text)

    async def wait(self) -> None:
        """Until it has ended (or been stopped)."""
        await asyncio.shield(self._pump)

    async def stop(self) -> CommandResult:
        if not self._pump.done():
            _signal_group(self._proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(self._pump), 3)
            except TimeoutError:
                _signal_group(self._proc.pid, signal.SIGKILL)
                await self._pump
        _LIVE_GROUPS.discard(self._proc.pid)
        return self._result(self._take())


NOTE_PREFIX = "[Background command "


@dataclass(frozen=True, slots=True)
class EndedCommand:
    """A background command that ended while nobody was reading it."""

    job_id: str
    command: str
    result: CommandResult

    def _status(self) -> str:
        if self.result.signal:
            return f"was killed by {self.result.signal}"
        return f"exited {self.result.exit_code}" if self.result.exit_code is not None else "ended"

    def _shown(self) -> str:
        text = " ".join(self.command.split())
        return text if len(text) <= 80 else text[:79] + "…"

    @property
    def notice(self) -> str:
        """What the user is told."""
        return f"Background command {self.job_id} (`{self._shown()}`) {self._status()}."

    @property
    def note(self) -> str:
        """What the model is told, once, at its next request: the notice and what to do."""
        return f"[{self.notice[:-1]}{_NOTE_TAIL}{self.job_id}) for its output.]"


_NOTE_TAIL = "; use command_output(job="


def is_background_note(text: str) -> bool:
    """Whether a user-side message is an ``EndedCommand.note`` rather than the user's words."""
    return text.startswith(NOTE_PREFIX) and _NOTE_TAIL in text


def notice_of_note(note: str) -> str:
    """The user's notice for a stored ``EndedCommand.note`` (to replay a conversation)."""
    return note[1:].rsplit(_NOTE_TAIL, 1)[0] + "."


def take_ended(jobs: Mapping[str, object], audience: str) -> list[EndedCommand]:
    """The background commands among ``jobs`` that have ended and that ``audience`` ("model" or
    "user") has not been told of yet, in start order; each is marked as told.

    A command the model read to its end or stopped has left ``jobs`` and is never announced.
    Jobs without ``ended`` (another host's) are skipped.
    """
    out = []
    for job in jobs.values():
        result = getattr(job, "ended", None)
        told = getattr(job, "told", None)
        if result is None or not isinstance(told, set) or audience in told:
            continue
        told.add(audience)
        out.append(EndedCommand(str(getattr(job, "id", "?")), str(getattr(job, "command", "")), result))
    return out


async def spawn(argv: list[str], cwd: Path, env: dict[str, str]) -> asyncio.subprocess.Process:
    """Start ``argv`` in its own process group, guarded (it ends when we die), output piped,
    stdin closed."""
    from core.host.sandbox import own_session

    global _exit_handlers
    if not _exit_handlers:
        _exit_handlers = True
        _end_on_termination()
    guard = sys.platform.startswith("linux")
    go_read, go_write = os.pipe() if guard else (None, None)
    try:
        try:
            proc = await asyncio.create_subprocess_exec(
                *_guarded(argv),
                cwd=str(cwd),
                stdin=go_read if guard else asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
                # Its own process group, so that stop and cancel reach all of it, in a session of
                # its own (no terminal to read from or be stopped by): bubblewrap makes that session
                # for the command it runs, which then only needs the group.
                **({"process_group": 0} if own_session(argv) else {"start_new_session": True}),
                umask=user_umask(),  # ours is 077 for the state home; the user's project gets theirs
            )
        finally:
            if go_read is not None:
                os.close(go_read)
        if go_write is not None:
            _guardian.add(proc.pid)
            _forget_when_done(proc)
            os.write(go_write, b"\n")
    finally:
        if go_write is not None:
            os.close(go_write)  # before the go-ahead (an error): the command exits unstarted
    return proc


_waiting: set[asyncio.Task[None]] = set()


def _forget_when_done(proc: asyncio.subprocess.Process) -> None:
    """Unguard the group once its leader has ended (its number may then be reused). One whose
    loop is shut down first stays guarded: it is ended with us."""

    async def forget() -> None:
        try:
            await proc.wait()
        finally:
            if proc.returncode is not None:
                _guardian.discard(proc.pid)

    task = asyncio.ensure_future(forget())
    _waiting.add(task)
    task.add_done_callback(_waiting.discard)


async def run_to_end(proc: asyncio.subprocess.Process, *, timeout: float, output_limit: int) -> CommandResult:
    """Collect ``proc``'s output until it exits; past ``timeout`` stop its group, politely first."""
    capture = OutputCapture(output_limit)

    async def pump() -> None:
        assert proc.stdout is not None
        while data := await proc.stdout.read(65536):
            capture.add(data)

    timed_out = False
    try:
        await asyncio.wait_for(pump(), timeout)
        await proc.wait()
    except TimeoutError:
        timed_out = True
        # A polite stop first (test runners clean up), then the hard one.
        _signal_group(proc.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(proc.wait(), 2)
        except TimeoutError:
            _signal_group(proc.pid, signal.SIGKILL)
            await proc.wait()
    except BaseException:
        _signal_group(proc.pid, signal.SIGKILL)
        raise
    return _result(_wrapped_code(proc), capture.text(), omitted=capture.omitted, timed_out=timed_out)
