"""``fallback_for_toolsets``: a skill offered only while none of the toolsets it stands in for is
active, wherever skills are offered (discovery, the prompt's index, skills as commands)."""

from __future__ import annotations

from core.agent.session import SessionContext
from core.learning import skills
from core.learning.context import LearningSettings
from surface_support.skill_commands import skill_prompt, skills_listing


def _skill(root, name, description, extra=""):
    path = root / name / "SKILL.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n# {name}\n\nSteps of {name}.\n")
    return path


def _names(found) -> set[str]:
    return {s.name for s in found}


def test_a_fallback_is_offered_only_while_none_of_its_toolsets_is_active(hermes_home, tmp_path):
    personal = hermes_home / "skills"
    _skill(personal, "fetch-by-curl", "fetch pages with curl", "fallback_for_toolsets: [web, browser]\n")
    _skill(personal, "no-editor", "for sessions without the editor tools", "fallback_for_toolsets:\n  - editor\n")
    _skill(personal, "plain", "always there")
    project = tmp_path / "project"

    assert {"fetch-by-curl", "no-editor", "plain"} <= _names(skills.discover([project], toolsets={"cron"}))
    # Either of the toolsets it stands in for being active hides it: the session has the better way.
    assert "fetch-by-curl" not in _names(skills.discover([project], toolsets={"web"}))
    assert "fetch-by-curl" not in _names(skills.discover([project], toolsets={"editor", "browser"}))
    editor = _names(skills.discover([project], toolsets={"editor", "mcp", "gateway"}))
    assert "no-editor" not in editor and {"fetch-by-curl", "plain"} <= editor
    # Without toolsets (an admin listing), every skill.
    assert {"fetch-by-curl", "no-editor", "plain"} <= _names(skills.discover([project]))
    assert skills.find("no-editor", [project]) is not None
    assert skills.find("no-editor", [project], toolsets={"editor"}) is None


def test_fallback_and_requirement_together(hermes_home, tmp_path):
    _skill(hermes_home / "skills", "cron-without-web", "cron runs with no web", "requires_toolsets: cron\nfallback_for_toolsets: web\n")
    assert "cron-without-web" in _names(skills.discover([tmp_path], toolsets={"cron"}))
    assert "cron-without-web" not in _names(skills.discover([tmp_path], toolsets={"cron", "web"}))
    assert "cron-without-web" not in _names(skills.discover([tmp_path], toolsets={"editor"}))


def test_the_prompt_index_and_skill_commands_honour_it(hermes_home, tmp_path):
    _skill(hermes_home / "skills", "no-editor", "stands in for the editor tools", "fallback_for_toolsets: [editor]\n")
    _skill(hermes_home / "skills", "plain", "always there")
    cwd = tmp_path / "project"
    cwd.mkdir()

    in_editor = SessionContext.build(cwd, "base", LearningSettings(), {"editor", "mcp"})
    elsewhere = SessionContext.build(cwd, "base", LearningSettings(), {"cron"})
    assert "- plain: always there" in in_editor.prompt() and "no-editor" not in in_editor.prompt()
    assert "- no-editor: stands in for the editor tools" in elsewhere.prompt()

    assert skill_prompt("no-editor", "", cwd, {"editor"}) is None
    text = skill_prompt("no-editor", "the report", cwd, {"cron"})
    assert text is not None and "Steps of no-editor." in text and "for this: the report" in text
    assert "no-editor" not in skills_listing(cwd, {"editor"}) and "`plain`" in skills_listing(cwd, {"editor"})
    assert "`no-editor`" in skills_listing(cwd, {"cron"})


def test_capability_groups_follow_the_tools_of_each_toolset(hermes_home, tmp_path):
    """A session has a group ("web", "terminal", "delegation", ...) while it has any of its tools."""
    from toolsets import GROUPS, toolset

    _skill(hermes_home / "skills", "delegate-by-hand", "split work without subagents", "fallback_for_toolsets: [delegation]\n")
    _skill(
        hermes_home / "skills", "web-by-curl", "fetch pages with curl", "metadata:\n  hermes:\n    fallback_for_toolsets:\n      - web\n"
    )
    editor = {t.name for t in toolset("editor")}
    cron = {t.name for t in toolset("cron")}
    for group, tools in GROUPS.items():
        assert any(t.name in editor for t in tools), group  # every group names tools the agent has
    editor_groups = {g for t in toolset("editor") for g in t.groups}
    cron_groups = {g for t in toolset("cron") for g in t.groups}
    assert editor_groups == set(GROUPS) and "delegation" not in cron_groups and {"web", "terminal", "file"} <= cron_groups
    assert "delegate" in editor and "delegate" not in cron
    in_cron = _names(skills.discover([tmp_path], toolsets={"cron", *cron_groups}))
    in_editor = _names(skills.discover([tmp_path], toolsets={"editor", *editor_groups}))
    assert "delegate-by-hand" in in_cron and "delegate-by-hand" not in in_editor
    assert "web-by-curl" not in in_cron and "web-by-curl" not in in_editor


def test_nested_front_matter_lists_belong_to_their_own_key():
    meta, body = skills.parse_front_matter(
        "---\nname: x\ntags:\n  - a\n  - b\nmetadata:\n  hermes:\n    requires_tools:\n      - run_command\n"
        "    fallback_for_toolsets: [web]\n  version: 2\n---\nbody\n"
    )
    assert meta["tags"] == ["a", "b"] and meta["requires_tools"] == ["run_command"]
    assert meta["fallback_for_toolsets"] == ["web"] and meta["version"] == "2" and body == "body\n"
