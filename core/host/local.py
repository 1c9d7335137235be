"""Where files and commands live. A tool never opens a file or spawns a process itself.

``LocalHost`` uses this machine's filesystem and processes. Surfaces may provide their own
(the ACP surface reads editor buffers and runs commands in the editor's terminal).

Text files keep what they were: their encoding (UTF-8 with or without BOM, UTF-16 with BOM,
Windows-1252 / Latin-1), line endings and mode survive a write, which is atomic.
"""

from __future__ import annotations

import asyncio
import atexit
import dataclasses
import itertools
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from core.events import ToolContent
from core.host.sandbox import Confinement, command_argv, command_environment
from core.redaction import SECRET_ENV_VARS
from core.state_home import make_user_dirs, user_file_mode, user_umask

__all__ = [
    "BackgroundCommand",
    "BinaryFileError",
    "CommandResult",
    "Host",
    "LocalHost",
    "OutputCapture",
    "TextFile",
    "binary_kind",
    "child_environment",
    "decode_text",
    "die_with_parent",
    "encode_text",
    "next_job_id",
    "read_text_file",
    "write_atomic",
]


@dataclass(frozen=True, slots=True)
class CommandResult:
    exit_code: int | None
    output: str
    truncated: bool = False
    signal: str | None = None
    timed_out: bool = False
    omitted: int = 0  # bytes cut from the middle (head and tail kept); -1: an unknown amount


Emit = Callable[[list[ToolContent]], Awaitable[None]]


class BinaryFileError(UnicodeError):
    """The file is not text; the message says what it looks like (a UnicodeError: it does not decode)."""


@dataclass(frozen=True, slots=True)
class TextFile:
    """A text file's content and the encoding to write it back in."""

    text: str
    encoding: str = "utf-8"  # utf-8, utf-8-sig, utf-16-le, utf-16-be, cp1252 or latin-1


class BackgroundCommand(Protocol):
    """A command started with ``background``; it runs until it ends or is stopped."""

    id: str
    command: str

    async def read(self, wait: float = 0) -> tuple[str, CommandResult | None]:
        """Output since the last read (waiting up to ``wait`` s for some), and the result once ended."""
        ...

    async def stop(self) -> CommandResult:
        """Stop it (and its children); the result holds output not read yet."""
        ...


class Host(Protocol):
    """File and process access for one session."""

    jobs: dict[str, BackgroundCommand]

    async def read_text(self, path: Path) -> str: ...

    async def read_file(self, path: Path) -> TextFile: ...

    async def write_text(self, path: Path, content: str, *, encoding: str = "utf-8") -> None: ...

    async def delete(self, path: Path) -> None: ...

    async def move(self, source: Path, target: Path) -> None: ...

    async def run_command(
        self, command: str, cwd: Path, *, timeout: float, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> CommandResult:
        """Run ``command``; inside the sandbox ``confinement`` describes when there is one."""
        ...

    async def start_command(
        self, command: str, cwd: Path, *, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> BackgroundCommand: ...

    async def aclose(self) -> None: ...


# --- text encodings --------------------------------------------------------------------

_BOMS = ((b"\xef\xbb\xbf", "utf-8-sig"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))
_MAGIC = (
    (b"\x89PNG", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF8", "a GIF image"),
    (b"%PDF", "a PDF document"),
    (b"PK\x03\x04", "a zip archive"),
    (b"\x7fELF", "an executable (ELF)"),
    (b"\x1f\x8b", "gzip data"),
    (b"SQLite format 3", "an SQLite database"),
)
# Bytes that plain text holds: printable ASCII, high bytes, tab, newlines, form feed, escape.
_TEXT_BYTES = bytes([7, 8, 9, 10, 12, 13, 27, *range(32, 127), *range(128, 256)])


def binary_kind(head: bytes) -> str | None:
    """What the first bytes of a file look like when it is not text, else None."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return None  # UTF-16 with a BOM is text full of NULs
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    if b"\x00" in head:
        return "binary data"
    if head and len(head.translate(None, _TEXT_BYTES)) > len(head) * 0.3:
        return "binary data"
    return None


def decode_text(data: bytes) -> TextFile:
    """Text and encoding of a file's bytes; raises BinaryFileError for non-text."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            try:
                return TextFile(data[len(bom) :].decode(encoding.replace("-sig", "")), encoding)
            except UnicodeDecodeError:
                raise BinaryFileError(f"binary data (a {encoding} byte-order mark, then bytes that are not {encoding})") from None
    if kind := binary_kind(data[:8192]):
        raise BinaryFileError(kind)
    try:
        return TextFile(data.decode("utf-8"), "utf-8")
    except UnicodeDecodeError:
        pass
    # Windows-1252 shows curly quotes where Latin-1 shows control codes; both round-trip bytes.
    try:
        return TextFile(data.decode("cp1252"), "cp1252")
    except UnicodeDecodeError:
        return TextFile(data.decode("latin-1"), "latin-1")


def encode_text(text: str, encoding: str) -> bytes:
    """Bytes for ``text`` in ``encoding`` (BOM included where the encoding has one)."""
    if encoding == "utf-16-le":
        return b"\xff\xfe" + text.encode("utf-16-le")
    if encoding == "utf-16-be":
        return b"\xfe\xff" + text.encode("utf-16-be")
    return text.encode(encoding)


def read_text_file(path: Path) -> TextFile:
    """Read and decode a file from disk (no newline translation)."""
    with open(path, "rb") as handle:
        return decode_text(handle.read())


def write_atomic(path: Path, content: str | bytes, encoding: str = "utf-8", mode: int | None = None) -> None:
    """Write via a temporary file and rename, keeping the file's mode (or setting ``mode``)."""
    data = content if isinstance(content, bytes) else encode_text(content, encoding)
    path = Path(os.path.realpath(path))  # through a symlink to its target, never replacing the link
    make_user_dirs(path.parent)
    if mode is None:
        try:
            mode = path.stat().st_mode & 0o7777
        except FileNotFoundError:
            mode = None
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        else:  # mkstemp makes 0600; a new file gets the mode the user's umask gives it
            os.chmod(tmp, user_file_mode())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def child_environment(secrets: list[str] = ()) -> dict[str, str]:
    """The environment for commands the agent runs: ours, minus every credential."""
    env = {k: v for k, v in os.environ.items() if k not in SECRET_ENV_VARS}
    if secrets:
        env = {k: v for k, v in env.items() if v not in secrets}
    env.setdefault("PAGER", "cat")
    env["GIT_PAGER"] = "cat"
    env.setdefault("NO_COLOR", "1")
    return env


# --- processes -------------------------------------------------------------------------

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


_PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In a child before exec: be killed when this process dies, however it dies (Linux)."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        except (OSError, AttributeError):
            pass


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

# Without a PID namespace to end with us, a command runs under this small supervisor: it is
# sent SIGTERM when we die (even by SIGKILL) and then kills its whole process group.
_SUPERVISOR = """
import ctypes, os, signal, sys
ctypes.CDLL(None).prctl(1, signal.SIGTERM)
if os.getppid() != int(sys.argv[1]):
    os.killpg(0, signal.SIGKILL)
def end(signum, frame):
    os.killpg(0, signal.SIGKILL)
signal.signal(signal.SIGTERM, end)
signal.signal(signal.SIGHUP, end)
child = os.fork()
if child == 0:
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGHUP, signal.SIG_DFL)
    os.execv("/bin/sh", ["/bin/sh", "-c", sys.argv[2]])
while True:
    try:
        _, status = os.waitpid(child, 0)
        break
    except InterruptedError:
        continue
code = os.waitstatus_to_exitcode(status)
os._exit(128 - code if code < 0 else code)
"""


def supervised(argv: list[str]) -> list[str]:
    """``/bin/sh -c COMMAND`` under the supervisor on Linux; other argvs (a sandbox) as they are."""
    if argv[:2] != ["/bin/sh", "-c"] or not sys.platform.startswith("linux"):
        return argv
    return [sys.executable, "-S", "-c", _SUPERVISOR, str(os.getpid()), argv[2]]


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
    """The command's own exit code: the sandbox or the supervisor every command runs under
    reports a signal that killed it as 128 + N."""
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


class _LocalJob:
    """A background command on this machine, its output kept (the newest ``limit`` bytes)."""

    def __init__(self, job_id: str, command: str, proc: asyncio.subprocess.Process, limit: int) -> None:
        self.id = job_id
        self.command = command
        self._proc = proc
        self._limit = limit
        self._unread = bytearray()
        self._dropped = 0
        self._changed = asyncio.Event()
        self._pump = asyncio.create_task(self._read_output())
        _LIVE_GROUPS.add(proc.pid)

    async def _read_output(self) -> None:
        assert self._proc.stdout is not None
        while data := await self._proc.stdout.read(65536):
            self._unread += data
            if len(self._unread) > self._limit:
                cut = len(self._unread) - self._limit
                del self._unread[:cut]
                self._dropped += cut
            self._changed.set()
        await self._proc.wait()
        _LIVE_GROUPS.discard(self._proc.pid)
        self._changed.set()

    def _take(self) -> str:
        text = bytes(self._unread).decode("utf-8", errors="replace")
        if self._dropped:
            text = f"[... {self._dropped} bytes of earlier output dropped ...]\n{text}"
        self._unread.clear()
        self._dropped = 0
        self._changed.clear()
        return text

    async def read(self, wait: float = 0) -> tuple[str, CommandResult | None]:
        if wait > 0 and not self._unread and not self._pump.done():
            try:
                await asyncio.wait_for(self._changed.wait(), wait)
            except TimeoutError:
                pass
        text = self._take()
        if not self._pump.done():
            return text, None
        return text, _result(_wrapped_code(self._proc), text)

    async def stop(self) -> CommandResult:
        if not self._pump.done():
            _signal_group(self._proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(asyncio.shield(self._pump), 3)
            except TimeoutError:
                _signal_group(self._proc.pid, signal.SIGKILL)
                await self._pump
        _LIVE_GROUPS.discard(self._proc.pid)
        text = self._take()
        return _result(_wrapped_code(self._proc), text)


def _sweep_session_temps() -> None:
    """Remove the private /tmp of sessions whose server is gone (killed before it could clean up)."""
    base = Path(tempfile.gettempdir())
    try:
        entries = list(base.glob("hermes-tmp-*-*"))
    except OSError:
        return
    for entry in entries:
        pid = entry.name.split("-")[2]
        try:
            if not pid.isdigit() or int(pid) == os.getpid() or entry.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        try:
            os.kill(int(pid), 0)
        except ProcessLookupError:
            shutil.rmtree(entry, ignore_errors=True)
        except PermissionError:
            pass


class LocalHost:
    """This machine's filesystem and processes."""

    def __init__(self, secrets: list[str] | None = None) -> None:
        self._secrets = secrets or []
        self.jobs: dict[str, BackgroundCommand] = {}
        self._temp: str | None = None  # the session's private /tmp inside the sandbox

    def command_argv(self, command: str, cwd: Path, confinement: Confinement | None) -> tuple[list[str], dict[str, str]]:
        """The argv and environment that run ``command`` (inside the sandbox when confined)."""
        env = child_environment(self._secrets)
        if confinement is None:
            return ["/bin/sh", "-c", command], env
        if confinement.temp is None:
            if self._temp is None or not os.path.isdir(self._temp):
                _sweep_session_temps()
                self._temp = tempfile.mkdtemp(prefix=f"hermes-tmp-{os.getpid()}-")
            confinement = dataclasses.replace(confinement, temp=Path(self._temp))
        argv = command_argv(command, cwd, confinement, command_environment(env))
        return argv, env

    async def read_text(self, path: Path) -> str:
        return (await self.read_file(path)).text

    async def read_file(self, path: Path) -> TextFile:
        return await asyncio.to_thread(read_text_file, path)

    async def write_text(self, path: Path, content: str, *, encoding: str = "utf-8") -> None:
        await asyncio.to_thread(write_atomic, path, content, encoding)

    async def delete(self, path: Path) -> None:
        await asyncio.to_thread(os.unlink, path)

    async def move(self, source: Path, target: Path) -> None:
        def move() -> None:
            if target.exists():
                raise FileExistsError(f"{target} already exists")
            make_user_dirs(target.parent)
            os.rename(source, target)

        await asyncio.to_thread(move)

    async def _spawn(self, command: str, cwd: Path, confinement: Confinement | None) -> asyncio.subprocess.Process:
        global _exit_handlers
        if not _exit_handlers:
            _exit_handlers = True
            _end_on_termination()
        argv, env = self.command_argv(command, cwd, confinement)
        argv = supervised(argv)
        return await asyncio.create_subprocess_exec(
            *argv,
            cwd=str(cwd),
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group, so stop and cancel reach all of it
            preexec_fn=die_with_parent,
            umask=user_umask(),  # ours is 077 for the state home; the user's project gets theirs
        )

    async def run_command(
        self, command: str, cwd: Path, *, timeout: float, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> CommandResult:
        proc = await self._spawn(command, cwd, confinement)
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

    async def start_command(
        self, command: str, cwd: Path, *, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> BackgroundCommand:
        proc = await self._spawn(command, cwd, confinement)
        job = _LocalJob(next_job_id(), command, proc, output_limit)
        self.jobs[job.id] = job
        return job

    async def aclose(self) -> None:
        """Stop every background command still running."""
        jobs, self.jobs = list(self.jobs.values()), {}
        await asyncio.gather(*(job.stop() for job in jobs), return_exceptions=True)
        if self._temp is not None:
            await asyncio.to_thread(shutil.rmtree, self._temp, True)
            self._temp = None
