"""The first listings answered before the SDK has loaded: byte for byte what the SDK answers, in both
eras, for a home with skills, memory and sessions; and what happens when an early answer turns out
not to be the SDK's."""

from __future__ import annotations

import asyncio
import errno
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from core.messages import UserMessage
from core.store import SessionStore
from hermes_mcp import listing, resources
from tests.hermes_mcp.harness import ERAS, connected, hermes_mcp, mcp_env

ROOT = Path(__file__).resolve().parents[2]

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
    "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}},
}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}},
}
WAIT = 60


def _opening(era: str, methods: tuple[str, ...]) -> list[dict]:
    """What a client sends first: the handshake and its listings, or the enveloped requests alone."""
    if era == "legacy":
        requests = [{"jsonrpc": "2.0", "id": n + 1, "method": m} for n, m in enumerate(methods)]
        return [INITIALIZE, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *requests]
    return [
        {"jsonrpc": "2.0", "id": f"m-{n}", "method": m, "params": {"_meta": ENVELOPE}} for n, m in enumerate(("server/discover", *methods))
    ]


LISTED = ("tools/list", "prompts/list", "resources/list", "resources/templates/list")


class Spawned:
    """hermes-mcp on stdio, spoken to line by line; its answers kept as the bytes it wrote."""

    def __init__(self, env: dict, cwd: Path, args: tuple[str, ...] = ()) -> None:
        self.proc = subprocess.Popen(
            [hermes_mcp(), *args], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=cwd
        )
        self._pending = bytearray()  # read from stdout, not yet a whole line

    def send(self, *messages: dict) -> None:
        assert self.proc.stdin
        self.proc.stdin.write("".join(json.dumps(m) + "\n" for m in messages).encode())
        self.proc.stdin.flush()

    def line(self) -> bytes:
        """The next line the server writes (within WAIT seconds)."""
        assert self.proc.stdout
        out = self.proc.stdout.fileno()
        while b"\n" not in self._pending:
            ready, _, _ = select.select([out], [], [], WAIT)
            if not ready:
                self.proc.kill()
                raise AssertionError(f"hermes-mcp wrote nothing for {WAIT} s")
            chunk = os.read(out, 1 << 16)
            assert chunk, "hermes-mcp closed its output"
            self._pending += chunk
        end = self._pending.index(b"\n") + 1
        line = bytes(self._pending[:end])
        del self._pending[:end]
        json.loads(line)  # every line is JSON-RPC
        return line

    def answers(self, ids: set) -> tuple[dict, list[dict]]:
        """Read until every id is answered: {id: the line's bytes}, and the notifications met on the way."""
        out: dict = {}
        notices = []
        while set(out) != ids:
            raw = self.line()
            message = json.loads(raw)
            if "id" in message:
                out[message["id"]] = raw
            else:
                notices.append(message)
        return out, notices

    def close(self) -> str:
        """End the input; the server must exit cleanly, writing nothing but JSON-RPC."""
        try:
            tail, errors = self.proc.communicate(timeout=WAIT)
            rest = bytes(self._pending) + tail
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            raise AssertionError(f"hermes-mcp did not exit within {WAIT} s of its input's end") from None
        assert self.proc.returncode == 0, errors.decode()[-3000:]
        assert all(json.loads(line) for line in rest.splitlines()), rest
        return errors.decode()


def exchange(env: dict, cwd: Path, messages: list[dict], args: tuple[str, ...] = (), *, settle: bool = False) -> dict:
    """Send ``messages``, return the answers by id. ``settle``: then wait for the SDK to answer a request
    of its own (a handshake-era resources/read), so that it has also gone through what came before."""
    spawned = Spawned(env, cwd, args)
    try:
        spawned.send(*messages)
        answers, _ = spawned.answers({m["id"] for m in messages if "id" in m})
        if settle:
            spawned.send({"jsonrpc": "2.0", "id": "settle", "method": "resources/read", "params": {"uri": "hermes://memory/USER.md"}})
            spawned.answers({"settle"})
    finally:
        spawned.close()
    return answers


def _open_for_writing(fifo: Path, timeout: float = 30) -> int:
    """Open ``fifo`` for writing once its reader has opened it; fail after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as exc:
            if exc.errno != errno.ENXIO or time.monotonic() > deadline:
                raise
        time.sleep(0.01)


class HeldConfig:
    """config.toml as a FIFO: building the server waits at its first step (reading the config) until released."""

    def __init__(self, home: Path) -> None:
        self.config = home / "config.toml"
        self.text = self.config.read_text() if self.config.exists() else ""
        self.config.unlink(missing_ok=True)
        os.mkfifo(self.config, 0o600)

    def release(self) -> None:
        held = _open_for_writing(self.config)
        plain = self.config.with_name("config.plain")
        plain.write_text(self.text)
        os.replace(plain, self.config)
        os.close(held)


async def _seed(home: Path, project: Path) -> None:
    """Skills (personal and the project's), both memory files, and sessions with awkward titles."""
    personal = home / "skills" / "release-notes"
    personal.mkdir(parents=True)
    (personal / "SKILL.md").write_text('---\nname: release-notes\ndescription: Notes from the log — "quoted", é, </b> \\ 🚀\n---\nBody\n')
    bare = home / "skills" / "bare"
    bare.mkdir()
    (bare / "SKILL.md").write_text("---\nname: bare\n---\nNo description.\n")
    local = project / ".agents" / "skills" / "local-build"
    local.mkdir(parents=True)
    (local / "SKILL.md").write_text("---\nname: local-build\ndescription: Build this project\n---\nmake\n")
    memories = home / "memories"
    memories.mkdir(exist_ok=True)
    (memories / "MEMORY.md").write_text("The project uses uv.\n")
    (memories / "USER.md").write_text("Prefers short answers.\n")
    async with SessionStore.open() as store:
        for n, title in enumerate(["plain", None, 'quote " and \\ and \u2028 and ü', "x" * 300]):
            record = await store.create_session(cwd=f"/work/p{n}", surface="acp" if n % 2 else "gateway", model="openai:x", title=title)
            await store.append_message(record.id, UserMessage.of(f"message {n}"))


@pytest.fixture
def project(tmp_path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    return root


def test_the_early_path_loads_nothing_heavy():
    code = (
        "import sys, hermes_mcp.listing\n"
        "print(','.join(m for m in ('mcp', 'mcp_types', 'pydantic', 'anyio', 'core.config', 'core.learning') if m in sys.modules))"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == ""


def test_the_early_path_speaks_the_sdks_versions():
    assert listing.MODERN_VERSIONS == MODERN_PROTOCOL_VERSIONS
    assert listing.RECENT_SESSIONS == resources.RECENT_SESSIONS and listing.MARKDOWN == resources.MARKDOWN


@pytest.mark.parametrize(("era", "args"), [("legacy", ()), ("2026-07-28", ()), ("legacy", ("--trust-client-approvals",))])
def test_early_listings_are_the_sdks_answers_byte_for_byte(hermes_home, project, era, args):
    asyncio.run(_seed(hermes_home, project))
    env = mcp_env(hermes_home)
    messages = _opening(era, LISTED)
    ids = [m["id"] for m in messages if "id" in m and m["method"] != "initialize"]
    # The first start of this code: the SDK answers what depends on the code alone, and it is kept.
    first = exchange(env, project, messages, args)
    kept = json.loads(listing.snapshot_path().read_text())["answers"]
    assert "tools/list" in kept and "resources/templates/list" in kept
    # The next start answers every listing while the server is still being built (held at the config).
    held = HeldConfig(hermes_home)
    spawned = Spawned(env, project, args)
    try:
        spawned.send(*messages)
        try:
            early, notices = spawned.answers(set(ids) | ({0} if era == "legacy" else set()))
        finally:
            held.release()
        # Then the SDK takes over the connection: it answers the next request, and finds nothing to correct.
        read = {"uri": "hermes://memory/MEMORY.md", **({} if era == "legacy" else {"_meta": ENVELOPE})}
        spawned.send({"jsonrpc": "2.0", "id": "after", "method": "resources/read", "params": read})
        after, later = spawned.answers({"after"})
    finally:
        errors = spawned.close()
    assert json.loads(after["after"])["result"]["contents"][0]["text"] == "The project uses uv.\n"
    assert notices == [] and later == [], "no list changed, nothing to correct"
    assert "was not the SDK's" not in errors
    # The SDK alone, from the same home.
    sdk = exchange({**env, "HERMES_MCP_NO_FAST_INIT": "1"}, project, messages, args)
    for request_id in ids:
        assert early[request_id] == sdk[request_id], f"{request_id}: early and SDK answers differ"
        assert first[request_id] == sdk[request_id]
    by_method = {m["id"]: m["method"] for m in messages if "id" in m}
    answers = {by_method[i]: json.loads(early[i])["result"] for i in ids}
    tools = [t["name"] for t in answers["tools/list"]["tools"]]
    assert ("approval_respond" in tools) == bool(args)
    prompts = [p["name"] for p in answers["prompts/list"]["prompts"]]
    assert {"bare", "local-build", "release-notes"} <= set(prompts) and prompts == sorted(prompts)
    uris = [r["uri"] for r in answers["resources/list"]["resources"]]
    assert uris[0] == "hermes://sessions" and {f"hermes://skills/{name}" for name in prompts} <= set(uris)
    assert {"hermes://memory/MEMORY.md", "hermes://memory/USER.md"} <= set(uris)
    assert len([u for u in uris if u.startswith("hermes://sessions/")]) == 4


def test_a_list_that_changed_while_the_server_loaded_is_announced(hermes_home, project):
    asyncio.run(_seed(hermes_home, project))
    env = mcp_env(hermes_home)
    held = HeldConfig(hermes_home)
    spawned = Spawned(env, project)
    try:
        spawned.send(*_opening("legacy", ("prompts/list",)))
        try:
            early, _ = spawned.answers({0, 1})
            added = hermes_home / "skills" / "added-later"
            added.mkdir()
            (added / "SKILL.md").write_text("---\nname: added-later\ndescription: New\n---\nBody\n")
        finally:
            held.release()
        # A request the early path leaves to the SDK: it takes over, and its own prompts/list differs.
        spawned.send({"jsonrpc": "2.0", "id": 2, "method": "resources/read", "params": {"uri": "hermes://memory/USER.md"}})
        _, notices = spawned.answers({2})
        changed = {"jsonrpc": "2.0", "method": "notifications/prompts/list_changed"}
        while changed not in notices:
            notices.append(json.loads(spawned.line()))
        spawned.send({"jsonrpc": "2.0", "id": 3, "method": "prompts/list"})
        after, _ = spawned.answers({3})
    finally:
        spawned.close()
    assert "added-later" not in early[1].decode()
    assert "added-later" in [p["name"] for p in json.loads(after[3])["result"]["prompts"]]


def test_a_kept_answer_that_is_not_the_sdks_is_replaced_by_it(hermes_home, project):
    key = listing.code_key({"allow_auto": False, "trust_client_approvals": False})
    path = listing.snapshot_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "answers": {"tools/list": {"2025-11-25": '{"tools":[]}'}}}))
    env = mcp_env(hermes_home)
    messages = _opening("legacy", ("tools/list",))
    wrong = exchange(env, project, messages, settle=True)
    assert json.loads(wrong[1])["result"] == {"tools": []}, "the early path answers from what it kept"
    right = exchange(env, project, messages)
    sdk = exchange({**env, "HERMES_MCP_NO_FAST_INIT": "1"}, project, messages)
    assert right[1] == sdk[1]
    assert json.loads(path.read_text())["answers"]["tools/list"]["2025-11-25"] == listing.result_text(sdk[1].decode(), 1)


def test_answers_kept_for_other_code_are_not_used(hermes_home, project):
    path = listing.snapshot_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": "another version", "answers": {"tools/list": {"2025-11-25": '{"tools":[]}'}}}))
    answers = exchange(mcp_env(hermes_home), project, _opening("legacy", ("tools/list",)))
    assert len(json.loads(answers[1])["result"]["tools"]) > 0
    assert json.loads(path.read_text())["key"] != "another version", "the SDK's answer is kept under this code's key"


async def _lists(env: dict, mode: str, cwd: Path) -> dict:
    async with connected(env, mode=mode, cwd=cwd) as client:
        return {
            "tools": (await client.list_tools()).model_dump(mode="json"),
            "prompts": (await client.list_prompts()).model_dump(mode="json"),
            "resources": (await client.list_resources()).model_dump(mode="json"),
        }


@pytest.mark.parametrize("mode", ERAS)
async def test_sdk_clients_list_the_same_either_way(hermes_home, project, mode):
    await _seed(hermes_home, project)
    env = mcp_env(hermes_home)
    await _lists(env, mode, project)  # the first start keeps what the next ones answer early
    early = await _lists(env, mode, project)
    sdk = await _lists({**env, "HERMES_MCP_NO_FAST_INIT": "1"}, mode, project)
    assert early == sdk
    assert "ask" in [t["name"] for t in early["tools"]["tools"]] and "release-notes" in [p["name"] for p in early["prompts"]["prompts"]]


def _inspector() -> Path:
    """The MCP Inspector's launcher (npm @modelcontextprotocol/inspector, from package.json)."""
    launcher = ROOT / "node_modules" / ".bin" / "mcp-inspector"
    if not launcher.exists():
        subprocess.run(["npm", "install", "--no-audit", "--no-fund"], cwd=ROOT, check=True, capture_output=True)
    assert launcher.exists(), "npm install did not install @modelcontextprotocol/inspector: is it in package.json?"
    return launcher


def inspector_run(home: Path, cwd: Path, era: str, method: str, *, sdk_only: bool = False) -> dict:
    """One Inspector CLI run against the real hermes-mcp (it starts the server for each run)."""
    env = ["-e", f"HERMES_EDITOR_HOME={home}", "-e", "HERMES_QUIET=1", *(["-e", "HERMES_MCP_NO_FAST_INIT=1"] if sdk_only else [])]
    command = [str(_inspector()), "--cli", hermes_mcp(), *env, "--cwd", str(cwd), "--protocol-era", era, "--method", method]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=120, env={**os.environ, "NO_COLOR": "1"})
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_the_inspector_lists_the_same_either_way(hermes_home, project, era):
    asyncio.run(_seed(hermes_home, project))
    inspector_run(hermes_home, project, era, "tools/list")  # the first start keeps what the next ones answer early
    for method in ("tools/list", "prompts/list", "resources/list"):
        early = inspector_run(hermes_home, project, era, method)
        assert early == inspector_run(hermes_home, project, era, method, sdk_only=True), method
    assert "hermes://skills/local-build" in [r["uri"] for r in early["resources"]]


def test_the_first_listing_benchmark_prints_its_figures():
    """benchmarks/mcp_first_listing.py still runs (its figures are never asserted)."""
    proc = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "mcp_first_listing.py"), "--rounds", "1"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads(proc.stdout)
    for era in ("2025-11-25", "2026-07-28"):
        assert set(figures[era]) == {"early", "sdk_only", "cold"}
        assert {"tools/list_ms", "prompts/list_ms", "resources/list_ms"} <= set(figures[era]["early"])
