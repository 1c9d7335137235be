"""Vision for text-only models through hermes-acp: a user's image described by the ``[models] vision``
model, ``inspect_image`` on a project file, and what happens when no model can see images."""

from __future__ import annotations

import asyncio
import base64
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import acp
import pytest

from tests.acp_harness import Client, agent_env, running_agent, until
from tests.fakes.openai_server import ScriptedOpenAIServer, Spec

# A 1x1 PNG.
PIXEL = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
DESCRIPTION = "A dialog titled 'Build failed' with the text: error E0425 cannot find value `x`."
TEXT_ONLY = "[providers.openai]\nimages = false\n"
WITH_VISION = TEXT_ONLY + '[models]\nvision = "openai:scripted-vision"\n'


class TwoModels:
    """The scripted server's answers for two models behind one provider: the main ``scripted``
    model takes ``main`` in order; ``scripted-vision`` answers every request with ``vision``."""

    def __init__(self, main: list[Spec], vision: str | Spec = DESCRIPTION) -> None:
        self.main = list(main)
        self.vision = vision

    def __call__(self, body: dict) -> Spec:
        if body["model"] == "scripted-vision":
            return {"text": self.vision} if isinstance(self.vision, str) else self.vision
        if not self.main:
            return {"error": 400, "message": "scripted server: the main model's script is exhausted"}
        return self.main.pop(0)


@pytest.fixture
def project(tmp_path):
    root = tmp_path / "project"
    root.mkdir()
    return root


def _requests(server: ScriptedOpenAIServer, model: str) -> list[dict]:
    return [r for r in server.requests if r["model"] == model]


def _user_parts(body: dict) -> list[dict]:
    """The parts of every user message of a request, strings as text parts."""
    parts: list[dict] = []
    for message in body["messages"]:
        if message["role"] == "user":
            content = message["content"]
            parts += [{"type": "text", "text": content}] if isinstance(content, str) else content
    return parts


def _texts(body: dict) -> str:
    return "\n".join(p.get("text", "") for p in _user_parts(body))


def _images(body: dict) -> list[str]:
    return [p["image_url"]["url"] for p in _user_parts(body) if p.get("type") == "image_url"]


async def test_a_users_image_is_described_once_for_a_text_only_model(hermes_home, project):
    (hermes_home / "config.toml").write_text(WITH_VISION)
    script = TwoModels([{"text": "The build fails: `x` is undefined."}, {"text": "Define x first."}])
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            assert conn.init_response.agent_capabilities.prompt_capabilities.image is True  # the vision model sees for it
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            prompt = [acp.text_block("why does my build fail?"), acp.image_block(PIXEL, "image/png")]
            assert (await conn.prompt(session_id=sid, prompt=prompt)).stop_reason == "end_turn"
            await conn.prompt(session_id=sid, prompt=[acp.text_block("and how do I fix it?")])
        replay = Client()
        async with running_agent(replay, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
    (seen,) = _requests(server, "scripted-vision")  # once, though the history was sent twice
    assert _images(seen) == [f"data:image/png;base64,{PIXEL}"]
    assert "Describe this image" in _texts(seen) and "why does my build fail?" in _texts(seen)
    assert "tools" not in seen
    first, second = _requests(server, "scripted")
    for body in (first, second):
        assert _images(body) == []
        assert f"[Image: {DESCRIPTION}]" in _texts(body) and "why does my build fail?" in _texts(body)
    assert "and how do I fix it?" in _texts(second)
    assert "openai:scripted-vision described the image for openai:scripted" in client.text()
    replayed = "".join(u.content.text for u in replay.of_kind("user_message_chunk") if u.content.type == "text")
    assert f"[Image: {DESCRIPTION}]" in replayed
    assert not [u for u in replay.of_kind("user_message_chunk") if u.content.type == "image"]


async def test_inspect_image_asks_the_vision_model_about_a_project_file(hermes_home, project):
    (hermes_home / "config.toml").write_text(WITH_VISION)
    (project / "shots").mkdir()
    (project / "shots" / "pixel.png").write_bytes(base64.b64decode(PIXEL))
    (project / "notes.png").write_text("not an image\n")
    question = "What colour is the pixel?"
    script = TwoModels(
        [
            {
                "tool_calls": [
                    {"id": "i1", "name": "inspect_image", "arguments": {"path_or_url": "shots/pixel.png", "question": question}},
                    {"id": "i2", "name": "inspect_image", "arguments": {"path_or_url": "notes.png", "question": question}},
                ]
            },
            {"text": "It is red."},
        ],
        vision="The single pixel is red.",
    )
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("look at shots/pixel.png")])
    (seen,) = _requests(server, "scripted-vision")
    assert _images(seen) == [f"data:image/png;base64,{PIXEL}"] and question in _texts(seen)
    assert "inspect_image" in [t["function"]["name"] for t in _requests(server, "scripted")[0]["tools"]]
    results = {m["tool_call_id"]: m["content"] for m in _requests(server, "scripted")[1]["messages"] if m["role"] == "tool"}
    assert results["i1"] == "The single pixel is red."
    assert "notes.png is not a PNG, JPEG, GIF or WebP image" in results["i2"]
    start = [u for u in client.tool_updates("i1") if u.session_update == "tool_call"][0]
    assert start.kind == "read" and start.title == "Inspect shots/pixel.png"
    assert start.locations[0].path == str(project / "shots" / "pixel.png")
    assert {u.status for u in client.tool_updates("i1") if u.session_update == "tool_call_update"} >= {"completed"}
    assert "failed" in {u.status for u in client.tool_updates("i2") if u.session_update == "tool_call_update"}


async def test_a_model_that_takes_images_inspects_them_itself(hermes_home, project):
    (project / "pixel.png").write_bytes(base64.b64decode(PIXEL))
    call = {"id": "i1", "name": "inspect_image", "arguments": {"path_or_url": f"data:image/png;base64,{PIXEL}", "question": "Colour?"}}
    script = [{"tool_calls": [call]}, {"text": "Red."}, {"text": "It is red."}, {"text": "Red, as I said."}]
    with ScriptedOpenAIServer(script) as server:
        async with running_agent(Client(), agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("what colour?")])
            await conn.prompt(session_id=sid, prompt=[acp.text_block("again"), acp.image_block(PIXEL, "image/png")])
    looked, answered, after, again = server.requests
    assert looked["tools"] and "tools" not in answered  # the tool's request carries no tools
    assert [m["content"] for m in after["messages"] if m["role"] == "tool"] == ["Red."]
    assert _images(answered) == [f"data:image/png;base64,{PIXEL}"] and "Colour?" in _texts(answered)
    assert _images(again) == [f"data:image/png;base64,{PIXEL}"]  # a user's image goes to the model as it is


async def test_without_a_vision_model_a_text_only_model_is_told_it_cannot_see(hermes_home, project):
    (hermes_home / "config.toml").write_text(TEXT_ONLY)
    (project / "pixel.png").write_bytes(base64.b64decode(PIXEL))
    call = {"id": "i1", "name": "inspect_image", "arguments": {"path_or_url": "pixel.png", "question": "Colour?"}}
    script = [{"text": "I cannot see it."}, {"tool_calls": [call]}, {"text": "No vision."}]
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            assert conn.init_response.agent_capabilities.prompt_capabilities.image is False
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("what is this?"), acp.image_block(PIXEL, "image/png")])
            told = client.text()
            await conn.prompt(session_id=sid, prompt=[acp.text_block("inspect pixel.png")])
    assert "An image was not shown to the model" in told and '[models] vision = "provider:model"' in told
    assert {r["model"] for r in server.requests} == {"scripted"}
    first = server.requests[0]
    assert _images(first) == [] and "you cannot see it" in _texts(first) and "what is this?" in _texts(first)
    result = [m for m in server.requests[2]["messages"] if m["role"] == "tool"][0]["content"]
    assert "Cannot look at images: openai:scripted does not take images" in result and "[models] vision" in result


async def test_a_vision_model_that_does_not_resolve_is_named_when_an_image_comes(hermes_home, project):
    # Two providers: with one, any name is a model of it (Ollama's names hold ':' too).
    local = '[providers.local]\nbase_url = "http://127.0.0.1:9/v1"\n'
    (hermes_home / "config.toml").write_text(TEXT_ONLY + local + '[models]\nvision = "nowhere:eyes"\n')
    with ScriptedOpenAIServer([{"text": "I cannot see it."}]) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.image_block(PIXEL, "image/png")])
    assert "[models] vision = 'nowhere:eyes' in config.toml does not name a configured model" in client.text()
    assert "configured: local, openai" in client.text()
    assert _images(server.requests[0]) == [] and "you cannot see it" in _texts(server.requests[0])


class _Images(BaseHTTPRequestHandler):
    """/shot redirects to /pixel.png, a PNG."""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        if self.path == "/shot":
            self.send_response(302)
            self.send_header("Location", "/pixel.png")
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        body = base64.b64decode(PIXEL)
        self.send_response(200)
        self.send_header("Content-Type", "image/png")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def image_server():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Images)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


async def test_inspect_image_fetches_a_url_asking_for_a_loopback_address_as_web_fetch_does(hermes_home, project, image_server):
    (hermes_home / "config.toml").write_text(WITH_VISION)
    call = {"id": "u1", "name": "inspect_image", "arguments": {"path_or_url": f"{image_server}/shot", "question": "Colour?"}}
    script = TwoModels([{"tool_calls": [call]}, {"text": "Red."}], vision="Red.")
    with ScriptedOpenAIServer(script) as server:
        client = Client(answer="allow_once")
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("look at the screenshot")])
    (asked,) = client.permission_requests  # the redirect to the same host and address asks no second question
    assert "127.0.0.1 is a loopback address" in asked.title and asked.title.startswith(f"Fetch {image_server}/shot")
    (seen,) = _requests(server, "scripted-vision")
    assert _images(seen) == [f"data:image/png;base64,{PIXEL}"]
    result = [m for m in _requests(server, "scripted")[1]["messages"] if m["role"] == "tool"][0]["content"]
    assert result == "Red."


async def test_a_failed_description_is_told_and_the_turn_goes_on(hermes_home, project):
    (hermes_home / "config.toml").write_text(WITH_VISION)
    script = TwoModels([{"text": "I could not see it."}], vision={"error": 400, "message": "image too large for this model"})
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            response = await conn.prompt(session_id=sid, prompt=[acp.text_block("see?"), acp.image_block(PIXEL, "image/png")])
    assert response.stop_reason == "end_turn" and client.text().rstrip().endswith("I could not see it.")
    assert "An image could not be described" in client.text() and "image too large for this model" in client.text()
    (main,) = _requests(server, "scripted")
    assert _images(main) == [] and "it could not be described" in _texts(main)


async def test_a_turn_cancelled_while_its_image_is_described_keeps_the_users_words(hermes_home, project):
    (hermes_home / "config.toml").write_text(WITH_VISION)
    script = TwoModels([{"text": "Your build fails on `x`."}], vision={"hang": True})
    with ScriptedOpenAIServer(script) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            prompt = [acp.text_block("why does my build fail?"), acp.image_block(PIXEL, "image/png")]
            turn = asyncio.create_task(conn.prompt(session_id=sid, prompt=prompt))
            await until(lambda: _requests(server, "scripted-vision"), what="the vision model's request")
            await conn.cancel(session_id=sid)
            assert (await asyncio.wait_for(turn, 20)).stop_reason == "cancelled"
            await conn.prompt(session_id=sid, prompt=[acp.text_block("did you get my question?")])
        replay = Client()
        async with running_agent(replay, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            await conn.load_session(cwd=str(project), session_id=sid, mcp_servers=[])
    (main,) = _requests(server, "scripted")
    assert _images(main) == []
    assert "why does my build fail?" in _texts(main) and "it was not described" in _texts(main)
    assert "did you get my question?" in _texts(main)
    replayed = "".join(u.content.text for u in replay.of_kind("user_message_chunk") if u.content.type == "text")
    assert "why does my build fail?" in replayed and "it was not described" in replayed
