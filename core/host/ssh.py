"""A project on another machine, reached over SSH (``[projects.NAME] host = "ssh"``).

Files go over SFTP: reads decode as local files do (``core.host.text_files``), writes go to a
temporary file in the same directory and are renamed over the target. Commands run over SSH
channels without a terminal, under ``/bin/sh`` in the remote project; they are stopped by
signalling their process group from a second channel. Nothing of our environment travels: no
variables are sent, agent forwarding is off.

The project's local ``path`` (a mirror or a mount that the editor opens) maps to the remote
directory named in ``ssh = "user@box:/srv/app"``; remote paths are accepted as they are. A path
outside the remote project is refused.

Host keys are checked against ``known_hosts`` (the project's, else ``~/.ssh/known_hosts``); a key
that differs from the one recorded is refused, an unknown one is shown to the user (its
fingerprint) through ``host_questions`` and recorded when they accept. ``~/.ssh/config`` applies.
One connection per session, kept alive and made again when it drops.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets as secrets_module
import shlex
import signal
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import asyncssh

from core.events import TextContent
from core.host.checkpoints import register_files
from core.host.local import BackgroundCommand, Emit
from core.host.processes import CommandResult, KeptOutputJob, OutputCapture, next_job_id
from core.host.questions import host_questions
from core.host.sandbox import Confinement
from core.host.text_files import TextFile, decode_text, encode_text

if TYPE_CHECKING:
    from core.config import ProjectConfig

__all__ = ["RemoteFiles", "RemoteJob", "SshError", "SshHost", "SshTarget"]

log = logging.getLogger(__name__)

KEEPALIVE = 15.0  # seconds between keepalives; the connection counts as dropped after 4 unanswered
CONNECT_TIMEOUT = 20.0
_PID_LINE = re.compile(rb"hermes-pid (\d+)\n")
_SHOW_EVERY = 0.5  # seconds between updates of a running command's output in its tool call


class SshError(OSError):
    """The remote machine could not be reached or used; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class SshTarget:
    """Where a remote project lives: ``[user@]host:/absolute/path`` and how to connect."""

    host: str
    root: PurePosixPath
    user: str | None = None
    port: int | None = None
    identity_file: str | None = None
    known_hosts: str | None = None

    @classmethod
    def parse(cls, spec: str, *, port: int | None = None, identity_file: str | None = None, known_hosts: str | None = None) -> SshTarget:
        """``user@box:/srv/app``; a ValueError naming the form otherwise."""
        match = re.fullmatch(r"(?:([^@:/\s]+)@)?(\[[0-9A-Fa-f:.]+\]|[^@:/\s\[\]]+):(/\S*)", spec.strip())
        if match is None:
            raise ValueError(f"{spec!r} is not an SSH project: write 'user@box:/srv/app' (the remote directory is absolute)")
        user, host, root = match.groups()
        return cls(host.strip("[]"), PurePosixPath(root), user, port, identity_file, known_hosts)

    @property
    def label(self) -> str:
        """``user@box`` (with ``:port`` when given), as messages name the machine."""
        name = f"{self.user}@{self.host}" if self.user else self.host
        return f"{name}:{self.port}" if self.port else name

    def known_hosts_file(self) -> Path:
        """The known_hosts file checked, and where an accepted key is recorded."""
        return Path(self.known_hosts).expanduser() if self.known_hosts else Path.home() / ".ssh" / "known_hosts"


class _Client(asyncssh.SSHClient):
    """Records the key a server offered that known_hosts does not trust (then refused)."""

    def __init__(self, host: SshHost) -> None:
        self._host = host

    def validate_host_public_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> bool:
        self._host._offered = (host, addr, port, key)
        accepted = self._host._accepted
        return accepted is not None and accepted.public_data == key.public_data


class SshHost:
    """Files and commands of a project on a remote machine, over one SSH connection."""

    kind = "ssh"

    def __init__(
        self,
        name: str,
        project: ProjectConfig | None = None,
        *,
        secrets: list[str] | None = None,
        target: SshTarget | None = None,
        local_root: Path | None = None,
    ) -> None:
        if target is None:
            if project is None or not project.ssh:
                raise ValueError(f'[projects.{name}] host = "ssh" needs ssh = "user@box:/srv/app"')
            target = SshTarget.parse(project.ssh, port=project.port, identity_file=project.identity_file, known_hosts=project.known_hosts)
        self.name = name
        self.target = target
        self.where = f"ssh: {target.label}"  # named in tool call titles
        # The approval policy reads this: commands here are not in the OS sandbox, so in the
        # accept-edits and auto modes those that do more than read ask first.
        self.unsandboxed = f"commands run on {target.label} over SSH, outside the sandbox"
        self.local_root = local_root if local_root is not None else (project.folder if project is not None else None)
        self.jobs: dict[str, BackgroundCommand] = {}
        self._conn: asyncssh.SSHClientConnection | None = None
        self._sftp: asyncssh.SFTPClient | None = None
        self._connecting = asyncio.Lock()
        self._offered: tuple[str, str, int, asyncssh.SSHKey] | None = None
        self._accepted: asyncssh.SSHKey | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        with contextlib.suppress(RuntimeError):
            self._loop = asyncio.get_running_loop()
        self.checkpoint_files = RemoteFiles(self)
        register_files(self.checkpoint_files)

    # --- the connection ------------------------------------------------------------

    def _options(self) -> dict[str, Any]:
        t = self.target
        options: dict[str, Any] = {
            "agent_forwarding": False,
            "x11_forwarding": False,
            "keepalive_interval": KEEPALIVE,
            "keepalive_count_max": 4,
            "connect_timeout": CONNECT_TIMEOUT,
            "client_factory": lambda: _Client(self),
        }
        if t.user:
            options["username"] = t.user
        if t.port:
            options["port"] = t.port
        if t.identity_file:
            options["client_keys"] = [str(Path(t.identity_file).expanduser())]
        known = t.known_hosts_file()
        if t.known_hosts or known.is_file():
            options["known_hosts"] = str(known) if known.is_file() else b""
        return options

    async def connection(self) -> asyncssh.SSHClientConnection:
        """The session's connection, made (again) when there is none."""
        async with self._connecting:
            if self._conn is not None and not self._conn.is_closed():
                return self._conn
            self._conn, self._sftp = None, None
            self._loop = asyncio.get_running_loop()
            self._conn = await self._connect()
            return self._conn

    async def _connect(self) -> asyncssh.SSHClientConnection:
        t = self.target
        self._offered = None
        try:
            return await asyncssh.connect(t.host, **self._options())
        except asyncssh.HostKeyNotVerifiable:
            if self._offered is None:
                raise SshError(f"The host key of {t.label} could not be verified. Check {t.known_hosts_file()}.") from None
            await self._decide_on_key(*self._offered)
            try:
                return await asyncssh.connect(t.host, **self._options())
            except (OSError, asyncssh.Error) as exc:
                raise self._error(exc) from None
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            raise self._error(exc) from None

    def _error(self, exc: BaseException) -> SshError:
        t = self.target
        if isinstance(exc, SshError):
            return exc
        if isinstance(exc, asyncssh.PermissionDenied):
            how = f"the key {t.identity_file}" if t.identity_file else "your SSH keys and agent"
            return SshError(
                f"Authentication to {t.label} failed: the server accepted none of {how}. "
                "Set identity_file in the project's [projects] table, or add your public key to the server's authorized_keys."
            )
        if isinstance(exc, TimeoutError):
            return SshError(f"Connecting to {t.label} timed out after {CONNECT_TIMEOUT:g}s. Check the host name, the port and the network.")
        if isinstance(exc, OSError):
            reason = exc.strerror or str(exc) or type(exc).__name__
            return SshError(f"Cannot reach {t.label}: {reason}. Check the host name and port, and that sshd runs there.")
        reason = getattr(exc, "reason", "") or str(exc) or type(exc).__name__
        return SshError(f"The SSH connection to {t.label} failed: {reason}.")

    async def _decide_on_key(self, host: str, addr: str, port: int, key: asyncssh.SSHKey) -> None:
        """A key known_hosts does not trust: refused when it holds another key for the host,
        else the user is asked (once; an accepted key is recorded)."""
        t = self.target
        known_file = t.known_hosts_file()
        fingerprint = key.get_fingerprint()
        algorithm = key.get_algorithm()
        recorded: list[Any] = []
        if known_file.is_file():
            with contextlib.suppress(ValueError, OSError):
                recorded = list(asyncssh.read_known_hosts(str(known_file)).match(host, addr, port if port != 22 else None)[0])
        if recorded:
            raise SshError(
                f"The host key of {t.label} does not match the one in {known_file}: the server now offers an {algorithm} key "
                f"with fingerprint {fingerprint}. Refusing to connect: the server's key changed, or someone is in between. "
                f"If the change is expected, remove the old key (ssh-keygen -R {_pattern(host, port)} -f {known_file}) and try again."
            )
        ask = host_questions.get()
        question = f"Trust the SSH host key of {t.label}?"
        detail = (
            f"{t.label} is not in {known_file}. It offers an {algorithm} key with fingerprint {fingerprint}. "
            "Accept only if this is the fingerprint of that machine; it is then recorded and not asked again."
        )
        if ask is None:
            raise SshError(
                f"{t.label} is not in {known_file} (it offers an {algorithm} key, fingerprint {fingerprint}), and nobody can be asked "
                f"here. Connect once with ssh to check and record its key, or add it to {known_file}."
            )
        if not await ask(question, detail):
            raise SshError(f"The host key of {t.label} (fingerprint {fingerprint}) was not accepted; nothing was done there.")
        self._accepted = key
        line = f"{_pattern(host, port)} {key.export_public_key('openssh').decode().strip()}\n"
        try:
            known_file.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            with open(known_file, "a", encoding="utf-8") as handle:
                handle.write(line)
        except OSError as exc:
            log.warning("could not record the host key of %s in %s: %s", t.label, known_file, exc)

    async def sftp(self) -> asyncssh.SFTPClient:
        conn = await self.connection()
        if self._sftp is None:
            try:
                self._sftp = await conn.start_sftp_client()
            except (OSError, asyncssh.Error) as exc:
                raise self._error(exc) from None
        return self._sftp

    def _dropped(self) -> None:
        if self._conn is not None and self._conn.is_closed():
            self._conn, self._sftp = None, None

    # --- paths ---------------------------------------------------------------------

    def remote(self, path: Path | str) -> str:
        """The remote path of ``path`` (a path under the local folder, or already remote)."""
        text = str(path).replace("\\", "/")
        root = self.target.root
        candidate = PurePosixPath(os.path.normpath(text)) if text.startswith("/") else root / text
        if self.local_root is not None:
            local = PurePosixPath(str(self.local_root))
            if candidate == local or candidate.is_relative_to(local):
                candidate = root / candidate.relative_to(local)
        candidate = PurePosixPath(os.path.normpath(str(candidate)))
        if candidate != root and not candidate.is_relative_to(root):
            raise SshError(f"{path} is outside the remote project ({root} on {self.target.label}); only files inside it can be used.")
        return str(candidate)

    def local(self, remote: str) -> Path:
        """The path the session knows ``remote`` by: under the local folder when there is one."""
        path = PurePosixPath(remote)
        if self.local_root is not None and (path == self.target.root or path.is_relative_to(self.target.root)):
            return self.local_root / path.relative_to(self.target.root)
        return Path(remote)

    def display_path(self, path: Path | str) -> str:
        """How ``path`` is shown to the user: its path on the remote machine (unchanged when outside the project)."""
        try:
            return self.remote(path)
        except SshError:
            return str(path)

    @property
    def remote_files(self) -> SshHost:
        """Searches and listings go through this host (its files are not on this machine)."""
        return self

    # --- files -----------------------------------------------------------------------

    async def _files(self, what: str, path: Path | str, action: Callable[[asyncssh.SFTPClient], Awaitable[Any]]) -> Any:
        sftp = await self.sftp()
        try:
            return await action(sftp)
        except asyncssh.SFTPNoSuchFile:
            raise FileNotFoundError(2, "No such file or directory", str(path)) from None
        except asyncssh.SFTPPermissionDenied:
            raise PermissionError(13, f"Permission denied on {self.target.label}", str(path)) from None
        except asyncssh.SFTPFileAlreadyExists:
            raise FileExistsError(17, "File exists", str(path)) from None
        except asyncssh.SFTPError as exc:
            raise OSError(f"{what} {path} on {self.target.label} failed: {exc.reason}") from None
        except (asyncssh.Error, ConnectionError, BrokenPipeError) as exc:
            self._dropped()
            raise SshError(f"The connection to {self.target.label} dropped while {what.lower()} {path}: {exc}. Try again.") from None

    async def read_bytes(self, path: Path | str) -> bytes:
        remote = self.remote(path)

        async def read(sftp: asyncssh.SFTPClient) -> bytes:
            async with sftp.open(remote, "rb") as handle:
                data: bytes = await handle.read()
                return data

        result: bytes = await self._files("Reading", path, read)
        return result

    async def read_text(self, path: Path) -> str:
        return (await self.read_file(path)).text

    async def read_file(self, path: Path) -> TextFile:
        return decode_text(await self.read_bytes(path))

    async def stat(self, path: Path | str) -> asyncssh.SFTPAttrs | None:
        """The file's attributes (following symlinks), or None when it does not exist."""
        remote = self.remote(path)
        try:
            attrs: asyncssh.SFTPAttrs = await self._files("Checking", path, lambda sftp: sftp.stat(remote))
        except FileNotFoundError:
            return None
        return attrs

    async def write_bytes(self, path: Path | str, data: bytes, *, mode: int | None = None) -> None:
        """Write atomically: a temporary file in the same directory, then renamed over ``path``
        (through a symlink to its target); the file's mode is kept (or set to ``mode``)."""
        remote = self.remote(path)

        async def write(sftp: asyncssh.SFTPClient) -> None:
            target = remote
            with contextlib.suppress(asyncssh.SFTPError):
                if (await sftp.lstat(target)).type == asyncssh.FILEXFER_TYPE_SYMLINK:
                    target = await sftp.realpath(target)
            keep = mode
            if keep is None:
                with contextlib.suppress(asyncssh.SFTPNoSuchFile):
                    permissions = (await sftp.stat(target)).permissions
                    keep = permissions & 0o7777 if permissions is not None else None
            parent, name = str(PurePosixPath(target).parent), PurePosixPath(target).name
            await sftp.makedirs(parent, exist_ok=True)
            temp = f"{parent}/.{name}.{secrets_module.token_hex(4)}.tmp"
            try:
                async with sftp.open(temp, "wb", asyncssh.SFTPAttrs(permissions=keep if keep is not None else 0o644)) as handle:
                    await handle.write(data)
                    with contextlib.suppress(asyncssh.SFTPError):
                        await handle.fsync()
                if keep is not None:
                    await sftp.chmod(temp, keep)
                try:
                    await sftp.posix_rename(temp, target)
                except asyncssh.SFTPOpUnsupported:
                    with contextlib.suppress(asyncssh.SFTPNoSuchFile):
                        await sftp.remove(target)
                    await sftp.rename(temp, target)
            except BaseException:
                with contextlib.suppress(Exception):
                    await sftp.remove(temp)
                raise

        await self._files("Writing", path, write)

    async def write_text(self, path: Path, content: str, *, encoding: str = "utf-8") -> None:
        await self.write_bytes(path, encode_text(content, encoding))

    async def delete(self, path: Path) -> None:
        remote = self.remote(path)
        await self._files("Deleting", path, lambda sftp: sftp.remove(remote))

    async def move(self, source: Path, target: Path) -> None:
        src, dst = self.remote(source), self.remote(target)

        async def move(sftp: asyncssh.SFTPClient) -> None:
            if await sftp.exists(dst):
                raise FileExistsError(17, f"{target} already exists", str(target))
            await sftp.makedirs(str(PurePosixPath(dst).parent), exist_ok=True)
            await sftp.rename(src, dst)

        await self._files("Moving", source, move)

    async def listdir(self, path: Path | str) -> list[tuple[str, str, int, str]]:
        """A directory's entries as (name, kind "dir"/"file"/"link"/"other", size, link target)."""
        remote = self.remote(path)

        async def listing(sftp: asyncssh.SFTPClient) -> list[tuple[str, str, int, str]]:
            out = []
            for entry in await sftp.readdir(remote):
                name = entry.filename if isinstance(entry.filename, str) else entry.filename.decode("utf-8", "replace")
                if name in (".", ".."):
                    continue
                kind = _KINDS.get(entry.attrs.type or 0, "other")
                target = ""
                if kind == "link":
                    with contextlib.suppress(asyncssh.SFTPError):
                        target = str(await sftp.readlink(f"{remote}/{name}"))
                out.append((name, kind, entry.attrs.size or 0, target))
            return sorted(out)

        result: list[tuple[str, str, int, str]] = await self._files("Listing", path, listing)
        return result

    async def kind_of(self, path: Path | str) -> str | None:
        """ "dir", "file", "link" or "other" (symlinks followed); None when nothing is there."""
        attrs = await self.stat(path)
        return None if attrs is None else _KINDS.get(attrs.type or 0, "other")

    async def capture(self, argv: list[str]) -> tuple[int | None, bytes, bytes]:
        """Run a read-only program (a search) to its end: exit status, stdout, stderr."""
        conn = await self.connection()
        script = f"exec /bin/sh -c {shlex.quote(shlex.join(argv))}"
        try:
            done = await conn.run(script, check=False, stdin=asyncssh.DEVNULL, encoding=None)
        except (OSError, asyncssh.Error) as exc:
            self._dropped()
            raise self._error(exc) from None
        out, err = done.stdout or b"", done.stderr or b""
        return done.exit_status, out if isinstance(out, bytes) else out.encode(), err if isinstance(err, bytes) else err.encode()

    # --- commands --------------------------------------------------------------------

    def _script(self, command: str, cwd: Path | str) -> str:
        """What the remote login shell runs: ``/bin/sh`` reports its process id (on stderr,
        which is then joined to stdout), enters ``cwd`` and becomes the command."""
        inner = (
            'echo "hermes-pid $$" >&2\n'
            "exec 2>&1 </dev/null\n"
            f"cd -- {shlex.quote(self.remote(cwd))} || exit 126\n"
            'PAGER="${PAGER:-cat}" GIT_PAGER=cat NO_COLOR="${NO_COLOR:-1}"\n'
            "export PAGER GIT_PAGER NO_COLOR\n"
            f"exec /bin/sh -c {shlex.quote(command)}"
        )
        return f"exec /bin/sh -c {shlex.quote(inner)}"

    async def _start(self, command: str, cwd: Path | str) -> _RemoteProcess:
        conn = await self.connection()
        script = self._script(command, cwd)
        try:
            process = await conn.create_process(script, stdin=asyncssh.DEVNULL, encoding=None)
        except (OSError, asyncssh.Error) as exc:
            self._dropped()
            raise self._error(exc) from None
        return _RemoteProcess(self, process)

    async def signal_group(self, pid: int, sig: signal.Signals) -> None:
        """Send ``sig`` to the remote process group led by ``pid`` (else to the process)."""
        name = sig.name.removeprefix("SIG")
        kill = f"kill -s {name} -- -{pid} 2>/dev/null || kill -s {name} {pid} 2>/dev/null; exit 0"
        script = f"exec /bin/sh -c {shlex.quote(kill)}"
        try:
            conn = await self.connection()
            await asyncio.wait_for(conn.run(script, check=False, stdin=asyncssh.DEVNULL), 10)
        except (OSError, asyncssh.Error, TimeoutError) as exc:
            log.warning("could not signal remote process %s on %s: %s", pid, self.target.label, exc)

    async def run_command(
        self, command: str, cwd: Path, *, timeout: float, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> CommandResult:
        """Run ``command`` on the remote machine (its own account is the boundary there: the
        local sandbox does not apply). Output is shown in the tool call while it runs."""
        proc = await self._start(command, cwd)
        capture = OutputCapture(output_limit)
        changed = asyncio.Event()

        async def pump() -> None:
            async for data in proc.output():
                capture.add(data)
                changed.set()

        async def shower() -> None:
            while True:
                await changed.wait()
                changed.clear()
                await show([TextContent(_fenced(capture.text()[-4000:]))])
                await asyncio.sleep(_SHOW_EVERY)

        showing = asyncio.create_task(shower())
        timed_out = False
        try:
            await asyncio.wait_for(pump(), timeout)
            await proc.wait()
        except TimeoutError:
            timed_out = True
            await proc.stop()
        except BaseException:
            await asyncio.shield(proc.kill())
            raise
        finally:
            showing.cancel()
        if proc.lost:
            raise SshError(
                f"The connection to {self.target.label} dropped while `{command}` ran; it may still be running there. "
                f"Output so far:\n{capture.text()}"
            )
        return proc.result(capture.text(), omitted=capture.omitted, timed_out=timed_out)

    async def start_command(
        self, command: str, cwd: Path, *, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> BackgroundCommand:
        proc = await self._start(command, cwd)
        job = RemoteJob(next_job_id(), command, proc, output_limit)
        self.jobs[job.id] = job
        return job

    async def aclose(self) -> None:
        """Stop background commands, then close the connection."""
        jobs, self.jobs = list(self.jobs.values()), {}
        await asyncio.gather(*(job.stop() for job in jobs), return_exceptions=True)
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await self._conn.wait_closed()
        self._conn, self._sftp = None, None


_KINDS = {
    asyncssh.FILEXFER_TYPE_DIRECTORY: "dir",
    asyncssh.FILEXFER_TYPE_REGULAR: "file",
    asyncssh.FILEXFER_TYPE_SYMLINK: "link",
}


def _pattern(host: str, port: int | None) -> str:
    return host if port in (None, 22) else f"[{host}]:{port}"


def _fenced(text: str) -> str:
    return f"```\n{text.rstrip()}\n```"


class _RemoteProcess:
    """A command running over an SSH channel: its output, its process id there, its end."""

    def __init__(self, host: SshHost, process: asyncssh.SSHClientProcess[bytes]) -> None:
        self.host = host
        self.process = process
        self.pid: int | None = None
        self.lost = False
        self._pid_known = asyncio.Event()
        self._pre = bytearray()
        self._stderr = asyncio.create_task(self._read_stderr())

    async def _read_stderr(self) -> None:
        """The first line is the process id; anything after (login scripts) is output too."""
        try:
            while data := await self.process.stderr.read(4096):
                if self.pid is None:
                    self._pre += data
                    found = _PID_LINE.search(self._pre)
                    if found:
                        self.pid = int(found.group(1))
                        self._pid_known.set()
                        del self._pre[found.start() : found.end()]
        except (asyncssh.Error, OSError):
            self.lost = True
        finally:
            self._pid_known.set()

    async def output(self) -> Any:
        """Chunks of output until the command's output ends."""
        try:
            while data := await self.process.stdout.read(65536):
                yield data
        except (asyncssh.Error, OSError):
            self.lost = True
        await self._stderr
        if self._pre:
            yield bytes(self._pre)
            self._pre.clear()

    async def wait(self) -> None:
        try:
            await self.process.wait_closed()
        except (asyncssh.Error, OSError):
            self.lost = True
        if self.process.exit_status is None and self.process.exit_signal is None:
            self.lost = True
            self.host._dropped()

    async def stop(self) -> None:
        """TERM to its group, KILL after 2 s."""
        await self._pid_known.wait()
        if self.pid is not None:
            await self.host.signal_group(self.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(self.wait(), 2)
        except TimeoutError:
            await self.kill()

    async def kill(self) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._pid_known.wait(), 5)
        if self.pid is not None:
            await self.host.signal_group(self.pid, signal.SIGKILL)
        self.process.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.process.wait_closed(), 5)

    def result(self, output: str, *, omitted: int = 0, timed_out: bool = False) -> CommandResult:
        code = self.process.exit_status
        sig: str | None = None
        if self.process.exit_signal is not None:
            name = self.process.exit_signal[0]
            sig = name if name.startswith("SIG") else f"SIG{name}"
            code = None
        elif code is not None and 128 < code < 128 + signal.NSIG:
            with contextlib.suppress(ValueError):
                sig = signal.Signals(code - 128).name
                code = None
        if code == -1 and sig is None and self.lost:
            code = None
        return CommandResult(exit_code=code, output=output, truncated=omitted > 0, signal=sig, timed_out=timed_out, omitted=omitted)


class RemoteJob(KeptOutputJob):
    """A background command on the remote machine; the newest ``limit`` bytes of output kept."""

    def __init__(self, job_id: str, command: str, proc: _RemoteProcess, limit: int) -> None:
        self._proc = proc
        super().__init__(job_id, command, limit)

    async def _read_output(self) -> None:
        async for data in self._proc.output():
            self._keep(data)
        await self._proc.wait()
        self._changed.set()

    def _result(self, text: str) -> CommandResult:
        if self._proc.lost:
            text += f"\n[the connection to {self._proc.host.target.label} dropped; the command may still run there]"
        return self._proc.result(text)

    async def wait(self) -> None:
        await asyncio.shield(self._pump)

    async def stop(self) -> CommandResult:
        if not self._pump.done():
            await self._proc.stop()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self._pump), 5)
            if not self._pump.done():
                self._pump.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await self._pump
        return self._result(self._take())


class RemoteFiles:
    """The remote project's files for checkpoints, which work in a thread: each call runs on
    the host's event loop and waits for it."""

    def __init__(self, host: SshHost) -> None:
        self._host = host

    @property
    def label(self) -> str:
        """Names the machine in checkpoints (``ssh:user@box:port``)."""
        return f"ssh:{self._host.target.label}"

    def _run(self, coro: Awaitable[Any]) -> Any:
        loop = self._host._loop
        if loop is None:
            raise SshError(f"not connected to {self._host.target.label}")
        return asyncio.run_coroutine_threadsafe(coro, loop).result()  # type: ignore[arg-type]

    def stat(self, path: Path) -> tuple[int, int] | None:
        """(mode, size) of a regular file; None when there is none."""
        attrs = self._run(self._host.stat(path))
        if attrs is None or attrs.type != asyncssh.FILEXFER_TYPE_REGULAR:
            return None
        return (attrs.permissions or 0o644) & 0o7777, attrs.size or 0

    def exists(self, path: Path) -> bool:
        return self._run(self._host.stat(path)) is not None

    def read_bytes(self, path: Path) -> bytes:
        data: bytes = self._run(self._host.read_bytes(path))
        return data

    def write_bytes(self, path: Path, data: bytes, mode: int | None) -> None:
        self._run(self._host.write_bytes(path, data, mode=mode))

    def unlink(self, path: Path) -> None:
        self._run(self._host.delete(path))
