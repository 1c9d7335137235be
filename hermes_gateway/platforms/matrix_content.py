"""What the Matrix adapter puts in events: Markdown as Matrix HTML, edits, relations, size limits.

A message carries the Markdown as its plain ``body`` and, when it has any formatting, the
rendered ``org.matrix.custom.html`` as ``formatted_body``. Homeservers never refuse markup
(clients sanitise it), but an event is capped at 65,536 bytes of JSON: ``fit`` drops the HTML
first when a text of wide characters would not fit.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from hermes_gateway.platform import Button
from hermes_gateway.render import to_html

__all__ = [
    "HTML_FORMAT",
    "KEYCAPS",
    "LIMIT",
    "choice_numbers",
    "edit_content",
    "fit",
    "keycap_number",
    "matrix_html",
    "message_content",
    "strip_reply_fallback",
    "thread_relation",
]

# Characters of Markdown in one message. With the HTML beside the Markdown, and an edit carrying
# both twice, 8,000 fits the event cap for most texts (``fit`` handles the rest).
LIMIT = 8000
EVENT_BUDGET = 60_000  # bytes, under the homeserver's 65,536 with room for the event's envelope
HTML_FORMAT = "org.matrix.custom.html"
KEYCAPS = [f"{n}\ufe0f\u20e3" for n in range(1, 10)] + ["\U0001f51f"]  # 1️⃣ … 9️⃣ 🔟


def matrix_html(markdown: str) -> str:
    """``org.matrix.custom.html`` for Markdown: the gateway's HTML with line breaks kept (HTML
    collapses newlines; code blocks keep theirs)."""
    rendered = to_html(markdown).replace("</blockquote>\n<blockquote>", "<br>")
    parts = re.split(r"(<pre>.*?</pre>)", rendered, flags=re.S)
    out: list[str] = []
    for index, part in enumerate(parts):
        if index % 2:
            out.append(part)
            continue
        if index > 0:  # a block ends the line itself
            part = part.removeprefix("\n")
        if index < len(parts) - 1:
            part = part.removesuffix("\n")
        part = part.replace("</blockquote>\n", "</blockquote>").replace("\n<blockquote>", "<blockquote>")
        out.append(part.replace("\n", "<br>"))
    return "".join(out)


def message_content(markdown: str, msgtype: str = "m.text") -> dict[str, Any]:
    """A message: the Markdown as ``body``, its HTML as ``formatted_body`` when it has formatting.
    ``m.mentions`` is empty so nothing in a reply pings anyone (``@room`` included)."""
    content: dict[str, Any] = {"msgtype": msgtype, "body": markdown, "m.mentions": {}}
    rendered = matrix_html(markdown)
    if rendered != html.escape(markdown, quote=False).replace("\n", "<br>"):
        content["format"] = HTML_FORMAT
        content["formatted_body"] = rendered
    return content


def edit_content(event_id: str, markdown: str) -> dict[str, Any]:
    """An ``m.replace`` edit: the new message in ``m.new_content``, a "* text" fallback around it."""
    new = message_content(markdown)
    content: dict[str, Any] = {"msgtype": "m.text", "body": f"* {markdown}", "m.mentions": {}, "m.new_content": new}
    if "formatted_body" in new:
        content.update({"format": HTML_FORMAT, "formatted_body": f"* {new['formatted_body']}"})
    content["m.relates_to"] = {"rel_type": "m.replace", "event_id": event_id}
    return content


def thread_relation(root: str, latest: str, *, reply: bool = False) -> dict[str, Any]:
    """In the thread of ``root``; ``latest`` is what clients without threads show it replying to."""
    return {"rel_type": "m.thread", "event_id": root, "is_falling_back": not reply, "m.in_reply_to": {"event_id": latest}}


def _size(content: dict[str, Any]) -> int:
    return len(json.dumps(content, ensure_ascii=False, separators=(",", ":")).encode("utf-8"))


def fit(content: dict[str, Any]) -> dict[str, Any]:
    """Keep an event under the size cap: the HTML goes first, then an edit's fallback text."""
    new = content.get("m.new_content")
    steps = [(content, "html"), (content, "fallback"), (new, "html")] if new is not None else [(content, "html")]
    for part, step in steps:
        if _size(content) <= EVENT_BUDGET:
            break
        if step == "html":
            part.pop("formatted_body", None)
            part.pop("format", None)
        else:
            part["body"] = "* (edited)"
    return content


def keycap_number(key: str) -> int | None:
    """1 for "1️⃣" (with or without the variation selector) or "1"; 10 for "🔟"."""
    key = key.replace("\ufe0f", "").strip()
    if key == "\U0001f51f":
        return 10
    digits = key.removesuffix("\u20e3")
    return int(digits) if digits.isdigit() and 1 <= int(digits) <= 10 else None


def strip_reply_fallback(body: str) -> str:
    """A reply's ``body`` may start with the quoted message ("> <@a:b> text"); the reply is what follows."""
    if not body.startswith("> "):
        return body
    lines = body.split("\n")
    index = 0
    while index < len(lines) and lines[index].startswith(">"):
        index += 1
    return "\n".join(lines[index:]).lstrip("\n")


def choice_numbers(markdown: str, buttons: list[Button]) -> list[int]:
    """The number a question's text gives each choice ("Reply 4 — Allow once"), else 1, 2, 3 …"""
    found: list[int] = []
    for button in buttons:
        matches = re.findall(rf"(?<!\d)(\d{{1,3}})[^\n\d]{{0,8}}{re.escape(button.label)}", markdown)
        found.append(int(matches[-1]) if matches else 0)
    if 0 in found or len(set(found)) != len(found):
        return list(range(1, len(buttons) + 1))
    return found
