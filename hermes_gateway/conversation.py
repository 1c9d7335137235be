"""The conversation layer: everything a chat platform gets without knowing it.

Every message and button press of every platform comes through ``Router`` (the adapters'
``Events``): first the authorisation gate (default deny: an unknown person in a direct chat is
given a pairing code, in a group only a short refusal when they address the bot, a press is
refused), then answers to questions, then commands, then prompts. Questions from the approval
policy are bound to the request id, the place and the person who sent the prompt; platforms
without buttons answer them by replying with a number (an authenticated channel such as
Signal or Matrix) or a one-time code printed in the question (email).

Identities are per platform (``telegram:123``); ``/link`` joins a person's identities so their
sessions, jobs and ownership follow them from one platform to another.
"""

from __future__ import annotations

import base64
import logging
import mimetypes
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.config import home
from hermes_gateway.platform import Attachment, Incoming, Place, Platform, Press

if TYPE_CHECKING:
    from core.config import Config
    from hermes_gateway.chats import Conversations
    from hermes_gateway.commands import Commands
    from hermes_gateway.remote import RemoteApprovals
    from surface_support.pairing import Pairing

__all__ = ["Router"]

log = logging.getLogger(__name__)

_TEXT_INLINE_LIMIT = 100_000


class Router:
    """Every platform's messages and presses: the gate, then answers, commands and prompts."""

    def __init__(
        self,
        config: Config,
        platforms: dict[str, Platform],
        pairing: Pairing,
        conversations: Conversations,
        commands: Commands,
        remote: RemoteApprovals,
    ) -> None:
        self._config = config
        self._platforms = platforms
        self._pairing = pairing
        self._conversations = conversations
        self._commands = commands
        self._remote = remote
        self.last_update_at: float | None = None

    # -- the gate -------------------------------------------------------------------------

    async def _allowed(self, sender_id: str) -> bool:
        return await self._pairing.allowed(sender_id)

    async def _refuse(self, incoming: Incoming) -> None:
        """A stranger: a pairing code in a direct chat, a short refusal when they address the bot
        in a group, nothing otherwise. Names are never consulted."""
        platform = self._platforms[incoming.place.platform]
        place = incoming.place
        if not incoming.verified:
            log.info("message from %s refused: the sender could not be authenticated", incoming.sender.id)
            return
        if place.direct:
            issued = await self._pairing.request(incoming.sender.id, place.key, incoming.sender.name or None)
            if issued.code is None:
                await platform.send(place, f"Not authorised. {issued.reason}")
                return
            minutes = max(1, int(((issued.expires_at or time.time()) - time.time()) // 60))
            native = incoming.sender.id.partition(":")[2]
            await platform.send(
                place,
                "I don't know you yet.\n"
                f"Your user id: {native} ({incoming.sender.id})\n"
                f"Pairing code: {issued.code} (valid {minutes} min)\n\n"
                f"The bot's owner approves it on their machine with:\nhermes-editor pairing approve {issued.code}",
            )
        elif incoming.addressed:
            await platform.send(place, "I only answer people I know. Message me privately to pair.")

    # -- events ---------------------------------------------------------------------------

    async def message(self, incoming: Incoming) -> None:
        try:
            await self._message(incoming)
        except Exception:
            log.exception("handling a message in %s failed", incoming.place.key)

    async def _message(self, incoming: Incoming) -> None:
        if incoming.sender.is_bot:
            return
        person = await self._pairing.allowed_person(incoming.sender.id) if incoming.verified else None
        if person is None:
            log.info("message from unauthorised %s refused", incoming.sender.id)
            await self._refuse(incoming)
            return
        self.last_update_at = time.time()
        place, text = incoming.place, incoming.text.strip()
        answered = self._conversations.questions.reply_for(place, text)
        if answered is not None:
            await self._reply_answer(incoming, *answered)
            return
        if not incoming.addressed:
            return
        if text.startswith("/"):
            await self._commands.dispatch(incoming)
            return
        await self._prompt(incoming, person)

    async def _reply_answer(self, incoming: Incoming, approval_id: str, choice: str) -> None:
        platform = self._platforms[incoming.place.platform]
        person = await self._conversations.person(incoming.sender.id)

        async def ack(text: str, alert: bool) -> None:
            await platform.send(incoming.place, ("⚠️ " if alert else "") + text)

        await self._conversations.questions.answer(approval_id, choice, incoming.place, person, incoming.sender.id, ack)

    async def press(self, press: Press) -> None:
        try:
            await self._press(press)
        except Exception:
            log.exception("handling a button press in %s failed", press.place.key)

    async def _press(self, press: Press) -> None:
        if press.sender.is_bot:
            return
        if not await self._allowed(press.sender.id):
            log.info("button press from unauthorised %s refused", press.sender.id)
            await press.answer("You are not authorised to use this bot.", True)
            return
        self.last_update_at = time.time()
        kind, _, rest = press.data.partition("|")
        approval_id, _, choice = rest.partition("|")
        if kind == "ap":
            person = await self._conversations.person(press.sender.id)
            await self._conversations.questions.answer(approval_id, choice, press.place, person, press.sender.id, press.answer)
        elif kind == "rp":
            await self._remote.press(press, approval_id, choice)
        else:
            await press.answer("This button is no longer valid.", False)

    # -- prompts --------------------------------------------------------------------------

    async def _prompt(self, incoming: Incoming, person: str) -> None:
        """Start a turn with the message (its files fetched, voice notes transcribed) for ``person``
        (the sender's person, as the gate found it)."""
        from core.messages import ImagePart, TextPart, UserMessage

        place = incoming.place
        platform = self._platforms[place.platform]
        notes: list[str] = []
        images: list[tuple[str, str]] = []
        spoken: list[str] = []
        unheard: list[str] = []
        for attachment in incoming.attachments:
            try:
                if attachment.voice:
                    said = await self._transcribe(attachment)
                    spoken.append(said)
                    await platform.send(place, f"🎤 {said}")
                    continue
                await self._attachment(attachment, place, notes, images)
            except _Unheard as exc:
                unheard.append(str(exc))
            except Exception as exc:
                log.warning("could not fetch an attachment: %s", exc)
                notes.append(f"(An attachment could not be downloaded: {type(exc).__name__}.)")
        body = "\n\n".join([t for t in [incoming.text.strip(), *spoken, *notes] if t])
        if unheard:
            # Nothing is guessed: a voice note alone that could not be heard starts no turn.
            alone = "" if body or images else " Nothing was sent to the agent: try again, or type it."
            await platform.send(place, f"⚠️ The voice note could not be transcribed: {unheard[0]}{alone}")
            if body or images:
                body += f"\n\n(A voice note came too, but it could not be transcribed: {unheard[0]})"
        if not body and not images:
            return
        parts: list[Any] = [TextPart(text=body or "(see the attached image)")]
        parts += [ImagePart(media_type=mt, data=data) for mt, data in images]
        conversation = await self._conversations.get(place)
        self._conversations.start_turn(conversation, UserMessage(parts=parts), person)

    async def _transcribe(self, attachment: Attachment) -> str:
        from core.models import speech

        if not speech.transcription_configured(self._config):
            raise _Unheard("speech to text is not configured: set [voice] stt_base_url in config.toml (see the README).")
        data = await attachment.fetch()
        try:
            said = await speech.transcribe(self._config, data, filename=attachment.name, mime=attachment.mime or "audio/ogg")
            if not said.strip():
                raise _Unheard("no speech was recognised in it.")
            return said.strip()
        except speech.SpeechError as exc:
            raise _Unheard(str(exc)) from exc

    async def _attachment(self, attachment: Attachment, place: Place, notes: list[str], images: list[tuple[str, str]]) -> None:
        """Save a file under the state home; text files are given inline, images as images."""
        limit = self._config.gateway.files_max_bytes
        name = Path(attachment.name or "file").name or "file"
        if attachment.size and attachment.size > limit:
            notes.append(f"(The file {name} is larger than {limit} bytes and was not downloaded.)")
            return
        data = await attachment.fetch()
        if len(data) > limit:
            notes.append(f"(The file {name} is larger than {limit} bytes and was not kept.)")
            return
        folder = home() / "gateway" / "uploads" / re.sub(r"[^A-Za-z0-9._-]", "_", place.key)
        path = _save(folder, name, data)
        kind = attachment.mime or mimetypes.guess_type(name)[0] or ""
        if kind.startswith("image/"):
            images.append((kind, base64.b64encode(data).decode()))
            notes.append(f"({'Photo' if name.startswith('photo-') else 'Image'} saved at {path}.)")
            return
        try:
            content: str | None = data.decode("utf-8")
        except UnicodeDecodeError:
            content = None
        if content is not None and len(content) <= _TEXT_INLINE_LIMIT:
            notes.append(f"(File {name}, saved at {path}:)\n```\n{content}\n```")
        else:
            notes.append(f"(File {name} saved at {path}; {len(data)} bytes.)")


class _Unheard(Exception):
    """A voice note that could not be turned into text; the message says why."""


def _save(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{int(time.time())}-{name}"
    path.write_bytes(data)
    return path
