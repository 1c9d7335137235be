"""Commands on this machine end with the process that started them, whatever it dies of, and
whether they run in the sandbox, let out of it, or without one; they see no terminal, stdin is
/dev/null, and the way they are started changes nothing they see.

Each case starts a real server-like process (``LocalHost`` in a child Python), lets it start a
command that leaves children behind, kills it, and looks at ``/proc`` afterwards.
"""

from __future__ import annotations

import contextlib
import os
import pty
import secrets
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import pytest

from core.host import sandbox
from core.host.local import LocalHost
from core.host.processes import _guarded, _Guardian, child_environment
from core.host.sandbox import Confinement, Grants, command_argv, command_environment, own_session

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and runs bubblewrap: Linux only")

# A server in miniature: runs one command the way the agent does, in the mode asked for.
_STARTER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from core.host.local import LocalHost
    from core.host.sandbox import Confinement, Grants

    async def show(_):
        return None

    def confinement(mode, project, temp):
        if mode == "none":
            return None
        return Confinement((project,), Grants(unconfined=mode == "let-out"), temp=temp)

    async def main():
        project, marker, mode, how, temp = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], Path(sys.argv[5])
        host = LocalHost()
        boxed = confinement(mode, project, temp)
        if how == "restart":
            # The guardian is started by a first command; the test kills it before the next one.
            await host.run_command("true", project, timeout=60, output_limit=4096, show=show, confinement=boxed)
            print("first", flush=True)
            await asyncio.to_thread(sys.stdin.readline)
        command = f"sleep 300.{marker} & sleep 301.{marker} & wait"
        if how == "foreground":
            await host.run_command(command, project, timeout=3600, output_limit=4096, show=show, confinement=boxed)
        else:
            await host.start_command(command, project, output_limit=4096, show=show, confinement=boxed)
            await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


def _cmdline(pid: int) -> bytes:
    try:
        return Path("/proc", str(pid), "cmdline").read_bytes()
    except OSError:
        return b""


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _running(pid: int) -> bool:
    """Alive and not a zombie."""
    try:
        return Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _sleeps(marker: str) -> list[int]:
    return [pid for pid in _pids() if _cmdline(pid).startswith(b"sleep\0") and marker.encode() in _cmdline(pid) and _running(pid)]


def _holders(marker: str, exclude: int) -> list[int]:
    return [pid for pid in _pids() if pid != exclude and marker.encode() in _cmdline(pid) and _running(pid)]


def _until(predicate, what: str, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def project():
    base = Path(tempfile.mkdtemp(prefix="hermes-processes-", dir="/var/tmp")).resolve()
    (base / "project").mkdir()
    (base / "tmp").mkdir()
    yield base
    subprocess.run(["rm", "-rf", str(base)], check=False)


def _needs_bwrap(mode: str) -> None:
    if mode != "none":
        found = sandbox.status()
        assert found.name == "bubblewrap", f"no working bubblewrap: install it (apt-get install bubblewrap) ({found.detail})"


def _start(project: Path, marker: str, mode: str, how: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", _STARTER, str(project / "project"), marker, mode, how, str(project / "tmp")],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
        text=True,
    )


def _kill_what_is_left(marker: str, starter: subprocess.Popen[str]) -> None:
    for pid in _holders(marker, starter.pid):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    if starter.poll() is None:
        starter.kill()
    starter.wait()


class TestNothingOutlivesTheServer:
    @pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
    @pytest.mark.parametrize("how", ["foreground", "background"])
    @pytest.mark.parametrize("mode", ["none", "sandboxed", "let-out"])
    def test_the_command_and_its_children_end_with_it(self, project, sig, how, mode):
        _needs_bwrap(mode)
        marker = str(secrets.randbelow(10**8)).zfill(8)
        starter = _start(project, marker, mode, how)
        try:
            _until(lambda: len(_sleeps(marker)) == 2 or starter.poll() is not None, "both sleeps to start")
            assert starter.poll() is None, starter.stderr.read() if starter.stderr else ""
            starter.send_signal(sig)
            starter.wait(timeout=30)
            _until(lambda: not _holders(marker, starter.pid), f"the command to end after the server died by {sig.name}")
        finally:
            _kill_what_is_left(marker, starter)

    @pytest.mark.parametrize("mode", ["none", "sandboxed"])
    def test_a_guardian_that_died_is_replaced_and_guards_the_next_command(self, project, mode):
        _needs_bwrap(mode)
        marker = str(secrets.randbelow(10**8)).zfill(8)
        starter = _start(project, marker, mode, "restart")
        try:
            assert starter.stdout is not None and starter.stdin is not None
            assert starter.stdout.readline().strip() == "first", starter.stderr.read() if starter.stderr else ""
            (guardian,) = [pid for pid in _pids() if b"hermes-command-guardian" in _cmdline(pid) and _parent(pid) == starter.pid]
            os.kill(guardian, signal.SIGKILL)
            _until(lambda: not _running(guardian), "the guardian to die")
            starter.stdin.write("next\n")
            starter.stdin.flush()
            _until(lambda: len(_sleeps(marker)) == 2 or starter.poll() is not None, "both sleeps to start")
            starter.kill()
            starter.wait(timeout=30)
            _until(lambda: not _holders(marker, starter.pid), "the command to end after the server was killed")
        finally:
            _kill_what_is_left(marker, starter)


def test_a_guardian_that_stops_reading_is_replaced_and_keeps_every_group(tmp_path):
    """Stopped (SIGSTOP) with its pipe full, it is killed, not told we died (it would kill every
    command); the new one guards the groups the old one had, and ends them all when we go."""
    guardian = _Guardian()
    first = subprocess.Popen(["sleep", "300"], start_new_session=True)
    second = subprocess.Popen(["sleep", "300"], start_new_session=True)
    try:
        guardian.add(first.pid)
        old, pipe = guardian._proc, guardian._pipe
        assert old is not None and pipe is not None
        os.kill(old.pid, signal.SIGSTOP)
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(pipe, b"-0\n" * 1000)
        with contextlib.suppress(BlockingIOError):
            while True:
                os.write(pipe, b"-0\n")
        guardian.add(second.pid)
        assert old.poll() == -signal.SIGKILL and guardian._proc is not old
        assert first.poll() is None and second.poll() is None, "the old guardian ended nothing"
        assert guardian._pipe is not None
        os.close(guardian._pipe)  # as when we die
        guardian._pipe = None
        assert first.wait(timeout=30) == -signal.SIGKILL and second.wait(timeout=30) == -signal.SIGKILL
    finally:
        for proc in (first, second):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        guardian._close()


def _parent(pid: int) -> int:
    try:
        return int(Path("/proc", str(pid), "stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, ValueError, IndexError):
        return -1


def test_a_command_whose_go_ahead_never_comes_runs_nothing(tmp_path):
    """The server died between starting the command and registering it: stdin closes unwritten."""
    marker = tmp_path / "ran"
    done = subprocess.run(_guarded(["/bin/sh", "-c", f"touch {marker}"]), stdin=subprocess.DEVNULL, capture_output=True, timeout=30)
    assert done.returncode == 125 and not marker.exists()


async def _show(_content) -> None:
    return None


class TestWhatTheCommandSees:
    async def test_stdin_is_dev_null(self, tmp_path):
        host = LocalHost()
        try:
            result = await host.run_command("cat; readlink /proc/self/fd/0", tmp_path, timeout=60, output_limit=4096, show=_show)
        finally:
            await host.aclose()
        assert result.exit_code == 0 and result.output == "/dev/null\n", result.output

    async def test_the_environment_is_the_one_a_plain_shell_gets(self, tmp_path):
        host = LocalHost()
        try:
            result = await host.run_command("env", tmp_path, timeout=60, output_limit=1 << 20, show=_show)
        finally:
            await host.aclose()
        plain = subprocess.run(["/bin/sh", "-c", "env"], env=child_environment(), cwd=tmp_path, capture_output=True, text=True, timeout=30)
        assert result.exit_code == 0 and sorted(result.output.splitlines()) == sorted(plain.stdout.splitlines())

    @pytest.mark.parametrize("mode", ["none", "sandboxed", "let-out"])
    def test_no_terminal_even_when_the_server_has_one(self, project, mode):
        """A command that opens /dev/tty (a password prompt) fails at once instead of reading the
        user's terminal or being stopped by it."""
        _needs_bwrap(mode)
        code = textwrap.dedent(
            """
            import asyncio, sys
            from pathlib import Path
            from core.host.local import LocalHost
            from core.host.sandbox import Confinement, Grants

            async def show(_):
                return None

            async def main():
                project, mode = Path(sys.argv[1]), sys.argv[2]
                boxed = None if mode == "none" else Confinement((project,), Grants(unconfined=mode == "let-out"))
                host = LocalHost()
                result = await host.run_command(
                    "if (exec 3</dev/tty) 2>/dev/null; then echo has-terminal; else echo no-terminal; fi",
                    project, timeout=60, output_limit=4096, show=show, confinement=boxed,
                )
                await host.aclose()
                print("RESULT", result.output.strip(), flush=True)

            asyncio.run(main())
            """
        )
        pid, fd = pty.fork()
        if pid == 0:  # a session of its own, with the pty as its controlling terminal
            os.chdir(ROOT)
            os.execv(sys.executable, [sys.executable, "-c", code, str(project / "project"), mode])
        output = b""
        try:
            while True:
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    break
                if not chunk:
                    break
                output += chunk
        finally:
            os.close(fd)
            _, status = os.waitpid(pid, 0)
        text = output.decode(errors="replace")
        assert os.waitstatus_to_exitcode(status) == 0, text
        assert "RESULT no-terminal" in text, text


def test_the_let_out_argv_gives_the_command_a_session_of_its_own(tmp_path):
    """bubblewrap makes the session, so the command is only given its own process group."""
    if sandbox.status().name != "bubblewrap":
        pytest.fail(f"no working bubblewrap: {sandbox.status().detail}")
    confinement = Confinement((tmp_path,))
    boxed = command_argv("true", tmp_path, confinement, command_environment(child_environment()))
    let_out = command_argv("true", tmp_path, Confinement((tmp_path,), Grants(unconfined=True)))
    assert own_session(boxed) and own_session(let_out)
    assert not own_session(["/bin/sh", "-c", "true"]) and not own_session(["/bin/sh", "-c", "--new-session"])
