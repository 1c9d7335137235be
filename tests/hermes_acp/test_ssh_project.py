"""A ``[projects.NAME] host = "ssh"`` project through the real hermes-acp process, a scripted
model and the ACP client, against a real SSH server on 127.0.0.1 (tests/fakes/ssh_server.py):
the editor opens a local folder that maps to ``/srv/app`` on the server, which exists only
there. File tools work over SFTP with diffs, approvals, stale-write refusal and undo; commands
run over SSH (never in the editor's terminal); a background job, a cancelled command; an unknown
host key is asked about once with its fingerprint; a changed one is refused and the turn goes on.
"""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import acp
import asyncssh
import pytest

from tests.acp_harness import Client, agent_env, running_agent, until
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.ssh_server import SshServer, known_hosts_line


def _call(name: str, args: dict, call_id: str) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}]}


def _results(server) -> dict[str, str]:
    """Tool results by call id, from the last request the model got."""
    last = server.requests[-1].get("body", server.requests[-1])
    return {m["tool_call_id"]: m["content"] for m in last["messages"] if m["role"] == "tool"}


@pytest.fixture
def box(tmp_path):
    server = SshServer(tmp_path / "box")
    (server.box / "srv" / "app").mkdir()
    (server.box / "srv" / "app" / "notes.txt").write_text("price = 10\n")
    server.start_in_thread()
    yield server
    server.stop_thread()


def _configure(home: Path, box: SshServer, mirror: Path, known: Path) -> None:
    identity = box.write_client_key(home.parent / "id_box")
    (home / "config.toml").write_text(
        f'[projects.box]\npath = "{mirror}"\nhost = "ssh"\nssh = "tester@127.0.0.1:/srv/app"\n'
        f'port = {box.port}\nidentity_file = "{identity}"\nknown_hosts = "{known}"\n'
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return Path(f"/proc/{pid}/stat").read_text().split(") ")[1][0] != "Z"
    except (ProcessLookupError, OSError, IndexError):
        return False


async def test_an_ssh_project_end_to_end(hermes_home, tmp_path, box):
    app = box.box / "srv" / "app"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_line(box.port, box.host_key))
    _configure(hermes_home, box, mirror, known)
    assert not Path("/srv/app").exists(), "the remote project is reachable over SSH only"
    script = [
        # turn 1: read, edit (a diff to approve), write
        _call("read_file", {"path": "notes.txt"}, "r1"),
        _call("edit_file", {"path": "notes.txt", "old_string": "price = 10", "new_string": "price = 12"}, "e1"),
        _call("write_file", {"path": "added.txt", "content": "new file\n"}, "w1"),
        {"text": "edited"},
        # turn 2 is /undo
        # turn 3: a command, a change behind the agent's back, a refused edit, a background job
        _call("run_command", {"command": "pwd; cat notes.txt; echo to-stderr >&2; echo 42 > from-remote.txt"}, "c1"),
        _call("read_file", {"path": "notes.txt"}, "r2"),
        _call("run_command", {"command": "printf 'price = 10\\nextra = 1\\n' > next.txt && mv next.txt notes.txt"}, "c2"),
        _call("edit_file", {"path": "notes.txt", "old_string": "price = 10", "new_string": "price = 11"}, "e2"),
        _call("run_command", {"command": "echo bg-start; until [ -f go ]; do sleep 0.05; done; echo bg-done", "background": True}, "b1"),
        _call("command_output", {"job": "1", "wait": 5}, "o1"),
        _call("run_command", {"command": "exit 3"}, "x1"),
        _call("run_command", {"command": "pwd", "cwd": "sub"}, "c3"),
        _call("delete_file", {"path": "blob.bin"}, "d1"),
        {"text": "commands ran"},
        # turn 4: cancelled while its command runs
        _call("run_command", {"command": "echo $$ > started; exec sleep 120", "timeout": 600}, "s1"),
        {"text": "unreachable"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(mirror), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("raise the price and add a file")])
            assert (app / "notes.txt").read_text() == "price = 12\n" and (app / "added.txt").read_text() == "new file\n"
            assert sorted(p.name for p in mirror.iterdir()) == [], "nothing is written on this machine"
            edit = next(r for r in client.permission_requests if r.tool_call_id == "e1")
            assert edit.content[0].type == "diff"
            assert edit.content[0].old_text == "price = 10\n" and edit.content[0].new_text == "price = 12\n"
            # diffs show the remote's path; locations keep this folder's, which the editor opens
            assert edit.content[0].path == "/srv/app/notes.txt", edit.content[0].path
            shown = [
                c.path for u in client.of_kind("tool_call_update") if u.tool_call_id == "w1" for c in u.content or [] if c.type == "diff"
            ]
            assert shown == ["/srv/app/added.txt"], shown
            started = {u.tool_call_id: u for u in client.of_kind("tool_call")}
            assert [loc.path for loc in started["e1"].locations or []] == [str(mirror / "notes.txt")]

            client.updates.clear()
            await conn.load_session(cwd=str(mirror), session_id=sid, mcp_servers=[])
            replayed = [c.path for u in client.of_kind("tool_call_update") for c in u.content or [] if c.type == "diff"]
            assert replayed == ["/srv/app/notes.txt", "/srv/app/added.txt"], replayed

            await conn.prompt(session_id=sid, prompt=[acp.text_block("/undo")])
            assert (app / "notes.txt").read_text() == "price = 10\n" and not (app / "added.txt").exists()

            (app / "sub").mkdir()
            (app / "blob.bin").write_bytes(b"\x00\x01binary")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("run things")])
            results = _results(server)
            assert results["c1"].splitlines() == ["exit code 0", "/srv/app", "price = 10", "to-stderr"], results["c1"]
            assert (app / "from-remote.txt").read_text() == "42\n"
            assert "changed since you last read it" in results["e2"], "a change made on the remote is seen"
            assert (app / "notes.txt").read_text() == "price = 10\nextra = 1\n"
            assert results["o1"].startswith("running\nbg-start"), results["o1"]
            assert "exit code 3" in results["x1"]
            titles = {u.tool_call_id: u.title for u in client.of_kind("tool_call")}
            assert titles["c1"].endswith(f"(ssh: tester@127.0.0.1:{box.port})"), titles["c1"]
            assert results["c3"] == "exit code 0\n/srv/app/sub", "a directory that is only on the remote"
            assert not (app / "blob.bin").exists(), results["d1"]
            assert client.reads == [] and client.writes == [] and client.terminals == {}, "the editor's files and terminal are not used"
            assert all(env == {} for env in box.envs), "no environment variable (no API key) is sent"

            (app / "go").touch()
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("sleep")]))
            started = app / "started"
            await until(lambda: started.exists() and started.read_text().strip(), timeout=30, what="the command to start")
            pid = int(started.read_text())
            await conn.cancel(session_id=sid)
            assert (await turn).stop_reason == "cancelled"
            await until(lambda: not _alive(pid), timeout=30, what="the cancelled remote command to end")


async def test_host_keys_unknown_asks_once_changed_is_refused(hermes_home, tmp_path, box):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    known = tmp_path / "known_hosts"  # does not exist yet: the key is unknown
    _configure(hermes_home, box, mirror, known)
    script = [
        _call("read_file", {"path": "notes.txt"}, "r1"),
        {"text": "read it"},
        _call("read_file", {"path": "notes.txt"}, "r2"),
        {"text": "read again"},
        _call("read_file", {"path": "notes.txt"}, "r3"),
        {"text": "could not read"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(mirror), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("read")])
            assert "price = 10" in _results(server)["r1"]
            (question,) = client.permission_requests
            assert question.tool_call_id == "r1"
            shown = repr(question)
            assert box.host_key.get_fingerprint() in shown and f"tester@127.0.0.1:{box.port}" in shown
            assert known.read_text() == known_hosts_line(box.port, box.host_key)

            sid2 = (await conn.new_session(cwd=str(mirror), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid2, prompt=[acp.text_block("read again")])
            assert "price = 10" in _results(server)["r2"]
            assert len(client.permission_requests) == 1, "a recorded key is not asked about again"

            known.write_text(known_hosts_line(box.port, asyncssh.generate_private_key("ssh-ed25519")))
            sid3 = (await conn.new_session(cwd=str(mirror), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid3, prompt=[acp.text_block("and again")])
            result = _results(server)["r3"]
            assert "does not match the one in" in result and box.host_key.get_fingerprint() in result, result
            assert "could not read" in client.text(), "the turn goes on"
            assert len(client.permission_requests) == 1


@pytest.mark.parametrize("ripgrep", [True, False], ids=["remote-ripgrep", "walked-over-sftp"])
async def test_search_tools_look_at_the_remote(hermes_home, tmp_path, ripgrep):
    rg = Path(sys.executable).parent / "rg"
    assert rg.exists(), "the ripgrep package provides rg next to Python"
    bin_dir = tmp_path / "remote-bin"
    bin_dir.mkdir()
    if ripgrep:
        (bin_dir / "rg").symlink_to(rg)
    box = SshServer(tmp_path / "box", path=f"{bin_dir}:/usr/bin:/bin")
    app = box.box / "srv" / "app"
    (app / "src" / "deep").mkdir(parents=True)
    (app / "build").mkdir()
    (app / ".gitignore").write_text("build/\n")
    (app / "src" / "main.py").write_text("import os\n\ndef main():\n    return TOKEN_X\n")
    (app / "src" / "deep" / "util.py").write_text("TOKEN_X = 1\n")
    (app / "build" / "out.py").write_text("TOKEN_X = 2\n")
    (app / "README.md").write_text("TOKEN_X is documented\n")
    box.start_in_thread()
    try:
        mirror = tmp_path / "mirror"
        mirror.mkdir()
        known = tmp_path / "known_hosts"
        known.write_text(known_hosts_line(box.port, box.host_key))
        _configure(hermes_home, box, mirror, known)
        script = [
            _call("grep", {"pattern": "TOKEN_X", "glob": "*.py"}, "g1"),
            _call("grep", {"pattern": "TOKEN_(?=X)", "path": "src", "context": 1}, "g2"),
            _call("glob", {"pattern": "**/*.py"}, "f1"),
            _call("list_dir", {"depth": 2}, "l1"),
            _call("grep", {"pattern": "x", "path": "missing"}, "m1"),
            {"text": "searched"},
        ]
        with ScriptedOpenAIServer(script) as server:
            client = Client(answer="allow_once")
            async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
                sid = (await conn.new_session(cwd=str(mirror), mcp_servers=[])).session_id
                await conn.prompt(session_id=sid, prompt=[acp.text_block("search")])
        results = _results(server)
    finally:
        box.stop_thread()
    assert results["g1"] == "src/deep/util.py:1:TOKEN_X = 1\nsrc/main.py:4:    return TOKEN_X", results["g1"]
    assert results["g2"] == "src/deep/util.py:1:TOKEN_X = 1\n--\nsrc/main.py-3-def main():\nsrc/main.py:4:    return TOKEN_X", results["g2"]
    assert results["f1"] == "src/deep/util.py  12B\nsrc/main.py  42B", results["f1"]
    assert results["l1"].splitlines() == [
        "src/  (2 entries)",
        "  deep/  (1 entries)",
        "  main.py  42B",
        ".gitignore  7B",
        "README.md  22B",
        "[1 ignored entries not shown: build/]",
    ], results["l1"]
    assert "does not exist" in results["m1"]
    ran_rg = any("rg --json" in c or "'rg' '--json'" in c or "exec /bin/sh -c 'rg " in c for c in box.commands)
    assert ran_rg, box.commands


async def test_a_dropped_connection_mid_command_is_reported_and_the_turn_goes_on(hermes_home, tmp_path, box):
    app = box.box / "srv" / "app"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_line(box.port, box.host_key))
    _configure(hermes_home, box, mirror, known)
    script = [
        _call("run_command", {"command": "touch started; sleep 120", "timeout": 600}, "c1"),
        _call("run_command", {"command": "echo again"}, "c2"),
        {"text": "went on"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(mirror), mcp_servers=[])).session_id
            turn = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=[acp.text_block("run")]))
            await until(lambda: (app / "started").exists(), timeout=30, what="the command to start")
            box.drop_connections()
            assert (await turn).stop_reason == "end_turn"
    results = _results(server)
    assert f"The connection to tester@127.0.0.1:{box.port} dropped while `touch started; sleep 120` ran" in results["c1"], results["c1"]
    assert results["c2"] == "exit code 0\nagain"
    assert "went on" in client.text()


async def test_in_auto_mode_remote_commands_that_write_still_ask(hermes_home, tmp_path, box):
    app = box.box / "srv" / "app"
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    known = tmp_path / "known_hosts"
    known.write_text(known_hosts_line(box.port, box.host_key))
    _configure(hermes_home, box, mirror, known)
    script = [
        _call("run_command", {"command": "cat notes.txt"}, "c1"),
        _call("run_command", {"command": "touch made-here"}, "c2"),
        {"text": "done"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(mirror), mcp_servers=[])).session_id
            await conn.set_session_mode(session_id=sid, mode_id="auto")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("go")])
    assert [r.tool_call_id for r in client.permission_requests] == ["c2"], "only the command that writes asks"
    assert f"commands run on tester@127.0.0.1:{box.port} over SSH, outside the sandbox" in client.text() + repr(client.updates)
    assert (app / "made-here").exists() and _results(server)["c1"] == "exit code 0\nprice = 10"
