"""Several platforms in one hermes-gateway process: each connects on its own (one that cannot is
retried without stopping the others), and /link lets a person's sessions follow them from one
platform to another, without ever handing an owner's reach to someone else."""

from __future__ import annotations

import json
import re
import socket

import pytest

from tests.fakes.openai_server import ScriptedOpenAIServer
from tests.fakes.slack_server import FakeSlack
from tests.hermes_gateway.platform_harness import cli, gateway_status, start_gateway, wait_until

OWNER_TG = 4242
FRIEND_TG = 5151
OWNER_SLACK = "U0000ADA"
FRIEND_SLACK = "U0000BOB"


@pytest.fixture
def slack():
    with FakeSlack() as fake:
        fake.add_user(OWNER_SLACK, "ada")
        fake.add_user(FRIEND_SLACK, "bob")
        yield fake


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _sections(slack_base: str) -> str:
    return f"""
[telegram]
allowed_users = [{OWNER_TG}, {FRIEND_TG}]
poll_timeout = 1
edit_interval = 0.2

[slack]
api_base_url = "{slack_base}"
allowed_users = ["{OWNER_SLACK}", "{FRIEND_SLACK}"]
owner = "{OWNER_SLACK}"
edit_interval = 1.2
"""


def _env(telegram, slack: FakeSlack) -> dict[str, str]:
    return {
        "TELEGRAM_BOT_TOKEN": telegram.token,
        "TELEGRAM_API_BASE_URL": telegram.base_url,
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_APP_TOKEN": slack.app_token,
    }


def test_a_platform_that_cannot_connect_is_retried_while_the_others_work(hermes_home, project, telegram, slack):
    unreachable = f"http://127.0.0.1:{_closed_port()}/api/"
    with (
        ScriptedOpenAIServer([{"text": "Telegram still answers."}]) as model,
        start_gateway(
            hermes_home,
            project,
            _sections(unreachable),
            model=model,
            wait_for=["telegram"],
            env=_env(telegram, slack),
            gateway_extra=f"owner = {OWNER_TG}",
        ) as gateway,
    ):
        slack_state = wait_until(
            lambda: (
                (gateway_status(hermes_home).get("platforms") or {}).get("slack", {}).get("state") == "retrying"
                and gateway_status(hermes_home)["platforms"]["slack"]
            ),
            30,
            "slack to be retrying",
        )
        telegram.send_user_message(OWNER_TG, "are you there?")
        telegram.wait_text(OWNER_TG, "Telegram still answers.")
        status = cli(hermes_home, "gateway", "status")
        _, stderr = gateway.stop()
    assert slack_state["attempts"] >= 1 and slack_state["error"] and slack_state["retry_at"]
    assert "slack" in status.stdout and "retrying" in status.stdout
    for secret in (slack.bot_token, slack.app_token, telegram.token):
        assert secret not in stderr and secret not in json.dumps(gateway_status(hermes_home))
    assert re.search(r"Slack start-up failed \(attempt 1\)", stderr)


def test_link_lets_a_persons_sessions_follow_them_to_another_platform(hermes_home, project, telegram, slack):
    script = [{"text": "Noted: the launch is on Friday."}, {"text": "Still Friday."}]
    with (
        ScriptedOpenAIServer(script) as model,
        start_gateway(
            hermes_home,
            project,
            _sections(slack.base_url),
            model=model,
            wait_for=["telegram", "slack"],
            env=_env(telegram, slack),
            gateway_extra=f"owner = {OWNER_TG}",
        ),
    ):
        # The friend talks on Telegram: the session is theirs.
        telegram.send_user_message(FRIEND_TG, "remember: the launch is on Friday")
        telegram.wait_text(FRIEND_TG, "Noted: the launch is on Friday.")
        telegram.send_user_message(FRIEND_TG, "/whoami")
        session = telegram.wait_text(FRIEND_TG, "Session: ")["text"].split("Session: ")[1].split()[0]
        dm = slack.dm_channel(FRIEND_SLACK)
        # On Slack, before linking, it is someone else's.
        slack.dm(FRIEND_SLACK, " /sessions")
        slack.wait_text(dm, "No sessions of yours yet")
        slack.dm(FRIEND_SLACK, f" /resume {session[:8]}")
        slack.wait_text(dm, "is not yours")
        # A wrong code links nothing.
        slack.dm(FRIEND_SLACK, " /link ZZZZZZZZ")
        slack.wait_text(dm, "No live link code matches")
        telegram.send_user_message(FRIEND_TG, "/link")
        code = re.search(r"Link code: (?:<code>|`)?([A-Z0-9]{8})", telegram.wait_text(FRIEND_TG, "Link code")["text"]).group(1)
        # The owner's identity is never joined to a friend's person (that would hand them the owner's reach).
        owner_dm = slack.dm_channel(OWNER_SLACK)
        slack.dm(OWNER_SLACK, f" /link {code}")
        slack.wait_text(owner_dm, "can be linked only to the owner's other identities")
        slack.dm(FRIEND_SLACK, f" /link {code}")
        slack.wait_text(dm, f"now follows telegram:{FRIEND_TG}")
        # Now the friend's Slack identity reaches the Telegram session, and continues it.
        slack.dm(FRIEND_SLACK, " /sessions")
        slack.wait_text(dm, session[:8])
        slack.dm(FRIEND_SLACK, f" /resume {session[:8]}")
        slack.wait_text(dm, "Resumed")
        slack.dm(FRIEND_SLACK, "is it still Friday?")
        slack.wait_text(dm, "Still Friday.")
        # A used code does not work twice.
        slack.dm(OWNER_SLACK, f" /link {code}")
        slack.wait_text(owner_dm, "No live link code matches", timeout=20)
    # The second turn ran in the same session, with the first turn's words in its history.
    assert "launch is on Friday" in json.dumps(model.requests[1]["messages"])
    users = cli(hermes_home, "pairing", "users")
    assert f"slack:{FRIEND_SLACK}" in users.stdout
