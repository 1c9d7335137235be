"""Skills and memory: the tools, the resources, skills as prompts, and change notices in both eras."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from mcp import MCPError
from mcp_types import PromptListChangedNotification, ResourceListChangedNotification

from core.learning import memory as core_memory
from core.learning import skills as core_skills
from tests.acp_harness import until
from tests.hermes_mcp.harness import ERAS, connected, data, error_text, mcp_env


def _skill(root: Path, name: str, description: str, body: str = "Do the thing.\n") -> Path:
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\nextra: kept\n---\n\n# {name}\n\n{body}")
    return path


# --- what the resources read ----------------------------------------------------------------


def test_skills_are_read_from_home_and_projects(hermes_home, tmp_path):
    project = tmp_path / "proj"
    _skill(hermes_home / "skills", "deploy", "Ship to production")
    _skill(hermes_home / "skills", "review", "Personal review")
    _skill(project / ".agents" / "skills", "review", "Project review rules")
    (hermes_home / "skills" / "no-front-matter").mkdir()
    (hermes_home / "skills" / "no-front-matter" / "SKILL.md").write_text("# just text\n")
    found = {s.name: s for s in core_skills.discover([project])}
    assert {"deploy", "review", "no-front-matter"} <= set(found)
    assert found["review"].origin == "project" and found["review"].description == "Project review rules"
    assert found["deploy"].meta["extra"] == "kept" and found["no-front-matter"].description == ""
    assert core_skills.read_text(core_skills.find("review", [project])).endswith("Do the thing.\n")
    assert core_skills.find("../etc", [project]) is None
    before = core_skills.fingerprint([project])
    _skill(hermes_home / "skills", "deploy", "Ship it, changed")
    assert core_skills.fingerprint([project]) != before


# --- over MCP ----------------------------------------------------------------------------


async def test_skill_and_memory_tools(hermes_home, tmp_path):
    project = tmp_path / "proj"
    _skill(hermes_home / "skills", "deploy", "Ship to production")
    _skill(project / ".agents" / "skills", "lint", "Run the linters")
    async with connected(mcp_env(hermes_home), roots=[project]) as client:
        personal = data(await client.call_tool("skills_list", {}))
        both = data(await client.call_tool("skills_list", {"cwd": str(project)}))
        viewed = data(await client.call_tool("skill_view", {"name": "lint", "cwd": str(project)}))
        missing = error_text(await client.call_tool("skill_view", {"name": "nope"}))
        added = data(await client.call_tool("memory_add", {"text": "Prefers pytest over unittest", "file": "user"}))
        secret = error_text(await client.call_tool("memory_add", {"text": "key is sk-live-abcdefghijklmnop1234"}))
        memory = data(await client.call_tool("memory_read", {}))
        bundled = data(await client.call_tool("skill_view", {"name": "systematic-debugging"}))
        full = error_text(await client.call_tool("memory_add", {"text": "z" * 1500, "file": "user"}))
    # core.learning.skills: bundled skills too, and project > personal > bundled.
    assert [s["name"] for s in personal["skills"] if s["origin"] != "bundled"] == ["deploy"]
    assert "systematic-debugging" in {s["name"] for s in personal["skills"] if s["origin"] == "bundled"}
    assert [(s["name"], s["origin"]) for s in both["skills"] if s["origin"] != "bundled"] == [("deploy", "personal"), ("lint", "project")]
    assert viewed["description"] == "Run the linters" and "# lint" in viewed["text"] and "extra: kept" not in viewed["text"]
    assert bundled["origin"] == "bundled" and "Reproduce" in bundled["text"]
    # core.learning.memory: the [learning] budget and the journal.
    assert "full" in full and "Consolidate" in full
    assert [(e.who, e.action, e.after) for e in core_memory.journal()] == [("mcp", "add", "Prefers pytest over unittest")]
    assert "skills_list" in missing
    assert added["entry"] == "- Prefers pytest over unittest\n"
    assert "credential" in secret
    files = {f["file"]: f for f in memory["files"]}
    assert files["user"]["text"] == "- Prefers pytest over unittest\n" and files["memory"]["text"] == ""


@pytest.mark.parametrize("mode", ERAS)
async def test_skills_are_resources_and_prompts(hermes_home, mode):
    _skill(hermes_home / "skills", "deploy", "Ship to production", "Run make deploy.\n")
    (hermes_home / "memories").mkdir()
    (hermes_home / "memories" / "MEMORY.md").write_text("- uses uv\n")
    async with connected(mcp_env(hermes_home), mode=mode) as client:
        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        skill = await client.read_resource("hermes://skills/deploy")
        memory = await client.read_resource("hermes://memory/MEMORY.md")
        prompts = (await client.list_prompts()).prompts
        prompt = await client.get_prompt("deploy", {"task": "the web app"})
        with pytest.raises(MCPError):
            await client.get_prompt("nope")
        with pytest.raises(MCPError):
            await client.read_resource("hermes://skills/nope")
    assert {"hermes://skills/deploy", "hermes://memory/MEMORY.md", "hermes://memory/USER.md", "hermes://sessions"} <= set(resources)
    assert resources["hermes://skills/deploy"].description == "Ship to production"
    assert templates == {"hermes://sessions/{session_id}", "hermes://skills/{name}", "hermes://memory/{file}"}
    assert "Run make deploy." in skill.contents[0].text and memory.contents[0].text == "- uses uv\n"
    bundled = {s.name for s in core_skills.discover() if s.origin == "bundled"}
    assert [(p.name, p.description) for p in prompts if p.name not in bundled] == [("deploy", "Ship to production")]
    text = prompt.messages[0].content.text
    assert "for this: the web app" in text and "Run make deploy." in text


async def test_a_new_skill_on_disk_is_announced_in_the_handshake_era(hermes_home):
    notices: list = []

    async def on_message(message):
        if isinstance(message, (ResourceListChangedNotification, PromptListChangedNotification)):
            notices.append(message)

    async with connected(mcp_env(hermes_home), message_handler=on_message) as client:
        assert client.server_capabilities.resources.list_changed and client.server_capabilities.prompts.list_changed
        assert "fresh" not in [p.name for p in (await client.list_prompts()).prompts]
        _skill(hermes_home / "skills", "fresh", "Brand new")
        await until(lambda: len(notices) >= 2, what="both list-changed notices")
        prompts = (await client.list_prompts()).prompts
    assert {type(n) for n in notices} == {ResourceListChangedNotification, PromptListChangedNotification}
    assert "fresh" in [p.name for p in prompts]


async def test_a_new_skill_on_disk_is_announced_to_listeners_in_the_2026_era(hermes_home):
    async with connected(mcp_env(hermes_home), mode="2026-07-28") as client:
        events: set[str] = set()
        async with client.listen(resources_list_changed=True, prompts_list_changed=True) as subscription:
            _skill(hermes_home / "skills", "fresh", "Brand new")

            async def both() -> None:
                async for event in subscription:
                    events.add(type(event).__name__)
                    if len(events) == 2:
                        return

            await asyncio.wait_for(both(), 10)
        prompts = (await client.list_prompts()).prompts
    assert events == {"ResourcesListChanged", "PromptsListChanged"}
    assert "fresh" in [p.name for p in prompts]
