"""The platform protocol: what the conversation layer needs from a chat platform, and nothing more.

Each adapter (``hermes_gateway.platforms.<name>``) speaks one platform through the library its
community maintains and turns what arrives into ``Incoming`` messages and ``Press`` events; the
conversation layer (pairing and the authorisation gate, approvals bound to the asker, streaming,
splitting, commands, cron delivery) is written once against this module.

Identities are per platform: ``"<platform>:<native id>"`` (``telegram:123``, ``discord:456``,
``email:ada@example.org``). A place (where a conversation lives) has a key of the form
``"<platform>:<chat>:<thread or 0>"``; the key is what the store binds to a session.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Protocol

from hermes_gateway.render import number_chunks, split_markdown

__all__ = [
    "Attachment",
    "Button",
    "Events",
    "Incoming",
    "Limits",
    "Place",
    "Platform",
    "PlatformConfigError",
    "PlatformDown",
    "Press",
    "Sender",
    "identity",
    "send_long",
    "split_identity",
]


def identity(platform: str, native_id: object) -> str:
    """The identity string of a platform user: ``telegram:123``."""
    return f"{platform}:{native_id}"


def split_identity(value: str) -> tuple[str, str]:
    """``("telegram", "123")`` from ``"telegram:123"``; a bare number is a Telegram id (older config)."""
    platform, sep, native = str(value).partition(":")
    if not sep:
        return "telegram", platform
    return platform, native


@dataclass(frozen=True, slots=True)
class Place:
    """Where a conversation lives: a chat (channel, room, DM, mailbox thread) and a thread in it.

    ``direct`` is a one-to-one chat with the bot (pairing codes are offered only there).
    """

    platform: str
    chat: str
    thread: str | None = None
    direct: bool = False

    @property
    def key(self) -> str:
        return f"{self.platform}:{self.chat}:{self.thread or 0}"

    @staticmethod
    def parse_key(key: str) -> tuple[str, str, str | None]:
        """``(platform, chat, thread)`` of a key made by ``key``; chats may contain ':' (emails, Matrix ids)."""
        platform, _, rest = key.partition(":")
        chat, _, thread = rest.rpartition(":")
        return platform, chat, (None if thread in ("", "0") else thread)


@dataclass(frozen=True, slots=True)
class Sender:
    """Who sent a message or pressed a button. ``id`` is the identity string (``discord:456``)."""

    id: str
    name: str = ""
    is_bot: bool = False


@dataclass(slots=True)
class Attachment:
    """A file that came with a message; downloaded only when ``fetch`` is awaited.

    ``voice`` marks a voice note (or any audio message the platform sends as one): it is
    transcribed and handled as text.
    """

    name: str
    mime: str
    size: int | None
    fetch: Callable[[], Awaitable[bytes]]
    voice: bool = False


@dataclass(slots=True)
class Incoming:
    """One message to the bot.

    ``text`` has the bot's own mention removed. ``addressed`` is true in a direct chat, or when the
    bot is mentioned or replied to (in a group, anything else is ignored). ``verified`` is false
    when the platform could not authenticate the sender (email without DKIM/SPF passing): such a
    message is refused like a stranger's.
    """

    place: Place
    sender: Sender
    text: str
    addressed: bool
    attachments: list[Attachment] = field(default_factory=list)
    message_id: str | None = None
    verified: bool = True


@dataclass(frozen=True, slots=True)
class Button:
    """An inline button: its label and the data a press carries back (at most 64 bytes)."""

    label: str
    data: str


@dataclass(slots=True)
class Press:
    """A button press. ``answer(text, alert)`` acknowledges it to the presser alone (a toast, an
    ephemeral message); ``alert`` marks a refusal the presser must notice."""

    place: Place
    sender: Sender
    data: str
    message_id: str | None
    answer: Callable[[str, bool], Awaitable[None]]


@dataclass(frozen=True, slots=True)
class Limits:
    """What a platform allows.

    - ``text``: characters in one message as sent (after rendering);
    - ``edit_interval``: seconds between edits of one message (streaming rate);
    - ``edits``: sent messages can be edited (streaming); else a reply goes whole at the end;
    - ``buttons``: inline buttons exist; else questions are answered by replying with a code;
    - ``numbered_replies``: without buttons, answer with 1/2/3 (an authenticated channel such as
      Signal); else with a one-time code printed in the question (email).
    """

    text: int
    edit_interval: float = 1.5
    edits: bool = True
    buttons: bool = True
    numbered_replies: bool = False


class Events(Protocol):
    """What an adapter calls as things arrive (the conversation layer implements it)."""

    async def message(self, incoming: Incoming) -> None: ...

    async def press(self, press: Press) -> None: ...


class PlatformConfigError(Exception):
    """A platform's section cannot work as written; the message names the key and what to set."""


class PlatformDown(Exception):
    """Connecting failed. ``why`` is shown to the user (no secrets); ``retry_after`` overrides the
    backoff (seconds), e.g. for a rejected token (retry slowly) or flood control."""

    def __init__(self, why: str, retry_after: float | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.retry_after = retry_after


class Platform(abc.ABC):
    """One chat platform. ``start`` connects and then delivers events until ``stop``."""

    name: str = ""
    limits: Limits = Limits(text=4000)

    def __init__(self) -> None:
        # The bot's own name on the platform once connected ("@hermes_bot"), for status and logs.
        self.account = ""

    @abc.abstractmethod
    async def start(self, events: Events) -> None:
        """Connect and begin delivering events. Returns once connected; raises (``PlatformDown``
        preferably) when it cannot, and is then called again after a backoff."""

    async def stop_receiving(self) -> None:  # noqa: B027 - optional, a no-op by default
        """Take no new messages (the first step of a graceful shutdown); sending still works, so
        turns in flight can finish. ``stop`` follows."""

    @abc.abstractmethod
    async def stop(self) -> None:
        """Stop receiving and close connections; safe to call when never started."""

    @abc.abstractmethod
    async def send(self, place: Place, markdown: str, *, buttons: list[Button] | None = None) -> str:
        """Send one message (``markdown`` already fits: see ``split``); returns its message id."""

    async def edit(self, place: Place, message_id: str, markdown: str, *, buttons: list[Button] | None = None) -> None:
        """Replace a sent message's text (and its buttons: None removes them). Platforms without
        edits (``limits.edits`` false) are never asked."""
        raise NotImplementedError(f"{self.name} cannot edit messages")

    async def draft(self, place: Place, message_id: str | None, text: str) -> str:
        """Show a reply being written: send it (``message_id`` None) or edit it; returns the message id.
        Only called when ``limits.edits``; platforms may override to send drafts as plain text."""
        if message_id is None:
            return await self.send(place, text)
        await self.edit(place, message_id, text)
        return message_id

    async def send_file(self, place: Place, name: str, data: bytes, mime: str, caption: str = "") -> str:
        """Upload a file (a spoken reply, an export) to the place; returns the message id."""
        raise NotImplementedError(f"{self.name} cannot send files")

    async def typing(self, place: Place) -> None:  # noqa: B027 - optional, a no-op by default
        """Show that the bot is writing (called every few seconds during a turn)."""

    def split(self, markdown: str) -> list[str]:
        """Chunks of a reply that each fit one message (a number label is added after)."""
        return split_markdown(markdown, limit=self.limits.text)

    def place_for(self, chat: str, thread: str | None = None) -> Place:
        """A place from its parts (a stored binding, a cron destination ``chat:<key>``)."""
        return Place(self.name, chat, thread)

    def direct_place(self, native_user_id: str) -> Place | None:
        """The one-to-one chat with a user (remote approvals to the owner); None when the platform
        cannot open one."""
        return Place(self.name, native_user_id, None, direct=True)


async def send_long(platform: Platform, place: Place, markdown: str, *, first_message_id: str | None = None) -> list[str]:
    """Send ``markdown`` however long: split for the platform, numbered "(1/3)" when it takes more
    than one message. With ``first_message_id`` (a streamed draft) the first chunk replaces it."""
    chunks = number_chunks(platform.split(markdown)) or ["(empty reply)"]
    ids: list[str] = []
    for index, chunk in enumerate(chunks):
        if index == 0 and first_message_id is not None and platform.limits.edits:
            await platform.edit(place, first_message_id, chunk)
            ids.append(first_message_id)
            continue
        ids.append(await platform.send(place, chunk))
    return ids
