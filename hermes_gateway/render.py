"""Model Markdown to Telegram: split into messages of at most 4096 characters, render to HTML.

Splitting happens on the Markdown source, before rendering, at paragraph boundaries where
possible (then lines, then hard cuts). A fenced code block cut in two is closed at the end of
one chunk and reopened, with its language, at the start of the next, so each chunk renders on
its own. Telegram's HTML subset is small (b, i, code, pre, a, s, u, blockquote); anything
else is escaped. When the rendered HTML of a chunk would not fit, or Telegram rejects it, the
chunk goes as plain text instead (see ``hermes_gateway.telegram_io``).
"""

from __future__ import annotations

import html
import re

__all__ = ["LIMIT", "number_chunks", "split_markdown", "to_html"]

LIMIT = 4096
# Room left in each chunk for the "(2/3)" label and a reopened code fence.
_RESERVE = 48

_FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+#.-]*)\s*$")
_INLINE = re.compile(
    r"(?P<code>`[^`\n]+`)"
    r"|(?P<link>\[(?P<label>[^\]\n]+)\]\((?P<url>https?://[^)\s]+)\))"
    r"|(?P<bold>\*\*(?P<btext>[^*\n]+?)\*\*|__(?P<btext2>[^_\n]+?)__)"
    r"|(?P<strike>~~(?P<stext>[^~\n]+?)~~)"
    r"|(?P<italic>(?<![\w*])\*(?P<itext>[^*\n]+?)\*(?![\w*])|(?<![\w_])_(?P<itext2>[^_\n]+?)_(?![\w_]))"
)
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^(\s*)[-*+]\s+(.*)$")
_QUOTE = re.compile(r"^\s*>\s?(.*)$")


def split_markdown(text: str, limit: int = LIMIT) -> list[str]:
    """Chunks of ``text`` that each fit in one message (with room for a number label)."""
    budget = max(limit - _RESERVE, 64)
    text = text.strip("\n")
    if len(text) <= budget:
        return [text] if text else []
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    fence: str | None = None  # the open fence line ("```python") while inside a code block

    def flush() -> None:
        nonlocal current, size
        body = "\n".join(current).strip("\n")
        if fence is not None:
            body += "\n```"
        if body.strip():
            chunks.append(body)
        current = [fence] if fence is not None else []
        size = len(fence) + 1 if fence is not None else 0

    for line in _lines(text, budget - 16):
        match = _FENCE.match(line)
        # Prefer to cut at a blank line (a paragraph end) once the chunk is well filled.
        if size + len(line) + 1 > budget or (not line.strip() and fence is None and size > budget * 0.8):
            flush()
            if not line.strip() and not current:
                continue
        current.append(line)
        size += len(line) + 1
        if match:
            fence = None if fence is not None else f"```{match.group(2)}"
    body = "\n".join(current).strip("\n")
    if body.strip() and body.strip() != fence:
        chunks.append(body + ("\n```" if fence is not None else ""))
    return chunks


def _lines(text: str, width: int) -> list[str]:
    """Lines of ``text``, any longer than ``width`` cut at a space where one is near."""
    out: list[str] = []
    for line in text.split("\n"):
        while len(line) > width:
            cut = line.rfind(" ", width // 2, width)
            cut = cut if cut > 0 else width
            out.append(line[:cut])
            line = line[cut:].lstrip(" ")
        out.append(line)
    return out


def number_chunks(chunks: list[str]) -> list[str]:
    """Label chunks "(1/3)" when there is more than one, so a reader knows more follows."""
    if len(chunks) <= 1:
        return chunks
    total = len(chunks)
    return [f"({i}/{total})\n{chunk}" for i, chunk in enumerate(chunks, 1)]


def to_html(markdown: str) -> str:
    """Telegram HTML for one chunk of Markdown."""
    out: list[str] = []
    code: list[str] | None = None
    language = ""
    for line in markdown.split("\n"):
        fence = _FENCE.match(line)
        if fence and code is None:
            code, language = [], fence.group(2)
            continue
        if fence and code is not None:
            out.append(_pre(code, language))
            code = None
            continue
        if code is not None:
            code.append(line)
            continue
        out.append(_block_line(line))
    if code is not None:  # an unclosed fence still renders as code
        out.append(_pre(code, language))
    return "\n".join(out)


def _pre(lines: list[str], language: str) -> str:
    body = html.escape("\n".join(lines), quote=False)
    if language:
        return f'<pre><code class="language-{html.escape(language)}">{body}</code></pre>'
    return f"<pre>{body}</pre>"


def _block_line(line: str) -> str:
    heading = _HEADING.match(line)
    if heading:
        return f"<b>{_inline(heading.group(1))}</b>"
    quote = _QUOTE.match(line)
    if quote:
        return f"<blockquote>{_inline(quote.group(1))}</blockquote>"
    bullet = _BULLET.match(line)
    if bullet:
        return f"{bullet.group(1)}• {_inline(bullet.group(2))}"
    return _inline(line)


def _inline(text: str) -> str:
    out: list[str] = []
    pos = 0
    for match in _INLINE.finditer(text):
        out.append(html.escape(text[pos : match.start()], quote=False))
        pos = match.end()
        if match.group("code"):
            out.append(f"<code>{html.escape(match.group('code')[1:-1], quote=False)}</code>")
        elif match.group("link"):
            url = html.escape(match.group("url"), quote=True)
            out.append(f'<a href="{url}">{html.escape(match.group("label"), quote=False)}</a>')
        elif match.group("bold"):
            out.append(f"<b>{html.escape(match.group('btext') or match.group('btext2'), quote=False)}</b>")
        elif match.group("strike"):
            out.append(f"<s>{html.escape(match.group('stext'), quote=False)}</s>")
        else:
            out.append(f"<i>{html.escape(match.group('itext') or match.group('itext2'), quote=False)}</i>")
    out.append(html.escape(text[pos:], quote=False))
    return "".join(out)
