"""File tools: read, write, edit. Every change is shown as a diff and approved before it lands."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, Field

from core.messages import FileDiff
from core.tools import ToolContext, ToolError, ToolOutput, tool

__all__ = ["edit_file", "read_file", "write_file"]

MAX_LINES = 2000
MAX_BYTES = 100_000
MAX_LINE_CHARS = 2000


class ReadFileArgs(BaseModel):
    path: str = Field(description="file path")
    offset: int = Field(default=1, ge=1, description="first line, 1-based")
    limit: int = Field(default=MAX_LINES, ge=1, le=MAX_LINES, description="number of lines")


async def _read_existing(ctx: ToolContext, path: Path) -> str:
    if path.is_dir():
        raise ToolError(f"{path} is a directory; use list_files to see what it holds.")
    if path.exists() and _looks_binary(path):
        raise ToolError(f"{path} is a binary file; it cannot be read as text.")
    try:
        return await ctx.host.read_text(path)
    except FileNotFoundError:
        raise ToolError(f"{path} does not exist. Check the path with list_files.") from None


def _looks_binary(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            head = handle.read(8192)
    except OSError:
        return False
    return b"\x00" in head and not head.startswith((b"\xff\xfe", b"\xfe\xff"))


@tool(
    kind="read",
    read_only=True,
    toolsets={"editor", "mcp", "gateway", "cron"},
    title=lambda a: f"Read {a.path}",
    paths=lambda a: [a.path],
)
async def read_file(ctx: ToolContext, args: ReadFileArgs) -> ToolOutput:
    """Read a text file with numbered lines. Long files are cut; the marker says how to read on."""
    path = ctx.resolve(args.path)
    await ctx.check_read(path)
    text = await _read_existing(ctx, path)
    lines = text.splitlines()
    total = len(lines)
    start = args.offset - 1
    if total and start >= total:
        raise ToolError(f"{path} has {total} lines; offset {args.offset} is past the end.")
    out: list[str] = []
    size = 0
    end = start
    for number, line in enumerate(lines[start : start + args.limit], start=args.offset):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + " [line cut]"
        entry = f"{number:>6}\t{line}"
        if size + len(entry) > MAX_BYTES and out:
            break
        out.append(entry)
        size += len(entry) + 1
        end = number
    body = "\n".join(out) if out else "(empty file)"
    if end < total:
        body += f"\n[truncated: showing lines {args.offset}-{end} of {total}. Read more with offset={end + 1}]"
    return ToolOutput(body)


class WriteFileArgs(BaseModel):
    path: str = Field(description="file path")
    content: str = Field(description="the whole new content")


@tool(
    kind="edit",
    read_only=False,
    toolsets={"editor", "mcp", "gateway"},
    title=lambda a: f"Write {a.path}",
    paths=lambda a: [a.path],
)
async def write_file(ctx: ToolContext, args: WriteFileArgs) -> ToolOutput:
    """Create a file or replace its whole content."""
    path = ctx.resolve(args.path)
    if path.is_dir():
        raise ToolError(f"{path} is a directory.")
    try:
        old = await ctx.host.read_text(path) if path.exists() else None
    except FileNotFoundError:
        old = None
    if old == args.content:
        return ToolOutput(f"{path} already has this content; nothing changed.")
    diff = FileDiff(path=str(path), old_text=old, new_text=args.content)
    await ctx.approve_change(f"{'Overwrite' if old is not None else 'Create'} {path}", [diff])
    await ctx.write_text(path, args.content)
    lines = args.content.count("\n") + (0 if args.content.endswith("\n") or not args.content else 1)
    verb = "Overwrote" if old is not None else "Created"
    return ToolOutput(f"{verb} {path} ({lines} line{'s' if lines != 1 else ''}).", diffs=[diff])


class EditFileArgs(BaseModel):
    path: str = Field(description="file path")
    old_string: str = Field(description="exact text to replace; must match once unless replace_all")
    new_string: str = Field(description="replacement text")
    replace_all: bool = Field(default=False, description="replace every match")


@tool(
    kind="edit",
    read_only=False,
    toolsets={"editor", "mcp", "gateway"},
    title=lambda a: f"Edit {a.path}",
    paths=lambda a: [a.path],
)
async def edit_file(ctx: ToolContext, args: EditFileArgs) -> ToolOutput:
    """Replace exact text in a file. old_string must match exactly once unless replace_all is set."""
    path = ctx.resolve(args.path)
    if not args.old_string:
        raise ToolError("old_string is empty; to create or overwrite a file use write_file.")
    old = await _read_existing(ctx, path)
    count = old.count(args.old_string)
    if count == 0:
        if args.new_string and args.new_string in old:
            return ToolOutput(f"{path} already contains the new text; nothing changed.")
        raise ToolError(
            f"old_string was not found in {path}. Read the file again and copy the text exactly, "
            "including whitespace and indentation."
        )
    if count > 1 and not args.replace_all:
        lines = _match_lines(old, args.old_string)
        raise ToolError(
            f"old_string matches {count} times in {path} (at lines {', '.join(map(str, lines[:20]))}). "
            "Include more surrounding text to make it unique, or set replace_all."
        )
    new = old.replace(args.old_string, args.new_string) if args.replace_all else old.replace(args.old_string, args.new_string, 1)
    diff = FileDiff(path=str(path), old_text=old, new_text=new)
    await ctx.approve_change(f"Edit {path}", [diff])
    await ctx.write_text(path, new)
    first = _match_lines(old, args.old_string)[0]
    what = f"{count} replacements" if count > 1 else f"1 replacement at line {first}"
    return ToolOutput(f"Edited {path}: {what}.", diffs=[diff])


def _match_lines(text: str, needle: str) -> list[int]:
    lines, start = [], 0
    while (index := text.find(needle, start)) != -1:
        lines.append(text.count("\n", 0, index) + 1)
        start = index + 1
    return lines
