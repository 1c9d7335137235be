"""The client's model when none is configured: MCP sampling through the real hermes-mcp process.

The test's sampling callback is the edge: it answers ``sampling/createMessage`` as a client's
model would (in the handshake era as a request during the call, in the 2026-07-28 era through
``input_required`` rounds of the same call).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp_types import (
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitResult,
    ErrorData,
    SamplingCapability,
    SamplingToolsCapability,
    TextContent,
    ToolUseContent,
)

from core.store import SessionStore
from hermes_mcp.sampling import MAX_ROUNDS
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import BIN, ERAS, SECRET_KEY, allow_projects, connected, data, error_text, hermes_mcp, mcp_env
from tests.hermes_mcp.test_http import http_server

WITH_TOOLS = SamplingCapability(tools=SamplingToolsCapability())


@pytest.fixture
def project(tmp_path, hermes_home) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("def greet():\n    return 'hi'\n")
    allow_projects(hermes_home, root)
    return root


class ClientModel:
    """What a client's model answers, one answer per sampling request, and what it was asked."""

    def __init__(self, answers: list) -> None:
        self.answers = list(answers)
        self.asked: list = []
        self.request_ids: list = []

    async def __call__(self, context, params):
        self.asked.append(params)
        self.request_ids.append(context.request_id)
        return self.answers.pop(0)


def carried_as(mode: str, model: ClientModel) -> None:
    """Each step came as its era carries it: a request during the call, or an input_required round."""
    rounds = [str(r).startswith("sample:") for r in model.request_ids]
    assert rounds == [mode != "legacy"] * len(rounds), model.request_ids


def _text(answer: str, model: str = "client-model-7") -> CreateMessageResult:
    return CreateMessageResult(role="assistant", content=TextContent(text=answer), model=model, stop_reason="endTurn")


def _blocks(message) -> list:
    return message.content if isinstance(message.content, list) else [message.content]


@pytest.mark.parametrize("mode", ERAS)
async def test_with_no_model_configured_the_clients_model_answers_and_is_named(hermes_home, project, mode):
    model = ClientModel([_text("Hello from the client's model.")])
    async with connected(mcp_env(hermes_home), mode=mode, sampling_callback=model) as client:
        view = data(await client.call_tool("ask", {"prompt": "say hello", "cwd": str(project)}))
    assert view["status"] == "done", view
    assert view["reply"] == "Hello from the client's model."
    carried_as(mode, model)
    assert any("Answered by the client's model client-model-7" in n for n in view["notices"]), view["notices"]
    # This client offers sampling without tools: the agent runs without them, and says so.
    assert any("without the agent's tools" in n for n in view["notices"]), view["notices"]
    (params,) = model.asked
    assert params.tools is None and params.tool_choice is None
    assert "No tools are available" in params.system_prompt
    assert [m.role for m in params.messages] == ["user"]
    assert _blocks(params.messages[-1])[-1].text == "say hello"
    async with SessionStore.open() as store:
        record = await store.get_session(view["session_id"])
        assert record is not None and record.model == "mcp-client:client-model-7"
        stored = [m.message for m in await store.messages(record.id)]
    assert [m.kind for m in stored] == ["user", "assistant"]
    assert stored[1].model == "mcp-client:client-model-7"


@pytest.mark.parametrize("mode", ERAS)
async def test_a_tool_call_through_sampling_with_tools(hermes_home, project, mode):
    model = ClientModel(
        [
            CreateMessageResultWithTools(
                role="assistant",
                content=[
                    TextContent(text="I'll write the todo."),
                    ToolUseContent(id="tu_1", name="write_file", input={"path": "todo.md", "content": "- ship it\n"}),
                ],
                model="client-model-7",
                stop_reason="toolUse",
            ),
            CreateMessageResultWithTools(
                role="assistant", content=[TextContent(text="Wrote todo.md.")], model="client-model-7", stop_reason="endTurn"
            ),
        ]
    )
    async with connected(mcp_env(hermes_home), mode=mode, sampling_callback=model, sampling_capabilities=WITH_TOOLS) as client:
        view = data(await client.call_tool("ask", {"prompt": "add a todo", "cwd": str(project), "mode": "accept-edits"}))
    assert view["status"] == "done", view
    carried_as(mode, model)
    assert (project / "todo.md").read_text() == "- ship it\n"
    assert view["reply"].endswith("Wrote todo.md.")
    assert [s["tool"] for s in view["steps"]] == ["write_file"] and view["steps"][0]["status"] == "completed"
    assert [f["path"] for f in view["changed_files"]] == [str(project.resolve() / "todo.md")]
    assert not any("without the agent's tools" in n for n in view["notices"]), view["notices"]
    first, second = model.asked
    offered = {t.name: t for t in first.tools}
    assert {"write_file", "read_file", "run_command"} <= set(offered)
    assert offered["write_file"].input_schema["type"] == "object" and "path" in offered["write_file"].input_schema["properties"]
    assert "No tools are available" not in first.system_prompt
    # The second step carries the model's tool call and the tool's result, as sampling blocks.
    assert [m.role for m in second.messages] == ["user", "assistant", "user"]
    use = [b for b in _blocks(second.messages[1]) if b.type == "tool_use"]
    assert [(u.id, u.name) for u in use] == [("tu_1", "write_file")]
    (result,) = _blocks(second.messages[2])
    assert result.type == "tool_result" and result.tool_use_id == "tu_1" and not result.is_error
    assert "todo.md" in result.content[0].text


@pytest.mark.parametrize("mode", ERAS)
async def test_an_approval_between_sampled_steps_is_asked_in_the_clients_form(hermes_home, project, mode):
    write = ToolUseContent(id="tu_1", name="write_file", input={"path": "todo.md", "content": "- ship it\n"})
    model = ClientModel(
        [
            CreateMessageResultWithTools(role="assistant", content=[write], model="client-model-7", stop_reason="toolUse"),
            CreateMessageResultWithTools(role="assistant", content=[TextContent(text="Created.")], model="client-model-7"),
        ]
    )
    asked: list = []

    async def elicit(context, params):
        asked.append(params.message)
        return ElicitResult(action="accept", content={"decision": "allow"})

    options = {"sampling_callback": model, "sampling_capabilities": WITH_TOOLS, "elicitation_callback": elicit}
    async with connected(mcp_env(hermes_home), mode=mode, **options) as client:
        view = data(await client.call_tool("ask", {"prompt": "add a todo", "cwd": str(project)}))
    assert view["status"] == "done" and view["reply"] == "Created.", view
    assert (project / "todo.md").read_text() == "- ship it\n"
    (question,) = asked
    assert "todo.md" in question and "+- ship it" in question
    assert len(model.asked) == 2
    carried_as(mode, model)


async def test_a_conversation_with_tool_calls_goes_on_with_a_client_without_tools(hermes_home, project):
    write = ToolUseContent(id="tu_1", name="write_file", input={"path": "todo.md", "content": "- ship it\n"})
    with_tools = ClientModel(
        [
            CreateMessageResultWithTools(role="assistant", content=[write], model="client-model-7", stop_reason="toolUse"),
            CreateMessageResultWithTools(role="assistant", content=[TextContent(text="Created.")], model="client-model-7"),
        ]
    )
    async with connected(mcp_env(hermes_home), sampling_callback=with_tools, sampling_capabilities=WITH_TOOLS) as client:
        first = data(await client.call_tool("ask", {"prompt": "add a todo", "cwd": str(project), "mode": "accept-edits"}))
    assert first["status"] == "done", first
    plain = ClientModel([_text("It holds one entry.", model="client-model-8")])
    async with connected(mcp_env(hermes_home), sampling_callback=plain) as client:
        view = data(await client.call_tool("ask", {"prompt": "what is in it?", "session_id": first["session_id"]}))
    assert view["status"] == "done" and view["reply"] == "It holds one entry.", view
    assert any("client-model-8" in n for n in view["notices"])
    (params,) = plain.asked
    blocks = [b for m in params.messages for b in _blocks(m)]
    assert {b.type for b in blocks} == {"text"}, "without sampling tools the earlier calls travel as text"
    said = "\n".join(b.text for b in blocks)
    assert "[called the tool write_file with" in said and "[result of the tool write_file]" in said
    assert said.index("add a todo") < said.index("write_file") < said.index("Created.") < said.index("what is in it?")


async def test_a_long_turn_in_the_2026_era_ends_the_call_before_the_clients_round_limit(hermes_home, project):
    def read(n: int) -> CreateMessageResultWithTools:
        use = ToolUseContent(id=f"tu_{n}", name="read_file", input={"path": "app.py"})
        return CreateMessageResultWithTools(role="assistant", content=[use], model="client-model-7", stop_reason="toolUse")

    # Twelve steps: more than the client allows one call (10 rounds), as many as two calls carry.
    last = CreateMessageResultWithTools(role="assistant", content=[TextContent(text="Read it eleven times.")], model="client-model-7")
    model = ClientModel([*(read(n) for n in range(11)), last])
    async with connected(mcp_env(hermes_home), mode="2026-07-28", sampling_callback=model, sampling_capabilities=WITH_TOOLS) as client:
        first = data(await client.call_tool("ask", {"prompt": "read app.py again and again", "cwd": str(project)}))
        # The SDK's client stops a call after 10 rounds: the call ends first, saying how to go on.
        assert first["status"] == "running" and len(model.asked) == MAX_ROUNDS, (first, len(model.asked))
        assert "task_wait" in first["next"]
        waited = data(await client.call_tool("task_wait", {"task_id": first["task_id"], "wait": 30}))
    assert waited["status"] == "done" and waited["reply"] == "Read it eleven times.", waited
    assert len(model.asked) == 12 and [s["status"] for s in waited["steps"]] == ["completed"] * 11


async def test_task_start_waits_for_task_wait_to_carry_each_step(hermes_home, project):
    model = ClientModel([_text("Done at last.")])
    async with connected(mcp_env(hermes_home), sampling_callback=model) as client:
        started = data(await client.call_tool("task_start", {"prompt": "take your time", "cwd": str(project)}))
        status = data(await client.call_tool("task_status", {"task_id": started["task_id"]}))
        assert status["status"] == "running" and model.asked == [], "nothing is asked outside a call that follows the task"
        waited = data(await client.call_tool("task_wait", {"task_id": started["task_id"], "wait": 30}))
    assert waited["status"] == "done" and waited["reply"] == "Done at last."
    assert len(model.asked) == 1


async def test_a_refused_sampling_request_fails_the_task_and_says_what_to_do(hermes_home, project):
    async def refuse(context, params):
        return ErrorData(code=-1, message="User rejected sampling request")

    async with connected(mcp_env(hermes_home), sampling_callback=refuse) as client:
        view = data(await client.call_tool("ask", {"prompt": "hi", "cwd": str(project)}))
    assert view["status"] == "failed", view
    assert "User rejected sampling request" in view["error"] and "hermes-editor setup" in view["error"]


async def test_without_sampling_no_model_is_the_same_clear_error(hermes_home, project):
    async def elicit(context, params):  # a client with other capabilities, but not sampling
        raise AssertionError("nothing to ask")

    async with connected(mcp_env(hermes_home), elicitation_callback=elicit) as client:
        text = error_text(await client.call_tool("ask", {"prompt": "hi", "cwd": str(project)}))
    assert "No model is configured. Run 'hermes-editor setup'" in text and "client's model" not in text, text


async def test_a_configured_model_answers_even_when_the_client_offers_sampling(hermes_home, project):
    model = ClientModel([])
    with ScriptedOpenAIServer([{"text": "From the configured model."}]) as server:
        async with connected(mcp_env(hermes_home, server.base_url), sampling_callback=model) as client:
            view = data(await client.call_tool("ask", {"prompt": "hi", "cwd": str(project)}))
    assert view["reply"] == "From the configured model." and model.asked == []
    assert not any("client's model" in n for n in view["notices"])


@pytest.mark.parametrize("mode", ERAS)
async def test_over_http_the_steps_ride_the_calls_stream(hermes_home, project, mode):
    model = ClientModel([_text("Over HTTP.", model="client-model-9")])
    with http_server(mcp_env(hermes_home)) as served:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {served.token}"}) as http:
            transport = streamable_http_client(served.url, http_client=http)
            async with Client(transport, mode=mode, cache=None, sampling_callback=model) as client:
                view = data(await client.call_tool("ask", {"prompt": "hi", "cwd": str(project)}))
    assert view["status"] == "done" and view["reply"] == "Over HTTP.", view
    assert any("client-model-9" in n for n in view["notices"])
    carried_as(mode, model)


def test_doctor_says_hermes_mcp_uses_the_clients_model_when_none_is_configured(hermes_home):
    env = {**os.environ, "HERMES_EDITOR_HOME": str(hermes_home), "HERMES_QUIET": "1"}
    result = subprocess.run([str(BIN / "hermes-editor"), "doctor"], capture_output=True, text=True, env=env, timeout=120)
    assert "✗ No model is configured" in result.stdout, result.stdout + result.stderr
    assert "· No model configured: hermes-mcp will use the client's model where the client offers sampling" in result.stdout
    with ScriptedOpenAIServer([{"text": "OK"}]) as server:
        configured = {**env, "OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": SECRET_KEY, "HERMES_MODEL": "openai:scripted"}
        result = subprocess.run([str(BIN / "hermes-editor"), "doctor"], capture_output=True, text=True, env=configured, timeout=120)
    assert "client's model" not in result.stdout, result.stdout


def test_the_inspector_cli_which_offers_no_sampling_gets_the_no_model_error(hermes_home, project):
    from tests.hermes_mcp.test_inspector import _inspector

    command = [str(_inspector()), "--cli", hermes_mcp(), "-e", f"HERMES_EDITOR_HOME={hermes_home}", "-e", "HERMES_QUIET=1"]
    command += ["--method", "tools/call", "--tool-name", "ask", "--tool-arg", "prompt=hi", "--tool-arg", f"cwd={project}"]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
    # The Inspector exits 5 for a tool result with isError, after printing the result.
    assert proc.returncode == 5, proc.stdout[-2000:] + proc.stderr[-2000:]
    answer = json.loads(proc.stdout)
    assert answer["isError"] is True
    text = answer["content"][0]["text"]
    assert "No model is configured. Run 'hermes-editor setup'" in text and "client's model" not in text, text
