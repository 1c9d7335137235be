"""The state home holds every conversation and copies of edited files: only its owner may read it.

Every surface runs as a real process under a permissive umask (022, the usual default), does
its ordinary work, and then the home is walked: every folder must be 0700 and no file may have
a group or other bit. Files the agent makes in the user's project must still get the user's
umask. ``hermes-editor doctor`` repairs a home made by an older version.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import acp
import pytest
from mcp_types import ListRootsResult, Root

from tests.acp_harness import Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.telegram_server import FakeTelegram
from tests.hermes_gateway.harness import OWNER, GatewayProcess, gateway_env, write_config
from tests.hermes_mcp.harness import connected, data, mcp_env

BIN = Path(sys.executable).parent
# Written into the home by the test harnesses themselves (the server's stderr), not by our code.
HARNESS_FILES = {"stderr.log"}


@pytest.fixture
def permissive_umask():
    """Run every child under umask 022, as most users do; the old code then left the home readable."""
    previous = os.umask(0o022)
    yield
    os.umask(previous)


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("def greet():\n    return 'hi'\n")
    return root


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def _loose(home: Path) -> list[str]:
    """Everything in ``home`` another user could read or enter: folders not 0700, files with group/other bits."""
    found = [] if _mode(home) == 0o700 else [f". {_mode(home):04o}"]
    for folder, dirs, files in os.walk(home):
        for name in dirs:
            path = Path(folder) / name
            if not path.is_symlink() and _mode(path) != 0o700:
                found.append(f"{path.relative_to(home)}/ {_mode(path):04o}")
        for name in files:
            path = Path(folder) / name
            if Path(folder) == home and name in HARNESS_FILES or path.is_symlink():
                continue
            if _mode(path) & 0o7077:
                found.append(f"{path.relative_to(home)} {_mode(path):04o}")
    return found


def _cli(home: Path, *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HERMES_EDITOR_HOME": str(home), "HOME": str(home.parent / "user-home"), "HERMES_QUIET": "1"}
    return subprocess.run(
        [str(BIN / "hermes-editor"), *args], input=stdin, capture_output=True, text=True, env=env, timeout=90, start_new_session=True
    )


def _call(name: str, args: dict, call_id: str) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}]}


# -- every surface ---------------------------------------------------------------------------


async def test_every_surface_leaves_only_private_files_in_the_state_home(tmp_path, project, permissive_umask):
    home = tmp_path / "fresh-home"  # does not exist yet: the first process makes it
    seen_while_running: list[str] = []

    # hermes-acp: a turn that creates one file and edits another, so both are checkpointed.
    script = [
        _call("write_file", {"path": "notes/todo.md", "content": "- ship it\n"}, "c1"),
        _call("edit_file", {"path": "app.py", "old_string": "'hi'", "new_string": "'hello'"}, "c2"),
        {"text": "Done."},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once", fs=False, terminal=False)
        env = agent_env(home, server.base_url)
        async with running_agent(client, env, stderr_path=tmp_path / "acp-stderr.log") as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("write the todo, fix the greeting")])
            assert response.stop_reason == "end_turn"
            # While the store is open, SQLite's WAL and shared-memory files exist too.
            assert (home / "state.db-wal").exists() and (home / "state.db-shm").exists()
            seen_while_running = _loose(home)
    assert (project / "app.py").read_text() == "def greet():\n    return 'hello'\n"
    objects = [p for p in (home / "checkpoints" / "shadow.git" / "objects").rglob("*") if p.is_file()]
    assert objects, "the turn's checkpoint is in the shadow repository"

    # hermes-mcp: one task, in the folder the client shares.
    async def roots(context):
        return ListRootsResult(roots=[Root(uri=project.as_uri(), name="project")])

    with ScriptedOpenAIServer([{"text": "Hello over MCP."}]) as server:
        async with connected(mcp_env(home, server.base_url), list_roots_callback=roots) as mcp:
            assert data(await mcp.call_tool("ask", {"prompt": "say hello", "cwd": str(project)}))["reply"] == "Hello over MCP."

    # hermes-editor: set-up, an import of SOUL.md and memories, a prune of the checkpoints.
    source = tmp_path / "other-agent"
    (source / "memories").mkdir(parents=True)
    (source / "SOUL.md").write_text("You are terse.\n")
    (source / "memories" / "MEMORY.md").write_text("- The user prefers tabs.\n")
    for args, stdin in ((("setup",), "4\n\nqwen3:8b\n"), (("import", "--from", str(source)), ""), (("checkpoints", "prune"), "")):
        result = _cli(home, *args, stdin=stdin)
        assert result.returncode == 0, result.stdout + result.stderr
    assert (home / "SOUL.md").exists() and (home / "memories" / "MEMORY.md").exists()

    # hermes-gateway: one chat turn. Its config.toml is the user's own file, written here in their place.
    write_config(home, project)
    os.chmod(home / "config.toml", 0o600)
    with FakeTelegram() as telegram, ScriptedOpenAIServer([{"text": "Hello from the gateway."}]) as model:
        with GatewayProcess(gateway_env(home, telegram, model.base_url)).start(telegram) as gateway:
            telegram.send_user_message(OWNER, "hi")
            telegram.wait_text(OWNER, "Hello from the gateway.", 30)
            gateway.stop()
    assert list((home / "gateway").iterdir()), "the gateway's lock and status files"

    for log in ("acp", "mcp", "gateway"):
        assert (home / "logs" / f"{log}.log").exists()
    assert seen_while_running == [], "readable by others while hermes-acp ran: " + ", ".join(seen_while_running)
    loose = _loose(home)
    assert loose == [], "readable by others: " + ", ".join(loose)


@pytest.mark.parametrize("script", ["hermes-acp", "hermes-mcp", "hermes-gateway", "hermes-editor"])
def test_each_entry_point_makes_an_open_home_private_before_anything_else(tmp_path, script, permissive_umask):
    home = tmp_path / "open-home"
    home.mkdir()
    os.chmod(home, 0o755)
    # --version and --help answer before the state home is touched (the profile, which decides the
    # home, is read with the other arguments); with no arguments each program starts and stops at once
    # (the servers at the end of their input, the CLIs with their help).
    args: list[str] = []
    env = {**os.environ, "HERMES_EDITOR_HOME": str(home), "HERMES_QUIET": "1"}
    result = subprocess.run([str(BIN / script), *args], capture_output=True, text=True, env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert _mode(home) == 0o700
    assert f"the state home {home} was open to other users (0755); it is now 0700" in result.stderr
    # A home that does not exist yet is made 0700, parents included.
    nested = tmp_path / "a" / "b" / "home"
    subprocess.run(
        [str(BIN / script), *args],
        capture_output=True,
        env={**env, "HERMES_EDITOR_HOME": str(nested)},
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert _mode(nested) == 0o700 and _mode(nested.parent) == 0o700


def test_logs_stay_private_across_rotation(hermes_home, permissive_umask):
    from core.logs import setup_logging

    logs = hermes_home / "logs"
    logs.mkdir()
    (logs / "rot.log").write_text("an old line\n")
    os.chmod(logs / "rot.log", 0o644)  # as an older version left it
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        setup_logging("rot", "info")
        stderr_handler = next(h for h in root.handlers if isinstance(h, logging.StreamHandler) and not isinstance(h, logging.FileHandler))
        root.removeHandler(stderr_handler)  # six megabytes on the test's stderr helps nobody
        line = "x" * 1000
        for _ in range(6_000):  # past the 5 MB rotation size
            logging.getLogger("rot").info(line)
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    assert (logs / "rot.log.1").exists(), "the log rotated"
    assert {p.name: _mode(p) for p in logs.iterdir()} == {"rot.log": 0o600, "rot.log.1": 0o600}


# -- the user's project keeps the user's umask -----------------------------------------------


async def test_new_project_files_and_folders_get_the_users_umask(tmp_path, project, permissive_umask):
    script = [_call("write_file", {"path": "docs/guide/intro.md", "content": "# Intro\n"}, "c1"), {"text": "Done."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once", fs=False, terminal=False)
        async with running_agent(client, agent_env(tmp_path / "home", server.base_url), stderr_path=tmp_path / "stderr.log") as (
            conn,
            _,
            _,
        ):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("write the guide")])
    assert (project / "docs/guide/intro.md").read_text() == "# Intro\n"
    assert {p: f"{_mode(project / p):04o}" for p in ("docs", "docs/guide", "docs/guide/intro.md")} == {
        "docs": "0755",
        "docs/guide": "0755",
        "docs/guide/intro.md": "0644",
    }


async def test_commands_run_with_the_users_umask(tmp_path, project, permissive_umask):
    command = "mkdir built && echo ok > built/out.txt"
    script = [_call("run_command", {"command": command}, "c1"), {"text": "Done."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once", fs=False, terminal=False)
        async with running_agent(client, agent_env(tmp_path / "home", server.base_url), stderr_path=tmp_path / "stderr.log") as (
            conn,
            _,
            _,
        ):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("build it")])
    assert (project / "built/out.txt").read_text() == "ok\n"
    assert (f"{_mode(project / 'built'):04o}", f"{_mode(project / 'built/out.txt'):04o}") == ("0755", "0644")


def test_imported_skills_are_private(tmp_path, permissive_umask):
    home = tmp_path / "home"
    skill = tmp_path / "other-agent" / "skills" / "deploy"
    (skill / "scripts").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: Deploy the site.\n---\nRun the deploy script.\n")
    (skill / "scripts" / "check.sh").write_text("#!/bin/sh\necho ok\n")
    os.chmod(skill / "scripts" / "check.sh", 0o755)
    result = _cli(home, "import", "--from", str(tmp_path / "other-agent"))
    assert result.returncode == 0 and "skill deploy" in result.stdout, result.stdout + result.stderr
    assert (home / "skills" / "deploy" / "SKILL.md").exists()
    loose = _loose(home)
    assert loose == [], "readable by others: " + ", ".join(loose)


# -- doctor repairs an older home ------------------------------------------------------------


def _older_home(root: Path) -> Path:
    """A home as older versions left it under umask 022: folders 0755, files 0644, objects 0444."""
    home = root / "old-home"
    files = {
        "config.toml": 'log_level = "info"\n',
        "SOUL.md": "You are terse.\n",
        "memories/MEMORY.md": "- The user prefers tabs.\n",
        "skills/deploy/SKILL.md": "---\nname: deploy\ndescription: Deploy.\n---\nRun it.\n",
        "skills/deploy/scripts/check.sh": "#!/bin/sh\necho ok\n",
        "logs/acp.log": "a line\n",
        "logs/acp.log.1": "an older line\n",
        "logs/acp.log.3": "the oldest line\n",
        "gateway/bot-1.json": "{}\n",
        "gateway/bot-1.lock": "123",
        "checkpoints/lock": "",
        "checkpoints/shadow.git/HEAD": "ref: refs/heads/main\n",
        "checkpoints/shadow.git/refs/heads/sessions/s1": "0" * 40 + "\n",
        "checkpoints/shadow.git/objects/ab/" + "c" * 38: "a copy of an edited file",
    }
    for name, text in files.items():
        path = home / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        os.chmod(path, 0o644)
    os.chmod(home / "skills/deploy/scripts/check.sh", 0o755)
    os.chmod(home / "checkpoints/shadow.git/objects/ab" / ("c" * 38), 0o444)
    conn = sqlite3.connect(home / "state.db")
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("CREATE TABLE old (x)")
    conn.close()
    os.chmod(home / "state.db", 0o644)
    for folder in [home, *(p for p in home.rglob("*") if p.is_dir())]:
        os.chmod(folder, 0o755)
    return home


def test_doctor_repairs_an_older_home_and_says_what_it_changed(tmp_path, permissive_umask):
    home = _older_home(tmp_path)
    # Links lead out of the home: doctor must change neither them nor what they point at.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("the user's own file\n")
    os.chmod(outside / "notes.txt", 0o644)
    os.symlink(outside / "notes.txt", home / "skills" / "notes-link")
    os.symlink(outside, home / "memories" / "folder-link")
    assert len(_loose(home)) > 20

    result = _cli(home, "doctor", "--timeout", "1")
    out = result.stdout
    assert "the state home" in result.stderr and "it is now 0700" in result.stderr
    assert f"✓ State home {home} made private: " in out, out
    # Every file of _older_home (symbolic links not counted) and every folder below the home, which
    # hermes-editor itself made private on starting.
    assert "made private: 15 file(s) and 13 folder(s): " in out, out
    assert "0644→0600" in out and "and 23 more" in out
    assert _loose(home) == []
    # Owner bits stay: the skill's script still runs, git objects stay read-only.
    assert _mode(home / "skills/deploy/scripts/check.sh") == 0o700
    assert _mode(home / "checkpoints/shadow.git/objects/ab" / ("c" * 38)) == 0o400
    assert _mode(outside / "notes.txt") == 0o644 and _mode(outside) == 0o755
    # The store opened after the repair: its WAL took the repaired mode.
    assert _mode(home / "state.db") == 0o600
    assert "✓ Store" in out

    again = _cli(home, "doctor", "--timeout", "1")
    assert f"✓ State home {home} is private" in again.stdout, again.stdout
    assert "it is now 0700" not in again.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a file to another user")
def test_doctor_names_what_it_may_not_repair(tmp_path, permissive_umask):
    home = _older_home(tmp_path)
    planted = home / "memories" / "planted.md"
    planted.write_text("not yours\n")
    os.chmod(planted, 0o644)
    os.chown(planted, 65534, 65534)
    result = _cli(home, "doctor", "--timeout", "1")
    assert result.returncode == 1
    assert "could not make these private: memories/planted.md (owned by uid 65534, mode 0644)" in result.stdout, result.stdout
    assert "chown" in result.stdout
    assert _mode(planted) == 0o644 and planted.stat().st_uid == 65534
    assert _loose(home) == ["memories/planted.md 0644"], "everything else was repaired"
