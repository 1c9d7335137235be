"""session/load replays a stored conversation page by page: every update as the ACP SDK would
send it, in order, however long the session — against the real process over its stdio."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess

import pytest
from acp.schema import SessionNotification
from acp.utils import serialize_params

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
from hermes_acp.replay import FIRST_PAGE, PAGE, Replay, send_replay
from hermes_acp.wire import _with_null_old_text
from tests.acp_harness import agent_env, hermes_acp


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return root


def _load(home, project, session_id: str) -> list[dict]:
    """The session/update params the server sends for session/load, as they come on the wire."""
    env = agent_env(home, "http://127.0.0.1:9/v1")
    proc = subprocess.Popen([hermes_acp()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, text=True)
    assert proc.stdin and proc.stdout

    def send(message: dict) -> None:
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", **message}) + "\n")
        proc.stdin.flush()

    try:
        send({"id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}})
        send({"id": 2, "method": "session/load", "params": {"cwd": str(project), "sessionId": session_id, "mcpServers": []}})
        updates = []
        while True:
            message = json.loads(proc.stdout.readline())
            if message.get("id") == 2:
                assert "result" in message, message
                return updates
            if message.get("method") == "session/update" and message["params"]["update"]["sessionUpdate"] != "available_commands_update":
                updates.append(message["params"])
    finally:
        proc.stdin.close()
        proc.wait(timeout=30)


async def _store_session(home, project, messages) -> str:
    async with SessionStore.open(home / "state.db") as store:
        record = await store.create_session(cwd=str(project), surface="acp", model="openai:scripted", title="stored")
        for message in messages:
            await store.append_message(record.id, message)
        return record.id


def _call(call_id: str, name: str, **arguments) -> ToolCallPart:
    return ToolCallPart(id=call_id, name=name, arguments=arguments)


def test_each_replayed_update_is_what_the_sdk_sends_for_it(hermes_home, project):
    """Updates are made without the SDK's models: each must be exactly what the SDK's model of
    it serialises to (aliases, no empty fields, oldText null for a new file)."""
    path = str(project / "app.py")
    plan = {"entries": [{"content": "Edit app.py", "status": "in_progress"}, {"content": "Test", "priority": "high"}]}
    messages = [
        UserMessage(parts=[TextPart(text="look at this"), ImagePart(media_type="image/png", data="aGVsbG8=")]),
        AssistantMessage(
            parts=[
                ThinkingPart(text="Plan first."),
                ThinkingPart(text="hidden", redacted=True),
                TextPart(text="On it."),
                _call("p1", "update_plan", **plan),
                _call("e1", "edit_file", path="app.py", old_string="x = 1", new_string="x = 2"),
                _call("w1", "write_file", path="new.py", content="y = 1\n"),
                _call("u1", "no_such_tool", anything=[1, None, "two"]),
            ]
        ),
        ToolResultMessage(tool_call_id="p1", tool_name="update_plan", content="Plan updated."),
        ToolResultMessage(
            tool_call_id="e1", tool_name="edit_file", content="Edited.", diffs=[FileDiff(path=path, old_text="x = 1\n", new_text="x = 2\n")]
        ),
        ToolResultMessage(
            tool_call_id="w1",
            tool_name="write_file",
            content="Wrote.",
            diffs=[FileDiff(path=str(project / "new.py"), old_text=None, new_text="y = 1\n")],
        ),
        ToolResultMessage(tool_call_id="u1", tool_name="no_such_tool", content="Unknown tool 'no_such_tool'.", is_error=True),
        AssistantMessage(parts=[_call("r1", "read_file", path="app.py")]),  # a crash: no result
        UserMessage.of("[Background command `sleep 1` (job 1) ended with exit code 0; use command_output(job=1) for its output.]"),
        SummaryMessage(text="all of that"),
        AssistantMessage(parts=[TextPart(text="Done.")]),
    ]
    sid = asyncio.run(_store_session(hermes_home, project, messages))
    updates = _load(hermes_home, project, sid)
    for params in updates:
        canonical = _with_null_old_text(serialize_params(SessionNotification.model_validate(params)))
        assert json.dumps(params) == json.dumps(canonical), params
    kinds = [(p["update"]["sessionUpdate"], p["update"].get("toolCallId")) for p in updates]
    assert kinds == [
        ("user_message_chunk", None),
        ("user_message_chunk", None),
        ("agent_thought_chunk", None),
        ("agent_message_chunk", None),
        ("tool_call", "p1"),
        ("plan", None),
        ("tool_call", "e1"),
        ("tool_call", "w1"),
        ("tool_call", "u1"),
        ("tool_call_update", "p1"),
        ("tool_call_update", "e1"),
        ("tool_call_update", "w1"),
        ("tool_call_update", "u1"),
        ("tool_call", "r1"),
        ("tool_call_update", "r1"),
        ("agent_message_chunk", None),
        ("agent_message_chunk", None),
        ("agent_message_chunk", None),
    ]
    by_call = {p["update"].get("toolCallId"): p["update"] for p in updates if p["update"]["sessionUpdate"] == "tool_call_update"}
    assert by_call["w1"]["content"] == [{"path": str(project / "new.py"), "newText": "y = 1\n", "type": "diff", "oldText": None}]
    assert by_call["u1"]["status"] == "failed" and by_call["r1"]["status"] == "failed"
    assert by_call["r1"]["rawOutput"] == {"output": "Interrupted before a result."}
    started = {p["update"]["toolCallId"]: p["update"] for p in updates if p["update"]["sessionUpdate"] == "tool_call"}
    assert started["e1"]["locations"] == [{"path": path}] and started["e1"]["kind"] == "edit"
    assert started["u1"]["title"] == "no_such_tool" and started["u1"]["kind"] == "other"
    assert "Background command" in updates[15]["update"]["content"]["text"]


def test_a_long_session_replays_completely_and_in_order(hermes_home, project):
    """Several pages of the store, a page ending between a tool call and its result."""
    exchanges = (PAGE * 5) // 4
    messages = [UserMessage.of("before the first exchange")]  # shifts the exchanges across page ends
    for i in range(exchanges):
        messages += [
            UserMessage.of(f"Step {i}"),
            AssistantMessage(parts=[TextPart(text=f"Reading {i}."), _call(f"c{i}", "read_file", path=f"f{i}.txt")]),
            ToolResultMessage(tool_call_id=f"c{i}", tool_name="read_file", content=f"content {i}"),
            AssistantMessage(parts=[TextPart(text=f"Done {i}.")]),
        ]
    assert len(messages) > 2 * PAGE
    sid = asyncio.run(_store_session(hermes_home, project, messages))
    updates = [p["update"] for p in _load(hermes_home, project, sid)]
    assert len(updates) == 1 + 5 * exchanges
    users = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "user_message_chunk"]
    assert users == ["before the first exchange", *(f"Step {i}" for i in range(exchanges))]
    expected = []
    for i in range(exchanges):
        expected += [
            ("user_message_chunk", f"Step {i}"),
            ("agent_message_chunk", f"Reading {i}."),
            ("tool_call", f"c{i}"),
            ("tool_call_update", f"c{i}"),
            ("agent_message_chunk", f"Done {i}."),
        ]
    shown = [(u["sessionUpdate"], u.get("toolCallId") or u["content"]["text"]) for u in updates[1:]]
    assert shown == expected
    assert all(u["status"] == "completed" for u in updates if u["sessionUpdate"] == "tool_call_update")


def test_large_messages_make_shorter_pages_and_replay_the_same(hermes_home, project):
    """A page holds about ``page_chars`` of stored JSON: after large messages the next page asks
    for fewer, and what is sent is the same, in the same order, as with pages of any size."""
    from toolsets import toolset

    messages = [UserMessage.of(f"{i} " + "x" * (3000 if i % 3 else 10)) for i in range(300)]
    sid = asyncio.run(_store_session(hermes_home, project, messages))
    tools = {t.name: t for t in toolset("editor")}

    async def replay(page: int, page_chars: int) -> list[list[str]]:
        sent: list[list[str]] = []

        async def send(updates: list[str]) -> None:
            sent.append(updates)

        async with SessionStore.open(hermes_home / "state.db") as store:
            count = await send_replay(store, sid, Replay(tools, project), send, page=page, page_chars=page_chars)
        assert count == sum(len(batch) for batch in sent)
        return sent

    whole = [update for batch in asyncio.run(replay(1000, 10**9)) for update in batch]
    paged = asyncio.run(replay(100, 10_000))
    assert [update for batch in paged for update in batch] == whole
    assert [json.loads(u)["content"]["text"].split()[0] for u in whole] == [str(i) for i in range(300)]
    assert len(paged[0]) == FIRST_PAGE  # no sizes known yet
    assert max(len(batch) for batch in paged[1:]) <= 6 and len(paged) > 40


def test_rows_without_the_fields_that_have_defaults_replay_as_full_ones(hermes_home, project):
    """A stored message read as JSON gives what its model would: fields left out take their
    defaults (rows written before a field existed)."""
    full = [
        UserMessage.of("hello"),
        AssistantMessage(parts=[ThinkingPart(text="hmm"), TextPart(text="Hi."), _call("c1", "read_file", path="a.py")]),
        ToolResultMessage(tool_call_id="c1", tool_name="read_file", content="x = 1"),
        AssistantMessage(parts=[_call("c2", "no_such_tool")]),
        ToolResultMessage(tool_call_id="c2", tool_name="no_such_tool", content="Unknown tool.", is_error=True),
    ]
    bare = [
        {"kind": "user", "parts": [{"kind": "text", "text": "hello"}]},
        {
            "kind": "assistant",
            "parts": [{"kind": "thinking", "text": "hmm"}, {"kind": "text", "text": "Hi."}, full[1].parts[2].model_dump()],
        },
        {"kind": "tool_result", "tool_call_id": "c1", "tool_name": "read_file", "content": "x = 1"},
        {"kind": "assistant", "parts": [{"kind": "tool_call", "id": "c2", "name": "no_such_tool"}]},
        {"kind": "tool_result", "tool_call_id": "c2", "tool_name": "no_such_tool", "content": "Unknown tool.", "is_error": True},
    ]
    expected = _load(hermes_home, project, asyncio.run(_store_session(hermes_home, project, full)))
    sid = asyncio.run(_store_session(hermes_home, project, full))
    with sqlite3.connect(hermes_home / "state.db") as db:
        for seq, row in enumerate(bare, 1):
            db.execute("UPDATE messages SET content = ? WHERE session_id = ? AND seq = ?", (json.dumps(row), sid, seq))
    got = _load(hermes_home, project, sid)
    assert [json.dumps(p["update"]) for p in got] == [json.dumps(p["update"]) for p in expected]
    assert len(got) == 7
