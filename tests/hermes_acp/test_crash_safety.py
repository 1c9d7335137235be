"""SIGKILL hermes-acp at random points of multi-step turns: the store stays sound, what was
completed replays, and no file is ever left half-written."""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import threading
import time

import acp

from tests.acp_harness import Client, agent_env, hermes_acp, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer

BIG = "".join(f"line {i} of a file large enough that a torn write would show\n" for i in range(150))


def _reminder(message: dict) -> bool:
    content = message.get("content")
    text = content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))
    return text.startswith("[Ephemeral reminder")


def _script(body: dict) -> dict:
    """Each step writes a big file (whole or not at all), then the turn ends."""
    # A request-only reminder may follow the tool results as a user message of its own: not a prompt.
    prompts = [i for i, m in enumerate(body["messages"]) if m["role"] == "user" and not _reminder(m)]
    last_user = max(prompts)
    step = sum(1 for m in body["messages"][last_user:] if m["role"] == "tool")  # this turn's steps
    if step >= 4:
        return {"text": "all written"}
    marker = f"{step}-{len(body['messages'])}"
    return {
        "tool_calls": [{"id": f"w{marker}", "name": "write_file", "arguments": {"path": f"f{step}.txt", "content": f"{marker}\n{BIG}"}}],
    }


def _start(env, project):
    proc = subprocess.Popen([hermes_acp()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    send = lambda m: (proc.stdin.write(json.dumps({"jsonrpc": "2.0", **m}) + "\n"), proc.stdin.flush())
    send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
    proc.stdout.readline()
    return proc, send


def _answer(proc, request_id: int) -> dict:
    """Read the agent's stdout up to the answer to ``request_id`` (notifications may come first)."""
    while (message := json.loads(proc.stdout.readline())).get("id") != request_id:
        pass
    return message


def _files(project) -> dict[str, str]:
    return {p.name: p.read_text() for p in sorted(project.glob("f*.txt"))}


def _rounds_with_calls(updates) -> set[int]:
    """The rounds whose replayed turn has a tool call."""
    found, current = set(), None
    for update in updates:
        if update.session_update == "user_message_chunk" and update.content.text.startswith("round "):
            current = int(update.content.text.split()[1])
        elif update.session_update == "tool_call" and current is not None:
            found.add(current)
    return found


def _tool_call_seen(proc, timeout: float) -> bool:
    """Read the agent's stdout (in a thread, on to its end) until a tool call is announced."""
    seen = threading.Event()

    def read() -> None:
        for line in proc.stdout:
            if '"sessionUpdate":"tool_call"' in line.replace(" ", ""):
                seen.set()

    threading.Thread(target=read, daemon=True).start()
    return seen.wait(timeout)


def _stored(db_path, session_id: str, text: str, timeout: float) -> bool:
    """Wait until the session has a message containing ``text`` (read through a connection of our own)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        db = sqlite3.connect(db_path, timeout=5)
        try:
            query = "SELECT 1 FROM messages WHERE session_id = ? AND instr(content, ?) > 0"
            if db.execute(query, (session_id, json.dumps(text)[1:-1])).fetchone():
                return True
        finally:
            db.close()
        time.sleep(0.02)
    return False


def test_sigkill_mid_turn_loses_nothing_completed(hermes_home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    rng = random.Random(20261130)
    (hermes_home / "config.toml").write_text("")
    with ScriptedOpenAIServer(_script) as server:
        env = agent_env(hermes_home, server.base_url)
        proc, send = _start(env, project)
        send({"id": 2, "method": "session/new", "params": {"cwd": str(project), "mcpServers": []}})
        sid = json.loads(proc.stdout.readline())["result"]["sessionId"]
        send({"id": 3, "method": "session/set_mode", "params": {"sessionId": sid, "modeId": "auto"}})
        # The answer, not just the next line (the command list may come first): in "ask" mode
        # nothing would be written, and the undo below would check nothing.
        assert "error" not in _answer(proc, 3)
        proc.stdin.close()
        proc.wait(timeout=10)
        before_round = []  # the files as each round found them
        for round_ in range(8):
            before_round.append(_files(project))
            proc, send = _start(env, project)
            send({"id": 2, "method": "session/resume", "params": {"sessionId": sid, "cwd": str(project), "mcpServers": []}})
            _answer(proc, 2)
            send(
                {"id": 3, "method": "session/prompt", "params": {"sessionId": sid, "prompt": [{"type": "text", "text": f"round {round_}"}]}}
            )
            if round_ % 2:
                # Anywhere once the prompt is stored (a loaded machine may take longer than any
                # fixed pause to get there): the model stream, a tool, a write.
                assert _stored(hermes_home / "state.db", sid, f"round {round_}", 60), "the prompt was never stored"
                time.sleep(rng.uniform(0.0, 1.2))
            else:
                # Surely inside the turn: once its first tool call is announced, however loaded
                # the machine is.
                assert _tool_call_seen(proc, 60), "the turn announced no tool call"
                time.sleep(rng.uniform(0.0, 0.3))
            os.kill(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            # No file is half-written: each is either absent or whole.
            for written in project.glob("f*.txt"):
                text = written.read_text()
                assert text.endswith(BIG) and text.count("\n") == BIG.count("\n") + 1, written
            assert not list(project.glob(".*.tmp")), "temporary files are cleaned up or never visible"
            db = sqlite3.connect(hermes_home / "state.db")
            try:
                assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
                stored = db.execute("SELECT COUNT(*) FROM messages WHERE session_id = ?", (sid,)).fetchone()[0]
                # The full-text index agrees with the messages, row by row and token by token
                # (COUNT(*) on an external-content table would only count the messages again).
                indexed = [r[0] for r in db.execute("SELECT id FROM messages_fts_docsize ORDER BY id")]
                ids = [r[0] for r in db.execute("SELECT id FROM messages ORDER BY id")]
                db.execute("INSERT INTO messages_fts (messages_fts, rank) VALUES ('integrity-check', 1)")
            finally:
                db.close()
            assert indexed == ids

    written_before_undo = _files(project)

    async def replay():
        client = Client()
        async with running_agent(
            client,
            agent_env(
                hermes_home,
                None,
                extra={"HERMES_MODEL": "openai:scripted", "OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "sk-x-000000"},
            ),
        ) as (conn, _, _):
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
            replayed = len(client.updates)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/undo")])
        undo_text = "".join(u.content.text for u in client.updates[replayed:] if u.session_update == "agent_message_chunk")
        return client, undo_text

    client, undo_text = asyncio.run(replay())
    # The checkpoint taken before the last turn with writes restores the files as that round
    # found them (created ones go, overwritten ones get their content back).
    if written_before_undo:
        assert "Undid" in undo_text, undo_text
        last = max(r for r in range(8) if before_round[r] != (before_round[r + 1] if r < 7 else written_before_undo))
        restored = _files(project)
        if restored == written_before_undo:
            # Only when a later turn took its checkpoint and was killed before its write landed:
            # undoing it restores what is already there.
            assert any(r > last for r in _rounds_with_calls(client.updates)), undo_text
        else:
            assert restored == before_round[last], (sorted(restored), sorted(before_round[last]), undo_text)
    users = [u for u in client.updates if u.session_update == "user_message_chunk"]
    assert len(users) == 8 and stored >= 8, "every round's user message was persisted before the kill"
    assert client.of_kind("tool_call"), "the kills landed inside turns, after a step was persisted"
    # Every tool call that replays has a final status (completed, or failed when interrupted).
    for update in client.of_kind("tool_call"):
        finals = [u.status for u in client.tool_updates(update.tool_call_id) if u.session_update == "tool_call_update"]
        assert finals and finals[-1] in ("completed", "failed"), update.tool_call_id


def test_what_was_asked_before_stdin_closes_is_still_done(hermes_home, tmp_path):
    """A client that sends a request and closes stdin at once (an editor quitting right after a
    choice) still gets it done: the server answers every request it read before shutting down."""
    project = tmp_path / "p"
    project.mkdir()
    (hermes_home / "config.toml").write_text("")
    with ScriptedOpenAIServer([]) as server:
        env = agent_env(hermes_home, server.base_url)
        proc, send = _start(env, project)
        send({"id": 2, "method": "session/new", "params": {"cwd": str(project), "mcpServers": []}})
        sid = json.loads(proc.stdout.readline())["result"]["sessionId"]
        send({"id": 3, "method": "session/set_mode", "params": {"sessionId": sid, "modeId": "auto"}})
        proc.stdin.close()
        answer = _answer(proc, 3)
        assert proc.wait(timeout=30) == 0
        assert "error" not in answer, answer
        proc, send = _start(env, project)
        send({"id": 2, "method": "session/resume", "params": {"sessionId": sid, "cwd": str(project), "mcpServers": []}})
        resumed = _answer(proc, 2)
        proc.stdin.close()
        proc.wait(timeout=30)
    assert resumed["result"]["modes"]["currentModeId"] == "auto", "the mode chosen before stdin closed was saved"


async def test_a_ref_lock_left_by_a_kill_blocks_neither_checkpoints_nor_undo(hermes_home, tmp_path):
    """A process killed while it moved a session's checkpoint ref leaves ``<ref>.lock`` behind;
    the next process still checkpoints that session's writes and undoes them."""
    project = tmp_path / "p"
    project.mkdir()
    target = project / "f.txt"

    def write(text: str, call_id: str) -> dict:
        return {"tool_calls": [{"id": call_id, "name": "write_file", "arguments": {"path": "f.txt", "content": text}}]}

    script = [write("one\n", "c1"), {"text": "wrote one"}, write("two\n", "c2"), {"text": "wrote two"}]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("write one")])
            ref = hermes_home / "checkpoints" / "shadow.git" / "refs" / "heads" / "sessions" / sid
            assert ref.is_file() and target.read_text() == "one\n"
            ref.with_name(f"{sid}.lock").touch()  # what a kill in the middle of moving the ref leaves
            await conn.prompt(session_id=sid, prompt=[acp.text_block("write two")])
            assert target.read_text() == "two\n", client.tool_updates("c2")[-1]
            before_undo = len(client.updates)
            await conn.prompt(session_id=sid, prompt=[acp.text_block("/undo")])
    undo_text = "".join(u.content.text for u in client.updates[before_undo:] if u.session_update == "agent_message_chunk")
    assert "Undid" in undo_text and target.read_text() == "one\n", undo_text
