"""MCP servers a session brings, against a real MCP server (tests/fakes/mcp_server.py)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from core.events import Decision, PermissionNeeded, ToolUpdated
from core.host.local import LocalHost
from core.messages import ToolCallPart
from core.policy.approvals import ApprovalBroker, ApprovalPolicy
from core.tools.context import ToolContext
from core.tools.dispatch import ToolRun, run_tool
from core.tools.mcp_client import McpConnections, McpServerSpec
from core.tools.mcp_schema import mcp_tool_name, result_text

ROOT = Path(__file__).resolve().parents[2]
FAKE = ("-m", "tests.fakes.mcp_server")
WEIRD = mcp_tool_name("fake", "weird.name")  # a dot is not allowed in a tool name: the hashed form


def _stdio(name: str = "fake", *extra: str, record: Path | None = None, env: dict[str, str] | None = None) -> McpServerSpec:
    # PYTHONPATH is how an editor's config would point a server at its code; tests/ is not installed.
    full_env = {"PYTHONPATH": str(ROOT), **(env or {})}
    if record is not None:
        full_env["FAKE_MCP_RECORD"] = str(record)
    return McpServerSpec(name, "stdio", command=sys.executable, args=(*FAKE, *extra), env=tuple(full_env.items()))


def _calls(record: Path) -> list[dict]:
    if not record.exists():
        return []
    return [json.loads(line) for line in record.read_text().splitlines()]


class Session:
    """A ToolContext in ask mode, its events, and the broker to answer through."""

    def __init__(self, root: Path, tools: list) -> None:
        self.events: list = []
        self.broker = ApprovalBroker(None, timeout=5)
        self.tools = {t.name: t for t in tools}
        self.root = root

    def ctx(self) -> ToolContext:
        async def emit(event) -> None:
            self.events.append(event)

        return ToolContext(
            session_id="s",
            cwd=self.root,
            roots=[self.root.resolve()],
            host=LocalHost(),
            policy=ApprovalPolicy(mode="ask", roots=[self.root.resolve()]),
            broker=self.broker,
            emit=emit,
        )

    async def run(self, name: str, args: dict, answer: Decision | None = None) -> ToolRun:
        """Run a call; when it asks, answer with ``answer`` (a test without one fails if it asks)."""
        task = asyncio.create_task(run_tool(self.tools, ToolCallPart(id="c", name=name, arguments=args), self.ctx()))
        while not task.done():
            asked = [e for e in self.events if isinstance(e, PermissionNeeded)]
            if asked:
                assert answer is not None, f"{name} asked for approval: {asked[0].request.title}"
                assert await self.broker.answer(asked[0].request.id, answer, by="test")
                self.events.remove(asked[0])
            await asyncio.sleep(0.01)
        return task.result()

    def asked(self) -> bool:
        return any(isinstance(e, PermissionNeeded) for e in self.events)


@pytest.fixture
async def fake(tmp_path) -> AsyncIterator[tuple[McpConnections, Path]]:
    record = tmp_path / "calls.jsonl"
    connections = McpConnections(cwd=tmp_path)
    problems = await connections.start([_stdio(record=record)])
    assert problems == []
    yield connections, record
    await connections.aclose()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def http_server(tmp_path, request) -> Iterator[tuple[str, Path]]:
    """The fake server over streamable HTTP (or SSE) on 127.0.0.1, in its own process."""
    transport = getattr(request, "param", "http")
    port = _free_port()
    record = tmp_path / "http-calls.jsonl"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAKE_MCP_RECORD": str(record)}
    log = open(tmp_path / "http-server.log", "w")
    proc = subprocess.Popen([sys.executable, *FAKE, f"--{transport}", str(port)], env=env, stdout=log, stderr=log)
    try:
        deadline = time.monotonic() + 15
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                assert proc.poll() is None and time.monotonic() < deadline, (tmp_path / "http-server.log").read_text()
                time.sleep(0.05)
        path = "/mcp" if transport == "http" else "/sse"
        yield f"http://127.0.0.1:{port}{path}", record
    finally:
        proc.terminate()
        proc.wait(10)
        log.close()


def test_importing_the_client_does_not_load_the_sdk():
    code = "import sys, core.tools.mcp_client\nprint(','.join(m for m in ('mcp', 'mcp_types', 'httpx2', 'anyio') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert proc.stdout.strip() == ""


def test_tool_names_are_sanitised_capped_and_stable():
    assert mcp_tool_name("github", "create_issue") == "mcp__github__create_issue"
    weird = mcp_tool_name("my server", "weird.name")
    assert weird.startswith("mcp_") and weird.endswith("_my_server__weird_name") and weird == mcp_tool_name("my server", "weird.name")
    long_a = mcp_tool_name("a-very-long-server-name-indeed", "and_an_even_longer_tool_name_than_that_one")
    long_b = mcp_tool_name("a-very-long-server-name-indeed", "and_an_even_longer_tool_name_than_that_two")
    assert len(long_a) == len(long_b) == 64 and long_a != long_b
    assert long_a == mcp_tool_name("a-very-long-server-name-indeed", "and_an_even_longer_tool_name_than_that_one")
    assert all(c.isalnum() or c in "_-" for c in long_a + mcp_tool_name("ünï cödé", "x/y z"))


def test_result_text_joins_text_and_summarises_the_rest():
    from mcp_types import (
        CallToolResult,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    result = CallToolResult(
        content=[
            TextContent(text="first"),
            ImageContent(data="AAAA", mime_type="image/png"),
            ResourceLink(uri="file:///r.txt", name="r"),
            EmbeddedResource(resource=TextResourceContents(uri="file:///e.txt", text="embedded body")),
        ],
        structured_content={"ignored": "because there is text"},
    )
    assert result_text(result).splitlines() == [
        "first",
        "[image image/png, 3 bytes]",
        "[resource file:///r.txt]",
        "[resource file:///e.txt]",
        "embedded body",
    ]
    only_structured = CallToolResult(content=[], structured_content={"answer": 42})
    assert result_text(only_structured) == '{"answer": 42}'
    capped = result_text(CallToolResult(content=[TextContent(text="y" * 100)]), limit=10)
    assert capped.startswith("y" * 10 + "\n[truncated") and "100 characters" in capped


async def test_stdio_tools_are_listed_with_prefixed_names_and_the_servers_schema(fake):
    connections, _ = fake
    tools = {t.name: t for t in connections.tools()}
    assert "mcp__fake__echo" in tools and WEIRD in tools
    assert all(name.startswith("mcp__fake__") for name in tools if name != WEIRD)
    echo = tools["mcp__fake__echo"]
    assert echo.description == "Say the text back."
    assert (echo.kind, echo.read_only, echo.toolsets) == ("read", True, frozenset({"editor"}))
    spec = echo.spec()
    assert spec.name == "mcp__fake__echo"
    assert spec.parameters == {
        "type": "object",
        "properties": {
            "text": {"description": "what to say back", "type": "string"},
            "times": {"default": 1, "description": "how many times", "maximum": 5, "minimum": 1, "type": "integer"},
        },
        "required": ["text"],
    }
    note = tools["mcp__fake__write_note"]
    assert (note.kind, note.read_only) == ("other", False)
    assert note.spec().parameters["properties"]["priority"]["enum"] == ["low", "high"]
    assert tools[WEIRD].read_only is False, "no annotations: assume it changes things"
    assert note.title(note.args_model.model_validate({"note": "x"})) == "fake: write_note"


async def test_read_only_call_runs_without_asking(fake, tmp_path):
    connections, record = fake
    session = Session(tmp_path, connections.tools())
    run = await session.run("mcp__fake__echo", {"text": "hello", "times": 2})
    assert not run.failed and run.result.content == "hello hello"
    assert not session.asked()
    assert any(isinstance(e, ToolUpdated) for e in session.events), "the call shows as in progress"
    assert _calls(record) == [{"tool": "echo", "text": "hello", "times": 2}]


async def test_changing_call_asks_and_runs_once_allowed(fake, tmp_path):
    connections, record = fake
    session = Session(tmp_path, connections.tools())
    call = ToolCallPart(id="c", name="mcp__fake__write_note", arguments={"note": "n1"})
    task = asyncio.create_task(run_tool(session.tools, call, session.ctx()))
    while not session.asked():
        await asyncio.sleep(0.01)
    request = next(e.request for e in session.events if isinstance(e, PermissionNeeded))
    assert request.title == "Call fake.write_note" and request.reason == '{"note": "n1"}'
    assert _calls(record) == [], "nothing reaches the server before the answer"
    await session.broker.answer(request.id, Decision.ALLOW_ONCE, by="test")
    run = await task
    assert not run.failed and run.result.content == "saved 'n1'"
    assert _calls(record) == [{"tool": "write_note", "note": "n1", "priority": "low"}]


async def test_rejected_call_never_reaches_the_server(fake, tmp_path):
    connections, record = fake
    session = Session(tmp_path, connections.tools())
    run = await session.run("mcp__fake__write_note", {"note": "secret plan"}, answer=Decision.REJECT_ONCE)
    assert run.failed and "rejected" in run.result.content
    assert _calls(record) == []
    weird = await session.run(WEIRD, {}, answer=Decision.REJECT_ONCE)
    assert weird.failed and _calls(record) == []


async def test_error_results_and_other_shapes(fake, tmp_path):
    connections, _ = fake
    session = Session(tmp_path, connections.tools())
    failed = await session.run("mcp__fake__fail", {"message": "the widget is broken"})
    assert failed.failed and "the widget is broken" in failed.result.content
    invalid = await session.run("mcp__fake__echo", {"times": 9})
    assert invalid.failed and "text" in invalid.result.content, "the server's validation error reaches the model"
    mixed = await session.run("mcp__fake__mixed", {})
    assert mixed.result.content == "here is a picture\n[image image/png, 8 bytes]\n[resource file:///tmp/report.txt]"
    structured = await session.run("mcp__fake__structured_only", {})
    assert json.loads(structured.result.content) == {"answer": 42, "unit": "things"}
    big = await session.run("mcp__fake__big", {"size": 60_000})
    assert not big.failed and "[truncated: the result has 60000 characters" in big.result.content
    assert len(big.result.content) < 50_200


async def test_cancelling_a_call_cancels_it_on_the_server_promptly(fake, tmp_path):
    connections, record = fake
    session = Session(tmp_path, connections.tools())
    call = ToolCallPart(id="c", name="mcp__fake__slow", arguments={"seconds": 30})
    task = asyncio.create_task(run_tool(session.tools, call, session.ctx()))
    while {"tool": "slow", "phase": "started"} not in _calls(record):
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    deadline = time.monotonic() + 5
    while {"tool": "slow", "phase": "cancelled"} not in _calls(record):
        assert time.monotonic() < deadline, "the server never heard of the cancellation"
        await asyncio.sleep(0.05)
    again = await session.run("mcp__fake__echo", {"text": "still here"})
    assert again.result.content == "still here"


async def test_broken_servers_are_problems_and_the_good_one_still_works(tmp_path):
    connections = McpConnections(cwd=tmp_path)
    try:
        problems = await connections.start(
            [
                McpServerSpec("missing", "stdio", command="hermes-no-such-mcp-server"),
                _stdio("crashy", "--crash"),
                _stdio("good"),
                McpServerSpec("nowhere", "http", url=f"http://127.0.0.1:{_free_port()}/mcp"),
                McpServerSpec("good", "stdio", command="true"),
            ]
        )
        assert len(problems) == 4, problems
        by_server = {p.split("'")[1]: p for p in problems}
        assert "command not found: hermes-no-such-mcp-server" in by_server["missing"]
        assert "missing configuration, giving up" in by_server["crashy"], "the server's own words explain it"
        assert "cannot reach" in by_server["nowhere"]
        assert "listed twice" in by_server["good"]
        assert all("the session goes on without it" in p for p in problems if "twice" not in p)
        assert {t.server for t in connections.tools()} == {"good"}
        run = await Session(tmp_path, connections.tools()).run("mcp__good__echo", {"text": "ok"})
        assert run.result.content == "ok"
    finally:
        await connections.aclose()


async def test_a_server_that_never_answers_times_out_and_is_stopped(tmp_path):
    connections = McpConnections(cwd=tmp_path, start_timeout=1)
    pid_file = tmp_path / "silent.pid"
    script = "import os, sys, time; open(sys.argv[1], 'w').write(str(os.getpid())); time.sleep(60)"
    silent = McpServerSpec("silent", "stdio", command=sys.executable, args=("-c", script, str(pid_file)))
    # Alone: a server that does answer needs more than this 1 s on a loaded machine (that one
    # failing server leaves the others working is the stderr test's case, with default timeouts).
    problems = await connections.start([silent])
    assert len(problems) == 1 and "no answer within 1 s" in problems[0]
    assert connections.tools() == []
    with pytest.raises(ProcessLookupError):
        os.kill(int(pid_file.read_text()), 0)
    await connections.aclose()


async def test_server_stderr_is_logged_never_on_our_stdout(tmp_path, capfd, caplog):
    caplog.set_level("INFO", logger="core.tools.mcp_client")
    connections = McpConnections(cwd=tmp_path)
    problems = await connections.start([_stdio("crashy", "--crash"), _stdio("good")])
    run = await Session(tmp_path, connections.tools()).run("mcp__good__echo", {"text": "x"})
    await connections.aclose()
    assert len(problems) == 1 and run.result.content == "x"
    assert capfd.readouterr().out == ""
    assert "MCP server 'crashy': fake mcp server: missing configuration, giving up" in caplog.text


async def test_stdio_servers_get_their_env_but_not_our_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-must-not-leak-0000")
    monkeypatch.setenv("SOME_UNRELATED_VAR", "ours")
    connections = McpConnections(cwd=tmp_path)
    assert await connections.start([_stdio(env={"FAKE_GREETING": "hi from the editor"})]) == []
    try:
        session = Session(tmp_path, connections.tools())

        async def env(name: str) -> str:
            return (await session.run("mcp__fake__get_env", {"name": name})).result.content

        assert await env("OPENAI_API_KEY") == "(unset)"
        assert await env("SOME_UNRELATED_VAR") == "(unset)"
        assert await env("FAKE_GREETING") == "hi from the editor"
        assert await env("PATH") == os.environ["PATH"]
    finally:
        await connections.aclose()


async def test_aclose_terminates_the_child_and_later_calls_fail_readably(tmp_path):
    connections = McpConnections(cwd=tmp_path)
    assert await connections.start([_stdio()]) == []
    tools = connections.tools()
    session = Session(tmp_path, tools)
    pid = int((await session.run("mcp__fake__pid", {})).result.content)
    os.kill(pid, 0)  # alive
    await connections.aclose()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    assert connections.tools() == []
    late = await session.run("mcp__fake__echo", {"text": "anyone?"})
    assert late.failed and "not running" in late.result.content
    await connections.aclose()  # twice is fine


@pytest.mark.parametrize("http_server", ["http", "sse"], indirect=True)
async def test_http_and_sse_servers(http_server, tmp_path):
    url, record = http_server
    transport = "http" if url.endswith("/mcp") else "sse"
    connections = McpConnections()
    spec = McpServerSpec("remote", transport, url=url, headers=(("Authorization", "Bearer test-token"),))
    assert await connections.start([spec]) == []
    try:
        tools = {t.name: t for t in connections.tools()}
        assert tools["mcp__remote__echo"].spec().parameters["required"] == ["text"]
        session = Session(tmp_path, connections.tools())
        run = await session.run("mcp__remote__echo", {"text": "over the wire"})
        assert not run.failed and run.result.content == "over the wire"
        rejected = await session.run("mcp__remote__write_note", {"note": "no"}, answer=Decision.REJECT_ONCE)
        assert rejected.failed
        failed = await session.run("mcp__remote__fail", {"message": "remote trouble"})
        assert failed.failed and "remote trouble" in failed.result.content
        assert [c["tool"] for c in _calls(record)] == ["echo", "fail"]
    finally:
        await connections.aclose()
    wrong = McpServerSpec("wrong", transport, url=url.rsplit("/", 1)[0] + "/nope?api_key=sk-in-the-url-0000")
    others = McpConnections()
    (problem,) = await others.start([wrong])
    assert "/nope" in problem and ("404" in problem or "Not Found" in problem), problem
    assert "sk-in-the-url" not in problem
    await others.aclose()
