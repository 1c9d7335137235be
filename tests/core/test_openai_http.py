"""The chat-completions adapter speaks HTTP itself (httpx + httpx-sse), against the scripted
OpenAI-compatible server: the bytes and headers it sends, every error kind it reports, and
that no request needs the openai SDK."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from pydantic import SecretStr

from core.config import ModelRef, ProviderConfig
from core.messages import AssistantMessage, ImagePart, TextPart, ToolCallPart, ToolResultMessage, UserMessage
from core.models.base import ErrorKind, ModelError, ModelRequest, ResponseDone, TextChunk, ToolSpec
from core.models.openai_compat import OpenAIChatModel
from core.version import version
from tests.fakes.openai_server import ScriptedOpenAIServer

REPO = Path(__file__).resolve().parents[2]
KEY = "sk-http-SECRET-0123456789"


@pytest.fixture(autouse=True)
def _isolated(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("HERMES_EDITOR_HOME", str(tmp_path / "hermes"))
    for name in ("OPENAI_API_KEY", "OPENROUTER_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    for name in ("http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


_OPEN: list[OpenAIChatModel] = []


@pytest.fixture(autouse=True)
async def _close_models():
    yield
    while _OPEN:
        await _OPEN.pop().aclose()


def model_for(base_url: str, *, provider: str = "openai", timeout: float = 10.0) -> OpenAIChatModel:
    model = OpenAIChatModel(ModelRef(provider, "gpt-é", ProviderConfig(base_url=base_url, api_key=SecretStr(KEY), timeout=timeout)))
    _OPEN.append(model)
    return model


def rich_request() -> ModelRequest:
    """A request with every kind of entry, non-ASCII text and a line separator in it."""
    return ModelRequest(
        system="Système ✓",
        messages=[
            UserMessage(parts=[TextPart(text='hi \u2028 "quoted" é 😀')]),
            AssistantMessage(parts=[TextPart(text="ok"), ToolCallPart(id="c1", name="run", arguments={"cmd": "ls é"})]),
            ToolResultMessage(tool_call_id="c1", tool_name="run", content="a\tb"),
            UserMessage(parts=[TextPart(text="look"), ImagePart(media_type="image/png", data="AAAA")]),
        ],
        tools=[ToolSpec("run", "Run ✓", {"type": "object", "properties": {"cmd": {"type": "string"}}})],
        max_tokens=100,
        reasoning_effort="low",
    )


async def failure(model: OpenAIChatModel) -> ModelError:
    with pytest.raises(ModelError) as info:
        async for _ in model.stream(ModelRequest(system="s", messages=[UserMessage.of("hello")])):
            pass
    return info.value


async def test_the_body_is_byte_for_byte_what_the_openai_sdk_sent():
    import openai

    request = rich_request()
    with ScriptedOpenAIServer([{"text": "a"}, {"text": "b"}]) as server:
        server.keep_raw = True
        model = model_for(server.base_url)
        events = [e async for e in model.stream(request)]
        # The same body through the SDK, the way the adapter called it before.
        params = model.build_params(request)
        name = params.pop("model")
        sdk = openai.AsyncOpenAI(api_key=KEY, base_url=server.base_url, max_retries=0)
        try:
            stream = await sdk.chat.completions.create(model=name, messages=[], stream=True, extra_body=params)
            async with stream:
                async for _ in stream:
                    pass
        finally:
            await sdk.close()
    ours, theirs = server.raw_requests
    assert ours == theirs
    assert ours.startswith(b'{"model":"gpt-\xc3\xa9","stream":true,"messages":[{"role":"system"')
    assert isinstance(events[-1], ResponseDone) and events[-1].message.text == "a"


async def test_headers_carry_the_key_the_profile_headers_and_our_name():
    with ScriptedOpenAIServer([{"text": "a"}]) as server:
        await failure_free(model_for(server.base_url + "/", provider="openrouter"))
    headers = server.headers[0]
    assert headers["authorization"] == f"Bearer {KEY}"
    assert headers["x-title"] == "hermes-editor"  # the openrouter profile's extra header
    assert headers["content-type"] == "application/json"
    assert headers["accept"] == "text/event-stream"
    assert headers["user-agent"] == f"hermes-editor/{version()}"
    assert not any(name.startswith("x-stainless") for name in headers)


async def failure_free(model: OpenAIChatModel) -> ResponseDone:
    events = [e async for e in model.stream(ModelRequest(system="s", messages=[UserMessage.of("hello")]))]
    assert isinstance(events[-1], ResponseDone)
    return events[-1]


async def test_a_trailing_slash_on_the_base_url_posts_to_the_same_path():
    with ScriptedOpenAIServer([{"text": "a"}, {"text": "b"}]) as server:
        one = await failure_free(model_for(server.base_url))
        two = await failure_free(model_for(server.base_url + "/"))
    assert one.message.text == "a" and two.message.text == "b"
    assert len(server.requests) == 2


CASES = [
    ({"error": 401}, ErrorKind.AUTH, 401),
    ({"error": 403}, ErrorKind.AUTH, 403),
    ({"error": 429, "retry_after": 7}, ErrorKind.RATE_LIMIT, 429),
    ({"error": 429, "retry_after_ms": 250}, ErrorKind.RATE_LIMIT, 429),
    ({"error": 413, "message": "Request entity too large"}, ErrorKind.CONTEXT_TOO_LONG, 413),
    ({"error": 400, "message": "This model's maximum context length is 128000 tokens."}, ErrorKind.CONTEXT_TOO_LONG, 400),
    ({"error": 400, "message": "bad", "code": "context_length_exceeded"}, ErrorKind.CONTEXT_TOO_LONG, 400),
    ({"error": 408}, ErrorKind.TIMEOUT, 408),
    ({"error": 500}, ErrorKind.SERVER, 500),
    ({"error": 503, "message": "upstream down"}, ErrorKind.SERVER, 503),
    ({"error": 529}, ErrorKind.OVERLOADED, 529),
    ({"error": "overloaded"}, ErrorKind.OVERLOADED, 503),
    ({"error": 400, "message": "tools.0.name: String should match pattern"}, ErrorKind.BAD_REQUEST, 400),
    ({"error": 404}, ErrorKind.BAD_REQUEST, 404),
    ({"text": "half an answer", "stream_error": "overloaded"}, ErrorKind.OVERLOADED, None),
    ({"text": "half an answer", "stream_error": 500}, ErrorKind.SERVER, None),
    ({"text": "half an answer", "stream_error": 429}, ErrorKind.RATE_LIMIT, None),
    ({"text": "half an answer", "stream_error": 400, "message": "prompt is too long"}, ErrorKind.CONTEXT_TOO_LONG, None),
    ({"disconnect_after": 2}, ErrorKind.CONNECTION, None),
    ({"malformed": True}, ErrorKind.BAD_RESPONSE, None),
]


@pytest.mark.parametrize(("spec", "kind", "status"), CASES, ids=[f"{c[1].value}-{i}" for i, c in enumerate(CASES)])
async def test_each_failure_is_the_error_kind_the_sdk_path_gave(spec, kind, status):
    with ScriptedOpenAIServer([spec]) as server:
        error = await failure(model_for(server.base_url))
    assert error.kind is kind, error.user_message()
    assert error.status == status
    assert error.model == "openai:gpt-é"
    assert KEY not in str(error) and KEY not in error.user_message()
    if "retry_after" in spec:
        assert error.retry_after == 7.0
    if "retry_after_ms" in spec:
        assert error.retry_after == 0.25
    if "stream_error" in spec and "message" in spec:
        assert spec["message"] in error.message


async def test_a_cut_mid_stream_keeps_what_came_before_it():
    with ScriptedOpenAIServer([{"text": "one two three four", "chunk_size": 4, "disconnect_after": 2}]) as server:
        model = model_for(server.base_url)
        seen: list[str] = []
        with pytest.raises(ModelError) as info:
            async for event in model.stream(ModelRequest(system="s", messages=[UserMessage.of("hello")])):
                if isinstance(event, TextChunk):
                    seen.append(event.text)
    assert info.value.kind is ErrorKind.CONNECTION and info.value.retryable
    assert "".join(seen) == "one two "


async def test_a_silent_server_times_out_and_a_closed_port_is_a_connection_error():
    with ScriptedOpenAIServer([{"hang": True}]) as server:
        error = await failure(model_for(server.base_url, timeout=0.5))
    assert error.kind is ErrorKind.TIMEOUT
    error = await failure(model_for(server.base_url))  # the server is closed now
    assert error.kind is ErrorKind.CONNECTION


async def test_the_key_echoed_in_an_error_is_redacted():
    with ScriptedOpenAIServer([{"error": 401, "message": f"Incorrect API key provided: {KEY}"}]) as server:
        error = await failure(model_for(server.base_url))
    assert error.kind is ErrorKind.AUTH and "[redacted]" in error.message
    assert KEY not in str(error) and KEY not in repr(error.args)


async def test_the_client_is_made_once_and_closed():
    with ScriptedOpenAIServer([{"text": "a"}, {"text": "b"}]) as server:
        model = model_for(server.base_url)
        await failure_free(model)
        client = model._client
        await failure_free(model)
        assert model._client is client
        await model.aclose()
        assert model._client is None and client.is_closed


async def test_a_plain_http_server_loads_no_ca_bundle_unless_a_proxy_is_set(monkeypatch):
    def ca_certs(model: OpenAIChatModel) -> int:
        context = model._get_client()._transport._pool._ssl_context
        return context.cert_store_stats()["x509_ca"]

    assert ca_certs(model_for("http://127.0.0.1:9/v1")) == 0
    assert ca_certs(model_for("https://127.0.0.1:9/v1")) > 0
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")
    assert ca_certs(model_for("http://127.0.0.1:9/v1")) > 0


NO_SDK = textwrap.dedent(
    """
    import asyncio, json, sys
    sys.modules["openai"] = None  # importing the SDK now fails
    from pydantic import SecretStr
    from core.config import ModelRef, ProviderConfig
    from core.messages import UserMessage
    from core.models.base import ModelError, ModelRequest
    from core.models.openai_compat import OpenAIChatModel

    async def main():
        ref = ModelRef("openai", "gpt-test", ProviderConfig(base_url=sys.argv[1], api_key=SecretStr("sk-x-0123456789")))
        model = OpenAIChatModel(ref)
        out = []
        for _ in range(3):
            try:
                events = [e async for e in model.stream(ModelRequest(system="s", messages=[UserMessage.of("hi")]))]
                out.append(events[-1].message.text)
            except ModelError as exc:
                out.append(exc.kind.value)
        await model.aclose()
        loaded = sorted(m for m, module in sys.modules.items() if module is not None and m.split(".")[0] in ("openai", "httpx", "rich"))
        print(json.dumps({"out": out, "loaded": loaded}))

    asyncio.run(main())
    """
)


def test_no_request_needs_the_openai_sdk():
    script = [{"text": "hello"}, {"error": 429, "retry_after": 1}, {"text": "x", "stream_error": 500}]
    with ScriptedOpenAIServer(script) as server:
        proc = subprocess.run([sys.executable, "-c", NO_SDK, server.base_url], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["out"] == ["hello", "rate_limit", "server_error"]
    assert "httpx" in result["loaded"] and "openai" not in result["loaded"]
    assert not any(m.startswith("rich") for m in result["loaded"])
