"""Search tools: list files by glob, grep by regular expression. Both only read."""

from __future__ import annotations

import asyncio
import fnmatch
import os
import re
from pathlib import Path

from pydantic import BaseModel, Field

from core.tools import ToolContext, ToolError, ToolOutput, tool

__all__ = ["grep", "list_files"]

# Directories that are never worth walking into.
SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".mypy_cache", ".pytest_cache", ".tox", "dist", "build", ".idea", ".next", "target"}
MAX_RESULTS = 500


class ListFilesArgs(BaseModel):
    path: str = Field(default=".", description="directory")
    pattern: str = Field(default="*", description="glob matched against paths relative to `path`, e.g. **/*.py")
    limit: int = Field(default=200, ge=1, le=MAX_RESULTS)


def _walk(root: Path):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_DIRS)
        for name in sorted(filenames):
            yield Path(dirpath) / name


def _glob_match(rel: str, pattern: str) -> bool:
    if fnmatch.fnmatch(rel, pattern):
        return True
    # "**/x" also matches "x" at the top; a pattern without "/" matches the file name anywhere.
    if pattern.startswith("**/") and fnmatch.fnmatch(rel, pattern[3:]):
        return True
    return "/" not in pattern and fnmatch.fnmatch(rel.rsplit("/", 1)[-1], pattern)


@tool(
    kind="search",
    read_only=True,
    toolsets={"editor", "mcp", "gateway", "cron"},
    title=lambda a: f"List {a.path}" + (f" ({a.pattern})" if a.pattern != "*" else ""),
    paths=lambda a: [a.path],
)
async def list_files(ctx: ToolContext, args: ListFilesArgs) -> ToolOutput:
    """List files under a directory, recursively, filtered by a glob."""
    root = ctx.resolve(args.path)
    await ctx.check_read(root)
    if not root.is_dir():
        raise ToolError(f"{root} is not a directory.")

    def collect() -> tuple[list[str], bool]:
        found: list[str] = []
        for file in _walk(root):
            rel = file.relative_to(root).as_posix()
            if _glob_match(rel, args.pattern):
                if len(found) == args.limit:
                    return found, True
                found.append(rel)
        return found, False

    found, more = await asyncio.to_thread(collect)
    if not found:
        return ToolOutput(f"No files under {root} match {args.pattern!r}.")
    text = "\n".join(found)
    if more:
        text += f"\n[more files match; showing the first {args.limit}. Narrow the pattern or raise limit]"
    return ToolOutput(text)


class GrepArgs(BaseModel):
    pattern: str = Field(description="regular expression (Python syntax)")
    path: str = Field(default=".", description="file or directory")
    glob: str | None = Field(default=None, description="only files matching this glob, e.g. *.py")
    ignore_case: bool = False
    limit: int = Field(default=100, ge=1, le=MAX_RESULTS, description="max matching lines")


@tool(
    kind="search",
    read_only=True,
    toolsets={"editor", "mcp", "gateway", "cron"},
    title=lambda a: f"Search {a.pattern!r}" + (f" in {a.path}" if a.path != "." else ""),
    paths=lambda a: [a.path],
)
async def grep(ctx: ToolContext, args: GrepArgs) -> ToolOutput:
    """Search file contents with a regular expression; prints path:line:text."""
    root = ctx.resolve(args.path)
    await ctx.check_read(root)
    try:
        regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"Invalid regular expression {args.pattern!r}: {exc}") from None
    if not root.exists():
        raise ToolError(f"{root} does not exist.")

    def search() -> tuple[list[str], bool]:
        hits: list[str] = []
        files = [root] if root.is_file() else _walk(root)
        base = root.parent if root.is_file() else root
        for file in files:
            rel = file.relative_to(base).as_posix()
            if args.glob and not _glob_match(rel, args.glob):
                continue
            try:
                with open(file, "rb") as handle:
                    data = handle.read(4_000_000)
            except OSError:
                continue
            if b"\x00" in data[:8192]:
                continue
            for number, line in enumerate(data.decode("utf-8", errors="replace").splitlines(), 1):
                if regex.search(line):
                    if len(hits) == args.limit:
                        return hits, True
                    hits.append(f"{rel}:{number}:{line[:300]}")
        return hits, False

    hits, more = await asyncio.to_thread(search)
    if not hits:
        return ToolOutput(f"No matches for {args.pattern!r} under {root}.")
    text = "\n".join(hits)
    if more:
        text += f"\n[more matches; showing the first {args.limit}. Narrow the pattern or path]"
    return ToolOutput(text)
