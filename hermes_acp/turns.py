"""What a prompt does in the ACP server besides the turn itself: slash commands, permission questions, prompt content."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING

from core.events import ApprovalRequest, Decision
from core.messages import ImagePart, TextPart, UserMessage
from core.models.base import ModelError
from hermes_acp.commands import INIT_PROMPT, command_prompt, help_text, list_skills, read_memory, session_toolsets
from hermes_acp.live import LiveSession, cost_text
from hermes_acp.options import MODES
from hermes_acp.render import acp_content
from hermes_acp.wire import request_permission, send_update

if TYPE_CHECKING:
    from acp.schema import PermissionOptionKind, ToolKind

    from hermes_acp.backend import Backend
    from hermes_acp.session_ops import SessionOps

__all__ = ["Turns"]

log = logging.getLogger(__name__)

MAX_RESOURCE_CHARS = 200_000

_OPTIONS: tuple[tuple[PermissionOptionKind, str, Decision], ...] = (
    ("allow_once", "Allow", Decision.ALLOW_ONCE),
    ("allow_always", "Always allow", Decision.ALLOW_ALWAYS),
    ("reject_once", "Reject", Decision.REJECT_ONCE),
    ("reject_always", "Always reject", Decision.REJECT_ALWAYS),
)


class Turns:
    """Slash commands, permission questions and prompt conversion for the server's prompts."""

    def __init__(self, backend: Backend, sessions: SessionOps) -> None:
        self._backend = backend
        self._sessions = sessions

    async def command(self, live: LiveSession, name: str, args: str) -> str | None:
        """Run a slash command; returns a prompt for the model when the command is one (/init)."""
        import acp

        session = live.session
        extra = command_prompt(name, args, session.cwd, session_toolsets(session))
        if extra is not None:
            return extra
        if name == "init":
            return INIT_PROMPT
        if name == "help":
            text = help_text()
        elif name == "cost":
            text = cost_text(session)
        elif name == "search":
            text = await self._search_text(args)
        elif name == "model":
            if not args:
                text = (
                    "Models: " + ", ".join(f"`{m}`" for m in self._sessions.config.model_choices()) + f". Current: `{live.choices.model}`."
                )
            else:
                await self._sessions.set_model(live, args)
                text = f"Model for this session: `{live.choices.model}`."
        elif name == "mode":
            if args not in MODES:
                text = f"Modes: {', '.join(f'`{m}`' for m in MODES)}. Current: `{live.choices.mode}`."
            else:
                await self._sessions.set_mode(live, args)
                text = f"Mode: `{args}` — {MODES[args][1]}."
        elif name == "memory":
            text = read_memory()
        elif name == "skills":
            text = list_skills(session.cwd, session_toolsets(session))
        elif name == "personality":
            text = await self._personality(session, args)
        elif name == "compact":
            try:
                summary = await self._sessions.agent.compact(session)
                text = "Compacted: later requests start from this summary.\n\n" + summary if summary else "Nothing to compact yet."
            except ModelError as exc:
                text = exc.user_message()
        elif name == "undo":
            text = await self._undo(session)
        else:  # pragma: no cover - parse_command only returns known names
            text = f"Unknown command /{name}."
        await send_update(self._backend.conn, session.id, acp.update_agent_message_text(text))
        return None

    async def _personality(self, session, args: str) -> str:
        """``/personality``: list the overlays, or switch the session's from its next turn."""
        from core.agent.prompt import choose_personality, personality_listing
        from core.learning.personality import PersonalityError

        current = session.context.personality if session.context is not None else None
        if not args:
            return await asyncio.to_thread(personality_listing, current)
        try:
            chosen = await choose_personality(self._sessions.store, session.id, session.context, args.split()[0])
        except PersonalityError as exc:
            return f"Personality unchanged: {exc}"
        return f"Personality `{chosen.name}` from the next turn." if chosen else "Personality cleared from the next turn."

    async def _undo(self, session) -> str:
        """Restore the files the last turn with changes touched (the checkpoint before it)."""
        from core.host.checkpoints import Checkpoints

        checkpoints = Checkpoints()
        if not await checkpoints.list(session.id):
            return "Nothing to undo: no turn of this session has changed files."
        report = await checkpoints.undo_last(session.id)
        return report.summary()

    async def _search_text(self, query: str) -> str:
        if not query:
            return "Usage: `/search <words>`."
        hits = await self._sessions.store.search(query, limit=10)
        if not hits:
            return f"No past conversation mentions {query!r}."
        lines = [f"Found in {len(hits)} place(s):"]
        for hit in hits:
            lines.append(f"- **{hit.session_title or 'untitled'}** ({hit.role}, `{hit.session_id[:8]}`): {hit.snippet}")
        return "\n".join(lines)

    # --- helpers -----------------------------------------------------------------------

    async def ask(self, session_id: str, request: ApprovalRequest) -> None:
        """Ask the editor; the answer goes to the broker (the first answer from anywhere wins)."""
        from acp.schema import PermissionOption, ToolCallUpdate

        from core.events import DiffContent, TextContent, ToolContent

        content: list[ToolContent] = [DiffContent(d.path, d.old_text, d.new_text) for d in request.diffs]
        if request.command:
            content.append(TextContent(f"```sh\n{request.command}\n```"))
        if request.reason and not request.diffs:
            content.append(TextContent(f"Asking because {request.reason}."))
        # "Always allow" is never offered for dangerous commands.
        options = [
            PermissionOption(option_id=oid, name=name, kind=oid)
            for oid, name, _ in _OPTIONS
            if request.offer_always or oid != "allow_always"
        ]
        decision = Decision.CANCELLED
        asking = asyncio.ensure_future(
            request_permission(
                self._backend.conn,
                session_id,
                ToolCallUpdate(
                    tool_call_id=request.tool_call_id,
                    title=request.title,
                    kind=_tool_kind(request.tool_kind),
                    status="pending",
                    content=acp_content(content) or None,
                ),
                options,
            )
        )
        try:
            # The question may be answered elsewhere first (hermes-mcp, the gateway): stop waiting then.
            waits = {asking} | ({request.future} if request.future is not None else set())
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            if not asking.done():
                asking.cancel()
                return
            response = asking.result()
            outcome = response.outcome
            if getattr(outcome, "outcome", None) == "selected":
                decision = next((d for oid, _, d in _OPTIONS if oid == outcome.option_id), Decision.REJECT_ONCE)
        except asyncio.CancelledError:
            asking.cancel()
            raise
        except Exception as exc:
            log.warning("permission request failed (%s); treating it as rejected", exc)
            decision = Decision.REJECT_ONCE
        await self._sessions.agent.broker.answer(request.id, decision, by="acp")

    async def user_message(self, blocks: list, live: LiveSession) -> UserMessage:
        """Text, audio (transcribed), resource links (read) and embedded resources, as one user message.

        An audio block becomes the text "(voice) <transcript>", which the user is shown as part of
        their own message (a ``user_message_chunk``: Zed appends it to the message just sent, and a
        replayed session shows the same words). Audio that cannot be transcribed fails the prompt
        before anything is stored, saying what to set or what went wrong.
        """
        parts: list[TextPart | ImagePart] = []
        heard: list[str] = []
        for block in blocks:
            kind = getattr(block, "type", None)
            if kind == "text":
                parts.append(TextPart(text=block.text))
            elif kind == "audio":
                heard.append(f"(voice) {await self._transcript(block)}")
                parts.append(TextPart(text=heard[-1]))
            elif kind == "image":
                # A model that does not take images gets a description (core.agent.vision).
                parts.append(ImagePart(media_type=block.mime_type, data=block.data))
            elif kind == "resource_link":
                parts.append(TextPart(text=await self._linked(block, live.session)))
            elif kind == "resource":
                resource = block.resource
                text = getattr(resource, "text", None)
                mime = getattr(resource, "mime_type", None) or ""
                if text is not None:
                    parts.append(TextPart(text=f'<context uri="{resource.uri}">\n{text[:MAX_RESOURCE_CHARS]}\n</context>'))
                elif mime.startswith("image/") and getattr(resource, "blob", None):
                    parts.append(ImagePart(media_type=mime, data=resource.blob))
                else:
                    parts.append(TextPart(text=f"[attached binary resource {resource.uri} ({mime or 'unknown type'}) omitted]"))
            else:
                parts.append(TextPart(text=f"[{kind} content is not supported and was omitted]"))
        if not parts:
            parts.append(TextPart(text=""))
        if heard:
            import acp

            for text in heard:
                await send_update(self._backend.conn, live.session.id, acp.update_user_message_text(text))
        return UserMessage(parts=parts)

    async def _transcript(self, block) -> str:
        """The words of an audio block; a protocol error naming what to set or what failed."""
        import base64
        import binascii

        from acp import RequestError

        from core.models.speech import SpeechError, transcribe

        try:
            audio = base64.b64decode(block.data, validate=True)
        except (binascii.Error, ValueError):
            raise RequestError.invalid_params({"audio": "the audio block's data is not base64"}) from None
        try:
            return await transcribe(self._sessions.config, audio, filename="prompt", mime=block.mime_type or "")
        except SpeechError as exc:
            log.warning("audio prompt not transcribed: %s", exc)
            raise RequestError.invalid_params({"audio": f"The audio was not transcribed: {str(exc).rstrip('.')}."}) from None

    async def _linked(self, block, session) -> str:
        uri = block.uri
        if uri.startswith("file://"):
            from urllib.parse import unquote, urlparse

            path = Path(unquote(urlparse(uri).path))
            if path.is_file():
                try:
                    text = await session.host.read_text(path)
                    return f'<context uri="{uri}">\n{text[:MAX_RESOURCE_CHARS]}\n</context>'
                except (OSError, UnicodeError):
                    pass
        return f"[{block.name}]({uri})"


def _tool_kind(kind: str) -> ToolKind:
    """The ACP tool kind named ``kind``; "other" for a name ACP does not know."""
    from typing import get_args

    from acp.schema import ToolKind

    for known in get_args(ToolKind):
        if known == kind:
            return known
    return "other"
