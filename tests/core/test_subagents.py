"""Subagents in-process: the real loop, tools and store, a scripted in-process model answering in order."""

from __future__ import annotations

import pytest

from core.agent.loop import Agent
from core.agent.subagents import SUBAGENT_NOTE, Subagents
from core.config import DelegateConfig
from core.events import Decision, PermissionNeeded, ToolFinished, ToolStarted
from core.host.local import LocalHost
from core.messages import ToolResultMessage, UserMessage
from core.models.base import ErrorKind, ModelError
from core.policy.approvals import ApprovalBroker
from core.store import SessionStore
from tests.fakes.scripted_model import Reply, ScriptedModel, call
from toolsets import toolset


@pytest.fixture
async def store(hermes_home):
    store = await SessionStore.open(hermes_home / "state.db")
    yield store
    await store.close()


def _agent(model: ScriptedModel, store: SessionStore, **settings) -> Agent:
    agent = Agent(model=model, tools=toolset("editor"), store=store, broker=ApprovalBroker(store), surface="acp")
    Subagents(agent, DelegateConfig(**settings))
    return agent


async def _turn(agent: Agent, cwd, text: str = "go"):
    """One turn of a new session in ``cwd``; every question is allowed once."""
    session = await agent.new_session(cwd, LocalHost())
    events = []
    async for event in agent.run_turn(session, UserMessage.of(text)):
        events.append(event)
        if isinstance(event, PermissionNeeded):
            await agent.broker.answer(event.request.id, Decision.ALLOW_ONCE, by="test")
    return session, events


def _outside(tmp_path, text: str):
    """A file outside the project (reading it asks), and the project."""
    outside = tmp_path / "outside.txt"
    outside.write_text(text)
    project = tmp_path / "project"
    project.mkdir()
    return outside, project


def _result(session, call_id: str = "d1") -> ToolResultMessage:
    return next(m for m in session.history if isinstance(m, ToolResultMessage) and m.tool_call_id == call_id)


async def test_more_tasks_than_allowed_is_refused_before_any_runs(store, tmp_path):
    tasks = [{"goal": f"task {n}"} for n in range(3)]
    model = ScriptedModel([Reply(tool_calls=[call("d1", "delegate", tasks=tasks)]), Reply("ok")])
    session, _ = await _turn(_agent(model, store, max_tasks=2), tmp_path)
    result = _result(session)
    assert result.is_error and "at most 2 ([delegate] max_tasks)" in result.content
    assert await store.subagent_sessions(session.id) == []
    assert len(model.requests) == 2


async def test_a_long_report_is_cut_with_a_marker_naming_the_session(store, tmp_path):
    long_report = "R" * 1000
    model = ScriptedModel([Reply(tool_calls=[call("d1", "delegate", tasks=[{"goal": "write a lot"}])]), Reply(long_report), Reply("ok")])
    session, events = await _turn(_agent(model, store, report_chars=200), tmp_path)
    (child,) = await store.subagent_sessions(session.id)
    content = _result(session).content
    assert "R" * 200 in content and "R" * 201 not in content
    assert f"[report cut: 800 more characters; the subagent's whole conversation is kept in session {child.id}]" in content
    # The editor's view of the subagent is not cut by the model's budget.
    finished = next(e for e in events if isinstance(e, ToolFinished) and e.call_id == "d1/1")
    assert long_report in finished.content[0].text


async def test_a_subagent_stops_at_its_step_budget_and_says_so(store, tmp_path):
    looping = [Reply(tool_calls=[call(f"l{n}", "list_dir", path=".")]) for n in range(2)]
    model = ScriptedModel([Reply(tool_calls=[call("d1", "delegate", tasks=[{"goal": "loop"}])]), *looping, Reply("ok")])
    session, _ = await _turn(_agent(model, store, max_steps=2), tmp_path)
    content = _result(session).content
    assert "## Subagent 1 (incomplete): loop" in content
    assert "[Stopped after 2 model requests ([delegate] max_steps) before it finished.]" in content
    assert len(model.requests) == 4  # the parent's two, the subagent's two


async def test_a_failed_subagent_is_reported_and_the_turn_goes_on(store, tmp_path):
    broken = Reply(error=ModelError(ErrorKind.BAD_REQUEST, "the subagent's request was refused"))
    model = ScriptedModel([Reply(tool_calls=[call("d1", "delegate", tasks=[{"goal": "fail"}])]), broken, Reply("carried on")])
    session, events = await _turn(_agent(model, store), tmp_path)
    content = _result(session).content
    assert "## Subagent 1 (failed): fail" in content and "refused" in content
    assert next(e for e in events if isinstance(e, ToolFinished) and e.call_id == "d1/1").status == "failed"
    assert session.history[-1].text == "carried on"


async def test_nesting_needs_max_depth(store, tmp_path):
    nested = Reply(tool_calls=[call("d2", "delegate", tasks=[{"goal": "inner"}])])
    script = [Reply(tool_calls=[call("d1", "delegate", tasks=[{"goal": "outer"}])]), nested, Reply("inner report")]
    model = ScriptedModel([*script, Reply("outer report"), Reply("ok")])
    session, _ = await _turn(_agent(model, store, max_depth=2), tmp_path)
    assert "delegate" in {t.name for t in model.requests[1].tools}
    assert "delegate" not in {t.name for t in model.requests[2].tools}  # the grandchild is at the limit
    (child,) = await store.subagent_sessions(session.id)
    (grandchild,) = await store.subagent_sessions(child.id)
    assert grandchild.parent_call_id == "d2"
    assert "outer report" in _result(session).content

    # By default a subagent has no delegate at all.
    model = ScriptedModel([Reply(tool_calls=[call("d1", "delegate", tasks=[{"goal": "outer"}])]), Reply("done"), Reply("ok")])
    await _turn(_agent(model, store), tmp_path)
    assert "delegate" not in {t.name for t in model.requests[1].tools}


async def test_a_subagents_read_that_asks_is_shown_as_its_own_call_before_the_question(store, tmp_path):
    outside, project = _outside(tmp_path, "outside the project\n")
    script = [
        Reply(tool_calls=[call("d1", "delegate", tasks=[{"goal": "read outside"}])]),
        Reply(tool_calls=[call("r1", "read_file", path=str(outside))]),
    ]
    model = ScriptedModel([*script, Reply("it says: outside"), Reply("ok")])
    session, events = await _turn(_agent(model, store), project)
    (ask,) = [e for e in events if isinstance(e, PermissionNeeded)]
    assert ask.request.tool_call_id == "d1/1/r1" and ask.request.title.startswith("Subagent 1: Read ")
    assert ask.request.session_id == session.id  # the parent's question, wherever it is answered
    shown = [i for i, e in enumerate(events) if isinstance(e, ToolStarted) and e.call_id == "d1/1/r1"]
    assert shown and shown[0] < events.index(ask)
    assert [e.status for e in events if isinstance(e, ToolFinished) and e.call_id == "d1/1/r1"] == ["completed"]
    assert "it says: outside" in _result(session).content


async def test_a_nested_subagents_question_names_its_call_as_the_editor_knows_it(store, tmp_path):
    outside, project = _outside(tmp_path, "far away\n")
    script = [
        Reply(tool_calls=[call("d1", "delegate", tasks=[{"goal": "outer"}])]),
        Reply(tool_calls=[call("d2", "delegate", tasks=[{"goal": "inner"}])]),
        Reply(tool_calls=[call("r1", "read_file", path=str(outside))]),
        Reply("inner read it"),
        Reply("outer done"),
        Reply("ok"),
    ]
    model = ScriptedModel(script)
    session, events = await _turn(_agent(model, store, max_depth=2), project)
    (ask,) = [e for e in events if isinstance(e, PermissionNeeded)]
    assert ask.request.tool_call_id == "d1/1/d2/1/r1"
    assert ask.request.title.startswith("Subagent 1.1: Read "), ask.request.title  # its own name, not its parent's stacked on it
    shown = [i for i, e in enumerate(events) if isinstance(e, ToolStarted) and e.call_id == "d1/1/d2/1/r1"]
    assert shown and shown[0] < events.index(ask)
    titles = {e.call_id: e.title for e in events if isinstance(e, ToolStarted)}
    assert titles["d1/1"] == "Subagent 1: outer" and titles["d1/1/d2/1"] == "Subagent 1.1: inner"
    assert titles["d1/1/d2"].startswith("Subagent 1: ") and titles["d1/1/d2/1/r1"].startswith("Subagent 1.1: Read ")
    assert {"d1/1", "d1/1/d2", "d1/1/d2/1"} <= {e.call_id for e in events if isinstance(e, ToolStarted)}
    assert all(model.requests[n].system.count(SUBAGENT_NOTE) == 1 for n in (1, 2))
    assert "outer done" in _result(session).content


async def test_deleting_a_session_deletes_its_subagents_sessions_not_its_forks(store, tmp_path):
    from core.store.session_admin import delete_sessions

    parent = await store.create_session(cwd=tmp_path, surface="acp")
    child = await store.create_session(cwd=tmp_path, surface="acp", parent_id=parent.id, parent_call_id="d1")
    grandchild = await store.create_session(cwd=tmp_path, surface="acp", parent_id=child.id, parent_call_id="d2")
    fork = await store.create_session(cwd=tmp_path, surface="acp", parent_id=parent.id)
    await store.append_message(grandchild.id, UserMessage.of("the quokka findings"))

    assert await delete_sessions(store, [parent.id]) == 1

    assert [await store.get_session(s.id) for s in (parent, child, grandchild)] == [None, None, None]
    assert await store.search("quokka") == []
    kept = await store.get_session(fork.id)
    assert kept is not None and kept.parent_id is None
