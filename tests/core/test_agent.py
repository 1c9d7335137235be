"""The agent loop in-process: a scripted in-process model, the real tools and a real store."""

from __future__ import annotations

import asyncio

import pytest

from core.agent.loop import Agent
from core.events import Notice, TitleChanged, ToolFinished, ToolStarted, TurnEnded, UsageUpdated
from core.host.local import LocalHost
from core.messages import AssistantMessage, ToolCallPart, ToolResultMessage, Usage, UserMessage, repair_history
from core.models.base import ErrorKind, ModelError
from core.policy.approvals import ApprovalBroker, ApprovalPolicy
from core.store import SessionStore
from core.tools.context import ToolContext
from core.tools.dispatch import prepare
from tests.acp_harness import until
from tests.fakes.scripted_model import Reply, ScriptedModel, call
from toolsets import toolset


@pytest.fixture
async def store(hermes_home):
    store = await SessionStore.open(hermes_home / "state.db")
    yield store
    await store.close()


def _agent(model: ScriptedModel, store: SessionStore, **kw) -> Agent:
    return Agent(model=model, tools=toolset("editor"), store=store, broker=ApprovalBroker(store), surface="acp", **kw)


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
    model = ScriptedModel(
        [
            Reply(tool_calls=[call("r1", "read_file", path="a.txt"), call("r2", "read_file", path="b.txt")], usage=Usage(100, 10)),
            Reply("alpha and beta", usage=Usage(150, 5)),
        ]
    )
    agent = _agent(model, store)
    session = await agent.new_session(tmp_path, LocalHost())
    events = await _collect(agent, session, "read both")
    started = [e for e in events if isinstance(e, ToolStarted)]
    assert [e.title for e in started] == ["Read a.txt", "Read b.txt"]
    assert started[0].locations[0].path == str((tmp_path / "a.txt").resolve())
    finished = {e.call_id: e for e in events if isinstance(e, ToolFinished)}
    assert set(finished) == {"r1", "r2"} and all(e.status == "completed" for e in finished.values())
    assert isinstance(events[-1], TurnEnded) and events[-1].stop_reason == "end_turn"
    assert TitleChanged("read both") in events
    usage = [e for e in events if isinstance(e, UsageUpdated)]
    assert usage[-1].total.input_tokens == 250 and usage[-1].total.output_tokens == 15
    stored = [m.message for m in await store.messages(session.id)]
    assert [m.kind for m in stored] == ["user", "assistant", "tool_result", "tool_result", "assistant"]
    record = await store.get_session(session.id)
    assert record.input_tokens == 250
    # The second request carried both results.
    results = [m.content for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert any("alpha" in c for c in results) and any("beta" in c for c in results)


async def test_bad_tool_call_fails_and_turn_goes_on(store, tmp_path):
    model = ScriptedModel(
        [
            Reply(tool_calls=[ToolCallPart(id="x1", name="read_file", invalid_arguments="{not json")]),
            Reply(tool_calls=[call("x2", "no_such_tool")]),
            Reply(tool_calls=[call("x3", "read_file", nope=1)]),
            Reply("recovered"),
        ]
    )
    agent = _agent(model, store)
    session = await agent.new_session(tmp_path, LocalHost())
    events = await _collect(agent, session, "go")
    statuses = [(e.call_id, e.status) for e in events if isinstance(e, ToolFinished)]
    assert statuses == [("x1", "failed"), ("x2", "failed"), ("x3", "failed")]
    results = {m.tool_call_id: m.content for m in session.history if isinstance(m, ToolResultMessage)}
    assert "not a valid JSON object" in results["x1"]
    assert results["x2"].startswith("Unknown tool 'no_such_tool'")
    assert results["x3"].startswith("Invalid arguments for read_file")
    assert [e.title for e in events if isinstance(e, ToolStarted)] == ["read_file", "no_such_tool", "read_file"]
    assert events[-1].stop_reason == "end_turn"


async def test_cancel_keeps_partial_text_and_closes_tool_calls(store, tmp_path):
    model = ScriptedModel([Reply("partial " * 200, chunk_size=8, hold=True), Reply("next turn works")])
    agent = _agent(model, store)
    session = await agent.new_session(tmp_path, LocalHost())
    events = []

    async def run():
        async for event in agent.run_turn(session, UserMessage.of("talk")):
            events.append(event)

    task = asyncio.create_task(run())
    await asyncio.wait_for(model.held.wait(), 5)
    agent.cancel(session)
    await asyncio.wait_for(task, 5)
    assert events[-1] == TurnEnded("cancelled")
    stored = [m.message for m in await store.messages(session.id)]
    assert stored[-1].kind == "assistant" and stored[-1].interrupted and stored[-1].text == "partial " * 200
    follow = await _collect(agent, session, "again")
    assert follow[-1].stop_reason == "end_turn"


async def test_cancel_during_tool_records_a_result(store, tmp_path):
    started = tmp_path / "started"
    model = ScriptedModel([Reply(tool_calls=[call("s1", "run_command", command=f"touch {started} && sleep 20")])])
    agent = _agent(model, store)
    session = await agent.new_session(tmp_path, LocalHost(), mode="auto")
    events = []

    async def run():
        async for event in agent.run_turn(session, UserMessage.of("sleep")):
            events.append(event)

    task = asyncio.create_task(run())
    await until(started.exists, what="the command to start")
    agent.cancel(session)
    await asyncio.wait_for(task, 5)
    assert [e for e in events if isinstance(e, ToolFinished)][0].status == "failed"
    stored = [m.message for m in await store.messages(session.id)]
    assert stored[-1].kind == "tool_result" and stored[-1].tool_call_id == "s1" and "Cancelled" in stored[-1].content


async def test_length_and_refusal_map_to_stop_reasons(store, tmp_path):
    model = ScriptedModel([Reply("cut", finish_reason="length"), Reply("no", finish_reason="refusal")])
    agent = _agent(model, store)
    session = await agent.new_session(tmp_path, LocalHost())
    assert (await _collect(agent, session, "long"))[-1] == TurnEnded("max_tokens")
    assert (await _collect(agent, session, "bad"))[-1] == TurnEnded("refusal")


async def test_step_limit_ends_the_turn_with_a_notice(store, tmp_path):
    (tmp_path / "a.txt").write_text("a\n")
    model = ScriptedModel([Reply(tool_calls=[call(f"r{i}", "read_file", path="a.txt")]) for i in range(3)])
    agent = _agent(model, store, max_steps=2)
    session = await agent.new_session(tmp_path, LocalHost())
    events = await _collect(agent, session, "loop")
    assert len(model.requests) == 2
    assert events[-2] == Notice("Stopped after 2 model requests in one turn (max_steps).", "warning")
    assert events[-1] == TurnEnded("max_turn_requests")


async def test_a_model_error_ends_the_turn_with_its_message(store, tmp_path):
    model = ScriptedModel([Reply(error=ModelError(ErrorKind.AUTH, "bad key"))])
    agent = _agent(model, store)
    session = await agent.new_session(tmp_path, LocalHost())
    events = await _collect(agent, session, "hi")
    text = ModelError(ErrorKind.AUTH, "bad key").user_message()
    assert events[-2:] == [Notice(text, "error"), TurnEnded("end_turn", error=text)]


async def test_a_call_is_prepared_once_with_its_title_and_paths(store, tmp_path):
    events = []

    async def emit(event):
        events.append(event)

    policy = ApprovalPolicy(mode="ask", roots=[tmp_path])
    ctx = ToolContext(
        session_id="s", cwd=tmp_path, roots=[tmp_path], host=LocalHost(), policy=policy, broker=ApprovalBroker(store), emit=emit
    )
    tools = {t.name: t for t in toolset("editor")}
    ready = prepare(tools, call("c", "move_file", source="a.txt", destination="sub/b.txt"), ctx)
    assert ready.error is None and ready.args is not None and not ready.read_only
    assert ready.title == "Move a.txt → sub/b.txt" and ready.kind == "move"
    assert ready.paths == [(tmp_path / "a.txt").resolve(), (tmp_path / "sub" / "b.txt").resolve()]
    invalid = prepare(tools, call("c", "move_file", source="a.txt"), ctx)
    assert invalid.args is None and invalid.error.startswith("Invalid arguments for move_file") and invalid.title == "move_file"
