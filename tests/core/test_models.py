"""The model layer driven through the real SDKs against scripted servers on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import SecretStr

from core.config import Config, ConfigError, ModelRef, ProviderConfig, RetryConfig
from core.messages import AssistantMessage, ImagePart, TextPart, ThinkingPart, ToolCallPart, ToolResultMessage, UserMessage
from core.models import ResilientModel, build_model
from core.models.anthropic_messages import AnthropicModel
from core.models.base import (
    ErrorKind,
    ModelError,
    ModelRequest,
    ResponseDone,
    Retrying,
    TextChunk,
    ThinkingChunk,
    ToolCallChunk,
    ToolSpec,
)
from core.models.openai_compat import OpenAIChatModel
from core.models.resilient import backoff_delay
from tests.fakes.anthropic_server import ScriptedAnthropicServer
from tests.fakes.openai_server import ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-test-SECRET-0123456789"
TOOLS = [
    ToolSpec("read_file", "Read a file.", {"type": "object", "properties": {"path": {"type": "string"}}}),
    ToolSpec("run", "Run a command.", {"type": "object", "properties": {"cmd": {"type": "string"}}}),
]


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    """A temporary HOME and no provider credentials: real model calls are impossible."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_EDITOR_HOME", str(tmp_path / "hermes"))
    for name in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "OPENROUTER_API_KEY", "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(name, raising=False)


_OPEN: list = []


@pytest.fixture(autouse=True)
async def _close_models():
    """Close every HTTP client a test opened while its event loop still runs."""
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def openai_model(server: ScriptedOpenAIServer, *, provider: str = "openai", timeout: float = 10.0, **config) -> OpenAIChatModel:
    config.setdefault("api_key", SecretStr(KEY))
    model = OpenAIChatModel(ModelRef(provider, "gpt-test", ProviderConfig(base_url=server.base_url, timeout=timeout, **config)))
    _OPEN.append(model)
    return model


def anthropic_model(server: ScriptedAnthropicServer, *, timeout: float = 10.0) -> AnthropicModel:
    config = ProviderConfig(api_key=SecretStr(KEY), base_url=server.base_url, timeout=timeout)
    model = AnthropicModel(ModelRef("anthropic", "claude-test", config))
    _OPEN.append(model)
    return model


def ask(text: str = "hello", **kwargs) -> ModelRequest:
    return ModelRequest(system="You are a test.", messages=[UserMessage.of(text)], **kwargs)


async def collect(model, request: ModelRequest) -> tuple[list, ResponseDone]:
    events = [event async for event in model.stream(request)]
    assert isinstance(events[-1], ResponseDone)
    assert sum(isinstance(e, ResponseDone) for e in events) == 1
    return events, events[-1]


async def failure(model, request: ModelRequest | None = None) -> ModelError:
    with pytest.raises(ModelError) as info:
        async for _ in model.stream(request or ask()):
            pass
    return info.value


async def no_sleep(delay: float) -> None:
    return None


# -- OpenAI-compatible ----------------------------------------------------------------------------


async def test_openai_streams_text_with_usage_and_sends_profile_params():
    spec = {
        "text": "Hello, streaming world!",
        "chunk_size": 4,
        "usage": {"input_tokens": 120, "output_tokens": 9, "cache_read_tokens": 100},
    }
    with ScriptedOpenAIServer([spec]) as server:
        model = openai_model(server)
        events, done = await collect(model, ask(max_tokens=321))
        await model.aclose()
    chunks = [e.text for e in events if isinstance(e, TextChunk)]
    assert len(chunks) > 1 and "".join(chunks) == "Hello, streaming world!"
    assert done.message.text == "Hello, streaming world!"
    assert done.message.model == "openai:gpt-test"
    assert done.finish_reason == "stop"
    assert (done.usage.input_tokens, done.usage.output_tokens, done.usage.cache_read_tokens) == (120, 9, 100)
    body, headers = server.requests[0], server.headers[0]
    assert body["model"] == "gpt-test" and body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 321 and "max_tokens" not in body  # the openai profile's quirk
    assert body["messages"] == [{"role": "system", "content": "You are a test."}, {"role": "user", "content": "hello"}]
    assert headers["authorization"] == f"Bearer {KEY}"


async def test_openai_thinking_is_streamed_but_never_sent_back():
    with ScriptedOpenAIServer([{"thinking": "Let me think.", "text": "Answer.", "chunk_size": 5}, {"text": "ok"}]) as server:
        model = openai_model(server)
        events, done = await collect(model, ask())
        assert "".join(e.text for e in events if isinstance(e, ThinkingChunk)) == "Let me think."
        assert isinstance(done.message.parts[0], ThinkingPart) and done.message.parts[0].text == "Let me think."
        history = [UserMessage.of("hello"), done.message, UserMessage.of("and?")]
        await collect(model, ModelRequest(system="s", messages=history))
    sent = server.requests[1]["messages"]
    assert sent[2] == {"role": "assistant", "content": "Answer."}
    assert "Let me think" not in json.dumps(server.requests[1])


async def test_openai_tool_calls_are_announced_once_and_assembled():
    calls = [
        {"id": "call_a", "name": "read_file", "arguments": {"path": "src/app.py"}},
        {"id": "call_b", "name": "run", "arguments": {"cmd": "pytest -q --maxfail=1"}},
    ]
    with ScriptedOpenAIServer([{"text": "Reading.", "tool_calls": calls}]) as server:
        events, done = await collect(openai_model(server), ask(tools=TOOLS))
    announced = [(e.id, e.name) for e in events if isinstance(e, ToolCallChunk)]
    assert announced == [("call_a", "read_file"), ("call_b", "run")]
    assert done.finish_reason == "tool_calls"
    assert [(c.id, c.name, c.arguments) for c in done.message.tool_calls] == [
        ("call_a", "read_file", {"path": "src/app.py"}),
        ("call_b", "run", {"cmd": "pytest -q --maxfail=1"}),
    ]
    assert server.requests[0]["tools"][0] == {
        "type": "function",
        "function": {"name": "read_file", "description": "Read a file.", "parameters": TOOLS[0].parameters},
    }


@pytest.mark.parametrize("raw", ['{"path": "a.py"', "[1, 2]", "not json at all"])
async def test_openai_invalid_tool_arguments_are_kept_raw(raw):
    with ScriptedOpenAIServer([{"tool_calls": [{"id": "c1", "name": "read_file", "arguments": raw}]}]) as server:
        _, done = await collect(openai_model(server), ask(tools=TOOLS))
    (call,) = done.message.tool_calls
    assert call.arguments == {} and call.invalid_arguments == raw


async def test_openai_translates_images_tool_calls_and_results():
    history = [
        UserMessage(parts=[TextPart(text="what is this?"), ImagePart(media_type="image/png", data="iVBORw0KGgo=")]),
        AssistantMessage(parts=[ThinkingPart(text="hidden"), ToolCallPart(id="c1", name="read_file", arguments={"path": "x"})]),
        ToolResultMessage(tool_call_id="c1", tool_name="read_file", content="file body"),
        AssistantMessage(parts=[], interrupted=True),
    ]
    with ScriptedOpenAIServer([{"text": "ok"}]) as server:
        await collect(openai_model(server), ModelRequest(system="", messages=history))
    assert server.requests[0]["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "what is this?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
            ],
        },
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "x"}'}}],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "file body"},
    ]


async def test_ephemeral_text_after_the_users_words_is_set_apart_from_them():
    texts = UserMessage(parts=[TextPart(text="see "), TextPart(text="app.py")])
    image = UserMessage(parts=[TextPart(text="what is this?"), ImagePart(media_type="image/png", data="iVBORw0KGgo=")])
    with ScriptedOpenAIServer([{"text": "a"}, {"text": "b"}]) as server:
        model = openai_model(server)
        await collect(model, ModelRequest(system="s", messages=[texts], ephemeral="[nudge]"))
        await collect(model, ModelRequest(system="s", messages=[image], ephemeral="[nudge]"))
    first, second = (r["messages"][-1] for r in server.requests)
    assert first == {"role": "user", "content": "see app.py\n\n[nudge]"}
    assert second["content"][0] == {"type": "text", "text": "what is this?"}
    assert second["content"][-1] == {"type": "text", "text": "[nudge]"} and len(second["content"]) == 3


async def test_ephemeral_text_is_for_one_request_only():
    history = [
        UserMessage.of("fix the bug"),
        AssistantMessage(parts=[ToolCallPart(id="c1", name="run", arguments={})]),
        ToolResultMessage(tool_call_id="c1", tool_name="run", content="ok"),
    ]
    with ScriptedOpenAIServer([{"text": "a"}, {"text": "b"}]) as server:
        model = openai_model(server)
        await collect(model, ModelRequest(system="s", messages=history, ephemeral="[skill nudge]"))
        await collect(model, ModelRequest(system="s", messages=history))
    first, second = (r["messages"] for r in server.requests)
    # Last, after the tool result, in a user turn of its own: the prefix the next request repeats never holds it.
    assert first[1] == {"role": "user", "content": "fix the bug"}
    assert first[-1] == {"role": "user", "content": "[skill nudge]"} and first[:-1] == second
    assert second[1] == {"role": "user", "content": "fix the bug"}
    assert "skill nudge" not in json.dumps(second)
    assert history[0].text == "fix the bug"  # the persisted message is untouched


async def test_openai_profile_headers_and_keyless_servers():
    with ScriptedOpenAIServer([{"text": "a"}, {"text": "b"}]) as server:
        await collect(openai_model(server, provider="openrouter"), ask())
        await collect(openai_model(server, provider="vllm", api_key=None), ask())
    assert server.headers[0]["x-title"] == "hermes-editor"
    assert server.requests[1]["max_tokens"] == 8192  # compatible servers take max_tokens
    assert server.headers[1]["authorization"] == "Bearer not-needed"


async def test_missing_key_is_an_auth_error_naming_the_variable():
    with ScriptedOpenAIServer([]) as server:
        error = await failure(openai_model(server, api_key=None))
    assert error.kind is ErrorKind.AUTH and "OPENAI_API_KEY" in error.message
    assert server.requests == []


async def test_models_endpoint_lists_the_scripted_model():
    import openai

    with ScriptedOpenAIServer([], model="demo-model") as server:
        client = openai.AsyncOpenAI(api_key="x", base_url=server.base_url, max_retries=0)
        page = await client.models.list()
        await client.close()
    assert [m.id for m in page.data] == ["demo-model"]


# -- Anthropic --------------------------------------------------------------------------------------


async def test_anthropic_streams_thinking_text_tool_use_and_cache_usage():
    spec = {
        "thinking": "Consider the file.",
        "signature": "sig-abc",
        "text": "I'll read it.",
        "chunk_size": 5,
        "tool_calls": [{"id": "toolu_1", "name": "read_file", "arguments": {"path": "main.py", "lines": [1, 20]}}],
        "usage": {"input_tokens": 10, "output_tokens": 33, "cache_read_tokens": 900, "cache_write_tokens": 50},
    }
    with ScriptedAnthropicServer([spec]) as server:
        events, done = await collect(anthropic_model(server), ask(tools=TOOLS))
    assert "".join(e.text for e in events if isinstance(e, ThinkingChunk)) == "Consider the file."
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "I'll read it."
    assert [(e.id, e.name) for e in events if isinstance(e, ToolCallChunk)] == [("toolu_1", "read_file")]
    thinking, text, call = done.message.parts
    assert thinking == ThinkingPart(text="Consider the file.", signature="sig-abc")
    assert text == TextPart(text="I'll read it.")
    assert (call.id, call.name, call.arguments) == ("toolu_1", "read_file", {"path": "main.py", "lines": [1, 20]})
    assert done.finish_reason == "tool_calls" and done.message.model == "anthropic:claude-test"
    usage = done.usage
    assert (usage.input_tokens, usage.output_tokens, usage.cache_read_tokens, usage.cache_write_tokens) == (960, 33, 900, 50)
    headers = server.headers[0]
    assert headers.get("x-api-key") == KEY or headers.get("authorization") == f"Bearer {KEY}"


async def test_anthropic_redacted_thinking_and_invalid_tool_json():
    spec = {"redacted_thinking": "EncryptedBlob==", "tool_calls": [{"id": "toolu_1", "name": "run", "arguments": '{"cmd": '}]}
    with ScriptedAnthropicServer([spec]) as server:
        _, done = await collect(anthropic_model(server), ask(tools=TOOLS))
    assert done.message.parts[0] == ThinkingPart(text="EncryptedBlob==", redacted=True)
    (call,) = done.message.tool_calls
    assert call.arguments == {} and call.invalid_arguments == '{"cmd": '


@pytest.mark.parametrize(("reason", "expected"), [("max_tokens", "length"), ("refusal", "refusal"), ("end_turn", "stop")])
async def test_anthropic_stop_reasons_are_normalised(reason, expected):
    with ScriptedAnthropicServer([{"text": "x", "finish_reason": reason}]) as server:
        _, done = await collect(anthropic_model(server), ask())
    assert done.finish_reason == expected


async def test_anthropic_request_shape_and_cache_breakpoints():
    history = [
        UserMessage.of("refactor it"),
        AssistantMessage(
            parts=[
                ThinkingPart(text="plan", signature="sig-1"),
                ThinkingPart(text="opaque", redacted=True),
                ThinkingPart(text="from another provider"),
                TextPart(text="Reading both."),
                ToolCallPart(id="t1", name="read_file", arguments={"path": "a"}),
                ToolCallPart(id="t2", name="read_file", arguments={"path": "b"}),
            ]
        ),
        ToolResultMessage(tool_call_id="t1", tool_name="read_file", content="A"),
        ToolResultMessage(tool_call_id="t2", tool_name="read_file", content="denied", is_error=True),
    ]
    with ScriptedAnthropicServer([{"text": "done"}]) as server:
        await collect(anthropic_model(server), ModelRequest(system="SYSTEM", messages=history, tools=TOOLS, ephemeral="nudge"))
    body = server.requests[0]
    assert body["system"] == [{"type": "text", "text": "SYSTEM", "cache_control": {"type": "ephemeral"}}]
    assert "cache_control" not in body["tools"][0]
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral"}
    assert body["tools"][0]["input_schema"] == TOOLS[0].parameters
    user, assistant, results = body["messages"]
    assert user == {"role": "user", "content": [{"type": "text", "text": "refactor it"}]}
    assert assistant["content"] == [
        {"type": "thinking", "thinking": "plan", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "Reading both."},
        {"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a"}},
        {"type": "tool_use", "id": "t2", "name": "read_file", "input": {"path": "b"}},
    ]
    assert results == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "A"},
            {
                "type": "tool_result",
                "tool_use_id": "t2",
                "content": "denied",
                "is_error": True,
                "cache_control": {"type": "ephemeral"},
            },
            # Request-only text after the breakpoint: the next step's cached prefix never held it.
            {"type": "text", "text": "nudge"},
        ],
    }
    # Three breakpoints in all: tools, system, the end of the conversation (the API allows four).
    assert json.dumps(body).count("cache_control") == 3


@pytest.mark.parametrize(
    "room, effort, budget, max_tokens",
    [
        (0, "high", 24576, 28672),  # no window known: room for the whole budget and the answer
        (40_000, "high", 24576, 28672),  # a large window leaves that room
        (10_000, "high", 8976, 10_000),  # a smaller one: less thinking, within what it leaves
        (1_600, "low", None, 1_600),  # too small to think: the answer alone
    ],
)
async def test_anthropic_thinking_stays_within_the_room_the_window_leaves(room, effort, budget, max_tokens):
    with ScriptedAnthropicServer([{"text": "ok"}]) as server:
        request = ask(max_tokens=min(8192, room or 8192), reasoning_effort=effort, reply_room=room)
        await collect(anthropic_model(server), request)
    body = server.requests[0]
    assert body["max_tokens"] == max_tokens
    assert body.get("thinking") == ({"type": "enabled", "budget_tokens": budget} if budget else None)


# -- error classification ---------------------------------------------------------------------------

SERVERS = {"openai": (ScriptedOpenAIServer, openai_model), "anthropic": (ScriptedAnthropicServer, anthropic_model)}
CASES = [
    ({"error": 401}, ErrorKind.AUTH, 401),
    ({"error": 403}, ErrorKind.AUTH, 403),
    ({"error": 429, "retry_after": 7}, ErrorKind.RATE_LIMIT, 429),
    ({"error": "overloaded"}, ErrorKind.OVERLOADED, None),
    ({"error": 500}, ErrorKind.SERVER, 500),
    ({"error": 502, "message": "bad gateway"}, ErrorKind.SERVER, 502),
    ({"error": 400, "message": "This model's maximum context length is 128000 tokens."}, ErrorKind.CONTEXT_TOO_LONG, 400),
    ({"error": 400, "message": "prompt is too long: 210000 tokens > 200000 maximum"}, ErrorKind.CONTEXT_TOO_LONG, 400),
    ({"error": 400, "message": "tools.0.name: String should match pattern"}, ErrorKind.BAD_REQUEST, 400),
    ({"error": 404, "message": "model not found"}, ErrorKind.BAD_REQUEST, 404),
    ({"disconnect_after": 2}, ErrorKind.CONNECTION, None),
    ({"malformed": True}, ErrorKind.BAD_RESPONSE, None),
    ({"text": "half an answer", "stream_error": "overloaded"}, ErrorKind.OVERLOADED, None),
    ({"text": "half an answer", "stream_error": 500}, ErrorKind.SERVER, None),
]


@pytest.mark.parametrize("wire", SERVERS)
@pytest.mark.parametrize(("spec", "kind", "status"), CASES, ids=[f"{c[1].value}-{i}" for i, c in enumerate(CASES)])
async def test_errors_are_classified(wire, spec, kind, status):
    server_cls, make = SERVERS[wire]
    with server_cls([spec]) as server:
        error = await failure(make(server))
    assert error.kind is kind, error.user_message()
    assert error.status == status or (status is None and error.status in (None, 503, 529))
    assert error.model and error.model.endswith("-test")
    assert KEY not in str(error) and KEY not in error.user_message()
    if kind is ErrorKind.RATE_LIMIT:
        assert error.retry_after == 7.0
    if kind in (ErrorKind.CONNECTION, ErrorKind.BAD_RESPONSE, ErrorKind.OVERLOADED):
        assert error.retryable


@pytest.mark.parametrize("wire", SERVERS)
async def test_hang_is_a_timeout(wire):
    server_cls, make = SERVERS[wire]
    with server_cls([{"hang": True}]) as server:
        error = await failure(make(server, timeout=0.5))
    assert error.kind is ErrorKind.TIMEOUT and error.retryable


@pytest.mark.parametrize("wire", SERVERS)
async def test_unreachable_server_is_a_connection_error(wire):
    server_cls, make = SERVERS[wire]
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = server_cls([], port=port)  # never started: nothing listens on the port
    error = await failure(make(server))
    assert error.kind is ErrorKind.CONNECTION and "base_url" in error.user_message()


@pytest.mark.parametrize("wire", SERVERS)
async def test_api_key_echoed_by_the_server_is_redacted(wire):
    server_cls, make = SERVERS[wire]
    with server_cls([{"error": 401, "message": f"Incorrect API key provided: {KEY}. Authorization: Bearer {KEY}"}]) as server:
        error = await failure(make(server))
    assert error.kind is ErrorKind.AUTH
    assert KEY not in str(error) and KEY not in error.user_message() and KEY not in repr(error.args)
    assert "Incorrect API key provided: [redacted]" in error.message
    assert error.__cause__ is None and error.__suppress_context__


# -- retries and fallback -----------------------------------------------------------------------


async def test_retry_then_success_announces_each_restart():
    script = [
        {"error": 500},
        {"disconnect_after": 1, "text": "partial answer", "chunk_size": 7},
        {"malformed": True},
        {"text": "final answer"},
    ]
    with ScriptedOpenAIServer(script) as server:
        model = ResilientModel([openai_model(server)], RetryConfig(max_attempts=4, base_delay=0.01), sleep=no_sleep)
        events, done = await collect(model, ask())
    kinds = [e.kind for e in events]
    assert [e.error.kind for e in events if isinstance(e, Retrying)] == [
        ErrorKind.SERVER,
        ErrorKind.CONNECTION,
        ErrorKind.BAD_RESPONSE,
    ]
    assert [e.attempt for e in events if isinstance(e, Retrying)] == [1, 2, 3]
    # The partial text of the cut stream came before the Retrying that voids it.
    assert kinds.index("text") < kinds.index("retrying", 1)
    assert done.message.text == "final answer" and len(server.requests) == 4


async def test_retry_after_is_honoured():
    slept: list[float] = []

    async def record(delay: float) -> None:
        slept.append(delay)

    with ScriptedOpenAIServer([{"error": 429, "retry_after": 3}, {"text": "ok"}]) as server:
        model = ResilientModel([openai_model(server)], RetryConfig(base_delay=0.01, max_delay=30), sleep=record)
        events, done = await collect(model, ask())
    (retrying,) = [e for e in events if isinstance(e, Retrying)]
    assert slept == [retrying.delay] and slept[0] >= 3.0
    assert retrying.error.retry_after == 3.0 and done.message.text == "ok"


async def test_fallback_model_is_used_when_the_primary_keeps_failing():
    with (
        ScriptedOpenAIServer(lambda body: {"error": "overloaded"}) as primary,
        ScriptedAnthropicServer([{"text": "from the fallback"}]) as backup,
    ):
        model = ResilientModel([openai_model(primary), anthropic_model(backup)], RetryConfig(max_attempts=3), sleep=no_sleep)
        events, done = await collect(model, ask())
        await model.aclose()
    retries = [e for e in events if isinstance(e, Retrying)]
    assert [(r.model, r.attempt) for r in retries] == [
        ("openai:gpt-test", 1),
        ("openai:gpt-test", 2),
        ("anthropic:claude-test", 3),
    ]
    assert retries[-1].delay == 0.0 and retries[-1].error.model == "openai:gpt-test"
    assert len(primary.requests) == 3 and len(backup.requests) == 1
    assert done.message.model == "anthropic:claude-test" and done.message.text == "from the fallback"


async def test_auth_failure_falls_back_without_retrying():
    with ScriptedOpenAIServer(lambda body: {"error": 401}) as primary, ScriptedOpenAIServer([{"text": "backup"}]) as backup:
        model = ResilientModel([openai_model(primary), openai_model(backup, provider="vllm")], RetryConfig(), sleep=no_sleep)
        _, done = await collect(model, ask())
    assert len(primary.requests) == 1 and done.message.text == "backup"


async def test_long_retry_after_prefers_the_fallback():
    slept: list[float] = []

    async def record(delay: float) -> None:
        slept.append(delay)

    with (
        ScriptedOpenAIServer([{"error": 429, "retry_after": 600}]) as primary,
        ScriptedAnthropicServer([{"text": "now"}]) as backup,
    ):
        model = ResilientModel([openai_model(primary), anthropic_model(backup)], RetryConfig(max_delay=30), sleep=record)
        _, done = await collect(model, ask())
    assert slept == [] and done.message.text == "now"


async def test_context_too_long_is_neither_retried_nor_handed_to_a_fallback():
    spec = {"error": 400, "message": "prompt is too long: 300000 tokens > 200000 maximum"}
    with ScriptedAnthropicServer(lambda body: spec) as primary, ScriptedOpenAIServer([{"text": "unused"}]) as backup:
        model = ResilientModel([anthropic_model(primary), openai_model(backup)], RetryConfig(), sleep=no_sleep)
        error = await failure(model)
    assert error.kind is ErrorKind.CONTEXT_TOO_LONG
    assert len(primary.requests) == 1 and backup.requests == []


async def test_final_failure_raises_the_last_error_without_the_key():
    with (
        ScriptedOpenAIServer(lambda body: {"error": 500, "message": f"upstream exploded (key {KEY})"}) as primary,
        ScriptedAnthropicServer(lambda body: {"error": "overloaded"}) as backup,
    ):
        model = ResilientModel([openai_model(primary), anthropic_model(backup)], RetryConfig(max_attempts=2), sleep=no_sleep)
        error = await failure(model)
    assert error.kind is ErrorKind.OVERLOADED and error.model == "anthropic:claude-test"
    assert "overloaded" in error.user_message().lower() and "anthropic:claude-test" in error.user_message()
    assert len(primary.requests) == 2 and len(backup.requests) == 2
    assert KEY not in error.user_message()


async def test_a_consumer_can_stop_mid_stream_and_stream_again():
    slow = {"text": "x" * 200, "chunk_size": 1, "delay": 0.01}
    with ScriptedOpenAIServer([slow, {"text": "again"}]) as server:
        model = ResilientModel([openai_model(server)], RetryConfig(), sleep=no_sleep)
        stream = model.stream(ask())
        first = await anext(stream)
        await stream.aclose()  # what a cancelled turn does
        _, done = await collect(model, ask())
    assert first == TextChunk("x") and done.message.text == "again"


def test_backoff_is_jittered_capped_and_respects_retry_after():
    import random

    retry = RetryConfig(base_delay=1.0, max_delay=5.0)
    rng = random.Random(7)
    delays = [backoff_delay(attempt, retry, rng=rng) for attempt in range(1, 12) for _ in range(20)]
    assert all(0 <= d <= 5.0 for d in delays) and len(set(delays)) > 100
    assert all(backoff_delay(1, retry, rng=rng) <= 1.0 for _ in range(50))
    assert backoff_delay(1, retry, retry_after=12.0, rng=rng) == 12.0


# -- build_model -------------------------------------------------------------------------------------


def test_build_model_needs_a_model():
    with pytest.raises(ConfigError, match="no model is configured"):
        build_model(Config())


async def test_build_model_wraps_the_primary_and_fallbacks():
    with ScriptedOpenAIServer([{"error": 401}]) as local, ScriptedAnthropicServer([{"text": "claude here"}]) as claude:
        config = Config(
            model="local:qwen3:8b",
            fallback_models=["anthropic:claude-test"],
            providers={
                "local": ProviderConfig(profile="ollama", base_url=local.base_url),
                "anthropic": ProviderConfig(api_key=SecretStr(KEY), base_url=claude.base_url),
            },
        )
        model = build_model(config)
        _OPEN.append(model)
        assert isinstance(model, ResilientModel) and model.name == "local:qwen3:8b"
        assert [type(m).__name__ for m in model.models] == ["OpenAIChatModel", "AnthropicModel"]
        _, done = await collect(model, ask())
        await model.aclose()
    assert local.requests[0]["model"] == "qwen3:8b" and done.message.text == "claude here"


# -- packaging -----------------------------------------------------------------------------------------


def test_importing_the_model_layer_does_not_import_the_sdks():
    code = textwrap.dedent(
        """
        import sys
        import core.models, core.models.openai_compat, core.models.anthropic_messages, core.models.resilient
        # (The SDKs' unused aiohttp transports are marked absent, None, not imported.)
        heavy = sorted(m for m, module in sys.modules.items() if module is not None and m.split(".")[0] in ("openai", "anthropic", "httpx2"))
        print(",".join(heavy))
        """
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


async def test_scripted_server_runs_standalone(tmp_path):
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "standalone reply"}]))
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "hermes_cli.scripted_model",
        "--port",
        "0",
        "--script",
        str(script),
        cwd=REPO,
        stdout=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        base_url = (await asyncio.wait_for(proc.stdout.readline(), 30)).decode().strip()
        assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
        ref = ModelRef("local", "scripted", ProviderConfig(profile="llamacpp", base_url=base_url))
        model = OpenAIChatModel(ref)
        _OPEN.append(model)
        _, done = await collect(model, ask())
        assert done.message.text == "standalone reply"
    finally:
        proc.terminate()
        await proc.wait()
