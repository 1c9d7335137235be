"""Between turns the chat is told when a background command ends (the real gateway, the fake Bot API)."""

from __future__ import annotations

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.hermes_gateway.harness import OWNER, start


def test_a_background_command_that_ends_between_turns_is_told_in_the_chat(hermes_home, project, telegram):
    gate = project / "go"
    command = f"while [ ! -e {gate.name} ]; do sleep 0.05; done; echo finished"
    script = [
        {"tool_calls": [{"id": "c1", "name": "run_command", "arguments": {"command": command, "background": True}}]},
        {"text": "Started it in the background."},
        {"text": "It finished."},
    ]
    with ScriptedOpenAIServer(script) as model, start(hermes_home, project, telegram, model) as gateway:
        telegram.send_user_message(OWNER, "/mode accept-edits")
        telegram.wait_text(OWNER, "accept-edits")
        telegram.send_user_message(OWNER, "start the watcher")
        telegram.wait_text(OWNER, "Started it in the background.")
        assert not any("exited" in m["text"] for m in telegram.sent(OWNER))
        gate.touch()  # the command ends now, while no turn runs
        told = telegram.wait_text(OWNER, "exited 0")
        assert "Background command" in told["text"] and "while [" in told["text"]
        # The model hears of it once, at its next request; the chat is not told again.
        telegram.send_user_message(OWNER, "and now?")
        telegram.wait_text(OWNER, "It finished.")
        gateway.stop()
    notes = [m for m in model.requests[-1]["messages"] if "exited 0" in str(m.get("content"))]
    assert len(notes) == 1
    assert sum("exited 0" in m["text"] for m in telegram.sent(OWNER)) == 1
