"""The Matrix adapter in end-to-end encrypted rooms: a person's own nio client (Olm/Megolm through
vodozemac) talks to the adapter through the fake homeserver, which only ever sees ciphertext."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from nio import AsyncClient, AsyncClientConfig, RoomMessage, SyncResponse
from nio.crypto import decrypt_attachment

from core.config import Config, MatrixConfig
from hermes_gateway.platform import Place
from hermes_gateway.platforms.matrix import UNDECRYPTABLE_NOTICE, MatrixPlatform
from tests.fakes.matrix_server import FakeMatrix
from tests.hermes_gateway.platforms.test_matrix import ADA, WAIT, Recorder

SECRET = "the launch code is 0451"


class Person:
    """Someone on an encrypting client (as Element is): their own device, keys and store."""

    def __init__(self, fake: FakeMatrix, user_id: str, password: str, store: Path) -> None:
        store.mkdir(parents=True, exist_ok=True)
        config = AsyncClientConfig(encryption_enabled=True, max_timeouts=2, store_sync_tokens=False)
        self.client = AsyncClient(fake.base_url, user_id, store_path=str(store), config=config)
        self.password = password
        self.seen: list[RoomMessage] = []  # decrypted messages from others, oldest first

    async def __aenter__(self) -> Person:
        await self.client.login(self.password, device_name="phone")
        await self.pump()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.client.close()

    async def pump(self) -> None:
        """One sync and the key exchange an encrypting client does after it."""
        client = self.client
        response = await client.sync(timeout=200)
        if isinstance(response, SyncResponse):
            for info in response.rooms.join.values():
                self.seen.extend(e for e in info.timeline.events if isinstance(e, RoomMessage) and e.sender != client.user_id)
        if client.should_upload_keys:
            await client.keys_upload()
        if client.should_query_keys:
            await client.keys_query()
        if client.should_claim_keys:
            await client.keys_claim(client.get_users_for_key_claiming())
        await client.send_to_device_messages()

    async def until(self, predicate: Any, what: str) -> Any:
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            await self.pump()
            found = predicate()
            if found:
                return found
        raise AssertionError(f"timed out waiting for {what}; seen: {[getattr(e, 'body', e) for e in self.seen]}")

    async def send(self, room_id: str, content: dict[str, Any]) -> str:
        response = await self.client.room_send(room_id, "m.room.message", content, ignore_unverified_devices=True)
        return str(response.event_id)


def encrypted_settings(fake: FakeMatrix) -> Config:
    return Config(
        matrix=MatrixConfig(
            homeserver=fake.base_url, user_id=fake.bot, password=fake.password, encryption=True, allowed_users=[ADA], edit_interval=0.1
        )
    )


@pytest.fixture
def fake():
    with FakeMatrix() as server:
        server.max_wait = 0.5
        server.user(ADA, "Ada", password="ada-password")
        yield server


async def test_an_encrypted_direct_chat_is_read_and_answered_encrypted(fake, tmp_path, hermes_home):
    room = fake.create_room(ADA, [ADA], bot="invite", direct=True, encrypted=True)
    platform = MatrixPlatform(encrypted_settings(fake))
    events = Recorder()
    await platform.start(events)
    try:
        async with Person(fake, ADA, "ada-password", tmp_path / "ada") as ada:
            await ada.until(lambda: fake.bot in ada.client.rooms[room].users, "the bot to join")
            asked = await ada.send(room, {"msgtype": "m.text", "body": SECRET})
            incoming = await events.next_message()
            assert (incoming.text, incoming.message_id, incoming.addressed) == (SECRET, asked, True)
            assert incoming.place == Place("matrix", room, None, direct=True)
            place = incoming.place
            answer = await platform.send(place, "Noted: **0451**.")
            reply = await ada.until(lambda: next((e for e in ada.seen if e.event_id == answer), None), "the answer")
            assert reply.body == "Noted: **0451**." and reply.formatted_body == "Noted: <b>0451</b>."
            await platform.edit(place, answer, "Noted, and forgotten.")
            edited = await ada.until(lambda: next((e for e in ada.seen if "m.new_content" in e.source["content"]), None), "the edit")
            assert edited.source["content"]["m.new_content"]["body"] == "Noted, and forgotten."
            assert edited.source["content"]["m.relates_to"] == {"rel_type": "m.replace", "event_id": answer}
    finally:
        await platform.stop()
    on_the_server = fake.events(room)
    assert {e["type"] for e in on_the_server if e["sender"] in (ADA, fake.bot) and "state_key" not in e} == {"m.room.encrypted"}
    assert "0451" not in json.dumps(on_the_server)  # the homeserver never saw a word of it
    assert (hermes_home / "matrix").is_dir() and any((hermes_home / "matrix").iterdir())  # the bot's keys


async def test_encrypted_files_both_ways_and_keys_survive_a_restart(fake, tmp_path):
    room = fake.create_room(ADA, [ADA], direct=True, encrypted=True)
    platform = MatrixPlatform(encrypted_settings(fake))
    events = Recorder()
    await platform.start(events)
    try:
        async with Person(fake, ADA, "ada-password", tmp_path / "ada") as ada:
            await ada.until(lambda: ada.client.olm.tracked_users, "the bot's keys")
            data = b"col1,col2\n1,2\n"
            uploaded, keys = await ada.client.upload(
                lambda *_: data, content_type="text/csv", filename="t.csv", filesize=len(data), encrypt=True
            )
            await ada.send(room, {"msgtype": "m.file", "body": "t.csv", "filename": "t.csv", "file": {"url": uploaded.content_uri, **keys}})
            attachment = (await events.next_message()).attachments[0]
            assert attachment.name == "t.csv" and await attachment.fetch() == data
            assert data not in [media[0] for media in fake.media.values()]  # stored encrypted
            sent = await platform.send_file(Place("matrix", room, None, True), "out.txt", b"plain bytes out", "text/plain")
            message = await ada.until(lambda: next((e for e in ada.seen if e.event_id == sent), None), "the bot's file")
            download = await ada.client.download(mxc=message.url)
            assert decrypt_attachment(download.body, message.key["k"], message.hashes["sha256"], message.iv) == b"plain bytes out"
            await platform.stop()
            # The same device, its keys read back from the state home: Ada's session still decrypts.
            platform = MatrixPlatform(encrypted_settings(fake))
            events = Recorder()
            await platform.start(events)
            await ada.send(room, {"msgtype": "m.text", "body": "still there?"})
            assert (await events.next_message()).text == "still there?"
            assert len(fake.device_keys[fake.bot]) == 1  # one device, not a new one per start
    finally:
        await platform.stop()


async def test_a_message_the_bot_has_no_key_for_is_said_once(fake, tmp_path):
    room = fake.create_room(ADA, [ADA], direct=True, encrypted=True)
    platform = MatrixPlatform(encrypted_settings(fake))
    events = Recorder()
    await platform.start(events)
    try:
        async with Person(fake, ADA, "ada-password", tmp_path / "ada") as ada:
            await ada.until(lambda: ada.client.olm.tracked_users, "the bot's keys")
            without_key = {  # a session whose key never reached the bot (a client that shares keys only with verified devices)
                "algorithm": "m.megolm.v1.aes-sha2",
                "ciphertext": "AwgAEnACgAkLmt6qF84IK++J7UDH2Za1YVchHyprqTqsg2yyOwAtHaZTwyNg37afzg8f3r9IsN9r4RNFg7MaZencUJe4qvELiDi",
                "device_id": ada.client.device_id,
                "sender_key": "IlRMeOPX2e0MurIyfWEucYBRVOEEUMrOHqn/8mLqMjA",
                "session_id": "X3lUlvLELLYxeTx4yOVu6UDpasGEVO0Jbu+QFnm0cKQ",
            }
            fake.send_event(room, ADA, "m.room.encrypted", without_key)
            fake.send_event(room, ADA, "m.room.encrypted", without_key)
            notice = await ada.until(lambda: next((e for e in ada.seen if e.sender == fake.bot), None), "the bot's notice")
            assert notice.body == UNDECRYPTABLE_NOTICE and notice.source["content"]["msgtype"] == "m.notice"
            await ada.send(room, {"msgtype": "m.text", "body": "and now?"})
            assert (await events.next_message()).text == "and now?"  # nothing of the undecryptable two came through
            assert len(fake.events(room, sender=fake.bot, kind="m.room.encrypted")) == 1  # said once
    finally:
        await platform.stop()
