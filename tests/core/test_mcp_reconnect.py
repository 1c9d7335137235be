"""MCP servers that drop and come back, config.toml's servers shared by sessions, and tool names
that never collide; against the real fake server (tests/fakes/mcp_server.py) in its own process."""

from __future__ import annotations

import asyncio
import itertools
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from core.config import McpServerConfig
from core.redaction import scrub
from core.tools.mcp_client import McpConnections, McpPool, McpServerSpec, SessionMcp
from core.tools.mcp_schema import MAX_NAME, mcp_tool_name
from tests.core.test_mcp_client import FAKE, ROOT, Session, _free_port, _stdio


async def _until(predicate, what: str, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while not (found := predicate()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.05)
    return found


def _texts(connection) -> list[str]:
    return [text for _, text in connection.notices]


async def test_a_stdio_server_that_dies_is_down_then_reconnected(tmp_path):
    gate = tmp_path / "stay-down"
    connections = McpConnections(cwd=tmp_path)
    assert await connections.start([_stdio("fake", "--down-while", str(gate))]) == []
    (connection,) = connections.connected()
    session = Session(tmp_path, connections.tools())
    try:
        first_pid = int((await session.run("mcp__fake__pid", {})).result.content)
        gate.touch()  # its restarts fail until the test removes this
        os.kill(first_pid, signal.SIGKILL)
        await _until(lambda: connection.state == "down", "the server to be seen down")
        down = _texts(connection)
        assert len(down) == 1 and "MCP server 'fake' is down: its process ended" in down[0] and "Reconnecting" in down[0]
        failed = await session.run("mcp__fake__echo", {"text": "anyone?"})
        assert failed.failed
        assert "MCP server 'fake' is down" in failed.result.content and "reconnecting" in failed.result.content
        # Attempts fail while the gate exists: still down, and the reason is the server's own words.
        await _until(lambda: "staying down" in connection.reason, "a failed reconnect attempt")
        assert connection.state == "down" and len(_texts(connection)) == 1, "one notice for the drop, not one per attempt"
        gate.unlink()
        await _until(lambda: connection.state == "up", "the reconnect", timeout=60)
        assert "MCP server 'fake' is back (reconnected;" in _texts(connection)[-1]
        again = await session.run("mcp__fake__echo", {"text": "back"})
        assert not again.failed and again.result.content == "back"
        second_pid = int((await session.run("mcp__fake__pid", {})).result.content)
        assert second_pid != first_pid
    finally:
        await connections.aclose()


class _HttpFake:
    """The fake server over streamable HTTP (or SSE) on a fixed port, stopped and started at will."""

    def __init__(self, tmp_path: Path, transport: str = "http") -> None:
        self.port = _free_port()
        self.transport = transport
        self.url = f"http://127.0.0.1:{self.port}/{'mcp' if transport == 'http' else 'sse'}"
        self.log = tmp_path / f"{transport}-server.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        import socket

        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen([sys.executable, *FAKE, f"--{self.transport}", str(self.port)], env=env, stdout=log, stderr=log)
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                assert self.proc.poll() is None and time.monotonic() < deadline, self.log.read_text()
                time.sleep(0.05)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


@pytest.fixture
def http_fake(tmp_path) -> Iterator[_HttpFake]:
    fake = _HttpFake(tmp_path)
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


async def test_an_http_server_that_goes_away_is_down_then_reconnected(http_fake, tmp_path):
    connections = McpConnections()
    assert await connections.start([McpServerSpec("remote", "http", url=http_fake.url)]) == []
    (connection,) = connections.connected()
    session = Session(tmp_path, connections.tools())
    try:
        assert (await session.run("mcp__remote__echo", {"text": "one"})).result.content == "one"
        http_fake.stop()
        # Nothing tells a client that an HTTP server went away: the next call finds out.
        failed = await session.run("mcp__remote__echo", {"text": "two"})
        assert failed.failed and "MCP server 'remote'" in failed.result.content and "reconnecting" in failed.result.content
        await _until(lambda: connection.state == "down", "the server to be seen down")
        assert "MCP server 'remote' is down" in _texts(connection)[0]
        while_down = await session.run("mcp__remote__echo", {"text": "three"})
        assert while_down.failed and "is down" in while_down.result.content and "reconnecting" in while_down.result.content
        http_fake.start()
        await _until(lambda: connection.state == "up", "the reconnect", timeout=60)
        assert "is back" in _texts(connection)[-1]
        assert (await session.run("mcp__remote__echo", {"text": "four"})).result.content == "four"
    finally:
        await connections.aclose()


def _config(name: str = "cfg", **fields) -> dict[str, McpServerConfig]:
    fields.setdefault("command", sys.executable)
    fields.setdefault("args", list(FAKE))
    fields.setdefault("env", {"PYTHONPATH": str(ROOT)})
    return {name: McpServerConfig.model_validate(fields)}


async def test_config_servers_are_shared_per_project_and_say_when_they_cannot_start(tmp_path, monkeypatch):
    one, two = tmp_path / "one", tmp_path / "two"
    one.mkdir()
    two.mkdir()
    monkeypatch.setenv("FAKE_TOKEN_FOR_TEST", "tok-from-the-environment-1234")
    servers = {
        **_config("cfg", env={"PYTHONPATH": str(ROOT), "API_TOKEN": "${FAKE_TOKEN_FOR_TEST}"}),
        **_config("needs-var", env={"API_KEY": "${HERMES_TEST_UNSET_VARIABLE}"}),
        **_config("off", enabled=False),
    }
    pool = McpPool(servers)
    assert [spec.name for spec in pool.specs] == ["cfg", "needs-var"], "a disabled server is not connected"
    try:
        first, same, other = SessionMcp(pool, one), SessionMcp(pool, one), SessionMcp(pool, two)
        notices = await first.open_turn({})
        assert [n.text for n in notices] == [
            "MCP server 'needs-var' cannot start: env.API_KEY refers to the environment variable HERMES_TEST_UNSET_VARIABLE, "
            "which is not set (set it where this program starts, or write the value in config.toml)."
        ]
        tools = first.tools({})
        assert "mcp__cfg__echo" in tools and not any("needs-var" in name for name in tools)
        # The referenced variable reached the server ("(unset)" otherwise), and its value is a
        # secret from then on: scrubbed from what the tool returns.
        run = await Session(one, list(tools.values())).run("mcp__cfg__get_env", {"name": "API_TOKEN"})
        assert run.result.content == "[redacted]"
        assert scrub("token tok-from-the-environment-1234") == "token [redacted]"
        # Sessions in one project share the process; another project gets its own, in its directory.
        await same.open_turn({})
        await other.open_turn({})
        pid = "mcp__cfg__pid"
        pids = [
            int((await Session(cwd, list(s.tools({}).values())).run(pid, {})).result.content)
            for s, cwd in ((first, one), (same, one), (other, two))
        ]
        assert pids[0] == pids[1] != pids[2]
        assert Path(f"/proc/{pids[2]}/cwd").resolve() == two.resolve()
    finally:
        await pool.aclose()


async def test_the_editors_server_replaces_the_config_one_of_the_same_name(tmp_path):
    pool = McpPool({**_config("fake", env={"PYTHONPATH": str(ROOT), "FAKE_GREETING": "from config"}), **_config("cfg")})
    editor = McpConnections(cwd=tmp_path)
    try:
        assert await editor.start([_stdio("fake", env={"FAKE_GREETING": "from the editor"})]) == []
        extra = {t.name: t for t in editor.tools()}
        session = SessionMcp(pool, tmp_path)
        await session.open_turn(extra)
        config_tools = session.tools(extra)
        assert "mcp__cfg__echo" in config_tools and not any(name.startswith("mcp__fake__") for name in config_tools)
        merged = {**config_tools, **extra}
        run = await Session(tmp_path, list(merged.values())).run("mcp__fake__get_env", {"name": "FAKE_GREETING"})
        assert run.result.content == "from the editor"
    finally:
        await editor.aclose()
        await pool.aclose()


async def test_a_session_hears_of_a_drop_and_the_return_once(tmp_path):
    gate = tmp_path / "stay-down"
    pool = McpPool(_config("cfg", args=[*FAKE, "--down-while", str(gate)]))
    try:
        session = SessionMcp(pool, tmp_path)
        told: list[int] = []

        async def on_change() -> None:
            told.append(1)

        session.on_change = on_change
        assert await session.open_turn({}) == []
        tools = list(session.tools({}).values())
        pid = int((await Session(tmp_path, tools).run("mcp__cfg__pid", {})).result.content)
        (connection,) = pool.connections_for(tmp_path)
        gate.touch()
        os.kill(pid, signal.SIGKILL)
        await _until(lambda: connection.state == "down", "the drop")
        await _until(lambda: told, "the session to be told of the change")
        late = SessionMcp(pool, tmp_path)  # a session that starts while the server is down is told so at once
        assert [n.text.split(":")[0] for n in await late.open_turn({}, timeout=0.1)] == ["MCP server 'cfg' is down"]
        (down,) = session.changes({})
        assert down.level == "warning" and down.text.startswith("MCP server 'cfg' is down: its process ended")
        assert session.changes({}) == [], "each change is told once"
        gate.unlink()
        await _until(lambda: connection.state == "up", "the reconnect", timeout=60)
        (back,) = session.changes({})
        assert back.text.startswith("MCP server 'cfg' is back")
        assert [n.text.split(" (")[0] for n in late.changes({})] == ["MCP server 'cfg' is back"]
    finally:
        await pool.aclose()


def test_tool_names_never_collide_and_stay_within_the_limit():
    servers = ["a", "a_b", "a__b", "a_", "_a", "a-b", "a.b", "A", "x" * 30, "x" * 31, "ü", "a b", "mcp"]
    tools = ["b", "b__c", "_b", "c", "c.d", "c_d", "__", "y" * 60, "y" * 61, "é", "b_c", "a__b"]
    names: dict[str, tuple[str, str]] = {}
    for pair in itertools.product(servers, tools):
        name = mcp_tool_name(*pair)
        assert re.fullmatch(r"[A-Za-z0-9_-]+", name) and len(name) <= MAX_NAME, name
        assert names.setdefault(name, pair) == pair, f"{pair} and {names[name]} share {name}"
        assert mcp_tool_name(*pair) == name, "stable"
    assert mcp_tool_name("github", "create_issue") == "mcp__github__create_issue", "plain names stay readable"


async def test_a_quiet_server_is_pinged_and_stays_up(tmp_path, monkeypatch):
    """The newest protocol's servers refuse ping as an unknown method: that still counts as an answer."""
    from mcp.client.session import ClientSession

    import core.tools.mcp_client as client

    pings: list[str] = []
    original = ClientSession.send_ping

    async def counted(self, **kwargs):
        try:
            return await original(self, **kwargs)
        except Exception as exc:
            pings.append(type(exc).__name__)
            raise

    monkeypatch.setattr(ClientSession, "send_ping", counted)
    monkeypatch.setattr(client, "PING_INTERVAL", 0.05)
    connections = McpConnections(cwd=tmp_path)
    assert await connections.start([_stdio()]) == []
    (connection,) = connections.connected()
    try:
        await _until(lambda: len(pings) >= 5, "five refused pings")
        assert set(pings) == {"MCPError"}
        assert connection.state == "up" and list(connection.notices) == []
        assert (await Session(tmp_path, connections.tools()).run("mcp__fake__echo", {"text": "x"})).result.content == "x"
    finally:
        await connections.aclose()


async def test_a_config_server_that_never_answers_is_stopped_and_tried_again(tmp_path, monkeypatch):
    import core.tools.mcp_client as client

    monkeypatch.setattr(client, "CONNECT_TIMEOUT", 1.0)
    pids = tmp_path / "pids"
    script = "import os, sys, time; open(sys.argv[1], 'a').write(f'{os.getpid()}\\n'); time.sleep(60)"
    pool = McpPool({"silent": McpServerConfig(command=sys.executable, args=["-c", script, str(pids)])})
    try:
        session = SessionMcp(pool, tmp_path)
        (notice,) = await session.open_turn({}, timeout=30)
        assert notice.text == "MCP server 'silent' could not start: no answer within 1 s. Retrying in the background."
        await _until(lambda: pids.exists() and len(pids.read_text().split()) >= 2, "a second attempt")
        first = int(pids.read_text().split()[0])
        with pytest.raises(ProcessLookupError):
            os.kill(first, 0)  # each attempt's process is stopped before the next starts
        tools = session.tools({})
        assert tools == {}
    finally:
        await pool.aclose()


def test_secrets_of_a_config_server_are_scrubbed_and_never_in_its_repr(monkeypatch):
    monkeypatch.setenv("HERMES_TEST_HEADER_TOKEN", "header-token-from-env-0001")
    config = McpServerConfig(
        url="https://mcp.example.com/mcp?api_key=query-secret-0002&mode=x",
        headers={"Authorization": "Bearer ${HERMES_TEST_HEADER_TOKEN}", "X-Literal": "literal-header-0003"},
    )
    spec = McpServerSpec.from_config("remote", config)
    assert dict(spec.headers)["Authorization"] == "Bearer header-token-from-env-0001"
    for secret in ("header-token-from-env-0001", "query-secret-0002", "literal-header-0003"):
        assert secret not in repr(spec) and secret not in repr(config)
        assert scrub(f"a log line with {secret} in it") == "a log line with [redacted] in it"
    stdio = McpServerConfig(command="srv", env={"GITHUB_TOKEN": "literal-token-0004", "NODE_ENV": "production"})
    McpServerSpec.from_config("local", stdio)
    from core.config import Config

    assert "literal-token-0004" in Config(mcp_servers={"local": stdio}).secrets
    assert "production" not in Config(mcp_servers={"local": stdio}).secrets, "an ordinary value stays readable"


@pytest.mark.parametrize(
    ("toml", "key", "says"),
    [
        ('[mcp_servers.x]\ncomand = "npx"', "mcp_servers.x.comand", "did you mean `command`?"),
        ("[mcp_servers.x]\nenabled = false", "mcp_servers.x", "needs command (a stdio server"),
        ('[mcp_servers.x]\ncommand = "npx"\nurl = "http://h/mcp"', "mcp_servers.x", "has both command and url"),
        ('[mcp_servers.x]\ntransport = "sse"\ncommand = "npx"', "mcp_servers.x", "an SSE server needs url"),
        ('[mcp_servers.x]\nurl = "ftp://h/mcp"', "mcp_servers.x.url", "must start with http:// or https://"),
        ('[mcp_servers.x]\nurl = "http://h/mcp"\nenv = { A = "b" }', "mcp_servers.x.env", "HTTP or SSE server takes headers"),
        ('[mcp_servers.x]\ncommand = "npx"\nheaders = { A = "b" }', "mcp_servers.x.headers", "a stdio server takes env"),
        ('[mcp_servers.x]\ncommand = "npx"\ncwd = "relative/dir"', "mcp_servers.x.cwd", "is not an absolute path"),
        ('[mcp_servers."two words"]\ncommand = "npx"', "mcp_servers.two words", "cannot name an MCP server"),
        ('[mcp_servers.a__b]\ncommand = "npx"', "mcp_servers.a__b", "single '-' or '_'"),
        ('[mcp_servers.x]\ncommand = "npx"\nenv = { T = "${1BAD}" }', "mcp_servers.x.env.T", "write ${VARIABLE}"),
        ('[mcp_servers.x]\ncommand = "npx"\nenv = { T = 12345678 }', "mcp_servers.x.env.T", "valid string"),
    ],
)
def test_config_errors_name_the_key_and_never_the_value(tmp_path, toml, key, says):
    from core.config import ConfigError, load_config

    path = tmp_path / "config.toml"
    path.write_text(toml + "\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        load_config(path, env={})
    assert caught.value.key == key and says in str(caught.value), str(caught.value)
    assert "12345678" not in str(caught.value) and "1BAD" not in str(caught.value)


def test_dollar_references_and_escapes():
    from core.config import expand_env_references

    env = {"TOKEN": "t0k", "EMPTY": ""}
    assert expand_env_references("Bearer ${TOKEN}", env) == "Bearer t0k"
    assert expand_env_references("$${TOKEN} costs $5 and $$", env) == "${TOKEN} costs $5 and $"
    assert expand_env_references("${EMPTY}x", env) == "x"
    with pytest.raises(KeyError, match="MISSING"):
        expand_env_references("${MISSING}", env)
