"""The token estimate compression decides by: the same value as its plain formula, measured once per message."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from core.agent.loop import Agent
from core.host.local import LocalHost
from core.learning import compression
from core.learning.compression import estimate_tokens, message_sizes
from core.messages import AssistantMessage, ImagePart, TextPart, ToolCallPart, ToolResultMessage, UserMessage, dump_message
from core.models.base import ToolSpec
from core.policy.approvals import ApprovalBroker
from core.store import SessionStore
from tests.fakes.scripted_model import Reply, ScriptedModel, call
from toolsets import toolset


def plain_formula(system: str, tools: list, messages: list) -> int:
    """The estimate as first written: everything serialised on every call."""
    size = len(system) + len(json.dumps([getattr(t, "__dict__", str(t)) for t in tools], default=str))
    size += sum(len(dump_message(m)) for m in messages)
    return int(size / 3.5)


SPECS = [
    ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}),
    ToolSpec("run", "Run a command: 'quoted' and \"double\" ünïcode.", {"type": "object", "additionalProperties": False}),
]


def sample_history() -> list:
    return [
        UserMessage.of("fix the bug in app.py — it's ünïcode"),
        AssistantMessage(parts=[TextPart(text="Reading."), ToolCallPart(id="c1", name="read_file", arguments={"path": "app.py"})]),
        ToolResultMessage(tool_call_id="c1", tool_name="read_file", content="def f():\n    return 1\n" * 50),
        UserMessage(parts=[TextPart(text="and this"), ImagePart(media_type="image/png", data="aGVsbG8=")]),
        AssistantMessage(parts=[TextPart(text="Done.")], model="openai:scripted"),
    ]


@pytest.mark.parametrize("specs", [[], SPECS[:1], SPECS])
def test_the_estimate_equals_the_plain_formula_over_the_tool_specs_fields(specs):
    history = sample_history()
    # The plain formula meant to measure each spec's fields (its __dict__); a slots spec has none.
    as_fields = [SimpleNamespace(name=s.name, description=s.description, parameters=s.parameters) for s in specs]
    expected = plain_formula("You are a test.", as_fields, history)
    assert estimate_tokens("You are a test.", specs, history) == expected
    # Measured twice, from the cache the second time: the same value.
    assert estimate_tokens("You are a test.", specs, history) == expected


def test_the_tool_part_measures_the_schemas_not_a_repr():
    huge = ToolSpec("big", "x", {"type": "object", "description": "ü" * 3500})
    as_fields = SimpleNamespace(name="big", description="x", parameters=huge.parameters)
    # ensure_ascii JSON: each "ü" is six characters, as the wire sends it, not one as a repr shows it.
    assert estimate_tokens("", [huge], []) == plain_formula("", [as_fields], []) > 3500 * 6 / 3.5


def test_a_second_estimate_serialises_only_the_new_messages():
    history = sample_history()
    before = message_sizes.measured
    first = estimate_tokens("s", SPECS, history)
    assert message_sizes.measured - before == len(history)
    history.append(UserMessage.of("one more"))
    second = estimate_tokens("s", SPECS, history)
    assert message_sizes.measured - before == len(history)  # only the appended one was serialised
    assert second == plain_formula(
        "s", [SimpleNamespace(**{f: getattr(s, f) for f in ("name", "description", "parameters")}) for s in SPECS], history
    )
    assert second > first


@pytest.fixture
async def store(hermes_home):
    store = await SessionStore.open(hermes_home / "state.db")
    yield store
    await store.close()


async def test_each_step_of_a_turn_serialises_only_the_messages_it_adds(store, tmp_path):
    (tmp_path / "a.txt").write_text("a\n")
    (tmp_path / "b.txt").write_text("b\n")
    model = ScriptedModel(
        [
            Reply(tool_calls=[call("r1", "read_file", path="a.txt")]),
            Reply(tool_calls=[call("r2", "read_file", path="b.txt")]),
            Reply("done"),
        ]
    )
    agent = Agent(model=model, tools=toolset("editor"), store=store, broker=ApprovalBroker(store), surface="acp")
    agent.context_window = 1_000_000  # large: compression measures every step and never triggers
    session = await agent.new_session(tmp_path, LocalHost())
    before = message_sizes.measured
    [e async for e in agent.run_turn(session, UserMessage.of("read both"))]
    assert len(model.requests) == 3
    # Steps measured [U], [U A T], [U A T A T]: five messages once each, not 1 + 3 + 5.
    assert message_sizes.measured - before == 5
    assert len(session.history) == 6
    assert compression._spec_sizes  # the specs were measured once and kept


def test_a_tool_results_diffs_are_not_counted_requests_never_carry_them():
    from core.messages import FileDiff, ToolResultMessage

    big = "line\n" * 20_000
    plain = ToolResultMessage(tool_call_id="c1", tool_name="write_file", content="Created big.txt (20000 lines)")
    with_diff = plain.model_copy(update={"diffs": [FileDiff(path="/p/big.txt", old_text=None, new_text=big)]})
    assert estimate_tokens("", [], [with_diff]) == estimate_tokens("", [], [plain])
    assert estimate_tokens("", [], [with_diff]) < len(big) / 3.5 / 100
