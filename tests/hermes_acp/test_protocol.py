"""Protocol behaviour of the real hermes-acp: initialize, auth, errors, stdout purity."""

from __future__ import annotations

import json
import subprocess

import acp
import pytest

from tests.acp_harness import Client, agent_env, hermes_acp, running_agent
from tests.acp_schema import validate_transcript
from tests.fakes.openai_server import ScriptedOpenAIServer


async def test_initialize_is_truthful(hermes_home):
    client = Client()
    async with running_agent(client, agent_env(hermes_home, None)) as (conn, _, _):
        init = conn.init_response
    assert init.protocol_version == acp.PROTOCOL_VERSION
    assert init.agent_info.name == "hermes-editor" and init.agent_info.version
    caps = init.agent_capabilities
    assert caps.load_session is True
    sessions = caps.session_capabilities
    assert sessions.list is not None and sessions.resume is not None and sessions.close is not None and sessions.fork is not None
    assert caps.prompt_capabilities.embedded_context is True
    assert caps.prompt_capabilities.image is False  # no model configured: nothing known to accept images
    assert init.auth_methods, "editors show these when session/new needs auth"


async def test_no_model_configured_asks_for_auth_then_works(hermes_home, tmp_path):
    project = tmp_path / "p"
    project.mkdir()
    client = Client()
    with ScriptedOpenAIServer([{"text": "configured now"}]) as server:
        env = agent_env(hermes_home, None)
        async with running_agent(client, env) as (conn, _, _):
            with pytest.raises(acp.RequestError) as info:
                await conn.new_session(cwd=str(project), mcp_servers=[])
            assert info.value.code == -32000
            assert "hermes-acp --setup" in json.dumps(info.value.data)
            method = conn.init_response.auth_methods[-1].id
            # Still nothing configured: authenticate says so.
            with pytest.raises(acp.RequestError) as again:
                await conn.authenticate(method_id=method)
            assert again.value.code == -32000
            # The user runs set-up (here: writes the config) and picks the method again.
            (hermes_home / "config.toml").write_text(
                f'model = "local:scripted"\n[providers.local]\nprofile = "openai-compatible"\nbase_url = "{server.base_url}"\n'
            )
            await conn.authenticate(method_id=method)
            session = await conn.new_session(cwd=str(project), mcp_servers=[])
            response = await conn.prompt(session_id=session.session_id, prompt=[acp.text_block("hi")])
    assert response.stop_reason == "end_turn"
    assert client.text() == "configured now"


async def test_terminal_auth_method_when_the_client_supports_it(hermes_home):
    from acp.schema import ClientCapabilities

    client = Client()
    client.capabilities = lambda: ClientCapabilities(auth={"terminal": True})
    async with running_agent(client, agent_env(hermes_home, None)) as (conn, _, _):
        methods = conn.init_response.auth_methods
    terminal = [m for m in methods if getattr(m, "type", None) == "terminal"]
    assert terminal and terminal[0].args == ["--setup"]


async def test_invalid_config_names_the_key(hermes_home, tmp_path):
    (hermes_home / "config.toml").write_text('model = "openai:x"\nmax_steps = "many"\n')
    client = Client()
    async with running_agent(client, agent_env(hermes_home, None)) as (conn, _, _):
        with pytest.raises(acp.RequestError) as info:
            await conn.new_session(cwd=str(tmp_path), mcp_servers=[])
    details = json.dumps(info.value.data)
    assert "max_steps" in details and "config.toml" in details


async def test_session_new_validates_its_params(hermes_home, tmp_path):
    with ScriptedOpenAIServer([]) as server:
        client = Client()
        async with running_agent(client, agent_env(hermes_home, server.base_url)) as (conn, _, _):
            with pytest.raises(acp.RequestError) as relative:
                await conn.new_session(cwd="relative/dir", mcp_servers=[])
            assert relative.value.code == -32602
            with pytest.raises(acp.RequestError) as unknown:
                await conn.prompt(session_id="no-such-session", prompt=[acp.text_block("x")])
            assert unknown.value.code == -32602


def _raw_exchange(home, lines: list[str], timeout: float = 30) -> tuple[list[str], str]:
    env = agent_env(home, None)
    proc = subprocess.run([hermes_acp()], input="".join(l + "\n" for l in lines), capture_output=True, text=True, env=env, timeout=timeout)
    return proc.stdout.splitlines(), proc.stderr


def test_unsupported_methods_answer_method_not_found(hermes_home):
    methods = ["session/delete", "session/set_model", "logout", "_hermes/x", "nonsense"]
    lines = [json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": {}}) for i, m in enumerate(methods)]
    out, _ = _raw_exchange(hermes_home, lines)
    answers = {msg["id"]: msg for msg in map(json.loads, out)}
    for i, method in enumerate(methods):
        assert answers[i].get("error", {}).get("code") == -32601, (method, answers[i])


def test_malformed_input_gets_errors_and_the_server_keeps_serving(hermes_home):
    init = {"jsonrpc": "2.0", "id": 7, "method": "initialize", "params": {"protocolVersion": 1}}
    lines = ["{not json", "[1, 2, 3]", '"just a string"', '{"jsonrpc": "2.0"}', '{"jsonrpc":"2.0","id":1,"method":5}', json.dumps(init)]
    out, _ = _raw_exchange(hermes_home, lines)
    messages = [json.loads(line) for line in out]
    codes = [m["error"]["code"] for m in messages if "error" in m]
    assert codes == [-32700, -32600, -32600, -32600, -32600]
    assert [m for m in messages if m.get("id") == 7 and "result" in m], "initialize after garbage must still answer"


def test_stdout_carries_only_json_rpc_through_a_whole_turn(hermes_home, tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    # The command writes to stdout and stderr: neither may reach our stdout.
    script = [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": "echo to-stdout; echo to-stderr >&2"}}]},
        {"text": "done"},
    ]
    (hermes_home / "config.toml").write_text("[approvals]\ntimeout = 0.5\n")
    with ScriptedOpenAIServer(script) as server:
        env = agent_env(hermes_home, server.base_url)
        env.pop("HERMES_QUIET")
        lines = [
            json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1, "clientCapabilities": {}}}),
            json.dumps({"jsonrpc": "2.0", "id": 2, "method": "session/new", "params": {"cwd": str(project), "mcpServers": []}}),
        ]
        proc = subprocess.Popen([hermes_acp()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        for line in lines:
            proc.stdin.write(line + "\n")
        proc.stdin.flush()
        out_lines = [proc.stdout.readline(), proc.stdout.readline()]
        sid = json.loads(out_lines[1])["result"]["sessionId"]
        proc.stdin.write(
            json.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "method": "session/prompt",
                    "params": {"sessionId": sid, "prompt": [{"type": "text", "text": "go"}]},
                }
            )
            + "\n"
        )
        proc.stdin.flush()
        while True:
            line = proc.stdout.readline()
            assert line, "hermes-acp closed stdout before answering the prompt"
            out_lines.append(line)
            message = json.loads(line)
            if message.get("method") == "session/request_permission":
                answer = {"outcome": {"outcome": "selected", "optionId": "allow_once"}}
                proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": message["id"], "result": answer}) + "\n")
                proc.stdin.flush()
            if message.get("id") == 3:
                break
        proc.stdin.close()
        proc.wait(timeout=10)
        stderr = proc.stderr.read()
    for line in out_lines:
        message = json.loads(line)
        assert message.get("jsonrpc") == "2.0"
    assert json.loads(out_lines[-1])["result"]["stopReason"] == "end_turn"
    assert not any("to-stdout" in l and "jsonrpc" not in l for l in out_lines)
    assert "sk-test-not-a-real-key" not in stderr


def test_schema_check_catches_a_bad_message():
    """The transcript check every end-to-end test runs can fail."""
    bad = [
        ("outgoing", {"jsonrpc": "2.0", "id": 0, "method": "session/prompt", "params": {}}),
        ("incoming", {"jsonrpc": "2.0", "id": 0, "result": {"stopReason": "finished"}}),
        (
            "incoming",
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": "s", "update": {"sessionUpdate": "tool_call", "toolCallId": "a", "title": "t", "status": "weird"}},
            },
        ),
    ]
    problems = validate_transcript(bad)
    assert any("stopReason" in p for p in problems)
    assert any("session/update" in p for p in problems)


def test_fifty_megabyte_lines_are_handled(hermes_home):
    big = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "no/such", "params": {"blob": "x" * 50_000_000}})
    huge = '{"jsonrpc": "2.0", "id": 2, "method": "no/such", "params": {"blob": "' + "y" * 70_000_000 + '"}}'
    init = json.dumps({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 1}})
    out, _ = _raw_exchange(hermes_home, [big, huge, init], timeout=120)
    messages = [json.loads(line) for line in out]
    assert messages[0]["id"] == 1 and messages[0]["error"]["code"] == -32601
    assert messages[1]["error"]["code"] == -32600 and "longer than" in messages[1]["error"]["data"]["details"]
    assert messages[2]["id"] == 3 and "result" in messages[2]


def test_out_of_order_calls_are_errors_not_crashes(hermes_home, tmp_path):
    lines = [
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "session/prompt",
                "params": {"sessionId": "x", "prompt": [{"type": "text", "text": "hi"}]},
            }
        ),
        json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/load",
                "params": {"sessionId": "missing", "cwd": str(tmp_path), "mcpServers": []},
            }
        ),
        json.dumps({"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "never-existed"}}),
        json.dumps({"jsonrpc": "2.0", "id": 3, "method": "initialize", "params": {"protocolVersion": 1}}),
        json.dumps({"jsonrpc": "2.0", "id": 4, "method": "initialize", "params": {"protocolVersion": 1}}),
    ]
    out, _ = _raw_exchange(hermes_home, lines)
    answers = {m["id"]: m for m in map(json.loads, out)}
    assert answers[1]["error"]["code"] in (-32602, -32000)
    assert answers[2]["error"]["code"] in (-32602, -32000)
    assert "result" in answers[3] and "result" in answers[4]
    assert set(answers) == {1, 2, 3, 4}, "the cancel notification is never answered"
