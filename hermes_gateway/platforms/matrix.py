"""Matrix through matrix-nio: rooms and direct chats on any homeserver, over the client-server API.

The bot is an ordinary Matrix account (``[matrix] user_id``), logged in with an access token or a
password. Matrix's quirks, and what this adapter makes of them:

- Nothing is pushed: the adapter long-polls ``/sync``. The first sync (full state) only learns
  the rooms; messages sent before the gateway started are history, never answered.
- A room is a direct chat when the bot's ``m.direct`` account data lists it, or when it has
  exactly two joined members (the bot and one person). Invites to direct chats are accepted from
  anyone (a stranger must reach the bot to be given a pairing code); invites to group rooms only
  from the users listed in ``[matrix] allowed_users`` or ``owner``, others are declined.
- In a group room the bot answers when mentioned (a pill, ``m.mentions``, its user id, or its
  display name at the start), replied to, or written to in a thread it takes part in. A thread
  (``m.thread``) is its own conversation: ``Place.thread`` is the thread root's event id, and
  replies go into the thread.
- Replies are Markdown rendered to Matrix HTML (``matrix_content``); streaming edits a message
  with ``m.replace``.
- Matrix has no buttons. A question lists its replies by number (the conversation layer writes
  them); the bot also reacts to its own question with 1️⃣ 2️⃣ 3️⃣ so a person can answer with one
  click, and a reaction with one of those keys by anyone becomes a ``Press`` (the conversation
  layer checks who it was). A refusal (``Press.answer`` with ``alert``) is a notice in the room
  that mentions the presser: Matrix cannot show anything to one member of a room alone.
- Commands are messages that start with "/". Element treats a leading "/" as its own command:
  type "//new" there (Element sends "/new"), or confirm "Send as message".
- End-to-end encrypted rooms are read and answered with ``[matrix] encryption = true`` (Olm and
  Megolm through nio's crypto; its keys are kept in the state home under ``matrix/``). Devices
  are not verified: the bot shares its keys with every device of the room's members. Without
  it, the bot's first sight of an encrypted room is answered with one notice saying so.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

import aiohttp
from nio import (  # type: ignore[import-untyped]
    AsyncClient,
    AsyncClientConfig,
    DownloadError,
    ErrorResponse,
    InviteMemberEvent,
    JoinError,
    LoginError,
    MatrixRoom,
    MegolmEvent,
    ReactionEvent,
    RoomCreateError,
    RoomGetEventError,
    RoomMessage,
    RoomPreset,
    RoomSendError,
    SyncError,
    SyncResponse,
    UnknownAccountDataEvent,
    WhoamiError,
)
from nio.crypto import ENCRYPTION_ENABLED, decrypt_attachment  # type: ignore[import-untyped]

from core.config import Config
from core.redaction import add_secrets, scrub
from hermes_gateway.platform import (
    Attachment,
    Button,
    Events,
    Incoming,
    Limits,
    Place,
    Platform,
    PlatformDown,
    Press,
    Sender,
    identity,
)
from hermes_gateway.platforms.matrix_content import (
    KEYCAPS,
    LIMIT,
    choice_numbers,
    edit_content,
    fit,
    keycap_number,
    matrix_html,
    message_content,
    strip_reply_fallback,
    thread_relation,
)
from hermes_gateway.platforms.matrix_setup import check_section, crypto_store, remember_device, remembered_device

__all__ = ["ENCRYPTION_NOTICE", "LIMIT", "UNDECRYPTABLE_NOTICE", "MatrixError", "MatrixPlatform", "matrix_html"]

log = logging.getLogger(__name__)

SYNC_TIMEOUT_MS = 30_000
# Seconds before a rejected credential is tried again: only a new one (and a restart) helps.
REJECTED_RETRY = 300.0
_MAX_RETRY_AFTER = 30.0
# What a request can fail with on the way (TimeoutError is an OSError).
_NETWORK = (aiohttp.ClientError, OSError)
_READ = {"m.text", "m.emote", "m.file", "m.image", "m.audio", "m.video"}  # the message types given to the agent
_REMEMBERED = 1000  # sent events, questions, threads kept (replies to older messages are looked up)

ENCRYPTION_NOTICE = (
    "This room is end-to-end encrypted, and this gateway is not set up to read encrypted rooms: nothing "
    "said here reaches me. Talk to me in a room without encryption, or ask the bot's owner to set "
    "[matrix] encryption = true."
)
UNDECRYPTABLE_NOTICE = "I could not decrypt a message here (its key has not reached me). Please send it again."


class MatrixError(Exception):
    """The homeserver refused a request; the message names it and what to do."""


@dataclass
class _Question:
    """A message sent with buttons: each number (typed by the conversation layer, reacted as a keycap)
    stands for one of them."""

    place: Place  # as the question was sent (a press is bound to it)
    room_id: str
    data: dict[int, str]  # number -> button data
    reactions: list[str] = field(default_factory=list)  # the bot's own reaction events


def _reason(exc: BaseException) -> str:
    """A short, secret-free reason for a connection failure."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    os_error = getattr(exc, "os_error", None)
    if isinstance(os_error, OSError) and os_error.strerror:
        return os_error.strerror.lower()
    return scrub(str(exc) or type(exc).__name__)


def _remember(kept: OrderedDict[Any, Any], key: Any, value: Any) -> None:
    """Keep ``key`` as the newest entry; the oldest go past ``_REMEMBERED`` (a gateway runs for months)."""
    kept[key] = value
    kept.move_to_end(key)
    while len(kept) > _REMEMBERED:
        kept.popitem(last=False)


def _native(value: str) -> str:
    return value.removeprefix("matrix:")


class MatrixPlatform(Platform):
    name = "matrix"

    def __init__(self, config: Config) -> None:
        super().__init__()
        section = config.matrix
        self._section = section
        self._url, self._user_id = check_section(section, encryption_available=ENCRYPTION_ENABLED)
        self._trusted = {_native(u) for u in [*section.allowed_users, section.owner or ""] if u}
        self.limits = Limits(text=LIMIT, edit_interval=section.edit_interval, edits=True, buttons=False, numbered_replies=True)
        self._client: AsyncClient | None = None
        self._events: Events | None = None
        self._display_name = ""
        self._sync_task: asyncio.Task[None] | None = None
        self._dispatch_task: asyncio.Task[None] | None = None
        self._inbox: asyncio.Queue[Incoming] = asyncio.Queue()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._direct: dict[str, list[str]] = {}  # the bot's m.direct: user -> rooms
        self._sent: OrderedDict[str, None] = OrderedDict()
        self._questions: OrderedDict[str, _Question] = OrderedDict()
        self._bot_threads: OrderedDict[tuple[str, str], None] = OrderedDict()  # threads the bot takes part in
        self._thread_last: OrderedDict[tuple[str, str], str] = OrderedDict()  # thread -> its latest event
        self._last_edit: OrderedDict[str, float] = OrderedDict()
        self._typing: set[str] = set()
        self._noticed: set[str] = set()  # rooms told about encryption once
        self._handled_invites: set[str] = set()
        self._fresh: set[str] = set()  # rooms joined, not yet seen in a sync
        self._opened: dict[str, str] = {}  # user -> direct chat created by the bot (before a sync shows it)

    # -- connecting -----------------------------------------------------------------------

    async def start(self, events: Events) -> None:
        if self._sync_task is not None and not self._sync_task.done():
            return
        self._events = events
        encryption = self._section.encryption
        store = crypto_store() if encryption else ""
        client = AsyncClient(
            self._url,
            self._user_id,
            device_id=self._section.device_id or "",
            store_path=store,
            # 429s are retried here (once, bounded); a connection failure a couple of times.
            config=AsyncClientConfig(
                max_limit_exceeded=0,
                max_timeouts=2,
                request_timeout=SYNC_TIMEOUT_MS / 1000 + 30,
                encryption_enabled=encryption,
                store_sync_tokens=False,
            ),
        )
        self._client = client
        try:
            await self._log_in(client)
            first = await client.sync(timeout=0, full_state=True)
            if isinstance(first, SyncError):
                raise PlatformDown(f"the Matrix homeserver at {self._url} refused the first sync ({first.status_code}: {first.message})")
            await self._crypto_chores(client)
            name = await client.get_displayname(self._user_id)
        except PlatformDown:
            await self._close_client()
            raise
        except _NETWORK as exc:
            await self._close_client()
            raise PlatformDown(f"cannot reach the Matrix homeserver at {self._url} ({_reason(exc)}): check [matrix] homeserver") from None
        self._display_name = getattr(name, "displayname", None) or ""
        self.account = self._user_id
        await self._absorb(first, initial=True)
        self._sync_task = asyncio.create_task(self._sync_forever(), name="matrix-sync")
        self._dispatch_task = asyncio.create_task(self._dispatch(), name="matrix-dispatch")

    async def _log_in(self, client: AsyncClient) -> None:
        section = self._section
        if section.access_token is not None:
            token = section.access_token.get_secret_value()
            client.access_token = token
            who = await client.whoami()
            if isinstance(who, WhoamiError):
                raise self._rejected("access token", who)
            if who.user_id != self._user_id:
                raise PlatformDown(
                    f"the Matrix access token belongs to {who.user_id}, not {self._user_id}: set [matrix] user_id = "
                    f'"{who.user_id}" or use that account\'s token',
                    REJECTED_RETRY,
                )
            device = section.device_id or who.device_id
            if section.encryption and not device:
                raise PlatformDown(
                    "the homeserver did not say which device the access token is for: set [matrix] device_id", REJECTED_RETRY
                )
            if device:
                client.restore_login(self._user_id, device, token)  # opens the crypto store of that device
            return
        assert section.password is not None
        client.device_id = section.device_id or remembered_device(self._user_id)
        response = await client.login(section.password.get_secret_value(), device_name="hermes-gateway")
        if isinstance(response, LoginError):
            raise self._rejected("password", response)
        add_secrets([response.access_token])  # the session's token is as secret as the password
        if not section.device_id:
            remember_device(self._user_id, response.device_id)

    def _rejected(self, what: str, error: ErrorResponse) -> PlatformDown:
        if error.status_code == "M_LIMIT_EXCEEDED":
            wait = (error.retry_after_ms or 10_000) / 1000
            return PlatformDown(f"the Matrix homeserver asks to wait {wait:.0f}s before logging in again", wait)
        variable = " or MATRIX_ACCESS_TOKEN" if what == "access token" else ""
        return PlatformDown(
            f"the Matrix homeserver at {self._url} rejected the {what} for {self._user_id} ({error.status_code or 'error'}: "
            f"{error.message}): set a valid [matrix] {what.replace(' ', '_')}{variable}, then restart the gateway",
            REJECTED_RETRY,
        )

    async def _crypto_chores(self, client: AsyncClient) -> None:
        """What an encrypting client does between syncs: publish its keys, learn the others', share room keys."""
        if client.olm is None:
            return
        for due, call in (
            (client.should_upload_keys, client.keys_upload),
            (client.should_query_keys, client.keys_query),
            (client.should_claim_keys, lambda: client.keys_claim(client.get_users_for_key_claiming())),
        ):
            if due:
                response = await call()
                if isinstance(response, ErrorResponse):
                    log.warning("Matrix key exchange failed: %s %s", response.status_code, response.message)
        await client.send_to_device_messages()

    async def stop_receiving(self) -> None:
        """No new messages (the first step of a graceful shutdown); sending still works."""
        task, self._sync_task = self._sync_task, None
        if task is not None and not task.done():
            task.cancel()
            try:
                await task
            except (asyncio.CancelledError, Exception):
                pass
        while not self._inbox.empty():  # arrived, not yet handled: no new turn starts while stopping
            self._inbox.get_nowait()

    async def stop(self) -> None:
        tasks = [t for t in (self._sync_task, self._dispatch_task, *self._tasks) if t is not None and not t.done()]
        for task in tasks:
            task.cancel()
        for task in tasks:
            try:
                await task
            except asyncio.CancelledError:
                pass
            except Exception:
                log.debug("matrix task ended with an error at stop", exc_info=True)
        self._sync_task = self._dispatch_task = None
        self._tasks.clear()
        await self._close_client()

    async def _close_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.close()
            except Exception:
                log.debug("closing the Matrix client failed", exc_info=True)

    # -- receiving ------------------------------------------------------------------------

    async def _sync_forever(self) -> None:
        backoff = 1.0
        while self._client is not None:
            client = self._client
            try:
                response = await client.sync(timeout=SYNC_TIMEOUT_MS)
                if not isinstance(response, SyncError):
                    await self._crypto_chores(client)
            except _NETWORK as exc:
                log.warning("Matrix sync with %s failed (%s); trying again in %.0fs", self._url, _reason(exc), backoff)
                await asyncio.sleep(backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            if isinstance(response, SyncError):
                if response.status_code == "M_LIMIT_EXCEEDED":
                    await asyncio.sleep(min((response.retry_after_ms or 5000) / 1000, _MAX_RETRY_AFTER))
                    continue
                revoked = response.status_code == "M_UNKNOWN_TOKEN"
                if revoked and await self._log_in_again(client):
                    continue
                hint = " (the access token was revoked: set a new one and restart)" if revoked else ""
                log.error("the Matrix homeserver refused a sync: %s %s%s", response.status_code, response.message, hint)
                await asyncio.sleep(REJECTED_RETRY if revoked else backoff)
                backoff = min(backoff * 2, 60.0)
                continue
            backoff = 1.0
            try:
                await self._absorb(response, initial=False)
            except Exception:
                log.exception("handling a Matrix sync failed")

    async def _log_in_again(self, client: AsyncClient) -> bool:
        """A password login whose session ended (signed out elsewhere) logs in again, on the same device."""
        if self._section.password is None:
            return False
        try:
            await self._log_in(client)
        except (PlatformDown, *_NETWORK) as exc:
            log.error("logging in to Matrix again failed: %s", getattr(exc, "why", None) or _reason(exc))
            return False
        log.info("the Matrix session had ended; logged in again as %s", self._user_id)
        return True

    async def _dispatch(self) -> None:
        """Messages reach the conversation layer one at a time, in the order they arrived."""
        while True:
            incoming = await self._inbox.get()
            if self._events is None:
                continue
            try:
                await self._events.message(incoming)
            except Exception:
                log.exception("handling a Matrix message failed")

    def _spawn(self, coro: Awaitable[Any]) -> None:
        async def run() -> None:
            try:
                await coro
            except Exception:
                log.exception("a Matrix background task failed")

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _absorb(self, response: SyncResponse, *, initial: bool) -> None:
        for event in response.account_data_events:
            if isinstance(event, UnknownAccountDataEvent) and event.type == "m.direct":
                self._direct = {user: list(rooms) for user, rooms in event.content.items() if isinstance(rooms, list)}
        for room_id, info in response.rooms.invite.items():
            await self._on_invite(room_id, info.invite_state)
        if initial:
            return  # messages from before the start are history
        assert self._client is not None
        for room_id, info in response.rooms.join.items():
            room = self._client.rooms.get(room_id)
            if room is None:
                continue
            if room_id in self._fresh:  # just joined: its state (encryption) is known now
                self._fresh.discard(room_id)
                if room.encrypted and self._client.olm is None:
                    await self._notice_once(room_id, ENCRYPTION_NOTICE)
            for event in info.timeline.events:
                await self._on_event(room, event)

    async def _on_invite(self, room_id: str, state: list[Any]) -> None:
        invite = next(
            (e for e in state if isinstance(e, InviteMemberEvent) and e.state_key == self._user_id and e.membership == "invite"), None
        )
        if invite is None or room_id in self._handled_invites or self._client is None:
            return
        self._handled_invites.add(room_id)
        direct = bool(invite.content.get("is_direct"))
        if not direct and invite.sender not in self._trusted:
            log.info(
                "declined an invite to room %s from %s: only users in [matrix] allowed_users or owner add the bot to groups",
                room_id,
                invite.sender,
            )
            await self._client.room_leave(room_id)
            return
        joined = await self._client.join(room_id)
        if isinstance(joined, JoinError):
            log.warning("could not join Matrix room %s: %s %s", room_id, joined.status_code, joined.message)
            return
        self._fresh.add(room_id)
        if direct:
            await self._mark_direct(invite.sender, room_id)

    async def _on_event(self, room: MatrixRoom, event: Any) -> None:
        source = getattr(event, "source", None) or {}
        content = source.get("content") or {}
        relates = content.get("m.relates_to") or {}
        thread = relates.get("event_id") if relates.get("rel_type") == "m.thread" else None
        if thread:
            _remember(self._thread_last, (room.room_id, thread), event.event_id)
        if event.sender == self._user_id:
            return
        if isinstance(event, MegolmEvent):  # encrypted, and not decrypted
            await self._undecryptable(room, event)
            return
        if isinstance(event, ReactionEvent):
            await self._on_reaction(room, event)
            return
        # Notices are what bots send (answering one starts a loop); edits repeat a message already had;
        # other message types (locations, verification requests) are not for the agent.
        if not isinstance(event, RoomMessage) or content.get("msgtype") not in _READ or relates.get("rel_type") == "m.replace":
            return
        self._inbox.put_nowait(await self._incoming(room, event, content, relates, thread))

    async def _undecryptable(self, room: MatrixRoom, event: Any) -> None:
        client = self._client
        if client is None or client.olm is None:
            await self._notice_once(room.room_id, ENCRYPTION_NOTICE)
            return
        log.warning("could not decrypt a message in Matrix room %s (session %s); asking for its key", room.room_id, event.session_id)
        try:
            await client.request_room_key(event)
        except Exception:  # nio refuses a second request for the same session: already asked
            log.debug("room key request not sent", exc_info=True)
        await self._notice_once(room.room_id, UNDECRYPTABLE_NOTICE)

    async def _incoming(
        self, room: MatrixRoom, event: Any, content: dict[str, Any], relates: dict[str, Any], thread: str | None
    ) -> Incoming:
        body = str(content.get("body") or "")
        attachments: list[Attachment] = []
        if "url" in content or isinstance(content.get("file"), dict):
            attachment, body = self._attachment(event, content)
            attachments.append(attachment)
        reply_to = (relates.get("m.in_reply_to") or {}).get("event_id")
        if thread and relates.get("is_falling_back"):
            reply_to = None  # a thread's fallback reply points at its latest message, not at a reply
        if reply_to and not thread:
            body = strip_reply_fallback(body)
        mentioned = self._mentions_me(content, body)
        direct = self._is_direct(room.room_id)
        addressed = (
            direct
            or mentioned
            or (reply_to is not None and await self._sent_by_me(room.room_id, reply_to))
            or (thread is not None and ((room.room_id, thread) in self._bot_threads or thread in self._sent))
        )
        if mentioned and thread:
            _remember(self._bot_threads, (room.room_id, thread), None)
        return Incoming(
            place=Place(self.name, room.room_id, thread, direct=direct),
            sender=Sender(identity(self.name, event.sender), room.user_name(event.sender) or event.sender),
            text=self._strip_mention(body) if mentioned else body.strip(),
            addressed=addressed,
            attachments=attachments,
            message_id=event.event_id,
        )

    def _attachment(self, event: Any, content: dict[str, Any]) -> tuple[Attachment, str]:
        """The file of a media message, and its caption (``body`` is the caption when ``filename`` differs)."""
        info = content.get("info") or {}
        body = str(content.get("body") or "")
        name = str(content.get("filename") or body or "file")
        caption = body if content.get("filename") and body != content.get("filename") else ""
        encrypted = content.get("file") if isinstance(content.get("file"), dict) else None
        voice = content.get("msgtype") == "m.audio" and "org.matrix.msc3245.voice" in content
        mime = str(info.get("mimetype") or (encrypted or {}).get("mimetype") or ("audio/ogg" if voice else "application/octet-stream"))
        size = info.get("size") if isinstance(info.get("size"), int) else None
        return Attachment(name, mime, size, self._fetcher(name, content.get("url"), encrypted), voice=voice), caption

    def _fetcher(self, name: str, url: Any, encrypted: dict[str, Any] | None) -> Callable[[], Awaitable[bytes]]:
        """Download through the media API; an encrypted room's file is decrypted with the key its message carries."""

        async def fetch() -> bytes:
            client = self._require_client()
            mxc = str((encrypted or {}).get("url") or url or "")
            response = await client.download(mxc=mxc)
            if isinstance(response, DownloadError):
                raise MatrixError(f"the Matrix homeserver did not give the file {name} ({mxc}): {response.status_code} {response.message}")
            if encrypted is None:
                return bytes(response.body)
            try:
                return bytes(decrypt_attachment(response.body, encrypted["key"]["k"], encrypted["hashes"]["sha256"], encrypted["iv"]))
            except (KeyError, TypeError, ValueError) as exc:
                raise MatrixError(f"the encrypted file {name} could not be decrypted ({exc}); ask for it to be sent again") from None

        return fetch

    def _mentions_me(self, content: dict[str, Any], body: str) -> bool:
        mentions = content.get("m.mentions") or {}
        if self._user_id in (mentions.get("user_ids") or []) or self._user_id in body:
            return True
        formatted = str(content.get("formatted_body") or "")
        if f"matrix.to/#/{self._user_id}" in formatted or f"matrix.to/#/{quote(self._user_id)}" in formatted:
            return True
        name = self._display_name
        return bool(name) and re.match(rf"\s*@?{re.escape(name)}\b", body, re.IGNORECASE) is not None

    def _strip_mention(self, body: str) -> str:
        text = body.replace(self._user_id, "")
        if self._display_name:
            text = re.sub(rf"^\s*@?{re.escape(self._display_name)}\b\s*[:,]?", "", text, flags=re.IGNORECASE)
        return re.sub(r"^\s*[:,]\s*", "", text).strip()

    async def _sent_by_me(self, room_id: str, event_id: str) -> bool:
        if event_id in self._sent:
            return True
        client = self._client
        if client is None:
            return False
        found = await client.room_get_event(room_id, event_id)
        return not isinstance(found, RoomGetEventError) and getattr(found.event, "sender", None) == self._user_id

    async def _on_reaction(self, room: MatrixRoom, event: ReactionEvent) -> None:
        question = self._questions.get(event.reacts_to)
        number = keycap_number(event.key)
        if question is None or number is None or number not in question.data:
            return
        data = question.data[number]
        sender = event.sender
        name = room.user_name(sender) or sender

        async def answer(text: str, alert: bool) -> None:
            # A refusal is said in the room (nothing can be shown to one member alone); an accepted
            # answer shows itself: the question is updated and its reactions taken back.
            if not text or not alert:
                return
            content = message_content(f"{name}: {text}", "m.notice")
            content["m.mentions"] = {"user_ids": [sender]}
            content["m.relates_to"] = self._relation(question.place, reply_to=event.reacts_to)
            try:
                await self._send_content(room.room_id, "m.room.message", content)
            except (MatrixError, *_NETWORK):
                log.warning("could not answer a reaction in Matrix room %s", room.room_id, exc_info=True)

        press = Press(question.place, Sender(identity(self.name, sender), name), data, event.reacts_to, answer)
        if self._events is not None:
            self._spawn(self._events.press(press))

    async def _notice_once(self, room_id: str, text: str) -> None:
        if room_id in self._noticed:
            return
        self._noticed.add(room_id)
        try:
            await self._send_content(room_id, "m.room.message", message_content(text, "m.notice"))
        except (MatrixError, *_NETWORK):
            log.warning("could not send a notice to Matrix room %s", room_id, exc_info=True)

    # -- places ---------------------------------------------------------------------------

    def _is_direct(self, room_id: str) -> bool:
        if any(room_id in rooms for rooms in self._direct.values()):
            return True
        room = self._client.rooms.get(room_id) if self._client is not None else None
        return room is not None and room.joined_count == 2 and room.invited_count == 0

    def place_for(self, chat: str, thread: str | None = None) -> Place:
        return Place(self.name, chat, thread, direct=chat.startswith("@") or self._is_direct(chat))

    def direct_place(self, native_user_id: str) -> Place | None:
        """The direct chat with a user: a known one, else the user's id (a chat is opened on first send)."""
        user = _native(native_user_id)
        if not user.startswith("@"):
            return None
        rooms = self._client.rooms if self._client is not None else {}
        known = next((r for r in self._direct.get(user, []) if r in rooms), None)
        return Place(self.name, known or user, None, direct=True)

    async def _room_for(self, place: Place) -> str:
        """The room to send to; a user id (a direct chat not opened yet) gets one created and invited."""
        if not place.chat.startswith("@"):
            return place.chat
        client = self._require_client()
        known = next((r for r in self._direct.get(place.chat, []) if r in client.rooms), None) or self._opened.get(place.chat)
        if known is not None:
            return known
        encryption = [{"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}]
        created = await client.room_create(
            is_direct=True,
            invite=[place.chat],
            preset=RoomPreset.trusted_private_chat,
            initial_state=encryption if client.olm is not None else (),
        )
        if isinstance(created, RoomCreateError):
            raise MatrixError(f"could not open a direct chat with {place.chat}: {created.status_code} {created.message}")
        room_id = str(created.room_id)
        self._opened[place.chat] = room_id
        await self._mark_direct(place.chat, room_id)
        if client.olm is not None:  # encrypting needs the room's members, which the next sync brings
            for _ in range(100):
                if room_id in client.rooms:
                    break
                await asyncio.sleep(0.1)
        return room_id

    async def _mark_direct(self, user: str, room_id: str) -> None:
        """Record a direct chat in the bot's ``m.direct`` account data, as Matrix clients do."""
        rooms = self._direct.setdefault(user, [])
        if room_id in rooms:
            return
        rooms.append(room_id)
        client = self._require_client()
        path = f"/_matrix/client/v3/user/{quote(self._user_id, safe='')}/account_data/m.direct"
        headers = {"Authorization": f"Bearer {client.access_token}", "Content-Type": "application/json"}
        try:
            response = await client.send("PUT", path, json.dumps(self._direct), headers)
            response.release()
        except _NETWORK as exc:
            log.warning("could not record the direct chat %s in m.direct (%s)", room_id, _reason(exc))

    # -- sending --------------------------------------------------------------------------

    def _require_client(self) -> AsyncClient:
        if self._client is None:
            raise MatrixError("the Matrix connection is not open (the gateway is connecting or stopping); try again shortly")
        return self._client

    def _relation(self, place: Place, *, reply_to: str | None = None) -> dict[str, Any]:
        if place.thread:
            latest = reply_to or self._thread_last.get((place.chat, place.thread), place.thread)
            return thread_relation(place.thread, latest, reply=reply_to is not None)
        return {"m.in_reply_to": {"event_id": reply_to}} if reply_to else {}

    async def _send_content(self, room_id: str, kind: str, content: dict[str, Any]) -> str:
        """Send an event (encrypted in an encrypted room); a 429 is waited out once (at most 30 s),
        any other refusal raises."""
        client = self._require_client()
        txn = uuid.uuid4().hex
        content = fit(content)
        for attempt in (1, 2):
            response = await client.room_send(room_id, kind, content, tx_id=txn, ignore_unverified_devices=True)
            if not (isinstance(response, RoomSendError) and response.status_code == "M_LIMIT_EXCEEDED" and attempt == 1):
                break
            await asyncio.sleep(min((response.retry_after_ms or 1000) / 1000, _MAX_RETRY_AFTER))
        if isinstance(response, RoomSendError):
            raise MatrixError(
                f"the Matrix homeserver refused a message to room {room_id} ({response.status_code}: {response.message})"
                + (": invite the bot to the room again" if response.status_code == "M_FORBIDDEN" else "")
            )
        event_id = str(response.event_id)
        _remember(self._sent, event_id, None)
        return event_id

    async def send(self, place: Place, markdown: str, *, buttons: list[Button] | None = None) -> str:
        room_id = await self._room_for(place)
        content = message_content(markdown)
        relation = self._relation(place)
        if relation:
            content["m.relates_to"] = relation
        event_id = await self._send_content(room_id, "m.room.message", content)
        if place.thread:
            _remember(self._bot_threads, (room_id, place.thread), None)
            _remember(self._thread_last, (room_id, place.thread), event_id)
        self._stop_typing(room_id)
        if buttons:
            await self._offer(place, room_id, event_id, markdown, buttons)
        return event_id

    async def edit(self, place: Place, message_id: str, markdown: str, *, buttons: list[Button] | None = None) -> None:
        room_id = await self._room_for(place)
        wait = self._last_edit.get(message_id, 0.0) + self.limits.edit_interval - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)
        await self._send_content(room_id, "m.room.message", edit_content(message_id, markdown))
        _remember(self._last_edit, message_id, time.monotonic())
        question = self._questions.get(message_id)
        if question is not None and [b.data for b in buttons or []] != list(question.data.values()):
            await self._withdraw(message_id, question)
            if buttons:
                await self._offer(question.place, room_id, message_id, markdown, buttons)

    async def _offer(self, place: Place, room_id: str, event_id: str, markdown: str, buttons: list[Button]) -> None:
        """Remember a question's buttons by the numbers its text gives them, and react with those
        numbers (1️⃣ …) for one-click answers."""
        numbers = choice_numbers(markdown, buttons)
        question = _Question(place, room_id, dict(zip(numbers, (b.data for b in buttons), strict=True)))
        _remember(self._questions, event_id, question)
        for number in numbers if max(numbers) <= len(KEYCAPS) else []:  # no keycap past 🔟: typed replies only
            reaction = {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id, "key": KEYCAPS[number - 1]}}
            try:
                question.reactions.append(await self._send_content(room_id, "m.reaction", reaction))
            except MatrixError:
                log.warning("could not react with %d to a question in Matrix room %s", number, room_id, exc_info=True)

    async def _withdraw(self, event_id: str, question: _Question) -> None:
        """A question answered (its buttons removed): its number reactions go, presses no longer count."""
        self._questions.pop(event_id, None)
        client = self._require_client()
        room_id = question.room_id
        for reaction in question.reactions:
            response = await client.room_redact(room_id, reaction, tx_id=uuid.uuid4().hex)
            if isinstance(response, ErrorResponse):
                log.info("could not take back a reaction in Matrix room %s: %s", room_id, response.message)

    async def send_file(self, place: Place, name: str, data: bytes, mime: str, caption: str = "") -> str:
        room_id = await self._room_for(place)
        client = self._require_client()
        room = client.rooms.get(room_id)
        encrypt = client.olm is not None and room is not None and room.encrypted
        mime = mime or "application/octet-stream"
        uploaded, keys = await client.upload(lambda *_: data, content_type=mime, filename=name, filesize=len(data), encrypt=encrypt)
        if isinstance(uploaded, ErrorResponse):
            raise MatrixError(f"the Matrix homeserver refused the upload of {name} ({uploaded.status_code}: {uploaded.message})")
        msgtype = {"image": "m.image", "audio": "m.audio", "video": "m.video"}.get(mime.split("/")[0], "m.file")
        content: dict[str, Any] = {**(message_content(caption) if caption else {"body": name}), "msgtype": msgtype}
        content.update({"filename": name, "info": {"mimetype": mime, "size": len(data)}, "m.mentions": {}})
        if encrypt:
            content["file"] = {"url": uploaded.content_uri, "mimetype": mime, **keys}
        else:
            content["url"] = uploaded.content_uri
        relation = self._relation(place)
        if relation:
            content["m.relates_to"] = relation
        return await self._send_content(room_id, "m.room.message", content)

    async def typing(self, place: Place) -> None:
        if place.chat.startswith("@") or self._client is None:
            return
        try:
            await self._client.room_typing(place.chat, True, timeout=10_000)
            self._typing.add(place.chat)
        except _NETWORK:
            pass

    def _stop_typing(self, room_id: str) -> None:
        """Matrix shows "typing" until told otherwise (or it times out): a sent reply ends it."""
        if room_id in self._typing and self._client is not None:
            self._typing.discard(room_id)
            self._spawn(self._client.room_typing(room_id, False))
