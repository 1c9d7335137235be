"""Request-only text (the learning nudges) reaches the model set apart from the user's words,
after the cached prefix, and never in the stored history."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
from pydantic import SecretStr

from core.agent.loop import Agent
from core.config import ModelRef, ProviderConfig, load_config
from core.host.local import LocalHost
from core.learning.context import LearningSettings
from core.messages import UserMessage
from core.models import build_model
from core.models.anthropic_messages import AnthropicModel
from core.models.base import Model, ModelEvent, ModelRequest
from core.policy.approvals import ApprovalBroker
from core.store import SessionStore
from tests.fakes.anthropic_server import ScriptedAnthropicServer
from tests.fakes.openai_server import ScriptedOpenAIServer
from toolsets import toolset

NUDGE_EVERY_TURN = LearningSettings(memory_nudge_turns=1)
MARK = "[Ephemeral reminder"


@pytest.fixture
async def store(hermes_home):
    store = await SessionStore.open(hermes_home / "state.db")
    yield store
    await store.close()


def _agent(model: Model, store, **kw) -> Agent:
    return Agent(model=model, tools=toolset("editor"), store=store, broker=ApprovalBroker(store), surface="acp", **kw)


def _openai(server) -> Model:
    config = load_config(env={"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-test-123456", "HERMES_MODEL": "openai:scripted"})
    return build_model(config)


def _anthropic(server) -> Model:
    return AnthropicModel(
        ModelRef("anthropic", "claude-test", ProviderConfig(api_key=SecretStr("sk-ant-test-000000"), base_url=server.base_url))
    )


async def _turn(agent, session, text):
    return [e async for e in agent.run_turn(session, UserMessage.of(text))]


def _bodies(server) -> list[dict]:
    return [r.get("body", r) for r in server.requests]


def _read(call_id: str, path: str) -> dict:
    return {"tool_calls": [{"id": call_id, "name": "read_file", "arguments": {"path": path}}]}


async def test_the_nudge_is_set_apart_from_the_users_words(store, tmp_path):
    with ScriptedOpenAIServer([{"text": "ok"}]) as server:
        agent = _agent(_openai(server), store, learning=NUDGE_EVERY_TURN)
        session = await agent.new_session(tmp_path, LocalHost())
        await _turn(agent, session, "thanks")
        await agent.model.aclose()
    last = _bodies(server)[0]["messages"][-1]
    assert last["role"] == "user"
    assert last["content"].startswith(f"thanks\n\n{MARK}, not from the user:")
    assert f"thanks{MARK}" not in json.dumps(_bodies(server))
    stored = [m.message for m in await store.messages(session.id)]
    assert stored[0].text == "thanks" and not any(MARK in json.dumps(m.model_dump()) for m in stored)


class Recording:
    """A model at the process edge that keeps each request it is given, then asks the real one."""

    def __init__(self, inner: Model) -> None:
        self.inner = inner
        self.name = inner.name
        self.family = inner.family
        self.requests: list[ModelRequest] = []

    async def stream(self, request: ModelRequest) -> AsyncIterator[ModelEvent]:
        self.requests.append(request)
        async for event in self.inner.stream(request):
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


async def test_the_nudge_travels_as_request_only_text_on_every_step_of_its_turn(store, tmp_path):
    (tmp_path / "a.txt").write_text("a\n")
    with ScriptedOpenAIServer([_read("r1", "a.txt"), {"text": "done"}]) as server:
        model = Recording(_openai(server))
        agent = _agent(model, store, learning=NUDGE_EVERY_TURN)
        session = await agent.new_session(tmp_path, LocalHost())
        await _turn(agent, session, "look")
        await model.aclose()
    assert len(model.requests) == 2
    for request in model.requests:
        assert request.ephemeral is not None and request.ephemeral.startswith(MARK)
        assert not any(MARK in json.dumps(m.model_dump()) for m in request.messages)
    # On the wire it comes last: after the tool result on the second step, in a user turn of its own.
    second = _bodies(server)[1]["messages"]
    assert second[-2]["role"] == "tool" and second[-1] == {"role": "user", "content": model.requests[1].ephemeral}
    assert second[1] == {"role": "user", "content": "look"}


def _blocks(body: dict) -> list[tuple[str, str]]:
    """The conversation as a flat list of (role, block JSON), cache markers left out."""
    out = []
    for message in body["messages"]:
        for block in message["content"]:
            plain = {k: v for k, v in block.items() if k != "cache_control"}
            out.append((message["role"], json.dumps(plain, sort_keys=True)))
    return out


def _last_breakpoint(body: dict) -> int:
    flat = [b for m in body["messages"] for b in m["content"]]
    return max(i for i, b in enumerate(flat) if "cache_control" in b)


async def test_consecutive_requests_of_a_session_share_their_cached_prefix(store, tmp_path):
    """Every request is nudged; within a turn and across turns, what one request cached is
    the start of the next, byte for byte."""
    (tmp_path / "a.txt").write_text("a\n")
    script = [_read("r1", "a.txt"), {"text": "read it"}, _read("r2", "a.txt"), {"text": "again"}, {"text": "bye"}]
    with ScriptedAnthropicServer(script) as server:
        agent = _agent(_anthropic(server), store, learning=NUDGE_EVERY_TURN)
        session = await agent.new_session(tmp_path, LocalHost())
        for text in ("look", "once more", "thanks"):
            await _turn(agent, session, text)
        await agent.model.aclose()
    bodies = _bodies(server)
    assert len(bodies) == 5
    for body in bodies:
        flat = [b for m in body["messages"] for b in m["content"]]
        # The nudge is the last block, in a block of its own, after the last breakpoint.
        assert flat[-1]["type"] == "text" and flat[-1]["text"].startswith(MARK) and "cache_control" not in flat[-1]
        assert sum(MARK in json.dumps(b) for b in flat) == 1
        assert _last_breakpoint(body) == len(flat) - 2
    for earlier, later in zip(bodies, bodies[1:]):
        assert json.dumps(earlier["system"]) == json.dumps(later["system"])
        assert json.dumps(earlier["tools"]) == json.dumps(later["tools"])
        cached = _last_breakpoint(earlier) + 1
        assert _blocks(later)[:cached] == _blocks(earlier)[:cached]
