"""A real SSH server on 127.0.0.1 (asyncssh's), standing in for a remote machine.

Its files are a directory of this machine seen at ``/srv`` through SFTP (chrooted to ``box``)
and through commands, which run as OpenSSH's sshd runs them (``/bin/sh -c COMMAND`` in a new
session, no terminal), inside bubblewrap with ``box/srv`` mounted at ``/srv``: the remote
project's paths do not exist on this machine, so nothing can reach them except over SSH.

Run it in a thread with ``SshServer.start_in_thread()`` when the client runs in the test's own
event loop (a hermes-acp process needs nothing special).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import threading
from pathlib import Path

import asyncssh

__all__ = ["SshServer", "known_hosts_line"]


def known_hosts_line(port: int, key: asyncssh.SSHKey) -> str:
    return f"[127.0.0.1]:{port} {key.export_public_key('openssh').decode().strip()}\n"


def _end_group(pgid: int | None) -> None:
    if pgid is not None:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _read_all(fd: int) -> bytes:
    with os.fdopen(fd, "rb") as handle:
        return handle.read()


class SshServer:
    def __init__(self, box: Path, *, path: str = "/usr/local/bin:/usr/bin:/bin", isolate: bool = True) -> None:
        bwrap = shutil.which("bwrap")
        assert bwrap or not isolate, "the SSH tests need bubblewrap (bwrap): install the 'bubblewrap' package"
        self.bwrap = bwrap or ""
        # False: files and commands see this machine as it is (a benchmark's remote: no bubblewrap to time)
        self.isolate = isolate
        self.box = box
        self.path = path  # the remote's PATH: which programs (ripgrep, say) it has
        (box / "srv").mkdir(parents=True, exist_ok=True)
        self.host_key = asyncssh.generate_private_key("ssh-ed25519")
        self.client_key = asyncssh.generate_private_key("ssh-ed25519")
        self.port = 0
        self.commands: list[str] = []
        self.envs: list[dict[str, str]] = []  # what each command's client sent
        self.conns: list[asyncssh.SSHServerConnection] = []
        self._server: asyncssh.SSHAcceptor | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def write_client_key(self, path: Path) -> Path:
        path.write_bytes(self.client_key.export_private_key("openssh"))
        path.chmod(0o600)
        return path

    async def start(self) -> None:
        authorized = asyncssh.import_authorized_keys(self.client_key.export_public_key("openssh").decode())
        conns = self.conns

        class Server(asyncssh.SSHServer):
            def connection_made(self, conn: asyncssh.SSHServerConnection) -> None:
                conns.append(conn)

        self._server = await asyncssh.create_server(
            Server,
            "127.0.0.1",
            self.port,
            server_host_keys=[self.host_key],
            authorized_client_keys=authorized,
            sftp_factory=lambda chan: asyncssh.SFTPServer(chan, chroot=str(self.box).encode() if self.isolate else None),
            process_factory=self._run,
            encoding=None,
            keepalive_interval=0,
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _run(self, process: asyncssh.SSHServerProcess[bytes]) -> None:
        command = process.command or ""
        self.commands.append(command)
        self.envs.append(dict(process.env))
        read_end, write_end = os.pipe()
        argv = [self.bwrap, "--info-fd", str(write_end), "--ro-bind", "/", "/", "--bind", str(self.box / "srv"), "/srv"]
        argv += ["--dev", "/dev", "--proc", "/proc", "--new-session", "--die-with-parent", "/bin/sh", "-c", command]
        if not self.isolate:
            argv = ["/bin/sh", "-c", command]
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
                pass_fds=(write_end,) if self.isolate else (),
                env={"PATH": self.path, "HOME": "/srv", "LANG": "C.UTF-8"},
            )
        finally:
            os.close(write_end)
        # The command's process group: /bin/sh leads its own (bubblewrap's --new-session, sshd's setsid).
        group: int | None = proc.pid
        if self.isolate:
            info = await asyncio.get_running_loop().run_in_executor(None, _read_all, read_end)
            group = int(json.loads(info)["child-pid"]) if info else None
        else:
            os.close(read_end)

        async def pump(source: asyncio.StreamReader, sink: asyncssh.SSHWriter[bytes]) -> None:
            while data := await source.read(65536):
                try:
                    sink.write(data)
                except (OSError, asyncssh.Error):
                    return

        assert proc.stdout is not None and proc.stderr is not None
        try:
            await asyncio.gather(pump(proc.stdout, process.stdout), pump(proc.stderr, process.stderr))
            code = await proc.wait()
        finally:
            # What the command left running (a sshd would leave it) is ended: tests leave nothing behind.
            _end_group(group)
            if proc.returncode is None:
                proc.kill()
            try:  # reaped here, so that its transport is not left to the garbage collector
                await asyncio.wait_for(proc.wait(), 10)
            except (TimeoutError, asyncio.CancelledError):
                pass
        if code < 0:
            process.exit_with_signal(signal.Signals(-code).name.removeprefix("SIG"))
        elif 128 < code < 128 + signal.NSIG:  # bubblewrap reports a signal as 128 + N
            process.exit_with_signal(signal.Signals(code - 128).name.removeprefix("SIG"))
        else:
            process.exit(code)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    # --- in a thread of its own ---------------------------------------------------

    def start_in_thread(self) -> None:
        started = threading.Event()

        def serve() -> None:
            loop = asyncio.new_event_loop()
            asyncio.set_event_loop(loop)
            self._loop = loop
            loop.run_until_complete(self.start())
            started.set()
            loop.run_forever()
            for conn in self.conns:
                conn.abort()
            loop.run_until_complete(self.stop())

            async def finish() -> None:
                pending = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
                for task in pending:
                    task.cancel()
                await asyncio.gather(*pending, return_exceptions=True)

            loop.run_until_complete(finish())
            loop.close()

        self._thread = threading.Thread(target=serve, daemon=True)
        self._thread.start()
        assert started.wait(20), "the SSH server did not start"

    def stop_thread(self) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(20)

    def drop_connections(self) -> None:
        """Close every client connection (as a network failure would)."""
        assert self._loop is not None

        def drop() -> None:
            for conn in self.conns:
                conn.abort()
            self.conns.clear()

        self._loop.call_soon_threadsafe(drop)
