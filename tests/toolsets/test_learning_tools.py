"""memory, skill_view, skill_manage and session_search through the one dispatch path."""

from __future__ import annotations

from core import memory, skills
from core.messages import UserMessage
from core.store import SessionStore
from tests.toolsets.helpers import Session


async def test_memory_tool_edits_and_explains_a_full_file(hermes_home, tmp_path):
    session = Session(tmp_path)
    added = await session.run("memory", {"action": "add", "text": "CI runs on GitHub Actions"})
    assert not added.failed and "characters used" in added.result.content
    replaced = await session.run("memory", {"action": "replace", "old": "GitHub", "text": "CI runs on Buildkite"})
    assert not replaced.failed
    assert memory.parse_entries((hermes_home / "memories" / "MEMORY.md").read_text()) == ["CI runs on Buildkite"]
    full = await session.run("memory", {"action": "add", "file": "user", "text": "x" * 2000})
    assert full.failed and "Consolidate" in full.result.content
    missing = await session.run("memory", {"action": "remove", "old": "nothing like this"})
    assert missing.failed and "quote part of the entry" in missing.result.content
    assert memory.journal()[0].who == "agent:session-"
    readonly = Session(tmp_path, mode="read-only")
    refused = await readonly.run("memory", {"action": "add", "text": "anything"})
    assert refused.failed and "read-only" in refused.result.content


async def test_skill_tools(hermes_home, tmp_path):
    session = Session(tmp_path)
    viewed = await session.run("skill_view", {"name": "systematic-debugging"})
    assert not viewed.failed and "Reproduce" in viewed.result.content
    assert skills.usage()["systematic-debugging"]["uses"] == 1
    assert (await session.run("skill_view", {"name": "nope"})).failed
    content = "---\nname: flaky-tests\ndescription: Track down a flaky test\n---\n\nRun it 50 times with -x.\n"
    created = await session.run("skill_manage", {"action": "create", "name": "flaky-tests", "content": content})
    assert not created.failed, created.result.content
    patched = await session.run("skill_manage", {"action": "patch", "name": "flaky-tests", "old": "50", "new": "100"})
    assert not patched.failed and "100 times" in (hermes_home / "skills" / "flaky-tests" / "SKILL.md").read_text()
    bundled = await session.run("skill_manage", {"action": "delete", "name": "write-agents-md"})
    assert bundled.failed and "bundled" in bundled.result.content
    deleted = await session.run("skill_manage", {"action": "delete", "name": "flaky-tests"})
    assert not deleted.failed and skills.find("flaky-tests") is None


async def test_session_search_tool_scopes_to_the_project_and_reads_around(hermes_home, tmp_path):
    project = tmp_path / "repo"
    (project / ".git").mkdir(parents=True)
    async with SessionStore.open() as store:
        here = await store.create_session(cwd=str(project / "src"), surface="acp", title="Here")
        await store.append_message(here.id, UserMessage.of("why does the websocket reconnect loop"))
        await store.append_message(here.id, UserMessage.of("because the backoff resets"))
        there = await store.create_session(cwd=str(tmp_path / "other"), surface="mcp", title="There")
        await store.append_message(there.id, UserMessage.of("websocket in another project"))
    session = Session(project / "src")
    found = await session.run("session_search", {"query": "websocket"})
    assert not found.failed and here.id in found.result.content and there.id not in found.result.content
    everywhere = await session.run("session_search", {"query": "websocket", "scope": "all"})
    assert there.id in everywhere.result.content
    around = await session.run("session_search", {"session_id": here.id, "seq": 1})
    assert "backoff resets" in around.result.content
    none = await session.run("session_search", {"query": "kubernetes"})
    assert "scope=all" in none.result.content
