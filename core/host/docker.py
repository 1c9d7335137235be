"""A project whose commands run in a Docker container (``[projects.NAME] host = "docker"``).

One container per session, started from the project's image on the first command and reused;
removed when the session's host closes (stopped and kept with ``keep = true``). The project
folder is bind-mounted at the same path, so file tools work on it directly, as on this machine;
only commands run in the container: read-only root, a private ``/tmp``, every capability dropped,
no new privileges, the project folder owner's uid (65534 when that is root), no network unless
``network = true``, CPU, memory and process limits. Commands never see this process's
environment (so no credentials).

The Docker Engine API is reached with the ``docker`` library (the local socket, or
``DOCKER_HOST``); its calls block, so they run in threads. A command runs by ``exec`` as the
leader of its own process group; stopping it signals that group from a second ``exec``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import threading
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from core.config import ProjectConfig
from core.events import TextContent
from core.host.local import BackgroundCommand, Emit, LocalHost
from core.host.processes import CommandResult, KeptOutputJob, OutputCapture, next_job_id
from core.host.sandbox import Confinement, protected_entries
from core.paths import is_secret_path

__all__ = ["DockerHost", "DockerUnavailable", "daemon_status", "image_present"]

log = logging.getLogger(__name__)

_ENV = {"HOME": "/tmp", "PAGER": "cat", "GIT_PAGER": "cat", "NO_COLOR": "1", "TERM": "dumb"}
# Prints its pid (the id of its process group, as an exec's process leads its own group), then
# becomes the command.
_WRAPPER = 'echo "$$"; exec /bin/sh -c "$1" 2>&1'
_IDLE = "while :; do sleep 3600; done"  # what the container runs between commands
_TMPFS = "rw,nosuid,nodev,exec,size=512m,mode=1777"
_LABEL = "org.hermes-editor"
SHOW_EVERY = 0.5  # seconds between looks at a running command's output, for the tool call


class DockerUnavailable(OSError):
    """The daemon cannot be reached, the image is missing, or the container cannot start."""


def _daemon_address() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _unreachable(exc: Exception) -> DockerUnavailable:
    return DockerUnavailable(
        f"the Docker daemon is not reachable at {_daemon_address()} ({_short(exc)}). Start it (sudo systemctl start docker, "
        "or run dockerd), make its socket yours (add yourself to the docker group), or set DOCKER_HOST to a daemon that runs."
    )


def _short(exc: Exception) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return text if len(text) <= 300 else text[:299] + "…"


def _client() -> Any:
    """A client of the daemon (``DOCKER_HOST`` or the local socket), checked to answer."""
    import docker

    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except docker.errors.DockerException as exc:
        raise _unreachable(exc) from None
    return client


def daemon_status() -> tuple[bool, str]:
    """Whether the daemon answers, and its address and version, or what is wrong and the fix."""
    try:
        client = _client()
    except DockerUnavailable as exc:
        return False, str(exc)
    try:
        version = client.version().get("Version", "?")
    finally:
        client.close()
    return True, f"Docker {version} at {_daemon_address()}"


def image_present(image: str) -> bool:
    """Whether the daemon has ``image`` (raises ``DockerUnavailable`` when it does not answer)."""
    import docker

    client = _client()
    try:
        client.images.get(image)
        return True
    except docker.errors.ImageNotFound:
        return False
    finally:
        client.close()


def _owner(folder: Path) -> str:
    """``uid:gid`` commands run as: the project folder's owner, or nobody when that is root."""
    try:
        info = folder.stat()
    except OSError:
        return "65534:65534"
    return "65534:65534" if info.st_uid == 0 else f"{info.st_uid}:{info.st_gid}"


def _code_result(code: int | None, output: str, *, omitted: int = 0, timed_out: bool = False) -> CommandResult:
    """A command's result from its exit code; 128 + N is death by signal N (as a shell reports it)."""
    sig = None
    if code is not None and 128 < code < 128 + signal.NSIG:
        try:
            sig = signal.Signals(code - 128).name
        except ValueError:
            sig = None
    return CommandResult(
        exit_code=None if sig else code, output=output, truncated=omitted > 0, signal=sig, timed_out=timed_out, omitted=omitted
    )


class _Exec:
    """One command in the container: a thread reads the exec's stream (its first line is the
    command's pid) and hands the output over as it comes."""

    def __init__(self, host: DockerHost, exec_id: str) -> None:
        self._host = host
        self.exec_id = exec_id
        self.pid: int | None = None
        self._queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._pid_known = asyncio.Event()
        self._ended = asyncio.Event()

    def start(self, stream: Any) -> None:
        loop = asyncio.get_running_loop()

        def put(item: bytes | None) -> None:
            with contextlib.suppress(RuntimeError):  # the loop is gone
                loop.call_soon_threadsafe(self._queue.put_nowait, item)

        def known() -> None:
            with contextlib.suppress(RuntimeError):
                loop.call_soon_threadsafe(self._pid_known.set)

        def pump() -> None:
            head = b""
            try:
                for chunk in stream:
                    if self.pid is None:
                        head += chunk
                        line, newline, chunk = head.partition(b"\n")
                        if not newline:
                            continue
                        self.pid = int(line) if line.strip().isdigit() else 0
                        known()
                        if not self.pid:
                            chunk = head
                    if chunk:
                        put(chunk)
                if self.pid is None and head:
                    put(head)
            except Exception as exc:  # the connection to the daemon dropped
                put(f"\n[the connection to the Docker daemon dropped: {_short(exc)}]\n".encode())
            finally:
                known()
                put(None)

        threading.Thread(target=pump, name=f"docker-exec-{self.exec_id[:12]}", daemon=True).start()

    async def chunks(self) -> AsyncIterator[bytes]:
        """The command's output as it comes, until it ends."""
        while (chunk := await self._queue.get()) is not None:
            yield chunk
        self._ended.set()

    async def exit_code(self) -> int | None:
        return await asyncio.to_thread(self._host._exit_code, self.exec_id)

    async def signal(self, name: str) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._pid_known.wait(), 5)
        if self.pid:
            await self._host._signal_group(self.pid, name)

    async def end(self, *, polite: float) -> None:
        """Stop the command's process group: TERM, and KILL after ``polite`` s (at once when 0)."""
        if self._ended.is_set():
            return
        if polite > 0:
            await self.signal("TERM")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ended.wait(), polite)
        if not self._ended.is_set():
            await self.signal("KILL")


class DockerJob(KeptOutputJob):
    """A background command in the container, its output kept (the newest ``limit`` bytes)."""

    def __init__(self, job_id: str, command: str, proc: _Exec, limit: int) -> None:
        self._proc = proc
        self._code: int | None = None
        super().__init__(job_id, command, limit)

    async def _read_output(self) -> None:
        async for data in self._proc.chunks():
            self._keep(data)
        try:
            self._code = await self._proc.exit_code()
        finally:
            self._changed.set()

    def _result(self, text: str) -> CommandResult:
        return _code_result(self._code, text)

    async def wait(self) -> None:
        """Until it has ended (or been stopped)."""
        with contextlib.suppress(Exception):
            await asyncio.shield(self._pump)

    async def stop(self) -> CommandResult:
        if not self._pump.done():
            await self._proc.end(polite=3)
            try:
                await asyncio.wait_for(asyncio.shield(self._pump), 5)
            except TimeoutError:  # something it started still holds its output
                self._pump.cancel()
        return self._result(self._take())


class DockerHost(LocalHost):
    """Files on this machine (the project folder, mounted in the container at the same path);
    commands in the session's container."""

    def __init__(self, name: str, project: ProjectConfig, *, secrets: list[str] | None = None) -> None:
        super().__init__(secrets)
        assert project.image, "a docker project has an image (checked when the configuration loads)"
        self.project_name = name
        self.project = project
        self.image = project.image
        self.where = f"docker: {project.image}"  # named in tool call titles
        self.folder = project.folder
        self.user = _owner(self.folder)
        self._mounts = [self.folder] + [Path(m.split(":")[1]) for m in project.mounts]
        self._client: Any = None
        self.container_id: str | None = None
        self._starting = asyncio.Lock()

    # --- the container -----------------------------------------------------------------

    def _connect(self) -> Any:
        if self._client is None:
            self._client = _client()
        return self._client

    def _binds(self) -> list[str]:
        """The project folder (its protected paths read-only, its secret files hidden), then the extra mounts."""
        folder = str(self.folder)
        binds = [f"{folder}:{folder}:rw"]
        # As in the OS sandbox: what makes git, the editor or CI run code stays read-only, and
        # the top-level secret files (.env, keys) are not there.
        for path in protected_entries([self.folder]):
            if not path.is_symlink():
                binds.append(f"{path}:{path}:ro")
        try:
            top = list(self.folder.iterdir())
        except OSError:
            top = []
        for path in top:
            if path.name.lower() != ".git" and path.is_file() and not path.is_symlink() and is_secret_path(Path(path.name)):
                binds.append(f"/dev/null:{path}:ro")
        for mount in self.project.mounts:
            source, target, *mode = mount.split(":")
            binds.append(f"{Path(source).expanduser()}:{target}:{mode[0] if mode else 'rw'}")
        return binds

    def _create(self) -> str:
        import docker

        client = self._connect()
        try:
            client.images.get(self.image)
        except docker.errors.ImageNotFound:
            raise DockerUnavailable(
                f"the image {self.image!r} of project {self.project_name!r} is not on the Docker daemon at {_daemon_address()}: "
                f"build it (docker build -t {self.image} .) or pull it (docker pull {self.image}), or fix "
                f"[projects.{self.project_name}] image in config.toml."
            ) from None
        except docker.errors.DockerException as exc:
            raise _unreachable(exc) from None
        _sweep_orphans(client)
        limits: dict[str, Any] = {}
        if self.project.cpus is not None:
            limits["nano_cpus"] = int(self.project.cpus * 1e9)
        if self.project.memory is not None:
            limits["mem_limit"] = self.project.memory.strip().lower()
            limits["memswap_limit"] = limits["mem_limit"]
        if self.project.pids is not None:
            limits["pids_limit"] = self.project.pids
        try:
            container = client.containers.run(
                self.image,
                [_IDLE],
                entrypoint=["/bin/sh", "-c"],
                detach=True,
                init=True,
                user=self.user,
                working_dir=str(self.folder),
                environment=_ENV,
                read_only=True,
                tmpfs={"/tmp": _TMPFS},
                cap_drop=["ALL"],
                security_opt=["no-new-privileges"],
                network_mode="bridge" if self.project.network else "none",
                volumes=self._binds(),
                labels={
                    _LABEL: self.project_name,
                    f"{_LABEL}.host": socket.gethostname(),
                    f"{_LABEL}.pid": str(os.getpid()),
                    f"{_LABEL}.keep": "1" if self.project.keep else "0",
                },
                **limits,
            )
        except docker.errors.DockerException as exc:
            raise DockerUnavailable(
                f"the container of project {self.project_name!r} (image {self.image}) did not start: {_short(exc)}"
            ) from None
        # A bind mount under /tmp (a project in /tmp) leaves the tmpfs root 0755: open it again.
        try:
            container.exec_run(["/bin/sh", "-c", "chmod 1777 /tmp"], user="0")
        except docker.errors.DockerException as exc:
            log.debug("could not open /tmp in %s: %s", container.id[:12], exc)
        return str(container.id)

    async def _container(self) -> str:
        async with self._starting:
            if self.container_id is None:
                self.container_id = await asyncio.to_thread(self._create)
                log.info("started container %s for project %s", self.container_id[:12], self.project_name)
            return self.container_id

    def _check_cwd(self, cwd: Path) -> None:
        resolved = cwd.resolve()
        if not any(resolved == root or resolved.is_relative_to(root) for root in self._mounts):
            raise DockerUnavailable(
                f"{cwd} is not in the container: commands of project {self.project_name!r} run in {self.folder} "
                "(or a folder of its mounts)."
            )

    def _start_exec(self, container_id: str, command: str, cwd: Path) -> tuple[str, Any]:
        import docker

        api = self._connect().api
        try:
            created = api.exec_create(
                container_id, ["/bin/sh", "-c", _WRAPPER, "sh", command], stdout=True, stderr=True, environment=_ENV, workdir=str(cwd)
            )
            exec_id = created["Id"]
            return exec_id, api.exec_start(exec_id, stream=True, demux=False)
        except docker.errors.NotFound:
            raise _Gone() from None
        except docker.errors.APIError as exc:
            if exc.status_code == 409:  # not running any more
                raise _Gone() from None
            raise DockerUnavailable(f"docker exec failed: {_short(exc)}") from None
        except docker.errors.DockerException as exc:
            raise _unreachable(exc) from None

    async def _exec(self, command: str, cwd: Path) -> _Exec:
        self._check_cwd(cwd)
        for attempt in (1, 2):
            container_id = await self._container()
            try:
                exec_id, stream = await asyncio.to_thread(self._start_exec, container_id, command, cwd)
            except _Gone:
                if attempt == 2:
                    raise DockerUnavailable(f"the container of project {self.project_name!r} keeps stopping; see docker logs") from None
                log.warning("container %s is gone; starting another", container_id[:12])
                self.container_id = None
                continue
            proc = _Exec(self, exec_id)
            proc.start(stream)
            return proc
        raise AssertionError("unreachable")

    def _exit_code(self, exec_id: str) -> int | None:
        import time

        api = self._connect().api
        deadline = time.monotonic() + 10
        while True:
            try:
                info = api.exec_inspect(exec_id)
            except Exception:
                return None
            if not info.get("Running") or time.monotonic() > deadline:
                code = info.get("ExitCode")
                return int(code) if code is not None else None
            time.sleep(0.02)

    async def _signal_group(self, pgid: int, name: str) -> None:
        container_id = self.container_id
        if container_id is None:
            return

        def send() -> None:
            api = self._connect().api
            created = api.exec_create(container_id, ["/bin/sh", "-c", 'kill -s "$1" "-$2" 2>/dev/null', "sh", name, str(pgid)])
            api.exec_start(created["Id"])

        try:
            await asyncio.to_thread(send)
        except Exception as exc:
            log.debug("could not send %s to %s: %s", name, pgid, exc)

    # --- commands ----------------------------------------------------------------------

    async def run_command(
        self, command: str, cwd: Path, *, timeout: float, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> CommandResult:
        """Run ``command`` in the container (the container is its sandbox: ``confinement`` is not
        used). Its output is shown in the tool call while it runs."""
        proc = await self._exec(command, cwd)
        capture = OutputCapture(output_limit)
        changed = asyncio.Event()

        async def pump() -> None:
            async for data in proc.chunks():
                capture.add(data)
                changed.set()

        async def shower() -> None:
            while True:
                await changed.wait()
                changed.clear()
                await show([TextContent(f"```\n{capture.text()[-4000:].rstrip()}\n```")])
                await asyncio.sleep(SHOW_EVERY)

        reading = asyncio.ensure_future(pump())
        showing = asyncio.ensure_future(shower())
        timed_out = False
        try:
            await asyncio.wait_for(asyncio.shield(reading), timeout)
        except TimeoutError:
            timed_out = True
            await proc.end(polite=2)
            try:
                await asyncio.wait_for(asyncio.shield(reading), 5)
            except TimeoutError:
                reading.cancel()
        except BaseException:
            reading.cancel()
            await asyncio.shield(proc.end(polite=0))
            raise
        finally:
            showing.cancel()
        code = await proc.exit_code()
        return _code_result(code, capture.text(), omitted=capture.omitted, timed_out=timed_out)

    async def start_command(
        self, command: str, cwd: Path, *, output_limit: int, show: Emit, confinement: Confinement | None = None
    ) -> BackgroundCommand:
        proc = await self._exec(command, cwd)
        job = DockerJob(next_job_id(), command, proc, output_limit)
        self.jobs[job.id] = job
        return job

    async def aclose(self) -> None:
        """Stop background commands, then remove the container (stop it when it is kept)."""
        await super().aclose()
        container_id, self.container_id = self.container_id, None
        client, self._client = self._client, None
        if client is None:
            return

        def finish() -> None:
            try:
                if container_id is not None:
                    container = client.containers.get(container_id)
                    if self.project.keep:
                        container.stop(timeout=3)
                    else:
                        container.remove(force=True)
            finally:
                client.close()

        try:
            await asyncio.to_thread(finish)
        except Exception as exc:
            log.warning("could not remove container %s: %s", (container_id or "")[:12], _short(exc))


class _Gone(Exception):
    """The session's container is not running any more."""


def _sweep_orphans(client: Any) -> None:
    """Remove containers that sessions of this machine left behind when their server was killed."""
    me = socket.gethostname()
    try:
        found = client.containers.list(all=True, filters={"label": [f"{_LABEL}.host={me}", f"{_LABEL}.keep=0"]})
    except Exception:
        return
    for container in found:
        pid = container.labels.get(f"{_LABEL}.pid", "")
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            os.kill(int(pid), 0)
            continue
        except ProcessLookupError:
            pass
        except PermissionError:
            continue
        with contextlib.suppress(Exception):
            container.remove(force=True)
