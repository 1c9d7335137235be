"""Profiles keep two agents apart: two real hermes-acp processes at once, one per profile, share nothing.

Each runs a turn with its own marker that also writes a memory entry and a skill; the test then
opens both profiles' stores directly (sqlite3) and their files, and finds each marker only in its
own profile, and nothing in the main home. ``--profile`` and ``HERMES_EDITOR_PROFILE`` both select
a profile; the flag wins over the variable.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
import subprocess
from pathlib import Path

import acp
import pytest

from tests.acp_harness import Client, agent_env, hermes_acp, running_agent
from tests.fakes.openai_server import ScriptedOpenAIServer

MARKERS = {"work": "MARKER-WORK-7f3a1c", "personal": "MARKER-PERSONAL-92bd4e"}


def _call(call_id: str, name: str, arguments: dict) -> dict:
    return {"text": f"Calling {name}.", "tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


def _script(profile: str) -> list[dict]:
    marker = MARKERS[profile]
    skill = f"{profile}-notes"
    skill_md = f"---\nname: {skill}\ndescription: Where {profile} notes live.\n---\nRead notes/{marker}.md first.\n"
    return [
        _call("m1", "memory", {"action": "add", "file": "memory", "text": f"The {profile} project code is {marker}."}),
        _call("s1", "skill_manage", {"action": "create", "name": skill, "content": skill_md}),
        {"text": f"Noted {marker}."},
    ]


def _dump(db: Path) -> str:
    """Everything in a store, read through SQLite itself (tables, FTS and all)."""
    conn = sqlite3.connect(f"{db.as_uri()}?mode=ro", uri=True)
    try:
        return "\n".join(conn.iterdump())
    finally:
        conn.close()


def _files_text(root: Path, *, skip: tuple[str, ...] = ()) -> str:
    """The text of every memory and skill file under ``root`` (``skip``: top folders left out)."""
    found = []
    for folder in ("memories", "skills"):
        for path in sorted((root / folder).rglob("*")) if (root / folder).is_dir() else []:
            if path.is_file() and not any(part in skip for part in path.relative_to(root).parts):
                found.append(path.read_text(errors="replace"))
    return "\n".join(found)


async def _turn(client: Client, conn, project: Path, profile: str) -> str:
    sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
    answer = await conn.prompt(session_id=sid, prompt=[acp.text_block(f"Remember {MARKERS[profile]} and save a skill.")])
    assert answer.stop_reason == "end_turn", client.text()
    return sid


async def test_two_profiles_at_once_share_nothing(hermes_home, tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    with ScriptedOpenAIServer(_script("work")) as work_model, ScriptedOpenAIServer(_script("personal")) as personal_model:
        # Both processes inherit HERMES_EDITOR_PROFILE=personal; the first is told --profile work, which wins.
        work_env = agent_env(hermes_home, work_model.base_url, extra={"HERMES_EDITOR_PROFILE": "personal"})
        personal_env = agent_env(hermes_home, personal_model.base_url, extra={"HERMES_EDITOR_PROFILE": "personal"})
        work, personal = Client(), Client()
        async with (
            running_agent(work, work_env, args=("--profile", "work"), stderr_path=tmp_path / "work.log") as (work_conn, _, transcript),
            running_agent(personal, personal_env, stderr_path=tmp_path / "personal.log") as (personal_conn, _, _),
        ):
            # Both servers are up at once, each in its own home; the turns run side by side.
            await asyncio.gather(_turn(work, work_conn, project, "work"), _turn(personal, personal_conn, project, "personal"))
            (init,) = [m["result"] for m in transcript.from_agent() if "authMethods" in m.get("result", {})]
    assert MARKERS["work"] in work.text() and MARKERS["personal"] in personal.text()
    # Set-up from the editor's terminal configures the profile the server runs in.
    assert [m["_meta"]["terminal-auth"]["args"] for m in init["authMethods"]] == [["--profile", "work", "--setup"]]

    homes = {name: hermes_home / "profiles" / name for name in MARKERS}
    for name, home in homes.items():
        other = MARKERS["personal" if name == "work" else "work"]
        store = _dump(home / "state.db")
        assert MARKERS[name] in store, f"{name}'s turn is not in its own store"
        assert other not in store, f"{name}'s store holds the other profile's turn"
        learned = _files_text(home)
        assert MARKERS[name] in learned and other not in learned
        assert (home / "skills" / f"{name}-notes" / "SKILL.md").is_file()
        assert not (home / "skills" / f"{'personal' if name == 'work' else 'work'}-notes").exists()
        assert (home.stat().st_mode & 0o777) == 0o700, "a profile is as private as the main home"
        loose = [str(p) for p in home.rglob("*") if not p.is_symlink() and p.stat().st_mode & 0o077]
        assert not loose, f"readable by others: {loose}"
    # The main home holds the profiles, and nothing of theirs.
    main_store = hermes_home / "state.db"
    main = _dump(main_store) if main_store.exists() else ""
    main += _files_text(hermes_home)
    assert all(marker not in main for marker in MARKERS.values())


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (("--profile", "../escape"), {}, "--profile"),
        (("--profile", ""), {}, "--profile"),
        (("--profile", "a" * 65), {}, "--profile"),
        (("--profile", "wörk"), {}, "--profile"),
        ((), {"HERMES_EDITOR_PROFILE": "x/y"}, "HERMES_EDITOR_PROFILE"),
        ((), {"HERMES_EDITOR_PROFILE": ".."}, "HERMES_EDITOR_PROFILE"),
    ],
)
def test_a_bad_profile_name_stops_the_server_before_it_makes_anything(hermes_home, tmp_path, args, env, named):
    home = tmp_path / "fresh-home"  # not made yet: nothing may be created
    result = subprocess.run(
        [hermes_acp(), *args],
        input="",
        capture_output=True,
        text=True,
        env=agent_env(home, None, extra=env),
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert result.stdout == "", "stdout is the protocol's: the error goes to stderr"
    assert named in result.stderr and "letters, digits" in result.stderr
    assert not home.exists()
    assert not (tmp_path / "escape").exists()


async def test_default_is_the_main_home(hermes_home, tmp_path):
    """``--profile default`` undoes an inherited variable: the session lands in the main home."""
    project = tmp_path / "project"
    project.mkdir()
    with ScriptedOpenAIServer([{"text": "in the main home"}]) as model:
        client = Client()
        env = agent_env(hermes_home, model.base_url, extra={"HERMES_EDITOR_PROFILE": "work"})
        async with running_agent(client, env, args=("--profile", "default")) as (conn, _, _):
            sid = (await conn.new_session(cwd=str(project), mcp_servers=[])).session_id
            await conn.prompt(session_id=sid, prompt=[acp.text_block("hello MAIN-HOME-MARK")])
    assert "MAIN-HOME-MARK" in _dump(hermes_home / "state.db")
    assert not (hermes_home / "profiles").exists()


def test_the_editor_configs_profile_snippet_starts_the_server_in_its_profile(hermes_home):
    """The snippet editor-configs/README.md shows is valid JSON whose args hermes-acp takes."""
    readme = (Path(__file__).resolve().parents[2] / "editor-configs" / "README.md").read_text()
    section = readme.split("## Profiles", 1)[1]
    server = json.loads(section.split("```json\n", 1)[1].split("```", 1)[0])["agent_servers"]["Hermes (work)"]
    assert server["args"] == ["--profile", "work"]
    result = subprocess.run([hermes_acp(), *server["args"]], input="", capture_output=True, text=True, env=agent_env(hermes_home, None))
    assert result.returncode == 0 and result.stdout == "", result.stderr
    assert (hermes_home / "profiles" / "work").is_dir() and "made the profile 'work'" in result.stderr
