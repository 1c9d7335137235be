"""A background command that ends is announced: to the user in the thread, and to the model, once,
as a note appended before its next request."""

from __future__ import annotations

from pathlib import Path

import acp
import pytest

from tests.acp_harness import Client, agent_env, running_agent, until
from tests.fakes.openai_server import ScriptedOpenAIServer

# It ends once the test (or the model) creates ``go``: the facts decide when, not the clock.
COMMAND = "until [ -f go ]; do sleep 0.05; done; echo done"
NOTE = f"[Background command 1 (`{COMMAND}`) exited 0; use command_output(job=1) for its output.]"
NOTICE = f"Background command 1 (`{COMMAND}`) exited 0."


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


def _call(name: str, args: dict, call_id: str) -> dict:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": args}]}


def _messages(request: dict) -> list[dict]:
    return request.get("body", request)["messages"]


def _text(message: dict) -> str:
    content = message.get("content")
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content or [] if isinstance(p, dict))


def _notes(request: dict) -> int:
    return sum(_text(m).count(NOTE) for m in _messages(request))


@pytest.mark.parametrize("terminal", [True, False], ids=["editor-terminal", "local-process"])
async def test_a_command_that_ends_between_turns_is_announced_once(hermes_home, project, terminal):
    script = [
        _call("run_command", {"command": COMMAND, "background": True}, "c1"),
        {"text": "started"},
        _call("command_output", {"job": "1"}, "c2"),
        {"text": "it printed done"},
        {"text": "nothing new"},
    ]
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once", terminal=terminal)
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("start it in the background")])
            assert NOTICE not in client.text(), "the command still runs when the turn ends"
            (project / "go").touch()
            # No turn runs: the editor is told as soon as the command ends.
            await until(lambda: NOTICE in client.text(), what="the notice that the background command ended")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("how did it go?")])
            await conn.prompt(session_id=sid, prompt=[acp.text_block("anything else?")])
    assert client.text().count(NOTICE) == 1, "the user is told once, not again when the next turn starts"
    first_turn_end, asked, after_read, later = server.requests[1], server.requests[2], server.requests[3], server.requests[4]
    assert _notes(first_turn_end) == 0
    assert _notes(asked) == 1, "the model's next request carries the note once"
    texts = [_text(m) for m in _messages(asked)]
    assert texts.index(NOTE) == texts.index("how did it go?") - 1, "the note comes before the prompt it preceded"
    assert _messages(asked)[: len(_messages(first_turn_end))] == _messages(first_turn_end), "earlier messages are not rewritten"
    results = [m["content"] for m in _messages(after_read) if m["role"] == "tool"]
    assert results[-1].startswith("ended, exit code 0\ndone"), "the job is still there to read"
    assert _notes(after_read) == 1 and _notes(later) == 1, "the note stays in the history and is not repeated"


async def test_a_command_that_ends_during_a_turn_is_announced_at_its_next_step(hermes_home, project):
    def script(body: dict) -> dict:
        messages = body["messages"]
        tool_results = sum(1 for m in messages if m["role"] == "tool")
        if tool_results == 0:
            return _call("run_command", {"command": COMMAND, "background": True}, "start")
        if any(NOTE in _text(m) for m in messages):
            return {"text": "it ended"}
        if tool_results > 50:
            return {"text": "gave up waiting"}
        # Let it end, then look again at each next request until the note is there.
        return _call("run_command", {"command": "touch go" if tool_results == 1 else "sleep 0.1"}, f"step{tool_results}")

    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.set_session_mode(session_id=sid, mode_id="auto")
            await conn.prompt(session_id=sid, prompt=[acp.text_block("start it and wait")])
    assert "it ended" in client.text(), "the model saw the note within the turn"
    assert client.text().count(NOTICE) == 1, "the turn tells the user, once"
    assert _notes(server.requests[-1]) == 1
