"""Live resources: a client subscribes to a memory file, a skill or a session and is told when it
changes, whichever process changed it; the watchers run only while something needs them."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.subscriptions import ResourceUpdated
from mcp_types import PromptListChangedNotification, ResourceListChangedNotification, ResourceUpdatedNotification

from core.store import SessionStore
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_mcp.harness import ERAS, allow_projects, connected, data, hermes_mcp, mcp_env
from tests.hermes_mcp.test_http import http_server

MEMORY = "hermes://memory/MEMORY.md"
USER = "hermes://memory/USER.md"
SKILL = "hermes://skills/deploy"
WAIT = 60  # a bound on waiting for a notice, not a speed requirement

# resources/subscribe belongs to the handshake era, which these tests drive on purpose.
pytestmark = pytest.mark.filterwarnings("ignore:resources/(un)?subscribe is removed:UserWarning")

NextUpdate = Callable[[], Awaitable[str]]


def _skill(root: Path, name: str, description: str, body: str = "Run make deploy.\n") -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n---\n\n# {name}\n\n{body}")
    return path


def _save(path: Path, text: str) -> None:
    """Save as many editors do: write a copy beside the state home, then move it over the file at once.

    (Two steps on the file itself, truncate then write, could be seen in between.)"""
    scratch = next(p for p in path.parents if (p / "hermes-home").is_dir())  # the test's own folder
    copy = scratch / f".saving-{path.name}"
    copy.write_text(text)
    os.replace(copy, path)


def _memory(home: Path, text: str = "- uses uv\n") -> Path:
    path = home / "memories" / "MEMORY.md"
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    return path


class Inbox:
    """What a handshake-era client is sent: updated URIs and list-changed notices, in order."""

    def __init__(self) -> None:
        self.updates: asyncio.Queue[str] = asyncio.Queue()
        self.seen: list[str] = []

    async def __call__(self, message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.updates.put_nowait(message.params.uri)
            self.seen.append(message.params.uri)
        elif isinstance(message, (ResourceListChangedNotification, PromptListChangedNotification)):
            self.seen.append(message.method)

    async def next_update(self) -> str:
        return await asyncio.wait_for(self.updates.get(), WAIT)


@contextlib.asynccontextmanager
async def following(client: Client, mode: str, inbox: Inbox, uris: list[str]) -> AsyncIterator[NextUpdate]:
    """Subscribe to ``uris`` for the block as a client of ``mode``'s era does; yields "the next updated URI"."""
    if mode == "legacy":
        for uri in uris:
            await client.subscribe_resource(uri)
        yield inbox.next_update
        for uri in uris:
            await client.unsubscribe_resource(uri)
        return
    async with client.listen(resource_subscriptions=uris) as subscription:

        async def next_update() -> str:
            event = await asyncio.wait_for(anext(subscription), WAIT)
            assert isinstance(event, ResourceUpdated), event
            return event.uri

        yield next_update


@pytest.mark.parametrize("mode", ERAS)
async def test_a_memory_file_and_a_skill_changed_by_other_processes_are_updated_until_unsubscribed(hermes_home, mode):
    skill = _skill(hermes_home / "skills", "deploy", "Ship to production")
    memory_file = _memory(hermes_home)
    env = mcp_env(hermes_home)
    inbox = Inbox()
    async with connected(env, mode=mode, message_handler=inbox) as client:
        async with following(client, mode, inbox, [MEMORY, SKILL]) as next_update:
            # An editor saves the skill.
            _save(skill, skill.read_text() + "\nThen run the smoke tests.\n")
            assert await next_update() == SKILL
            # Another MCP client's server adds a memory.
            async with connected(env) as other:
                data(await other.call_tool("memory_add", {"text": "Deploys go out on Tuesdays", "file": "memory"}))
            assert await next_update() == MEMORY
            memory_text = (await client.read_resource(MEMORY)).contents[0].text
            skill_text = (await client.read_resource(SKILL)).contents[0].text
        # Now only the skill: a change of MEMORY.md is not announced. Were it announced, it would
        # come before the skill's: it is made first, and the changes found together are
        # announced in URI order (memory before skills).
        async with following(client, mode, inbox, [SKILL]) as next_update:
            _save(memory_file, memory_file.read_text() + "- nobody follows this now\n")
            _save(skill, skill.read_text() + "\nAnd tell the team.\n")
            assert await next_update() == SKILL
    assert "- Deploys go out on Tuesdays" in memory_text and "smoke tests" in skill_text


async def test_unsubscribing_one_resource_keeps_the_others_in_the_handshake_era(hermes_home):
    skill = _skill(hermes_home / "skills", "deploy", "Ship to production")
    memory_file = _memory(hermes_home)
    inbox = Inbox()
    async with connected(mcp_env(hermes_home), message_handler=inbox) as client:
        assert client.server_capabilities.resources.subscribe is True
        for uri in (MEMORY, SKILL, "test://not-ours"):  # any URI may be subscribed to; one not ours never changes
            await client.subscribe_resource(uri)
        _save(memory_file, "- uses uv and ruff\n")
        assert await inbox.next_update() == MEMORY
        await client.unsubscribe_resource(MEMORY)
        _save(memory_file, "- uses uv, ruff and mypy\n")
        _save(skill, skill.read_text() + "\nThen run the smoke tests.\n")
        # Made first and sorted first: an announcement of MEMORY.md would come before this one.
        assert await inbox.next_update() == SKILL
    assert inbox.seen == [MEMORY, SKILL]


async def test_a_changed_skill_body_is_an_update_and_a_changed_description_a_list_change(hermes_home):
    skill = _skill(hermes_home / "skills", "deploy", "Ship to production")
    inbox = Inbox()
    async with connected(mcp_env(hermes_home), message_handler=inbox) as client:
        await client.list_prompts()
        await client.subscribe_resource(SKILL)
        _save(skill, skill.read_text() + "\nThen run the smoke tests.\n")
        assert await inbox.next_update() == SKILL
        _save(skill, skill.read_text().replace("Ship to production", "Ship to production, then announce it"))
        assert await inbox.next_update() == SKILL
        await asyncio.wait_for(_until(lambda: len(inbox.seen) >= 4), WAIT)
        prompts = (await client.list_prompts()).prompts
    # The body's change left the lists as they were; the description's changed them.
    assert inbox.seen == [SKILL, SKILL, "notifications/resources/list_changed", "notifications/prompts/list_changed"]
    assert [p.description for p in prompts if p.name == "deploy"] == ["Ship to production, then announce it"]


async def test_a_projects_first_skills_folder_is_noticed(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    inbox = Inbox()
    async with connected(mcp_env(hermes_home), cwd=project, message_handler=inbox) as client:
        assert "lint" not in [p.name for p in (await client.list_prompts()).prompts]
        _skill(project / ".agents" / "skills", "lint", "Run the linters")
        await asyncio.wait_for(_until(lambda: "notifications/prompts/list_changed" in inbox.seen), WAIT)
        prompts = (await client.list_prompts()).prompts
    assert "lint" in [p.name for p in prompts]


@pytest.mark.parametrize("mode", ERAS)
async def test_a_session_is_updated_when_a_turn_in_another_process_appends_to_it(hermes_home, tmp_path, mode):
    project = tmp_path / "project"
    project.mkdir()
    allow_projects(hermes_home, project)
    async with SessionStore.open() as store:
        record = await store.create_session(cwd=str(project), surface="acp", title="editor work")
    uri = f"hermes://sessions/{record.id}"
    inbox = Inbox()
    with ScriptedOpenAIServer([{"text": "Deployed on Tuesday."}]) as model:
        async with connected(mcp_env(hermes_home), mode=mode, message_handler=inbox) as client:
            async with following(client, mode, inbox, [uri]) as next_update:
                async with connected(mcp_env(hermes_home, model.base_url)) as other:
                    view = data(await other.call_tool("ask", {"prompt": "when do we deploy?", "session_id": record.id}))
                assert await next_update() == uri
            text = (await client.read_resource(uri)).contents[0].text
    assert view["status"] == "done" and view["session_id"] == record.id
    assert "when do we deploy?" in text and "Deployed on Tuesday." in text


async def test_a_subscribed_memory_file_is_updated_over_http(hermes_home):
    user_file = hermes_home / "memories" / "USER.md"
    inbox = Inbox()
    with http_server(mcp_env(hermes_home)) as served:
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {served.token}"}) as http:
            transport = streamable_http_client(served.url, http_client=http)
            async with Client(transport, mode="legacy", cache=None, message_handler=inbox) as client:
                await client.subscribe_resource(USER)
                user_file.parent.mkdir(exist_ok=True)
                _save(user_file, "- prefers short answers\n")  # the file did not exist: it is created
                assert await inbox.next_update() == USER
                text = (await client.read_resource(USER)).contents[0].text
    assert text == "- prefers short answers\n"


# --- the watchers' lifetime ----------------------------------------------------------------------


class _Wire:
    """Raw JSON-RPC over a hermes-mcp process's stdio: a request, then its answer."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc = proc
        self.next_id = 1

    def request(self, method: str, params: dict | None = None) -> dict:
        request_id, self.next_id = self.next_id, self.next_id + 1
        self.send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params or {}})
        while True:
            line = self.proc.stdout.readline()
            assert line, f"hermes-mcp ended before answering {method}"
            message = json.loads(line)
            if message.get("id") == request_id:
                assert "result" in message, message
                return message["result"]

    def send(self, message: dict) -> None:
        self.proc.stdin.write((json.dumps(message) + "\n").encode())
        self.proc.stdin.flush()


def test_the_watchers_run_only_while_needed_and_end_with_the_server(hermes_home):
    log_file = hermes_home / "logs" / "mcp.log"
    files_on, files_off = "resources: watching memory files and skills", "resources: stopped watching memory files and skills"
    store_on, store_off = "resources: watching subscribed sessions", "resources: stopped watching subscribed sessions"

    def log() -> str:
        return log_file.read_text() if log_file.exists() else ""

    proc = subprocess.Popen([hermes_mcp()], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=mcp_env(hermes_home))
    try:
        wire = _Wire(proc)
        wire.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}})
        wire.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        # Each watcher is started before the request that needs it is answered, and stopped before
        # the one that ends the need is: the log says so by the time the answer comes.
        wire.request("tools/call", {"name": "memory_read", "arguments": {}})
        assert "live resources" not in log()
        wire.request("resources/subscribe", {"uri": "hermes://sessions/no-such-session"})
        assert store_on in log() and files_on not in log()
        wire.request("resources/unsubscribe", {"uri": "hermes://sessions/no-such-session"})
        assert store_off in log()
        wire.request("resources/subscribe", {"uri": MEMORY})
        assert files_on in log()
        wire.request("resources/unsubscribe", {"uri": MEMORY})
        assert files_off in log()
        # Listing asks to hear of list changes for as long as the connection lasts.
        wire.request("prompts/list")
        wire.request("resources/subscribe", {"uri": "hermes://sessions"})
        assert log().count(files_on) == 2 and log().count(store_on) == 2
        # The client goes away while both run: the server stops them and ends by itself.
        proc.stdin.close()
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    errors = proc.stderr.read().decode()
    assert "Traceback" not in errors and "was destroyed but it is pending" not in errors, errors[-3000:]
    assert log().count(files_off) == 2 and log().count(store_off) == 2


async def _until(predicate: Callable[[], bool]) -> None:
    while not predicate():
        await asyncio.sleep(0.02)
