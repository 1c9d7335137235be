"""hermes-acp answers ``initialize`` and ``session/new`` while the ACP SDK is still loading.

Those early answers must be exactly what the server itself answers (HERMES_ACP_NO_FAST_INIT turns
the early path off, for comparison), and what the client does right after must work on the
session it was given.
"""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

import acp
import pytest

from tests.acp_harness import agent_env, hermes_acp
from tests.acp_schema import validate_transcript
from tests.fakes.openai_server import ScriptedOpenAIServer


class RawClient:
    """hermes-acp over raw pipes, so that requests can be sent before answers arrive."""

    def __init__(self, env: dict[str, str], stderr: Path) -> None:
        self._stderr = open(stderr, "wb")
        self.proc = subprocess.Popen([hermes_acp()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env)
        self.received: list[dict] = []
        self.sent: list[dict] = []

    def send(self, message: dict) -> None:
        self.sent.append(message)
        assert self.proc.stdin
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        self.proc.stdin.flush()

    def request(self, request_id: int, method: str, params: dict) -> None:
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})

    def answer(self, request_id: int, timeout: float = 30) -> dict:
        """Read messages until the answer to ``request_id``; every line must be JSON-RPC."""
        found = [m for m in self.received if m.get("id") == request_id and "method" not in m]
        if found:
            return found[0]

        def read() -> None:
            assert self.proc.stdout
            while line := self.proc.stdout.readline():
                message = json.loads(line)  # a non-JSON byte on stdout fails here
                assert message.get("jsonrpc") == "2.0", message
                self.received.append(message)
                if message.get("id") == request_id and "method" not in message:
                    found.append(message)
                    return

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(timeout)
        assert found, f"no answer to request {request_id} within {timeout} s; got {self.received[-3:]}"
        return found[0]

    def close(self) -> None:
        assert self.proc.stdin
        self.proc.stdin.close()
        self.proc.wait(timeout=30)
        self._stderr.close()

    def transcript(self) -> list[tuple[str, dict]]:
        return [("outgoing", m) for m in self.sent] + [("incoming", m) for m in self.received]


def _handshake(env: dict[str, str], project: Path, stderr: Path, *, terminal: bool) -> tuple[dict, dict]:
    client = RawClient(env, stderr)
    caps = {"fs": {"readTextFile": True, "writeTextFile": True}, "terminal": True}
    if terminal:
        caps["auth"] = {"terminal": True}
    client.request(1, "initialize", {"protocolVersion": acp.PROTOCOL_VERSION, "clientCapabilities": caps})
    init = client.answer(1)
    client.request(2, "session/new", {"cwd": str(project), "mcpServers": []})
    new = client.answer(2)
    client.close()
    assert not validate_transcript(client.transcript())
    return init, new


@pytest.mark.parametrize("terminal", [False, True])
def test_early_answers_are_the_servers_own(hermes_home, tmp_path, terminal):
    project = tmp_path / "project"
    project.mkdir()
    # Fallbacks and a provider's model list fill the model picker; an Anthropic model adds
    # thinking levels and images, so every part of both answers is compared.
    (hermes_home / "config.toml").write_text(
        'model = "anthropic:claude-sonnet-4-5"\nfallback_models = ["openai:scripted"]\n[providers.openai]\nmodels = ["gpt-other"]\n'
    )
    with ScriptedOpenAIServer([]) as server:
        env = agent_env(hermes_home, server.base_url, extra={"ANTHROPIC_API_KEY": "sk-ant-test-000000"})
        env.pop("HERMES_MODEL")
        early = _handshake(env, project, tmp_path / "early.log", terminal=terminal)
        own = _handshake(env | {"HERMES_ACP_NO_FAST_INIT": "1"}, project, tmp_path / "own.log", terminal=terminal)
    for fast, slow in zip(early, own):
        assert "result" in fast and "result" in slow, (fast, slow)
    assert early[0]["result"] == own[0]["result"]
    assert early[0]["result"]["agentCapabilities"]["promptCapabilities"]["image"] is True
    assert any(m.get("type") == "terminal" for m in early[0]["result"]["authMethods"]) is terminal
    fast_session, slow_session = early[1]["result"], own[1]["result"]
    assert fast_session.pop("sessionId") != slow_session.pop("sessionId")
    assert fast_session == slow_session
    assert {o["id"] for o in fast_session["configOptions"]} == {"model", "mode", "thought_level"}
    log = (tmp_path / "early.log").read_text()
    assert "answered early" not in log, log


def test_a_prompt_right_after_the_early_session_runs_on_it(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    with ScriptedOpenAIServer([{"text": "hello from the model"}]) as server:
        client = RawClient(agent_env(hermes_home, server.base_url), tmp_path / "stderr.log")
        client.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        client.request(2, "session/new", {"cwd": str(project), "mcpServers": []})
        session_id = client.answer(2)["result"]["sessionId"]
        # Sent at once, most likely before the SDK has loaded; it must wait, not fail.
        client.request(3, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "say hello"}]})
        client.request(4, "session/list", {})
        prompt = client.answer(3)
        listed = client.answer(4)
        client.close()
    assert prompt.get("result", {}).get("stopReason") == "end_turn", prompt
    updates = [m["params"] for m in client.received if m.get("method") == "session/update"]
    assert all(u["sessionId"] == session_id for u in updates)
    kinds = [u["update"]["sessionUpdate"] for u in updates]
    assert "available_commands_update" in kinds
    text = "".join(u["update"]["content"]["text"] for u in updates if u["update"]["sessionUpdate"] == "agent_message_chunk")
    assert text == "hello from the model"
    # Nothing for the session comes before the answer that names it, and each request is answered once.
    order = [m.get("id") if "method" not in m else m["method"] for m in client.received]
    assert order.index(2) < order.index("session/update")
    assert sorted(i for i in order if isinstance(i, int)) == [1, 2, 3, 4]
    assert session_id in [s["sessionId"] for s in listed["result"]["sessions"]]
    assert not validate_transcript(client.transcript())


def test_a_session_announced_early_that_cannot_be_created_says_why(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (hermes_home / "state.db").mkdir()  # the store cannot be opened
    with ScriptedOpenAIServer([]) as server:
        client = RawClient(agent_env(hermes_home, server.base_url), tmp_path / "stderr.log")
        client.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        client.request(2, "session/new", {"cwd": str(project), "mcpServers": []})
        session_id = client.answer(2)["result"]["sessionId"]
        client.request(3, "session/prompt", {"sessionId": session_id, "prompt": [{"type": "text", "text": "hi"}]})
        failed = client.answer(3)
        client.close()
    error = failed.get("error")
    assert error and error["code"] == -32603, failed
    details = json.dumps(error)
    assert session_id in details and "could not be created" in details and "start a new session" in details
    assert "state.db" in details, "the reason names the thing that failed"
    assert "could not be created" in (tmp_path / "stderr.log").read_text()


def test_requests_the_early_path_does_not_take_get_the_servers_errors(hermes_home, tmp_path):
    with ScriptedOpenAIServer([]) as server:
        client = RawClient(agent_env(hermes_home, server.base_url), tmp_path / "stderr.log")
        client.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        client.request(2, "session/new", {"cwd": "relative/dir", "mcpServers": []})
        relative = client.answer(2)
        client.request(3, "session/new", {"cwd": str(tmp_path / "missing"), "mcpServers": []})
        missing = client.answer(3)
        client.close()
    assert relative["error"]["code"] == -32602 and "absolute" in json.dumps(relative["error"])
    assert missing["error"]["code"] == -32602 and "not a directory" in json.dumps(missing["error"])
    # No model configured: the early path leaves session/new to the server, which asks for auth.
    client = RawClient(agent_env(hermes_home, None), tmp_path / "stderr2.log")
    client.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
    client.request(2, "session/new", {"cwd": str(tmp_path), "mcpServers": []})
    unconfigured = client.answer(2)
    client.close()
    assert unconfigured["error"]["code"] == -32000, unconfigured


def test_the_protocol_version_constant_matches_the_sdk():
    from hermes_acp.handshake import PROTOCOL_VERSION

    assert PROTOCOL_VERSION == acp.PROTOCOL_VERSION


def test_only_the_config_loads_before_the_first_answers():
    import subprocess as sp
    import sys

    code = (
        "import sys, hermes_acp.__main__, hermes_acp.handshake, core.config, hermes_acp.options\n"
        "heavy = [m for m in ('acp', 'mcp', 'openai', 'anthropic', 'aiosqlite', 'httpx', 'core.agent.loop', 'core.store') if m in sys.modules]\n"
        "print(','.join(heavy))"
    )
    proc = sp.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""
