"""Reading and writing email for the email platform: who really sent a message (the receiving
server's Authentication-Results), the new text of a reply without what it quotes, bodies, files,
subjects and the thread a message belongs to."""

from __future__ import annotations

import hashlib
import mimetypes
import re
from collections.abc import Awaitable, Callable
from email.message import EmailMessage, Message
from html.parser import HTMLParser
from pathlib import Path

from hermes_gateway.platform import Attachment
from hermes_gateway.render import to_html

__all__ = [
    "SUBJECT_PREFIX",
    "attachments_of",
    "authenticated_sender",
    "automatic",
    "body_text",
    "clean_subject",
    "html_body",
    "message_ids",
    "new_subject",
    "strip_quoted",
    "thread_name",
]


# -- authentication -------------------------------------------------------------------------


def authenticated_sender(message: Message, sender: str, authserv_id: str) -> bool:
    """Whether the receiving server (``authserv_id``) vouches for ``sender``'s domain: in the topmost
    Authentication-Results with that id, dkim=pass with an aligned header.d, or spf=pass with an
    aligned smtp.mailfrom."""
    domain = sender.rpartition("@")[2].lower().rstrip(".")
    if not domain:
        return False
    for header in message.get_all("Authentication-Results") or []:
        server, results = _parse_authentication_results(str(header))
        if not _trusted(server, authserv_id.lower()):
            continue
        for method, result, props in results:
            if result != "pass":
                continue
            if method == "dkim":
                signer = props.get("header.d") or props.get("header.i", "").rpartition("@")[2]
                if _aligned(signer, domain):
                    return True
            elif method == "spf":
                envelope = props.get("smtp.mailfrom") or ""
                if envelope and _aligned(envelope.rpartition("@")[2], domain):
                    return True
        return False  # only the topmost header of the trusted server counts
    return False


def _trusted(server: str, authserv_id: str) -> bool:
    """``authserv_id`` is the receiving server's id, or ``*.example.net`` for any host under a domain
    (providers whose inbound hosts each write their own name)."""
    if authserv_id.startswith("*."):
        return server.endswith(authserv_id[1:])
    return server == authserv_id


def _aligned(domain: str, from_domain: str) -> bool:
    domain = domain.lower().strip().rstrip(".")
    return bool(domain) and (domain == from_domain or from_domain.endswith("." + domain) or domain.endswith("." + from_domain))


def _parse_authentication_results(value: str) -> tuple[str, list[tuple[str, str, dict[str, str]]]]:
    """RFC 8601: ``authserv-id [version]; method=result prop=value ...; ...`` with comments removed."""
    text = _without_comments(value)
    segments = [s.strip() for s in _split_outside_quotes(text, ";")]
    head = segments[0].split() if segments else []
    server = head[0].lower() if head else ""
    results: list[tuple[str, str, dict[str, str]]] = []
    for segment in segments[1:]:
        words = _split_outside_quotes(segment, " \t\r\n")
        words = [w for w in words if w]
        if not words or "=" not in words[0]:
            continue
        method, _, result = words[0].partition("=")
        props = {}
        for word in words[1:]:
            key, eq, val = word.partition("=")
            if eq:
                props[key.lower()] = val.strip('"')
        results.append((method.split("/")[0].lower(), result.lower(), props))
    return server, results


def _without_comments(value: str) -> str:
    out: list[str] = []
    depth = 0
    quoted = False
    escaped = False
    for char in value:
        if escaped:
            escaped = False
            if depth == 0:
                out.append(char)
            continue
        if char == "\\":
            escaped = True
            if depth == 0:
                out.append(char)
            continue
        if char == '"' and depth == 0:
            quoted = not quoted
        elif not quoted and char == "(":
            depth += 1
            continue
        elif not quoted and char == ")" and depth:
            depth -= 1
            continue
        if depth == 0:
            out.append(char)
    return "".join(out)


def _split_outside_quotes(text: str, separators: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    quoted = False
    for char in text:
        if char == '"':
            quoted = not quoted
        if char in separators and not quoted:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return parts


# -- message contents -----------------------------------------------------------------------

SUBJECT_PREFIX = re.compile(r"^\s*((re|fw|fwd|aw|wg|sv|vs|antw|tr)\s*(\[\d+\])?\s*:\s*)+", re.IGNORECASE)
_ATTRIBUTION = re.compile(
    r"^(on|le|am|el|il|op|em|den)\b.{0,400}\b(wrote|a écrit|schrieb|escribió|ha scritto|schreef|escreveu|skrev)\b.{0,200}:\s*$",
    re.IGNORECASE | re.DOTALL,
)
_MESSAGE_ID = re.compile(r"<[^<>\s]+>")
_SAFE_THREAD = re.compile(r"[A-Za-z0-9._%+\-@!#$&'*/=?^`{|}~]{1,200}")


def strip_quoted(text: str) -> str:
    """The new part of a reply: quoted lines (">"), everything from an "On ... wrote:" line (in a
    few languages, also wrapped over two lines), an Outlook "Original Message" block, and the
    signature after "-- " are cut."""
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    kept: list[str] = []
    for i, line in enumerate(lines):
        bare = line.strip()
        following = lines[i + 1].strip() if i + 1 < len(lines) else ""
        if _ATTRIBUTION.match(bare) or (
            bare and re.match(r"^(on|le|am|el|il|op|em|den)\b", bare, re.IGNORECASE) and _ATTRIBUTION.match(f"{bare} {following}")
        ):
            break
        if re.match(r"^-{2,}\s*original message\s*-{2,}$", bare, re.IGNORECASE) or line in ("-- ", "--"):
            break
        if re.fullmatch(r"_{10,}", bare) and following.lower().startswith("from:"):
            break
        if bare.lower().startswith("from:") and any(n.strip().lower().startswith("sent:") for n in lines[i + 1 : i + 4]):
            break
        if bare.startswith(">"):
            continue
        kept.append(line)
    return "\n".join(kept).strip()


def clean_subject(subject: str) -> str:
    return re.sub(r"\s+", " ", SUBJECT_PREFIX.sub("", subject)).strip()


def new_subject(text: str) -> str:
    """A subject for a message that starts a thread: its first line, without Markdown marks."""
    for line in text.splitlines():
        line = re.sub(r"[#*_`>]+", "", line).strip()
        if line:
            return line if len(line) <= 70 else line[:69].rstrip() + "…"
    return "Hermes"


def message_ids(value: str) -> list[str]:
    return _MESSAGE_ID.findall(value)


def thread_name(root: str) -> str:
    """A place's thread from a root Message-ID: the id itself when it is plain (no ':' nor spaces),
    else a digest of it."""
    bare = root.strip().strip("<>")
    if _SAFE_THREAD.fullmatch(bare):
        return bare
    return "h" + hashlib.sha256(root.encode()).hexdigest()[:24]


def automatic(message: Message) -> bool:
    """Bounces, vacation and other automatic replies, bulk mail (RFC 3834, common headers)."""
    auto = str(message["Auto-Submitted"] or "no").strip().lower()
    if auto and not auto.startswith("no"):
        return True
    if str(message["Precedence"] or "").strip().lower() in ("bulk", "junk", "list", "auto_reply"):
        return True
    if message["X-Autoreply"] or message["X-Autorespond"] or message["List-Id"]:
        return True
    return bool(str(message["Return-Path"] or "").strip() == "<>" or message.get_content_type() == "multipart/report")


def body_text(message: EmailMessage | Message) -> str:
    if not isinstance(message, EmailMessage):
        return ""
    part = message.get_body(preferencelist=("plain", "html"))
    if part is None:
        return ""
    try:
        content = part.get_content()
    except (LookupError, ValueError):
        payload = part.get_payload(decode=True)
        content = payload.decode("utf-8", errors="replace") if isinstance(payload, bytes) else ""
    if not isinstance(content, str):
        return ""
    return _HTMLText.text_of(content) if part.get_content_type() == "text/html" else content


class _HTMLText(HTMLParser):
    """The text of an HTML body, without scripts, styles and quoted replies (blockquote, gmail_quote)."""

    _BLOCK = {"p", "div", "br", "li", "tr", "h1", "h2", "h3", "h4", "h5", "h6", "pre", "table"}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.skip: list[str] = []  # open tags whose content is dropped

    @classmethod
    def text_of(cls, html_text: str) -> str:
        parser = cls()
        parser.feed(html_text)
        parser.close()
        return re.sub(r"\n{3,}", "\n\n", "".join(parser.out)).strip()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        classes = " ".join(v or "" for k, v in attrs if k == "class")
        if self.skip:
            if tag == self.skip[0]:
                self.skip.append(tag)
            return
        if tag in ("script", "style", "head", "title", "blockquote") or "gmail_quote" in classes:
            self.skip.append(tag)
        elif tag in self._BLOCK:
            self.out.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if self.skip:
            if tag == self.skip[0]:
                self.skip.pop()
            return
        if tag in self._BLOCK:
            self.out.append("\n")

    def handle_data(self, data: str) -> None:
        if not self.skip:
            self.out.append(data)


def attachments_of(message: Message) -> list[Attachment]:
    """Each file in the message: parts with a file name, marked as attachments, or media."""
    found: list[Attachment] = []
    body = message.get_body(preferencelist=("plain", "html")) if isinstance(message, EmailMessage) else None
    for index, part in enumerate(message.walk()):
        if part.is_multipart() or part is body:
            continue
        filename = part.get_filename()
        mime = part.get_content_type()
        if not (filename or part.get_content_disposition() == "attachment" or mime.split("/")[0] in ("image", "audio", "video")):
            continue
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        name = Path(filename).name if filename else f"attachment-{index}{mimetypes.guess_extension(mime) or '.bin'}"
        found.append(Attachment(name=name, mime=mime, size=len(data), fetch=_constant(data), voice=mime.startswith("audio/")))
    return found


def _constant(data: bytes) -> Callable[[], Awaitable[bytes]]:
    async def fetch() -> bytes:
        return data

    return fetch


def html_body(markdown: str) -> str:
    return (
        f'<!DOCTYPE html><html><body><div style="white-space: pre-wrap; font-family: sans-serif">{to_html(markdown)}</div></body></html>\n'
    )
