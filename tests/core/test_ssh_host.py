"""The SSH host against a real SSH server on 127.0.0.1: files over SFTP, commands over channels,
background jobs, cancel, host keys, errors, checkpoints of remote files."""

from __future__ import annotations

import asyncio
import os
import stat
from pathlib import Path

import pytest

from core.host.checkpoints import Checkpoints
from core.host.questions import host_questions
from core.host.ssh import SshError, SshHost, SshTarget
from core.host.text_files import TextFile
from tests.fakes.ssh_server import SshServer, known_hosts_line


@pytest.fixture
def server(tmp_path):
    server = SshServer(tmp_path / "box")
    (server.box / "srv" / "app").mkdir()
    server.start_in_thread()
    yield server
    server.stop_thread()


@pytest.fixture
def keys(tmp_path, server) -> tuple[Path, Path]:
    """The client's key and a known_hosts file that trusts the server."""
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_line(server.port, server.host_key))
    return server.write_client_key(tmp_path / "id_ed25519"), known


def make_host(server: SshServer, keys: tuple[Path, Path], mirror: Path | None = None) -> SshHost:
    identity, known = keys
    target = SshTarget.parse("tester@127.0.0.1:/srv/app", port=server.port, identity_file=str(identity), known_hosts=str(known))
    return SshHost("box", target=target, local_root=mirror)


@pytest.fixture
async def host(server, keys, tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    host = make_host(server, keys, mirror)
    yield host
    await host.aclose()


async def no_show(content) -> None:
    pass


def remote(server: SshServer, name: str) -> Path:
    return server.box / "srv" / "app" / name


async def until(predicate, what: str, timeout: float = 20.0):
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not (found := predicate()):
        assert loop.time() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)
    return found


def test_the_remote_project_is_not_on_this_machine():
    assert not Path("/srv/app").exists()


async def test_read_keeps_encoding_and_line_endings(server, host, tmp_path):
    remote(server, "win.txt").write_bytes("caf\xe9\r\nna\xefve\r\n".encode("cp1252"))
    found = await host.read_file(tmp_path / "mirror" / "win.txt")  # the mirror's path maps to /srv/app
    assert found == TextFile("café\r\nnaïve\r\n", "cp1252")
    assert (await host.read_file(Path("/srv/app/win.txt"))).text == "café\r\nnaïve\r\n"  # and the remote path as it is
    with pytest.raises(FileNotFoundError):
        await host.read_file(Path("/srv/app/missing.txt"))
    remote(server, "image.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    with pytest.raises(UnicodeError, match="PNG"):
        await host.read_file(Path("/srv/app/image.png"))


async def test_write_is_atomic_and_keeps_mode(server, host):
    script = remote(server, "run.sh")
    script.write_text("#!/bin/sh\necho old\n")
    script.chmod(0o750)
    await host.write_text(Path("/srv/app/run.sh"), "#!/bin/sh\necho new\n")
    assert script.read_text() == "#!/bin/sh\necho new\n"
    assert stat.S_IMODE(script.stat().st_mode) == 0o750
    await host.write_text(Path("/srv/app/sub/dir/new.txt"), "x\u00ff\n", encoding="latin-1")
    assert remote(server, "sub/dir/new.txt").read_bytes() == b"x\xff\n"
    assert sorted(p.name for p in remote(server, "").iterdir()) == ["run.sh", "sub"]  # no temporary file left


async def test_delete_and_move(server, host):
    remote(server, "a.txt").write_text("a\n")
    remote(server, "b.txt").write_text("b\n")
    with pytest.raises(FileExistsError):
        await host.move(Path("/srv/app/a.txt"), Path("/srv/app/b.txt"))
    await host.move(Path("/srv/app/a.txt"), Path("/srv/app/moved/a.txt"))
    assert remote(server, "moved/a.txt").read_text() == "a\n" and not remote(server, "a.txt").exists()
    await host.delete(Path("/srv/app/b.txt"))
    assert not remote(server, "b.txt").exists()


async def test_paths_outside_the_remote_project_are_refused(host):
    with pytest.raises(SshError, match=r"outside the remote project \(/srv/app on tester@127.0.0.1"):
        await host.read_file(Path("/etc/passwd"))
    with pytest.raises(SshError, match="outside the remote project"):
        await host.write_text(Path("/srv/app/../other/x"), "x")


async def test_command_output_exit_code_and_cwd(server, host, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-sent")
    remote(server, "sub").mkdir()
    result = await host.run_command(
        "pwd; echo out; echo err >&2; exit 3", Path("/srv/app/sub"), timeout=30, output_limit=10_000, show=no_show
    )
    assert result.exit_code == 3 and result.signal is None
    assert result.output.splitlines() == ["/srv/app/sub", "out", "err"]
    assert all(env == {} for env in server.envs)  # no variable is sent: no key travels
    missing = await host.run_command("true", Path("/srv/app/nowhere"), timeout=30, output_limit=10_000, show=no_show)
    assert missing.exit_code == 126 and "nowhere" in missing.output


async def test_command_output_is_shown_while_it_runs(server, host):
    shown: list[str] = []

    async def show(content) -> None:
        shown.append(content[0].text)

    # Each line waits until the previous one has been shown in the tool call.
    command = "echo one; while [ ! -e /srv/app/go ]; do sleep 0.05; done; echo two"
    task = asyncio.create_task(host.run_command(command, Path("/srv/app"), timeout=60, output_limit=10_000, show=show))
    await until(lambda: any("one" in s for s in shown), "the first line shown")
    remote(server, "go").write_text("")
    result = await task
    assert result.exit_code == 0 and result.output == "one\ntwo\n"


async def test_timeout_stops_the_process_group(server, host):
    command = "sleep 300 & echo $! > /srv/app/child; wait"
    result = await host.run_command(command, Path("/srv/app"), timeout=1, output_limit=1000, show=no_show)
    assert result.timed_out and result.exit_code is None
    child = int(remote(server, "child").read_text())
    await until(lambda: not _alive(child), "the remote child to end")


async def test_cancel_kills_the_remote_command(server, host):
    command = "echo $$ > /srv/app/pid; sleep 300"
    task = asyncio.create_task(host.run_command(command, Path("/srv/app"), timeout=600, output_limit=1000, show=no_show))
    pid_file = remote(server, "pid")
    await until(lambda: pid_file.exists() and pid_file.read_text().strip(), "the command to start")
    pid = int(pid_file.read_text())
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    await until(lambda: not _alive(pid), "the cancelled command to end")


async def test_background_job_reads_and_stops(server, host):
    job = await host.start_command("echo started; sleep 300", Path("/srv/app"), output_limit=10_000, show=no_show)
    assert job.id in host.jobs
    seen = ""
    while "started" not in seen:
        text, result = await job.read(wait=5)
        assert result is None
        seen += text
    result = await job.stop()
    assert result.signal == "SIGTERM" and result.exit_code is None
    ended = await host.start_command("echo done; exit 4", Path("/srv/app"), output_limit=10_000, show=no_show)
    await ended.wait()  # type: ignore[attr-defined]
    text, result = await ended.read()
    assert text == "done\n" and result is not None and result.exit_code == 4


async def test_a_dropped_connection_is_reported_and_the_next_command_reconnects(server, host):
    task = asyncio.create_task(host.run_command("echo before; sleep 300", Path("/srv/app"), timeout=600, output_limit=1000, show=no_show))
    await until(lambda: server.commands, "the command to reach the server")
    await asyncio.sleep(0)
    server.drop_connections()
    with pytest.raises(SshError, match="dropped while `echo before; sleep 300` ran"):
        await task
    again = await host.run_command("echo again", Path("/srv/app"), timeout=30, output_limit=1000, show=no_show)
    assert again.output == "again\n"
    assert len(server.conns) == 1  # a new connection


async def test_checkpoints_of_remote_files_undo(server, host, tmp_path):
    store = Checkpoints(tmp_path / "checkpoints")
    file, created = Path("/srv/app/a.txt"), Path("/srv/app/new.txt")
    remote(server, "a.txt").write_text("before\n")
    remote(server, "a.txt").chmod(0o755)
    (tmp_path / "srv").mkdir()  # a local file at the same path is another file
    await host.read_file(file)  # connects
    machine = host.checkpoint_files
    await store.snapshot("s", "t1", [file, created], machine)
    await host.write_text(file, "after\n")
    await host.write_text(created, "new\n")
    await store.record_written("s", "t1", [file, created], machine)
    checkpoint, rows, conflicts = await store.preview_undo("s")
    assert checkpoint is not None and not conflicts
    assert {(str(p), cur, res) for p, cur, res in rows} == {(str(file), b"after\n", b"before\n"), (str(created), b"new\n", None)}
    report = await store.undo_last("s")
    assert report.restored == [str(file)] and report.removed == [str(created)]
    assert remote(server, "a.txt").read_text() == "before\n" and not remote(server, "new.txt").exists()
    assert stat.S_IMODE(remote(server, "a.txt").stat().st_mode) == 0o755


async def test_a_changed_host_key_is_refused(server, keys, tmp_path):
    identity, known = keys
    import asyncssh

    other = asyncssh.generate_private_key("ssh-ed25519")
    known.write_text(known_hosts_line(server.port, other))
    host = make_host(server, keys)
    with pytest.raises(SshError, match="does not match the one in .*known_hosts.*Refusing to connect") as caught:
        await host.read_file(Path("/srv/app/x"))
    assert server.host_key.get_fingerprint() in str(caught.value)
    await host.aclose()


async def test_an_unknown_host_key_asks_once_and_is_recorded(server, keys, tmp_path):
    identity, known = keys
    known.write_text("")
    remote(server, "x.txt").write_text("x\n")
    questions: list[tuple[str, str]] = []

    async def ask(title: str, detail: str) -> bool:
        questions.append((title, detail))
        return True

    token = host_questions.set(ask)
    try:
        host = make_host(server, keys)
        assert (await host.read_file(Path("/srv/app/x.txt"))).text == "x\n"
        await host.aclose()
        host = make_host(server, keys)  # a new session: the key is known now
        assert (await host.read_file(Path("/srv/app/x.txt"))).text == "x\n"
        await host.aclose()
    finally:
        host_questions.reset(token)
    assert len(questions) == 1
    assert questions[0][0] == f"Trust the SSH host key of tester@127.0.0.1:{server.port}?"
    assert server.host_key.get_fingerprint() in questions[0][1]
    assert known.read_text() == known_hosts_line(server.port, server.host_key)


async def test_an_unknown_host_key_declined_or_unasked_is_refused(server, keys):
    identity, known = keys
    known.write_text("")

    async def no(title: str, detail: str) -> bool:
        return False

    host = make_host(server, keys)
    with pytest.raises(SshError, match="is not in .*nobody can be asked here"):
        await host.read_file(Path("/srv/app/x"))
    token = host_questions.set(no)
    try:
        with pytest.raises(SshError, match="was not accepted; nothing was done there"):
            await host.read_file(Path("/srv/app/x"))
    finally:
        host_questions.reset(token)
    assert known.read_text() == ""
    await host.aclose()


async def test_auth_failure_and_unreachable_host_are_clear(server, keys, tmp_path):
    import asyncssh

    stranger = tmp_path / "stranger"
    stranger.write_bytes(asyncssh.generate_private_key("ssh-ed25519").export_private_key("openssh"))
    stranger.chmod(0o600)
    host = make_host(server, (stranger, keys[1]))
    with pytest.raises(SshError, match=r"Authentication to tester@127.0.0.1:\d+ failed.*identity_file"):
        await host.read_file(Path("/srv/app/x"))
    await host.aclose()
    closed = SshServer(tmp_path / "closed")  # a port nobody listens on
    await closed.start()
    port = closed.port
    await closed.stop()
    target = SshTarget.parse("tester@127.0.0.1:/srv/app", port=port, identity_file=str(keys[0]), known_hosts=str(keys[1]))
    host = SshHost("gone", target=target)
    with pytest.raises(SshError, match=rf"Cannot reach tester@127.0.0.1:{port}: .*Check the host name and port"):
        await host.run_command("true", Path("/srv/app"), timeout=10, output_limit=100, show=no_show)


def test_target_parsing():
    t = SshTarget.parse("me@box.example:/srv/app")
    assert (t.user, t.host, str(t.root), t.label) == ("me", "box.example", "/srv/app", "me@box.example")
    assert SshTarget.parse("box:/srv", port=2222).label == "box:2222"
    with pytest.raises(ValueError, match="write 'user@box:/srv/app'"):
        SshTarget.parse("box:relative/path")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie has ended.
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (OSError, IndexError):
        return False


async def test_ssh_config_is_honoured(server, keys, tmp_path):
    identity, known = keys
    ssh_dir = Path.home() / ".ssh"
    ssh_dir.mkdir(parents=True, exist_ok=True)
    (ssh_dir / "config").write_text(f"Host devbox\n  HostName 127.0.0.1\n  Port {server.port}\n  User tester\n  IdentityFile {identity}\n")
    (ssh_dir / "known_hosts").write_text(known.read_text())
    remote(server, "x.txt").write_text("via config\n")
    host = SshHost("box", target=SshTarget.parse("devbox:/srv/app"))
    try:
        assert (await host.read_file(Path("/srv/app/x.txt"))).text == "via config\n"
        result = await host.run_command("id -un >/dev/null; echo ok", Path("/srv/app"), timeout=30, output_limit=100, show=no_show)
        assert result.output == "ok\n"
    finally:
        await host.aclose()
