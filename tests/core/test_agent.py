"""The agent loop in-process: a real model adapter against the scripted server, a real store."""

from __future__ import annotations

import asyncio

import pytest

from core.agent.loop import Agent
from core.config import load_config
from core.events import ToolFinished, ToolStarted, TurnEnded, UsageUpdated
from core.host.local import LocalHost
from core.messages import AssistantMessage, ToolCallPart, ToolResultMessage, UserMessage, repair_history
from core.models import build_model
from core.policy.approvals import ApprovalBroker
from core.store import SessionStore
from tests.fakes.openai_server import ScriptedOpenAIServer
from toolsets import toolset


@pytest.fixture
async def store(hermes_home):
    store = await SessionStore.open(hermes_home / "state.db")
    yield store
    await store.close()


def _agent(server, store, **kw) -> Agent:
    config = load_config(env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test-123456", "HERMES_MODEL": "openai:scripted"})
    config.retry.base_delay = 0.0
    return Agent(model=build_model(config), tools=toolset("editor"), store=store, broker=ApprovalBroker(store), surface="acp", **kw)


async def _collect(agent, session, text):
    return [e async for e in agent.run_turn(session, UserMessage.of(text))]


def test_repair_history_answers_dangling_calls_and_drops_orphans():
    call = ToolCallPart(id="c1", name="read_file", arguments={"path": "x"})
    history = [
        UserMessage.of("hi"),
        AssistantMessage(parts=[call]),
        UserMessage.of("again"),  # a crash left c1 unanswered
        ToolResultMessage(tool_call_id="zz", tool_name="read_file", content="orphan"),
        AssistantMessage(parts=[], interrupted=True),
    ]
    repaired = repair_history(history)
    assert [m.kind for m in repaired] == ["user", "assistant", "tool_result", "user"]
    assert repaired[2].tool_call_id == "c1" and repaired[2].is_error


async def test_parallel_reads_then_answer(store, tmp_path):
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "b.txt").write_text("beta\n")
    script = [
        {
            "tool_calls": [
                {"id": "r1", "name": "read_file", "arguments": {"path": "a.txt"}},
                {"id": "r2", "name": "read_file", "arguments": {"path": "b.txt"}},
            ],
            "usage": {"input_tokens": 100, "output_tokens": 10},
        },
        {"text": "alpha and beta", "usage": {"input_tokens": 150, "output_tokens": 5}},
    ]
    with ScriptedOpenAIServer(script) as server:
        agent = _agent(server, store)
        session = await agent.new_session(tmp_path, LocalHost())
        events = await _collect(agent, session, "read both")
    finished = {e.call_id: e for e in events if isinstance(e, ToolFinished)}
    assert set(finished) == {"r1", "r2"} and all(e.status == "completed" for e in finished.values())
    assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "end_turn"
    usage = [e for e in events if isinstance(e, UsageUpdated)]
    assert usage[-1].total.input_tokens == 250 and usage[-1].total.output_tokens == 15
    stored = [m.message for m in await store.messages(session.id)]
    assert [m.kind for m in stored] == ["user", "assistant", "tool_result", "tool_result", "assistant"]
    record = await store.get_session(session.id)
    assert record.input_tokens == 250
    # The second request carried both results.
    second = server.requests[1]
    body = second.get("body", second)
    contents = [m["content"] for m in body["messages"] if m["role"] == "tool"]
    assert any("alpha" in c for c in contents) and any("beta" in c for c in contents)


async def test_bad_tool_call_fails_and_turn_goes_on(store, tmp_path):
    script = [
        {"tool_calls": [{"id": "x1", "name": "read_file", "arguments": "{not json"}]},
        {"tool_calls": [{"id": "x2", "name": "no_such_tool", "arguments": {}}]},
        {"text": "recovered"},
    ]
    with ScriptedOpenAIServer(script) as server:
        agent = _agent(server, store)
        session = await agent.new_session(tmp_path, LocalHost())
        events = await _collect(agent, session, "go")
    statuses = [(e.call_id, e.status) for e in events if isinstance(e, ToolFinished)]
    assert statuses == [("x1", "failed"), ("x2", "failed")]
    assert events[-1].stop_reason == "end_turn"


async def test_cancel_keeps_partial_text_and_closes_tool_calls(store, tmp_path):
    script = [{"text": "partial " * 200, "chunk_size": 8, "delay": 0.02}, {"text": "next turn works"}]
    with ScriptedOpenAIServer(script) as server:
        agent = _agent(server, store)
        session = await agent.new_session(tmp_path, LocalHost())
        events = []

        async def run():
            async for event in agent.run_turn(session, UserMessage.of("talk")):
                events.append(event)

        task = asyncio.create_task(run())
        while len(events) < 3:
            await asyncio.sleep(0.01)
        agent.cancel(session)
        await asyncio.wait_for(task, 5)
        assert events[-1] == TurnEnded("cancelled")
        stored = [m.message for m in await store.messages(session.id)]
        assert stored[-1].kind == "assistant" and stored[-1].interrupted and stored[-1].text.startswith("partial")
        follow = await _collect(agent, session, "again")
    assert follow[-1].stop_reason == "end_turn"


async def test_cancel_during_tool_records_a_result(store, tmp_path):
    script = [{"tool_calls": [{"id": "s1", "name": "run_command", "arguments": {"command": "sleep 20"}}]}]
    with ScriptedOpenAIServer(script) as server:
        agent = _agent(server, store)
        session = await agent.new_session(tmp_path, LocalHost(), mode="auto")
        events = []

        async def run():
            async for event in agent.run_turn(session, UserMessage.of("sleep")):
                events.append(event)

        task = asyncio.create_task(run())
        while not any(isinstance(e, ToolStarted) for e in events):
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.2)
        agent.cancel(session)
        await asyncio.wait_for(task, 5)
    assert [e for e in events if isinstance(e, ToolFinished)][0].status == "failed"
    stored = [m.message for m in await store.messages(session.id)]
    assert stored[-1].kind == "tool_result" and stored[-1].tool_call_id == "s1" and "Cancelled" in stored[-1].content


async def test_length_and_refusal_map_to_stop_reasons(store, tmp_path):
    script = [{"text": "cut", "finish_reason": "length"}]
    with ScriptedOpenAIServer(script) as server:
        agent = _agent(server, store)
        session = await agent.new_session(tmp_path, LocalHost())
        events = await _collect(agent, session, "long")
    assert events[-1].stop_reason == "max_tokens"
