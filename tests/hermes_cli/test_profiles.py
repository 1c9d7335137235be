"""``hermes-editor profiles list|create|remove`` and ``--profile`` on the admin CLI, run as a user runs them."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from core.messages import UserMessage
from core.store import SessionStore
from tests.acp_harness import agent_env
from tests.hermes_acp.test_fast_start import RawClient
from tests.hermes_cli.entry import hermes_editor

BAD_NAMES = ["../evil", "a/b", "..", ".hidden", "", "a" * 65, "wörk", "work space", "_x", "tab\tname", "x;rm -rf ~"]


def _seed(home: Path, *sessions: str) -> None:
    """Sessions in the store of ``home``, through the store's own code."""

    async def body() -> None:
        async with SessionStore.open(home / "state.db") as store:
            for sid in sessions:
                await store.create_session(cwd=home, surface="acp", session_id=sid, title=sid)
                await store.append_message(sid, UserMessage.of(f"text of {sid}"))

    asyncio.run(body())


def _listing(env: dict[str, str] | None = None, *args: str) -> list[dict]:
    result = hermes_editor(*args, "profiles", "list", "--json", env=env)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_create_list_and_use(hermes_home):
    made = hermes_editor("profiles", "create", "work")
    assert made.returncode == 0, made.stderr
    work = hermes_home / "profiles" / "work"
    assert work.is_dir() and (work.stat().st_mode & 0o777) == 0o700
    assert "--profile work" in made.stdout
    _seed(hermes_home, "main-1")
    _seed(work, "work-1", "work-2")

    rows = {r["name"]: r for r in _listing()}
    assert set(rows) == {"default", "work"}
    assert rows["default"] == {**rows["default"], "path": str(hermes_home), "default": True, "current": True, "sessions": 1}
    assert rows["work"] == {**rows["work"], "path": str(work), "default": False, "current": False, "sessions": 2}
    assert rows["work"]["size_bytes"] > 0
    # The main home's size leaves its profiles out.
    assert rows["default"]["size_bytes"] < rows["default"]["size_bytes"] + rows["work"]["size_bytes"]
    text = hermes_editor("--profile", "work", "profiles")
    assert text.returncode == 0
    marked = [line for line in text.stdout.splitlines() if line.startswith("*")]
    assert len(marked) == 1 and " work " in marked[0] and str(work) in marked[0]

    # The flag and the variable both select it; the flag wins over the variable.
    assert hermes_editor("--profile", "work", "config", "path").stdout.strip() == str(work / "config.toml")
    assert hermes_editor("config", "path", env={"HERMES_EDITOR_PROFILE": "work"}).stdout.strip() == str(work / "config.toml")
    both = hermes_editor("--profile", "default", "config", "path", env={"HERMES_EDITOR_PROFILE": "work"})
    assert both.stdout.strip() == str(hermes_home / "config.toml")
    twice = hermes_editor("--profile", "default", "--profile", "work", "config", "path")
    assert twice.stdout.strip() == str(work / "config.toml"), "given twice, the last one counts"
    empty = hermes_editor("config", "path", env={"HERMES_EDITOR_PROFILE": ""})
    assert empty.stdout.strip() == str(hermes_home / "config.toml"), "an empty variable is unset"
    listed = hermes_editor("--profile", "work", "sessions", "list", "--json")
    assert sorted(s["id"] for s in json.loads(listed.stdout)) == ["work-1", "work-2"]
    # After the command too, as people type it.
    for after in (["--profile", "work"], ["--profile=work"]):
        listed = hermes_editor("sessions", "list", *after, "--json")
        assert listed.returncode == 0 and sorted(s["id"] for s in json.loads(listed.stdout)) == ["work-1", "work-2"], listed.stderr
    typo = hermes_editor("sessions", "list", "--profile", "wrok")
    assert typo.returncode == 2 and "no profile named 'wrok'" in typo.stderr
    status = json.loads(hermes_editor("--profile", "work", "status", "--json").stdout)
    assert status["profile"] == {"name": "work", "home": str(work)}
    assert "profile 'work'" in hermes_editor("--profile", "work", "doctor", "--timeout", "1").stdout.splitlines()[0]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_refused_and_nothing_is_made(hermes_home, tmp_path, name):
    before = sorted(p.name for p in hermes_home.iterdir())
    for args, env, source in (
        (("profiles", "create", name), {}, "profiles create"),
        (("--profile", name, "sessions", "list"), {}, "--profile"),
        (("--profile", name, "profiles", "list"), {}, "--profile"),
        (("profiles", "remove", name, "--yes"), {}, "profiles remove"),
        (("sessions", "list"), {"HERMES_EDITOR_PROFILE": name}, "HERMES_EDITOR_PROFILE"),
    ):
        if source == "HERMES_EDITOR_PROFILE" and name == "":
            continue  # an empty variable is unset: the main home
        result = hermes_editor(*args, env=env)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert source in result.stderr and "letters, digits, '-' and '_'" in result.stderr, result.stderr
    assert sorted(p.name for p in hermes_home.iterdir()) == before
    assert not (hermes_home / "profiles").exists()
    assert not (tmp_path / "evil").exists() and not (hermes_home / "evil").exists()


def test_default_is_the_main_home_and_no_profile(hermes_home):
    made = hermes_editor("profiles", "create", "default")
    assert made.returncode == 2 and "'default' is the main home" in made.stderr
    gone = hermes_editor("profiles", "remove", "default", "--yes")
    assert gone.returncode == 2 and "cannot be removed" in gone.stderr
    assert not (hermes_home / "profiles").exists()


def test_a_missing_profile_is_refused_with_the_way_to_make_it(hermes_home):
    assert hermes_editor("profiles", "create", "work").returncode == 0
    for args, env in ((("--profile", "wrok", "sessions", "list"), {}), (("sessions", "list"), {"HERMES_EDITOR_PROFILE": "wrok"})):
        result = hermes_editor(*args, env=env)
        assert result.returncode == 2
        assert "no profile named 'wrok'" in result.stderr
        assert "hermes-editor profiles create wrok" in result.stderr and "existing: work" in result.stderr
    assert sorted(p.name for p in (hermes_home / "profiles").iterdir()) == ["work"]
    # Names differ by more than case: a file system that ignores case would make them one folder.
    twin = hermes_editor("profiles", "create", "Work")
    assert twin.returncode == 1 and "'work' exists" in twin.stderr
    assert hermes_editor("--profile", "WORK", "sessions").returncode == 2
    again = hermes_editor("profiles", "create", "work")
    assert again.returncode == 1 and "exists" in again.stderr


def test_create_from_copies_settings_and_persona_only(hermes_home):
    (hermes_home / "config.toml").write_text(
        '# my settings\nmodel = "openai:gpt-4.1"\n\n[telegram]\nbot_token = "123456:ABCDEF-secret-bot-token"\n\n[approvals]\nmode = "ask"\n'
    )
    (hermes_home / "SOUL.md").write_text("You are terse.\n")
    (hermes_home / "memories").mkdir()
    (hermes_home / "memories" / "MEMORY.md").write_text("private memory\n")
    _seed(hermes_home, "main-1")
    made = hermes_editor("profiles", "create", "bot2", "--from", "default")
    assert made.returncode == 0, made.stderr
    assert "config.toml, SOUL.md" in made.stdout
    bot2 = hermes_home / "profiles" / "bot2"
    config = (bot2 / "config.toml").read_text()
    assert 'model = "openai:gpt-4.1"' in config and "# my settings" in config and 'mode = "ask"' in config
    assert "telegram" not in config and "secret-bot-token" not in config
    assert (bot2 / "SOUL.md").read_text() == "You are terse.\n"
    assert sorted(p.name for p in bot2.iterdir()) == ["SOUL.md", "config.toml"]
    assert all((p.stat().st_mode & 0o777) == 0o600 for p in bot2.iterdir())
    # From another profile too; a missing source makes nothing.
    assert hermes_editor("profiles", "create", "bot3", "--from", "bot2").returncode == 0
    assert (hermes_home / "profiles" / "bot3" / "SOUL.md").read_text() == "You are terse.\n"
    missing = hermes_editor("profiles", "create", "bot4", "--from", "nope")
    assert missing.returncode == 1 and "no profile named 'nope'" in missing.stderr
    assert not (hermes_home / "profiles" / "bot4").exists()


def test_remove_asks_and_moves_to_the_trash(hermes_home):
    assert hermes_editor("profiles", "create", "work").returncode == 0
    work = hermes_home / "profiles" / "work"
    _seed(work, "work-1")
    kept = hermes_editor("profiles", "remove", "work")  # no answer on stdin: nothing happens
    assert kept.returncode == 1 and "kept the profile 'work'" in kept.stderr
    no = hermes_editor("profiles", "remove", "work", input="n\n")
    assert no.returncode == 1 and work.is_dir()
    yes = hermes_editor("profiles", "remove", "work", input="y\n")
    assert yes.returncode == 0, yes.stderr
    assert "1 session(s)" in yes.stdout and "Nothing was deleted" in yes.stdout
    assert not work.exists()
    (trashed,) = (hermes_home / "trash").iterdir()
    assert trashed.name.startswith("work.") and (trashed / "state.db").is_file()
    assert (hermes_home / "trash").stat().st_mode & 0o777 == 0o700
    assert [r["name"] for r in _listing()] == ["default"]
    missing = hermes_editor("profiles", "remove", "work", "--yes")
    assert missing.returncode == 1 and "no profile named 'work'" in missing.stderr


def test_remove_moves_a_linked_profile_as_a_link(hermes_home, tmp_path):
    """A profile kept elsewhere through a link: the link goes to the trash, what it points at stays."""
    elsewhere = tmp_path / "kept-elsewhere"
    elsewhere.mkdir(mode=0o700)
    (elsewhere / "SOUL.md").write_text("mine\n")
    (hermes_home / "profiles").mkdir(mode=0o700)
    (hermes_home / "profiles" / "linked").symlink_to(elsewhere)
    assert "linked" in [r["name"] for r in _listing()]
    result = hermes_editor("profiles", "remove", "linked", "--yes")
    assert result.returncode == 0, result.stderr
    (trashed,) = (hermes_home / "trash").iterdir()
    assert trashed.is_symlink() and (elsewhere / "SOUL.md").read_text() == "mine\n"


def test_remove_refuses_while_a_process_uses_the_profile(hermes_home, tmp_path):
    """A real hermes-acp of the profile (an editor's) holds it: remove says so and moves nothing."""
    work = hermes_home / "profiles" / "work"
    # The server makes the profile on first use; once it has answered initialize, it holds the home.
    client = RawClient({**agent_env(hermes_home, None), "HERMES_EDITOR_PROFILE": "work"}, tmp_path / "acp.log")
    try:
        client.request(1, "initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        assert "result" in client.answer(1)
        assert work.is_dir()
        busy = hermes_editor("profiles", "remove", "work", "--yes")
        assert busy.returncode == 1 and "in use by a running process" in busy.stderr, busy.stderr
        assert work.is_dir() and not (hermes_home / "trash").exists()
    finally:
        client.close()
    done = hermes_editor("profiles", "remove", "work", "--yes")
    assert done.returncode == 0, done.stderr
    assert not work.exists()


def test_chat_and_its_hermes_acp_use_the_profile(hermes_home):
    """hermes-editor chat spawns hermes-acp, which inherits the profile: the session lands in it."""
    from tests.fakes.openai_server import ScriptedOpenAIServer

    assert hermes_editor("profiles", "create", "work").returncode == 0
    project = hermes_home.parent / "project"
    project.mkdir()
    with ScriptedOpenAIServer([{"text": "hello from the work profile"}]) as model:
        env = {"OPENAI_BASE_URL": model.base_url, "OPENAI_API_KEY": "sk-test-not-a-real-key-123456", "HERMES_MODEL": "openai:scripted"}
        result = hermes_editor("--profile", "work", "chat", "-p", "say hello CHAT-MARK", env=env, cwd=project)
    assert result.returncode == 0, result.stderr
    assert "hello from the work profile" in result.stdout
    listed = json.loads(hermes_editor("--profile", "work", "sessions", "list", "--json").stdout)
    assert len(listed) == 1
    assert json.loads(hermes_editor("sessions", "list", "--json").stdout) == []
    assert not (hermes_home / "state.db").exists() or b"CHAT-MARK" not in (hermes_home / "state.db").read_bytes()
    assert os.listdir(hermes_home / "profiles") == ["work"]
