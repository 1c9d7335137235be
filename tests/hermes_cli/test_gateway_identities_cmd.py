"""Gateway users and chats on the command line, through the real ``hermes-editor``: jobs report to a
place key (``--chat discord:123:0``) or a bare Telegram chat id as before; ``pairing users`` shows
linked identities and ``revoke`` drops a link; an old state.db's Telegram ids read back as identities."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from core.store import SessionStore
from core.store.gateway import GatewayStore
from tests.hermes_cli.entry import hermes_editor


def _jobs(home: Path) -> dict[str, dict]:
    listed = hermes_editor("cron", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    return {job["name"]: job for job in json.loads(listed.stdout)}


def test_cron_add_takes_a_place_key_or_a_telegram_chat_id(hermes_home, tmp_path):
    (hermes_home / "config.toml").write_text("[gateway]\nowner = 4242\n", encoding="utf-8")
    common = ("--project", str(tmp_path))
    added = hermes_editor("cron", "add", "every 2h", "check", "--name", "discord", "--chat", "discord:123:0", *common)
    assert added.returncode == 0 and "results go to chat discord:123:0" in added.stdout, added.stdout + added.stderr
    assert hermes_editor("cron", "add", "every 2h", "check", "--name", "group", "--chat", "-100200", *common).returncode == 0
    assert hermes_editor("cron", "add", "every 2h", "check", "--name", "owner", *common).returncode == 0
    wrong = hermes_editor("cron", "add", "every 2h", "check", "--name", "wrong", "--chat", "discord:123", *common)
    assert wrong.returncode == 2 and "--chat: 'discord:123' is not a chat: write platform:chat:thread" in wrong.stdout
    jobs = _jobs(hermes_home)
    assert {name: job["chat_key"] for name, job in jobs.items()} == {
        "discord": "discord:123:0",
        "group": "telegram:-100200:0",
        "owner": "telegram:4242:0",  # the owner's Telegram chat, as before
    }
    assert all(job["owner_id"] is None for job in jobs.values()), "made on the machine: the owner's"
    shown = hermes_editor("cron", "list").stdout
    assert "chat discord:123:0  by the owner" in shown and "delivers to: the store, chat telegram:-100200:0" in shown


def test_a_non_telegram_owner_gives_no_default_chat(hermes_home, tmp_path):
    (hermes_home / "config.toml").write_text('[gateway]\nowner = "discord:456"\n', encoding="utf-8")
    added = hermes_editor("cron", "add", "every 2h", "check", "--project", str(tmp_path))
    assert added.returncode == 0 and "no chat (set --chat" in added.stdout, added.stdout
    assert [job["chat_key"] for job in _jobs(hermes_home).values()] == [None]


def test_pairing_users_shows_links_and_revoke_drops_one(hermes_home):
    async def body() -> None:
        async with SessionStore.open(hermes_home / "state.db") as store:
            gateway = GatewayStore(store)
            code, _ = await gateway.issue_link_code("telegram:1001")
            assert await gateway.redeem_link_code(code, "email:ada@example.org") == "telegram:1001"

    asyncio.run(body())
    shown = hermes_editor("pairing", "users")
    assert "email:ada@example.org  linked to telegram:1001" in shown.stdout, shown.stdout
    (row,) = json.loads(hermes_editor("pairing", "users", "--json").stdout)
    assert (row["user_id"], row["person"], row["paired_at"]) == ("email:ada@example.org", "telegram:1001", None)
    revoked = hermes_editor("pairing", "revoke", "email:ada")  # a unique prefix
    assert revoked.returncode == 0 and "Revoked user email:ada@example.org." in revoked.stdout
    assert json.loads(hermes_editor("pairing", "users", "--json").stdout) == []


def test_an_older_state_dbs_telegram_users_and_chats_show_as_identities(hermes_home):
    from tests.core.test_identity_migration import FRIEND, GROUP, TOPIC, _store_at_m008

    asyncio.run(_store_at_m008(hermes_home / "state.db"))
    users = json.loads(hermes_editor("pairing", "users", "--json").stdout)
    assert [u["user_id"] for u in users] == [f"telegram:{FRIEND}", "telegram:6161"]
    (waiting,) = json.loads(hermes_editor("pairing", "list", "--json").stdout)
    assert (waiting["user_id"], waiting["chat_key"]) == ("telegram:9001", "telegram:9001:0")
    jobs = {job["id"]: job for job in json.loads(hermes_editor("cron", "list", "--json").stdout)}
    assert (jobs["j-topic"]["chat_key"], jobs["j-topic"]["owner_id"]) == (f"telegram:{GROUP}:{TOPIC}", f"telegram:{FRIEND}")
    assert "Revoked user telegram:6161." in hermes_editor("pairing", "revoke", "6161").stdout
