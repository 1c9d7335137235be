"""What the editor tools share: reading text with clear errors, line endings, short diffs."""

from __future__ import annotations

import difflib
import re
from pathlib import Path

from core.host.text_files import BinaryFileError, TextFile
from core.tools.context import ToolContext
from core.tools.diffs import changed_region
from core.tools.errors import ToolError

__all__ = ["eol_of", "existing_text", "match_conventions", "read_text", "shown", "unified_diff", "with_eol"]

MAX_DIFF_CHARS = 2500
_HUNK = re.compile(r"^@@ -(\d+)(,\d+)? \+(\d+)(,\d+)? @@")


def shown(ctx: ToolContext, path: Path) -> str:
    """A path as the model should write it back: relative to the working directory when inside."""
    try:
        return path.relative_to(ctx.cwd.resolve()).as_posix()
    except ValueError:
        return str(path)


async def read_text(ctx: ToolContext, path: Path, *, record: bool) -> TextFile:
    """A text file's content; ``record`` counts it as read (for stale-write checks)."""
    if path.is_dir():
        raise ToolError(f"{path} is a directory; list_dir shows what it holds.")
    try:
        return await (ctx.read_file(path) if record else ctx.host.read_file(path))
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist. Find the right path with glob or list_dir.") from None
    except BinaryFileError as exc:
        raise ToolError(f"{path} is not a text file (it looks like {exc}); only text files can be read or edited.") from None


async def existing_text(ctx: ToolContext, path: Path) -> TextFile | None:
    """The content of a file about to be replaced, or None when it does not exist yet."""
    if path.is_dir():
        raise ToolError(f"{path} is a directory.")
    if not path.exists():
        return await ctx.current(path)  # the editor may hold a buffer for a file not yet saved
    return await read_text(ctx, path, record=False)


def eol_of(text: str) -> str:
    """The file's line ending: CRLF when most of its lines end so."""
    crlf = text.count("\r\n")
    return "\r\n" if crlf and crlf * 2 >= text.count("\n") else "\n"


def with_eol(text: str, eol: str) -> str:
    """``text`` with every line ending made ``eol``."""
    if eol == "\r\n":
        return text.replace("\r\n", "\n").replace("\n", "\r\n")
    return text


def match_conventions(old: str, new: str) -> str:
    """New whole-file content written the way the old file was: line endings and final newline."""
    eol = eol_of(old)
    if eol == "\r\n" and "\r\n" not in new:
        new = with_eol(new, eol)
    if old and new:
        if old.endswith("\n") and not new.endswith("\n"):
            new += eol
        elif not old.endswith("\n") and new.endswith("\n"):
            new = new[: -len(eol)] if new.endswith(eol) else new[:-1]
    return new


def unified_diff(old: str, new: str, label: str, *, context: int = 2, limit: int = MAX_DIFF_CHARS) -> str:
    """A short unified diff for the model to check its change (line numbers are the file's)."""
    start, old_end, new_end, first_line = changed_region(old, new, context)
    a, b = old[start:old_end].splitlines(), new[start:new_end].splitlines()
    if min(len(a), len(b)) > 20_000:
        return f"(lines {first_line}-{first_line + len(a)} changed: too many to show)"
    out = []
    for line in difflib.unified_diff(a, b, f"a/{label}", f"b/{label}", n=context, lineterm=""):
        if match := _HUNK.match(line):
            shift = first_line - 1
            line = f"@@ -{int(match[1]) + shift}{match[2] or ''} +{int(match[3]) + shift}{match[4] or ''} @@{line[match.end() :]}"
        out.append(line)
    text = "\n".join(out)
    if len(text) > limit:
        cut = text.rfind("\n", 0, limit)
        text = text[: cut if cut > 0 else limit] + f"\n[diff cut: {text.count(chr(10), limit) + 1} more lines]"
    return text
