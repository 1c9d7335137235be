"""/skill and /personality through the real gateway and the fake Telegram Bot API: a skill runs a
turn with its body in the message the model gets (as /NAME does in an editor), /skill alone lists
the skills the chat is offered (a fallback for toolsets the chat has is not), and a personality
overlay chosen in the chat reaches the next request and stays with the session across a restart."""

from __future__ import annotations

import asyncio
import json

from benchmarks.prompt_cache import system_text
from core.store import SessionStore
from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import OWNER, start
from tests.hermes_gateway.test_model_and_cost import ask

BODY = "Step one: list the release notes. Step two: tag the release."


def _skill(home, name: str, description: str, body: str, extra: str = "") -> None:
    folder = home / "skills" / name
    folder.mkdir(parents=True)
    (folder / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n{extra}---\n\n{body}\n")


def _last_user_text(body: dict) -> str:
    content = [m for m in body["messages"] if m["role"] == "user"][-1]["content"]
    return content if isinstance(content, str) else "".join(p.get("text", "") for p in content)


def test_skill_runs_a_turn_with_the_skills_body_and_lists_what_the_chat_is_offered(hermes_home, project, telegram):
    _skill(hermes_home, "release-steps", "How we cut a release", BODY)
    _skill(hermes_home, "no-gateway", "Only where the chat tools are missing", "HIDDEN BODY", "fallback_for_toolsets: [gateway]\n")
    with ScriptedOpenAIServer([{"text": "Released as the skill says."}]) as model:
        with start(hermes_home, project, telegram, model):
            listing = ask(telegram, "/skill", "release-steps")
            assert "How we cut a release" in listing and "write-agents-md" in listing and "/skill NAME" in listing
            assert "no-gateway" not in listing
            refused = ask(telegram, "/skill no-gateway", "No skill named")
            assert "'no-gateway'" in refused
            assert "'../../SOUL'" in ask(telegram, "/skill ../../SOUL", "No skill named")
            telegram.send_user_message(OWNER, "/skill release-steps version 2.1")
            telegram.wait_text(OWNER, "Released as the skill says.")
    (request,) = model.requests  # the listing and the refusals never reached the model
    asked = _last_user_text(request)
    assert BODY in asked and "Use the skill 'release-steps' below for this: version 2.1." in asked
    assert '<skill name="release-steps"' in asked and "HIDDEN BODY" not in json.dumps(request)


def _stored_meta(prefix: str) -> dict:
    async def body() -> dict:
        async with SessionStore.open() as store:
            (record,) = [r for r in await store.list_sessions(limit=50) if r.id.startswith(prefix)]
            return record.meta

    return asyncio.run(body())


def test_personality_switches_the_chats_session_from_the_next_message(hermes_home, project, telegram):
    folder = hermes_home / "personalities"
    folder.mkdir()
    (folder / "pirate.md").write_text("---\ndescription: Arr\n---\nTalk like a pirate.\n")
    script = [{"text": "Plain reply."}, {"text": "Arr, reply."}, {"text": "Arr, after the restart."}, {"text": "Plain again."}]
    with ScriptedOpenAIServer(script) as model:
        with start(hermes_home, project, telegram, model):
            listing = ask(telegram, "/personality", "Personality:")
            assert "none (SOUL.md alone)" in listing and "pirate" in listing and "concise" in listing
            assert "available: concise, pirate, teacher" in ask(telegram, "/personality ../pirate", "Personality unchanged")
            telegram.send_user_message(OWNER, "hello")
            telegram.wait_text(OWNER, "Plain reply.")
            switched = ask(telegram, "/personality pirate", "Personality")
            assert "pirate" in switched and "from the next message" in switched, switched
            session = switched.split("session (")[1][:8]
            telegram.send_user_message(OWNER, "and now?")
            telegram.wait_text(OWNER, "Arr, reply.")
        assert _stored_meta(session)["personality"] == "pirate"
        with start(hermes_home, project, telegram, model):
            assert "→ pirate" in ask(telegram, "/personality", "Personality:").replace("`", "").replace("<code>", "").replace("</code>", "")
            telegram.send_user_message(OWNER, "still a pirate?")
            telegram.wait_text(OWNER, "Arr, after the restart.")
            assert "cleared" in ask(telegram, "/personality none", "Personality")
            telegram.send_user_message(OWNER, "plain?")
            telegram.wait_text(OWNER, "Plain again.")
    plain, pirate, restarted, cleared = (system_text(r) for r in model.requests)
    assert "Talk like a pirate." not in plain and "Talk like a pirate." in pirate
    assert pirate.startswith(plain) and restarted == pirate and cleared == plain
    assert "personality" not in _stored_meta(session)
