"""session/load sends exactly the bytes it always sent for a varied stored session: every kind
of message and tool call a replay shows, texts that JSON escapes, and a subagent's report.

``replay_bytes.jsonl`` holds the expected ``session/update`` lines (the test's own folder, which
holds the project and HOME, written ``<tmp>``); run this file with ``HERMES_WRITE_REPLAY_BYTES=1`` to write it again after a
deliberate change of what a replay shows."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from pathlib import Path

from core.messages import (
    AssistantMessage,
    FileDiff,
    ImagePart,
    SummaryMessage,
    TextPart,
    ThinkingPart,
    ToolCallPart,
    ToolResultMessage,
    UserMessage,
)
from core.store import SessionStore
from tests.acp_harness import agent_env, hermes_acp

EXPECTED = Path(__file__).with_name("replay_bytes.jsonl")
SESSION_ID = "0123456789abcdef0123456789abcdef"
# Texts JSON escapes or leaves as they are: quotes, backslashes, control characters, line and
# paragraph separators, accents, CJK, an emoji, a NUL, DEL, HTML.
ODD = 'say "hi" \\ back\tslash\r\n\x00\x01\x1f\x7f \u2028\u2029 é 中文 😀 </script>'


def _call(call_id: str, name: str, **arguments) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments=arguments)


def _messages(project: Path) -> list:
    app, new = str(project / "app.py"), str(project / "new file ü.py")
    plan = {"entries": [{"content": "Edit app.py", "status": "in_progress"}, {"content": ODD, "priority": "high"}, {"content": "Test"}]}
    return [
        UserMessage(parts=[TextPart(text=ODD), ImagePart(media_type="image/png", data="aGVsbG8="), TextPart(text="")]),
        AssistantMessage(
            parts=[
                ThinkingPart(text="Plan first: " + ODD, signature="sig"),
                ThinkingPart(text="hidden", redacted=True),
                ThinkingPart(text=""),
                TextPart(text="On it."),
                TextPart(text=""),
                TextPart(text=" and more"),
                _call("p1", "update_plan", **plan),
                _call("e1", "edit_file", path="app.py", old_string="x = 1", new_string="x = 2"),
                _call("w1", "write_file", path=new, content=ODD),
                _call("r1", "read_file", path="~/notes.txt", offset=3, limit=10),
                _call("g1", "grep", pattern="a.*b", path=".", ignore_case=True),
                _call("x1", "run_command", command="ls -la | head", timeout=2.5),
                _call("u1", "no_such_tool", anything=[1, None, "two", 3.25, {"ключ": True, "n": -0.0}], big=10**20),
                _call("v1", "read_file", nonsense=1),  # arguments the tool rejects
                _call("pb", "update_plan", entries="not a list"),
                _call("d1", "delegate", tasks=[{"goal": "look around"}]),
            ],
            model="openai:scripted",
        ),
        ToolResultMessage(tool_call_id="p1", tool_name="update_plan", content="Plan updated."),
        ToolResultMessage(
            tool_call_id="e1",
            tool_name="edit_file",
            content="Edited.",
            diffs=[FileDiff(path=app, old_text="x = 1\n", new_text="x = 2\n"), FileDiff(path=app, old_text=ODD, new_text="")],
        ),
        ToolResultMessage(
            tool_call_id="w1", tool_name="write_file", content="Wrote.", diffs=[FileDiff(path=new, old_text=None, new_text=ODD)]
        ),
        ToolResultMessage(tool_call_id="r1", tool_name="read_file", content="line\n" * 1000),  # cut at 4,000 characters
        ToolResultMessage(tool_call_id="g1", tool_name="grep", content=""),
        ToolResultMessage(tool_call_id="x1", tool_name="run_command", content="failed: " + "e" * 5000, is_error=True),
        ToolResultMessage(tool_call_id="u1", tool_name="no_such_tool", content="Unknown tool 'no_such_tool'.", is_error=True),
        ToolResultMessage(tool_call_id="pb", tool_name="update_plan", content="", is_error=True),
        ToolResultMessage(tool_call_id="d1", tool_name="delegate", content="Subagent 1 reported."),
        ToolResultMessage(tool_call_id="zz", tool_name="read_file", content="a result whose call is not stored"),
        AssistantMessage(parts=[TextPart(text="Half a"), _call("i1", "read_file", path="app.py")], interrupted=True),
        UserMessage.of("[Background command `sleep 1` (job 1) ended with exit code 0; use command_output(job=1) for its output.]"),
        UserMessage.of("[Background command `sleep 1` but not a note"),
        SummaryMessage(text="all of that", model="openai:scripted"),
        AssistantMessage(parts=[TextPart(text="Done. " + ODD)]),
        AssistantMessage(parts=[]),
        AssistantMessage(parts=[_call("last", "list_dir", path="src")]),  # the session ends before its result
    ]


def _subagent(project: Path) -> list:
    return [
        UserMessage.of("look around\n\n# Context\nthe parent's notes"),
        AssistantMessage(parts=[TextPart(text="Reading."), _call("s1", "read_file", path="app.py"), _call("s2", "edit_file", path="b.py")]),
        ToolResultMessage(tool_call_id="s1", tool_name="read_file", content="x = 1"),
        ToolResultMessage(
            tool_call_id="s2",
            tool_name="edit_file",
            content="Edited.",
            is_error=True,
            diffs=[FileDiff(path=str(project / "b.py"), old_text=None, new_text="b = 1\n")],
        ),
        AssistantMessage(parts=[TextPart(text="  app.py sets x to 1. " + ODD + "  ")]),
    ]


async def _store(home: Path, project: Path) -> None:
    async with SessionStore.open(home / "state.db") as store:
        await store.create_session(cwd=str(project), surface="acp", model="openai:scripted", title="varied", session_id=SESSION_ID)
        for message in _messages(project):
            await store.append_message(SESSION_ID, message)
        child = await store.create_session(
            cwd=str(project), surface="acp", parent_id=SESSION_ID, parent_call_id="d1", meta={"subagent": {"number": 1}}
        )
        for message in _subagent(project):
            await store.append_message(child.id, message)


def _replayed_lines(home: Path, project: Path) -> list[bytes]:
    """The session/update lines session/load writes, byte for byte (the commands it offers aside)."""
    env = agent_env(home, "http://127.0.0.1:9/v1")
    proc = subprocess.Popen([hermes_acp()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin and proc.stdout
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/load", "params": {"cwd": str(project), "sessionId": SESSION_ID, "mcpServers": []}},
    ]
    try:
        proc.stdin.write(b"".join(json.dumps(r).encode() + b"\n" for r in requests))
        proc.stdin.flush()
        lines: list[bytes] = []
        while True:
            line = proc.stdout.readline()
            message = json.loads(line)
            if message.get("id") == 2:
                assert "result" in message, message
                return lines
            if message.get("method") == "session/update" and message["params"]["update"]["sessionUpdate"] != "available_commands_update":
                lines.append(line)
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


def test_a_varied_session_replays_byte_for_byte_as_before(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    asyncio.run(_store(hermes_home, project))
    place = json.dumps(str(tmp_path))[1:-1].encode()
    got = b"".join(line.replace(place, b"<tmp>") for line in _replayed_lines(hermes_home, project))
    if os.environ.get("HERMES_WRITE_REPLAY_BYTES"):
        EXPECTED.write_bytes(got)
    assert got.decode() == EXPECTED.read_text(encoding="utf-8")
