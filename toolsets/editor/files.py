"""File tools: read, write, delete, move. Every change is a diff the user approves first."""

from __future__ import annotations

from pydantic import BaseModel, Field

from core.tools.context import ToolContext
from core.tools.diffs import FileChange
from core.tools.errors import ToolError
from core.tools.registry import ToolOutput, tool
from toolsets.editor.common import existing_text, match_conventions, read_text, shown

__all__ = ["delete_file", "move_file", "read_file", "write_file"]

MAX_LINES = 2000
MAX_BYTES = 60_000
MAX_LINE_CHARS = 2000


class ReadFileArgs(BaseModel):
    path: str
    offset: int = Field(default=1, ge=1, description="first line")
    limit: int = Field(default=MAX_LINES, ge=1, le=MAX_LINES)


@tool(
    kind="read",
    read_only=True,
    title=lambda a: f"Read {a.path}" + (f" from line {a.offset}" if a.offset > 1 else ""),
    paths=lambda a: [a.path],
)
async def read_file(ctx: ToolContext, args: ReadFileArgs) -> ToolOutput:
    """Read a text file as numbered lines. Long files are cut; the marker says how to read on."""
    path = ctx.resolve(args.path)
    await ctx.check_read(path)
    found = await read_text(ctx, path, record=True)
    lines = found.text.splitlines()
    total = len(lines)
    start = args.offset - 1
    if total and start >= total:
        raise ToolError(f"{shown(ctx, path)} has {total} lines; offset {args.offset} is past the end.")
    out: list[str] = []
    size = 0
    end = start
    for number, line in enumerate(lines[start : start + args.limit], start=args.offset):
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + f" [line cut: {len(line) - MAX_LINE_CHARS} more characters]"
        entry = f"{number:>6}\t{line}"
        if size + len(entry) > MAX_BYTES and out:
            break
        out.append(entry)
        size += len(entry) + 1
        end = number
    body = "\n".join(out) if out else "(empty file)"
    if end < total:
        body += f"\n[truncated: showing lines {args.offset}-{end} of {total}. Read more with offset={end + 1}]"
    if found.encoding != "utf-8":
        body += f"\n[encoding: {found.encoding}; kept when the file is changed]"
    return ToolOutput(body)


class WriteFileArgs(BaseModel):
    path: str
    content: str = Field(description="the whole new content")


@tool(kind="edit", read_only=False, title=lambda a: f"Write {a.path}", paths=lambda a: [a.path])
async def write_file(ctx: ToolContext, args: WriteFileArgs) -> ToolOutput:
    """Create a file or replace its whole content (prefer edit_file for changes)."""
    path = ctx.resolve(args.path)
    before = await existing_text(ctx, path)
    content, encoding = args.content, "utf-8"
    if before is not None:
        # An overwrite keeps the file's line endings, final newline and encoding.
        content, encoding = match_conventions(before.text, content), before.encoding
        if content == before.text:
            return ToolOutput(f"{shown(ctx, path)} already has this content; nothing changed.")
    verb = "Overwrote" if before is not None else "Created"
    diffs = await ctx.apply_changes(f"{'Overwrite' if before else 'Create'} {path}", [FileChange(path, before, content, encoding)])
    count = content.count("\n") + (0 if content.endswith("\n") or not content else 1)
    return ToolOutput(f"{verb} {shown(ctx, path)} ({count} line{'s' if count != 1 else ''}).", diffs=diffs)


class DeleteFileArgs(BaseModel):
    path: str


@tool(kind="delete", read_only=False, title=lambda a: f"Delete {a.path}", paths=lambda a: [a.path])
async def delete_file(ctx: ToolContext, args: DeleteFileArgs) -> ToolOutput:
    """Delete a file (undo brings it back)."""
    path = ctx.resolve(args.path)
    if path.is_dir():
        raise ToolError(f"{path} is a directory; delete_file removes files only.")
    before = await ctx.current(path)
    if before is None:
        raise ToolError(f"{shown(ctx, path)} does not exist.")
    diffs = await ctx.apply_changes(f"Delete {path}", [FileChange(path, before, None)])
    return ToolOutput(f"Deleted {shown(ctx, path)}.", diffs=diffs)


class MoveFileArgs(BaseModel):
    source: str
    destination: str = Field(description="must not exist")


@tool(
    kind="move",
    read_only=False,
    title=lambda a: f"Move {a.source} → {a.destination}",
    paths=lambda a: [a.source, a.destination],
)
async def move_file(ctx: ToolContext, args: MoveFileArgs) -> ToolOutput:
    """Move or rename a file."""
    source, target = ctx.resolve(args.source), ctx.resolve(args.destination)
    if source.is_dir():
        raise ToolError(f"{source} is a directory; move_file moves files only.")
    if target.is_dir():
        target = target / source.name
    if target.exists():
        raise ToolError(f"{shown(ctx, target)} already exists; delete it first or pick another name.")
    before = await ctx.current(source)
    if before is None:
        raise ToolError(f"{shown(ctx, source)} does not exist.")
    await ctx.apply_changes(f"Move {source} → {target}", [FileChange(source, before, None, move_to=target)])
    return ToolOutput(f"Moved {shown(ctx, source)} to {shown(ctx, target)}.")
