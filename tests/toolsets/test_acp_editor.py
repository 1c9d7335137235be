"""The editor toolset end to end: the real hermes-acp process, a scripted model, the ACP client."""

from __future__ import annotations

from pathlib import Path

import acp
import pytest

from tests.acp_harness import ROOT, Client, agent_env, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


def _call(name: str, args: dict, call_id: str) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}]}


def _tool_results(server) -> list[str]:
    last = server.requests[-1].get("body", server.requests[-1])
    return [m["content"] for m in last["messages"] if m["role"] == "tool"]


async def _prompt(conn, project: Path, *texts: str, mode: str | None = None) -> str:
    sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
    if mode:
        await conn.set_session_mode(session_id=sid, mode_id=mode)
    for text in texts:
        await conn.prompt(session_id=sid, prompt=[acp.text_block(text)])
    return sid


async def test_edits_through_the_editor_keep_line_endings_and_encodings(hermes_home, project):
    crlf, legacy = project / "win.py", project / "legacy.txt"
    crlf.write_bytes(b"a = 1\r\nb = 2\r\n")
    legacy.write_bytes(b"caf\xe9 = 1\n")
    script = [
        _call("edit_file", {"path": "win.py", "old_string": "b = 2", "new_string": "b = 3\nc = 4"}, "c1"),
        _call("edit_file", {"path": "legacy.txt", "old_string": "café = 1", "new_string": "café = 2"}, "c2"),
        {"text": "done"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await _prompt(conn, project, "edit both")
    assert crlf.read_bytes() == b"a = 1\r\nb = 3\r\nc = 4\r\n"
    assert legacy.read_bytes() == b"caf\xe9 = 2\n"
    assert client.writes == [str(crlf)], "the UTF-8 file goes through the editor, the cp1252 one is written on disk"
    first = client.permission_requests[0]
    assert first.content[0].type == "diff" and first.content[0].path == str(crlf)
    assert client.tool_updates("c1")[-1].status == "completed" and client.tool_updates("c1")[-1].content[0].type == "diff"


class TypingClient(Client):
    """An editor whose user types into the buffer right after the agent has read it."""

    async def read_text_file(self, path, session_id, line=None, limit=None, **kw):
        response = await super().read_text_file(path, session_id, line, limit, **kw)
        if len(self.reads) == 1:
            self.buffers[path] = response.content + "# typed by the user, not saved\n"
        return response


async def test_a_buffer_changed_since_the_read_is_not_overwritten(hermes_home, project):
    target = project / "app.py"
    target.write_text("x = 1\n")
    script = [
        _call("read_file", {"path": "app.py"}, "c1"),
        _call("edit_file", {"path": "app.py", "old_string": "x = 1", "new_string": "x = 2"}, "c2"),
        {"text": "I will read it again."},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = TypingClient(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await _prompt(conn, project, "change x")
    assert client.tool_updates("c2")[-1].status == "failed"
    assert "changed since you last read it" in _tool_results(server)[1]
    assert client.permission_requests == [] and client.writes == []
    assert client.buffers[str(target)] == "x = 1\n# typed by the user, not saved\n" and target.read_text() == "x = 1\n"


class RecordingClient(Client):
    def __init__(self, **kw) -> None:
        super().__init__(**kw)
        self.options: list[list[str]] = []

    async def request_permission(self, options, session_id, tool_call, **kw):
        self.options.append([o.option_id for o in options])
        return await super().request_permission(options, session_id, tool_call, **kw)


@pytest.mark.skipif(
    "offer_always" not in (ROOT / "hermes_acp" / "turns.py").read_text(),
    reason="hermes_acp does not yet honour ApprovalRequest.offer_always",
)
async def test_dangerous_commands_are_never_offered_always_allow(hermes_home, project):
    (project / "build").mkdir()
    script = [
        _call("run_command", {"command": "rm -rf build"}, "c1"),
        _call("run_command", {"command": "echo hi > out.txt"}, "c2"),
        {"text": "ok"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = RecordingClient(answer="reject_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await _prompt(conn, project, "clean up")
    assert "allow_always" not in client.options[0] and "allow_once" in client.options[0]
    assert "allow_always" in client.options[1]
    assert (project / "build").exists()


async def test_background_server_in_the_editor_terminal(hermes_home, project):
    script = [
        _call("run_command", {"command": "echo server up; sleep 30", "background": True}, "c1"),
        _call("command_output", {"job": "1", "wait": 5}, "c2"),
        _call("stop_command", {"job": "1"}, "c3"),
        {"text": "stopped it"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once", terminal=True)
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, transcript):
            await _prompt(conn, project, "start the server")
    (tid,) = client.terminals
    attached = [c for u in client.tool_updates("c1") for c in (u.content or []) if c.type == "terminal"]
    assert attached and attached[0].terminal_id == tid, "the terminal shows in the tool call"
    assert client.tool_updates("c1")[-1].status == "completed"
    results = _tool_results(server)
    assert "job 1" in results[0] and results[1].startswith("running\nserver up")
    assert results[2].startswith("stopped") and client.terminals[tid]["killed"] and client.released == [tid]
    create = next(m for _, m in transcript.messages if m.get("method") == "terminal/create")
    assert {"name": "OPENAI_API_KEY", "value": ""} in create["params"]["env"], "our key is blanked in the editor's terminal"


async def test_undo_brings_back_the_previous_turns_files(hermes_home, project):
    kept = project / "kept.txt"
    kept.write_text("original\n")
    script = [
        _call("write_file", {"path": "kept.txt", "content": "rewritten\n"}, "c1"),
        {"text": "rewrote it"},
        _call("undo", {}, "c2"),
        {"text": "undone"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await _prompt(conn, project, "rewrite kept.txt", "undo that")
    assert kept.read_text() == "original\n"
    assert client.tool_updates("c2")[-1].status == "completed"
    undo_request = client.permission_requests[-1]
    assert undo_request.content[0].old_text == "rewritten\n" and undo_request.content[0].new_text == "original\n"
    assert "Restored:" in _tool_results(server)[-1]


async def test_read_only_mode_refuses_writes_and_commands_without_asking(hermes_home, project):
    script = [
        _call("write_file", {"path": "a.txt", "content": "a"}, "c1"),
        _call("run_command", {"command": "ls"}, "c2"),
        _call("grep", {"pattern": "x"}, "c3"),
        {"text": "read-only, so I only searched"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await _prompt(conn, project, "try things", mode="read-only")
    assert client.permission_requests == [] and not (project / "a.txt").exists()
    assert [client.tool_updates(c)[-1].status for c in ("c1", "c2", "c3")] == ["failed", "failed", "completed"]
    assert all("read-only" in r for r in _tool_results(server)[:2])


class TailKeepingClient(Client):
    """An editor that keeps only the last output_byte_limit bytes of a terminal, as ACP allows."""

    async def create_terminal(self, command, session_id, args=None, env=None, cwd=None, output_byte_limit=None, **kw):
        self.limit = output_byte_limit
        return await super().create_terminal(command, session_id, args, env, cwd, output_byte_limit, **kw)

    async def terminal_output(self, session_id, terminal_id, **kw):
        response = await super().terminal_output(session_id, terminal_id, **kw)
        data = response.output.encode()
        if len(data) > self.limit:
            response.output, response.truncated = data[-self.limit :].decode(errors="ignore"), True
        return response


@pytest.mark.parametrize("lines, head", [(20_000, True), (200_000, False)], ids=["head-and-tail", "editor-dropped-the-head"])
async def test_long_terminal_output_is_cut_to_head_and_tail(hermes_home, project, lines, head):
    script = [_call("run_command", {"command": f"seq 1 {lines}"}, "c1"), {"text": "ok"}]
    with ScriptedOpenAIServer(script) as server:
        client = TailKeepingClient(answer="allow_once", terminal=True)
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await _prompt(conn, project, "count")
    result = _tool_results(server)[0]
    assert result.startswith("exit code 0\n") and result.rstrip().endswith(f"\n{lines}") and len(result) < 32_000
    if head:  # under the editor's limit: cut here, head and tail exact
        assert result.startswith("exit code 0\n1\n2\n3\n") and "bytes of output omitted" in result
    else:  # past it: the head caught while it ran, or a marker saying it is gone
        assert "[... output omitted ...]" in result or "[... earlier output dropped ...]" in result
