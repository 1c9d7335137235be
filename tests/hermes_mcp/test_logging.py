"""Log messages over MCP, through the real hermes-mcp: ``logging/setLevel`` per connection (handshake era),
the per-request log level (2026-07-28 era), the server's own lines redacted, a task's progress as log
messages, over stdio and HTTP, and the Inspector CLI."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.acp_harness import until
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import ERAS, allow_projects, call, connected, data, hermes_mcp, mcp_env
from tests.hermes_mcp.test_http import http_server

# logging/setLevel is how handshake-era clients ask (the SDK warns that the 2026 era replaced it).
pytestmark = pytest.mark.filterwarnings("ignore:The logging capability is deprecated")

# A configured key with no credential shape: only its value tells it apart from a word.
PLAIN_SECRET = "plainsecretvalue12345"
ROOT = Path(__file__).resolve().parents[2]


class Messages:
    """What the client received as ``notifications/message``."""

    def __init__(self) -> None:
        self.all: list = []

    async def __call__(self, params) -> None:
        self.all.append(params)

    def of(self, logger: str) -> list:
        return [m for m in self.all if m.logger == logger]

    def task_events(self) -> list[dict]:
        return [m.data for m in self.of("hermes.task")]

    def lines_ending(self, tail: str) -> list:
        return [m for m in self.of("hermes_mcp.projects") if isinstance(m.data, str) and m.data.endswith(tail)]


def _secret_home(tmp_path: Path) -> Path:
    """The user's home directory, whose path holds the configured key (so a log line naming it holds it too)."""
    home = tmp_path / f"home-{PLAIN_SECRET}"
    home.mkdir()
    return home


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    (root / "app.py").write_text("def greet():\n    return 'hi'\n")
    return root


def _env(hermes_home: Path, user_home: Path, base_url: str | None = None) -> dict:
    env = mcp_env(hermes_home, base_url, extra={"HOME": str(user_home)})
    env["OPENAI_API_KEY"] = PLAIN_SECRET
    return env


async def test_set_level_sends_the_servers_own_lines_at_or_above_it_with_secrets_redacted(hermes_home, tmp_path, project):
    user_home = _secret_home(tmp_path)
    # Listing the home directory (and the folder above it) as projects makes the server warn, naming them.
    allow_projects(hermes_home, user_home.parent, user_home, project)
    messages = Messages()
    async with connected(_env(hermes_home, user_home), logging_callback=messages) as client:
        assert client.server_capabilities.logging is not None
        assert await client.set_logging_level("error") is not None
        data(await client.call_tool("skills_list", {"cwd": str(project)}))  # warns twice: below "error"
        await client.set_logging_level("warning")
        data(await client.call_tool("skills_list", {"cwd": str(project)}))  # warns twice: sent
        # The second warning of the second call is the last one sent; a line of the first call would be before it.
        await until(lambda: messages.lines_ending("it is your home directory"), what="the warning about the home directory")
    contains = messages.lines_ending("it is a folder that contains your home directory")
    (home_line,) = messages.lines_ending("it is your home directory")
    assert len(contains) == 1, "the first call's warnings were below the level and never sent"
    assert home_line.level == "warning"
    assert PLAIN_SECRET not in home_line.data and "[redacted]" in home_line.data
    assert all(PLAIN_SECRET not in json.dumps(m.data) for m in messages.all)


@pytest.mark.parametrize("level", ["info", "debug"])
async def test_a_tasks_progress_comes_as_log_messages_with_its_text_at_debug(hermes_home, tmp_path, project, level):
    allow_projects(hermes_home, project)
    script = [call("read_file", {"path": "app.py"}), {"text": "The greeting says hi.\nThat is all.", "chunk_size": 4}]
    messages = Messages()
    with ScriptedOpenAIServer(script) as server:
        async with connected(mcp_env(hermes_home, server.base_url), logging_callback=messages) as client:
            await client.set_logging_level(level)
            view = data(await client.call_tool("ask", {"prompt": "what does greet say?", "cwd": str(project), "mode": "read-only"}))
            await until(lambda: any(e["event"] == "ended" for e in messages.task_events()), what="the task's end as a log message")
    assert view["status"] == "done"
    events = messages.task_events()
    expected = ["tool_started", "tool_finished", *(["text"] if level == "debug" else []), "ended"]
    assert [e["event"] for e in events] == expected
    assert {e["task_id"] for e in events} == {view["task_id"]} and {e["session_id"] for e in events} == {view["session_id"]}
    started, finished = events[0], events[1]
    assert started["tool"] == "read_file" and finished["status"] == "completed" and finished["call_id"] == started["call_id"]
    assert events[-1]["message"] == "Task done" and events[-1]["status"] == "done"
    levels = {m.data["event"]: m.level for m in messages.of("hermes.task")}
    assert levels["tool_started"] == levels["tool_finished"] == levels["ended"] == "info"
    if level == "debug":
        assert levels["text"] == "debug" and events[2]["message"] == "The greeting says hi.\nThat is all."
        # Debug lines reach the client that asked for them, not the log file (log_level is info).
        (said,) = [m for m in messages.of("hermes_mcp.logs") if "log messages at debug" in m.data]
        assert said.level == "debug"
        assert "INFO hermes_mcp.tasks" in (hermes_home / "logs" / "mcp.log").read_text()
        assert " DEBUG " not in (hermes_home / "logs" / "mcp.log").read_text()
    # The server's own lines come too: the task's start, logged while the call ran.
    assert any(isinstance(m.data, str) and m.data.startswith(f"task {view['task_id']} started") for m in messages.of("hermes_mcp.tasks"))


async def test_a_connection_that_asks_for_nothing_gets_nothing(hermes_home, tmp_path, project):
    allow_projects(hermes_home, project)
    quiet = Messages()
    with ScriptedOpenAIServer([call("read_file", {"path": "app.py"}), {"text": "Done."}]) as server:
        env = mcp_env(hermes_home, server.base_url)
        async with connected(env, logging_callback=quiet) as client:
            first = data(await client.call_tool("ask", {"prompt": "read it", "cwd": str(project), "mode": "read-only"}))
            # A task_wait after the end: anything of the task's own would have come before its answer.
            data(await client.call_tool("task_wait", {"task_id": first["task_id"], "wait": 1}))
    assert first["status"] == "done"
    assert quiet.all == [], "no logging/setLevel: no log messages"


async def test_the_2026_era_sends_log_messages_to_the_requests_that_ask_for_them(hermes_home, project):
    allow_projects(hermes_home, project)
    script = [call("read_file", {"path": "app.py"}), {"text": "It says hi."}, call("read_file", {"path": "app.py"}), {"text": "Still hi."}]
    asked, silent = Messages(), Messages()
    with ScriptedOpenAIServer(script) as server:
        env = mcp_env(hermes_home, server.base_url)
        async with connected(env, mode="2026-07-28", log_level="info", logging_callback=asked) as client:
            view = data(await client.call_tool("ask", {"prompt": "what does greet say?", "cwd": str(project), "mode": "read-only"}))
            events = [e["event"] for e in asked.task_events()]  # on the call's own stream, before its answer
        async with connected(env, mode="2026-07-28", logging_callback=silent) as client:
            other = data(await client.call_tool("ask", {"prompt": "and now?", "cwd": str(project), "mode": "read-only"}))
    assert view["status"] == other["status"] == "done"
    assert events[:2] == ["tool_started", "tool_finished"]
    assert {m.level for m in asked.all} <= {"info", "notice", "warning", "error", "critical"}, "nothing below the level asked for"
    assert any(isinstance(m.data, str) and m.data.startswith(f"task {view['task_id']} started") for m in asked.of("hermes_mcp.tasks"))
    assert silent.all == [], "a request without a log level gets no log messages"


@pytest.mark.parametrize("mode", ERAS)
async def test_log_messages_over_http_in_both_eras(hermes_home, tmp_path, project, mode):
    user_home = _secret_home(tmp_path)
    allow_projects(hermes_home, user_home, project)
    messages = Messages()
    options = {"log_level": "warning"} if mode != "legacy" else {}
    with http_server(_env(hermes_home, user_home)) as served:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {served.token}"}) as http:
            transport = streamable_http_client(served.url, http_client=http)
            async with Client(transport, mode=mode, cache=None, logging_callback=messages, **options) as client:
                if mode == "legacy":
                    await client.set_logging_level("warning")
                data(await client.call_tool("skills_list", {"cwd": str(project)}))
                await until(lambda: messages.lines_ending("it is your home directory"), what="the warning over HTTP")
    (line,) = messages.lines_ending("it is your home directory")
    assert line.level == "warning" and PLAIN_SECRET not in line.data and "[redacted]" in line.data
    assert PLAIN_SECRET not in served.stderr


def _inspector(hermes_home: Path, *args: str) -> dict:
    launcher = ROOT / "node_modules" / ".bin" / "mcp-inspector"
    if not launcher.exists():
        subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=ROOT, check=True, capture_output=True)
    command = [str(launcher), "--cli", hermes_mcp(), "-e", f"HERMES_EDITOR_HOME={hermes_home}", "-e", "HERMES_QUIET=1", *args]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_the_inspector_sets_the_log_level_and_sees_both_capabilities(hermes_home):
    # The Inspector CLI offers logging/setLevel (not completion/complete, nor a way to read log messages).
    assert _inspector(hermes_home, "--method", "logging/setLevel", "--log-level", "debug") == {}
    capabilities = _inspector(hermes_home, "--method", "initialize")["capabilities"]
    assert capabilities["logging"] == {} and capabilities["completions"] == {}
