"""Compression's budgets and cuts: the arithmetic behind "no request passes the window"."""

from __future__ import annotations

import json
import re

import pytest

from core.agent.loop import Agent
from core.config import load_config
from core.events import ToolFinished
from core.host.local import LocalHost
from core.learning.compression import Budget, Compression, cut_output, estimate_tokens, request_view, shown_history
from core.learning_config import LearningSettings
from core.messages import AssistantMessage, ToolCallPart, ToolResultMessage, UserMessage, dump_message
from core.models import build_model
from core.policy.approvals import ApprovalBroker
from core.store import SessionStore
from tests.fakes.openai_server import ScriptedOpenAIServer
from toolsets import toolset

READ_BACK = re.compile(r'session_search\(session_id="s1", seq=(\d+), offset=(\d+), limit=(\d+)\)')


@pytest.mark.parametrize("window", [8_000, 16_000, 32_768, 128_000, 200_000])
def test_a_budget_leaves_room_for_the_reply_and_five_steps_between_compressions(window):
    fixed = 4_000  # the system prompt and two dozen tool schemas
    budget = Budget.of(LearningSettings(), window, fixed)
    # The input's limit leaves a tenth of the fixed part for the wire's own JSON, and the reply the rest.
    assert budget.limit + budget.fixed // 10 == int(0.8 * window)
    assert budget.limit + budget.fixed // 10 + budget.reply_tokens(1_000_000) == window
    assert budget.reply_tokens(8192) == min(8192, window - int(0.8 * window))
    assert budget.fixed < budget.target < budget.limit
    per_step = budget.output_chars / 3.5 + 120
    assert budget.output_chars == 600 or budget.target + 5 * per_step <= budget.limit + 1


def test_larger_windows_cut_less_and_an_unknown_window_cuts_nothing():
    settings = LearningSettings()
    sizes = [Budget.of(settings, w, 4_000).output_chars for w in (8_000, 32_000, 128_000)]
    assert sizes == sorted(sizes) and sizes[1] > 7 * 1024  # a 7 KB file whole in a 32k window
    assert Budget.of(settings, 0, 4_000).output_chars == 0 and Budget.of(settings, 0, 4_000).reply_tokens(8192) == 8192


def test_a_cut_output_keeps_head_and_tail_and_its_marker_names_the_part_left_out():
    content = "".join(f"line {n}: {'x' * 40}\n" for n in range(300))
    shown = cut_output(content, 1_000, session_id="s1", index=6, chunk=500)
    assert len(shown) < 1_400
    head, marker, tail = re.split(r"(\n\[… tool output cut[^\n]*\]\n)", shown)
    assert content.startswith(head) and content.endswith(tail) and head.endswith("\n")
    seq, offset, limit = (int(g) for g in READ_BACK.search(marker).groups())
    assert seq == 7 and offset == len(head) and limit == 500  # the store's seq is the history index + 1
    assert f"characters {offset + 1}-{len(content) - len(tail)} of {len(content)}" in marker


def test_requests_show_a_message_the_same_way_from_the_step_it_arrives_on():
    history = [UserMessage.of("read")]
    for n in range(3):
        history.append(AssistantMessage(parts=[ToolCallPart(id=f"c{n}", name="read_file", arguments={"path": f"{n}.txt"})]))
        history.append(ToolResultMessage(tool_call_id=f"c{n}", tool_name="read_file", content=f"{n}\n" * 2_000))
    state = Compression(prune_before=3, clip_before=5, clip_chars=500)
    first = request_view(history[:5], state, session_id="s1", output_chars=900)
    second = request_view(history, state, session_id="s1", output_chars=900)
    assert second[:5] == first and all(a is b for a, b in zip(first, second))
    assert "pruned" in second[2].content and "cut to save context" in second[4].content and len(second[6].content) < 1_300
    assert Compression.from_meta(state.to_meta()) == state
    assert Compression.from_meta({"tail_from": 2, "prune_before": 2, "summary": "s"}) == Compression(2, 2, "s")


@pytest.fixture
async def store(hermes_home):
    store = await SessionStore.open(hermes_home / "state.db")
    yield store
    await store.close()


async def test_the_view_kept_step_by_step_is_the_one_built_afresh(store, tmp_path):
    for n in range(8):
        (tmp_path / f"f{n}.py").write_text(f"value_{n} = {n}\n" * 400)
    steps = iter(range(100))

    def script(body: dict) -> dict:
        if "Summarise the conversation above" in json.dumps(body["messages"][-1]):
            return {"text": "SUMMARY: files read."}
        n = next(steps)
        return {"tool_calls": [{"id": f"r{n}", "name": "read_file", "arguments": {"path": f"f{n}.py"}}]} if n < 8 else {"text": "done"}

    with ScriptedOpenAIServer(script) as server:
        env = {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test-123456", "HERMES_MODEL": "openai:scripted"}
        agent = Agent(
            model=build_model(load_config(env=env)), tools=toolset("editor"), store=store, broker=ApprovalBroker(store), surface="acp"
        )
        session = await agent.new_session(tmp_path, LocalHost())
        session.context_window = 8_000
        views = []
        async for event in agent.run_turn(session, UserMessage.of("read them all")):
            if isinstance(event, ToolFinished):  # the view kept so far, extended step by step
                views.append((len(session.history), session.compression))
        await agent.model.aclose()
    assert session.compression is not None and len(views) == 8
    specs = [t.spec() for t in agent.tools.values()]
    budget = Budget.of(agent.learning, 8_000, estimate_tokens(session.system, specs, []))
    afresh = request_view(session.history, session.compression, session_id=session.id, output_chars=budget.output_chars)
    assert [dump_message(m) for m in shown_history(session, specs, agent.learning)] == [dump_message(m) for m in afresh]
