"""Search tools: grep (ripgrep when there is one, else pure Python, same results), glob, list_dir.

All of them respect .gitignore and .ignore, skip .git and node_modules, and cap what they
return with a count of what was left out. Files that may hold secrets are never searched.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from core.host.text_files import BinaryFileError, decode_text
from core.paths import is_secret_path
from core.tools.context import ToolContext
from core.tools.errors import ToolError
from core.tools.registry import ToolOutput, tool
from toolsets.editor.common import shown
from toolsets.editor.remote_search import remote_list, remote_walk
from toolsets.editor.walk import ALWAYS_SKIP, Ignore, human_size, walk


def remote_of(ctx: ToolContext) -> Any | None:
    """The session's remote files (an SSH host's), or None when they are on this machine."""
    return getattr(ctx.host, "remote_files", None)


__all__ = ["glob", "grep", "grep_python", "grep_ripgrep", "list_dir", "remote_of", "ripgrep_argv", "ripgrep_path"]

MAX_FILE_BYTES = 20_000_000
MAX_LINE_CHARS = 300


def ripgrep_path() -> str | None:
    """The rg binary: next to this Python (the `ripgrep` package puts it there), else on PATH."""
    if os.environ.get("HERMES_RIPGREP", "").lower() in ("0", "off", "no"):
        return None
    beside = Path(sys.executable).parent / "rg"
    return str(beside) if beside.exists() else shutil.which("rg")


@dataclass(slots=True)
class Found:
    """What a search found: lines to show (path, number, text, is_match), and totals.

    Both engines feed it the same stream (ripgrep's JSON events: match and context lines in
    order, then a file's end), so their results are the same.
    """

    limit: int
    context: int
    lines: list[tuple[Path, int, str, bool]] = field(default_factory=list)
    matches: int = 0  # every matching line, shown or not
    shown: int = 0
    files: set[Path] = field(default_factory=set)
    files_shown: set[Path] = field(default_factory=set)
    secrets: set[Path] = field(default_factory=set)
    _pending: list[tuple[Path, int, str, bool]] = field(default_factory=list)
    _last_match: tuple[Path, int] | None = None

    def add(self, path: Path, number: int, line: str, is_match: bool) -> None:
        if is_secret_path(path):
            if is_match:
                self.secrets.add(path)
            return
        if not is_match:
            last = self._last_match
            if last and last[0] == path and number - last[1] <= self.context and self.lines and self.lines[-1][:2] == (path, number - 1):
                self.lines.append((path, number, line, False))  # after a shown match
            elif self.context:
                self._pending = [*self._pending, (path, number, line, False)][-self.context :]  # maybe before the next
            return
        self.matches += 1
        self.files.add(path)
        if self.shown >= self.limit:
            self._last_match, self._pending = None, []
            return
        self.shown += 1
        self.files_shown.add(path)
        self.lines.extend(p for p in self._pending if p[0] == path and p[1] >= number - self.context)
        self._pending = []
        self.lines.append((path, number, line, True))
        self._last_match = (path, number)

    def end_file(self) -> None:
        self._pending, self._last_match = [], None


class GrepArgs(BaseModel):
    pattern: str = Field(description="regular expression")
    path: str = "."
    glob: str = Field(default="", description="file filter, e.g. *.py")
    context: int = Field(default=0, ge=0, le=10, description="lines around matches")
    ignore_case: bool = False
    limit: int = Field(default=100, ge=1, le=500, description="max matching lines")


def _top(ctx: ToolContext, root: Path) -> Path:
    return next((r for r in ctx.roots if root == r or r in root.parents), root if root.is_dir() else root.parent)


@tool(
    kind="search",
    read_only=True,
    title=lambda a: f"Search {a.pattern!r}" + (f" in {a.path}" if a.path != "." else "") + (f" ({a.glob})" if a.glob else ""),
    paths=lambda a: [a.path],
)
async def grep(ctx: ToolContext, args: GrepArgs) -> ToolOutput:
    """Search file contents by regex; prints path:line:text (context lines path-line-text)."""
    root = ctx.resolve(args.path)
    await ctx.check_read(root)
    if (remote := remote_of(ctx)) is not None:
        return ToolOutput(_format(ctx, await _grep_remote(ctx, remote, root, args), args))
    if not root.exists():
        raise ToolError(f"{root} does not exist.")
    try:
        regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"Invalid regular expression {args.pattern!r}: {exc}") from None
    found = None
    if (rg := ripgrep_path()) is not None:
        found = await grep_ripgrep(rg, root, args)
    if found is None:  # no rg, or a pattern only Python's engine takes (look-around, say)
        found = await asyncio.to_thread(grep_python, root, _top(ctx, root), regex, args)
    return ToolOutput(_format(ctx, found, args))


def _format(ctx: ToolContext, found: Found, args: GrepArgs) -> str:
    if not found.lines:
        text = f"No matches for {args.pattern!r} in {shown(ctx, ctx.resolve(args.path))}."
    else:
        out, last = [], None
        for path, number, line, is_match in found.lines:
            if args.context and last is not None and (last[0] != path or number != last[1] + 1):
                out.append("--")
            if len(line) > MAX_LINE_CHARS:
                line = line[:MAX_LINE_CHARS] + " [line cut]"
            mark = ":" if is_match else "-"
            out.append(f"{shown(ctx, path)}{mark}{number}{mark}{line}")
            last = (path, number)
        text = "\n".join(out)
    left = found.matches - found.shown
    if left > 0:
        files = len(found.files - found.files_shown)
        text += (
            f"\n[{left} more matching lines"
            + (f" in {files} more files" if files else "")
            + " not shown; narrow the pattern, path or glob]"
        )
    if found.secrets:
        text += f"\n[{len(found.secrets)} file(s) that may hold secrets were not searched]"
    return text


def grep_python(root: Path, top: Path, regex: re.Pattern, args: GrepArgs) -> Found:
    """The search without ripgrep: same files, same order, same output."""
    found = Found(args.limit, args.context)
    only = _file_filter(args.glob)
    files = [root] if root.is_file() else walk(root, Ignore(top))
    for path in files:
        if only is not None and not only.match_file(_relative(path, root)):
            continue
        try:
            if path.stat().st_size > MAX_FILE_BYTES:
                continue
            text = decode_text(path.read_bytes()).text
        except (OSError, BinaryFileError):
            continue
        _grep_text(found, path, text, regex, args.context)
    return found


def _grep_text(found: Found, path: Path, text: str, regex: re.Pattern, context: int) -> None:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    hits = {i for i, line in enumerate(lines) if regex.search(line)}
    if not hits:
        return
    near = {j for i in hits for j in range(max(i - context, 0), min(i + context, len(lines) - 1) + 1)}
    for j in sorted(near):
        found.add(path, j + 1, lines[j].rstrip("\r"), j in hits)
    found.end_file()


async def _grep_remote(ctx: ToolContext, remote: Any, root: Path, args: GrepArgs) -> Found:
    """grep on another machine: its ripgrep when it has one, else its files read and searched here."""
    kind = await remote.kind_of(root)
    if kind is None:
        raise ToolError(f"{root} does not exist.")
    try:
        regex = re.compile(args.pattern, re.IGNORECASE if args.ignore_case else 0)
    except re.error as exc:
        raise ToolError(f"Invalid regular expression {args.pattern!r}: {exc}") from None
    only = _file_filter(args.glob)
    found = Found(args.limit, args.context)
    code, out, err = await remote.capture(ripgrep_argv("rg", args, remote.remote(root)))
    if code in (0, 1) or (code == 2 and b"regex" not in err.lower()):
        for raw in out.splitlines():
            event = json.loads(raw)
            event_kind, data = event.get("type"), event.get("data", {})
            if event_kind in ("match", "context"):
                path = remote.local(_text(data["path"]))
                if only is not None and not only.match_file(_relative(path, root)):
                    continue
                found.add(path, data["line_number"], _text(data["lines"]).rstrip("\n").rstrip("\r"), event_kind == "match")
            elif event_kind == "end":
                found.end_file()
        return found
    # No ripgrep there (or a pattern only Python's engine takes).
    files = await remote_walk(remote, root, _top(ctx, root)) if kind == "dir" else [(root, kind, 0, "")]
    for path, file_kind, size, _ in files:
        if only is not None and not only.match_file(_relative(path, root)):
            continue
        if size > MAX_FILE_BYTES or (file_kind == "link" and await remote.kind_of(path) != "file"):
            continue
        try:
            text = decode_text(await remote.read_bytes(path)).text
        except (OSError, BinaryFileError):
            continue
        _grep_text(found, path, text, regex, args.context)
    return found


def ripgrep_argv(rg: str, args: GrepArgs, root: str) -> list[str]:
    """ripgrep's command line for a search of ``root`` (JSON events, our ignore rules)."""
    command = [
        rg,
        "--json",
        "--sort",
        "path",
        "--hidden",
        "--no-require-git",
        "--no-ignore-global",
        "--no-ignore-exclude",
        "--max-filesize",
        "20M",
    ]
    for name in sorted(ALWAYS_SKIP):
        command += ["-g", f"!{name}/"]
    if args.ignore_case:
        command.append("-i")
    if args.context:
        command += ["-C", str(args.context)]
    # The file filter is applied by the caller, not with rg's -g: that would override the ignore rules.
    return [*command, "-e", args.pattern, "--", root]


async def grep_ripgrep(rg: str, root: Path, args: GrepArgs) -> Found | None:
    """The search through ripgrep's JSON output; None when rg cannot take the pattern."""
    command = ripgrep_argv(rg, args, str(root))
    only = _file_filter(args.glob)
    proc = await asyncio.create_subprocess_exec(
        *command,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=64 * 1024 * 1024,  # one JSON event per line, and a minified file's line can be huge
    )
    found = Found(args.limit, args.context)
    assert proc.stdout is not None and proc.stderr is not None
    errors = asyncio.create_task(proc.stderr.read())  # drained alongside, so rg never blocks on it
    try:
        async for raw in proc.stdout:
            event = json.loads(raw)
            kind, data = event.get("type"), event.get("data", {})
            if kind in ("match", "context"):
                path = Path(_text(data["path"]))
                if only is not None and not only.match_file(_relative(path, root)):
                    continue
                line = _text(data["lines"]).rstrip("\n").rstrip("\r")
                found.add(path, data["line_number"], line, kind == "match")
            elif kind == "end":
                found.end_file()
        stderr = await errors
        code = await proc.wait()
    except BaseException:
        errors.cancel()
        proc.kill()
        raise
    if code == 2 and b"regex" in stderr.lower() and not found.lines:
        return None
    return found


def _relative(path: Path, root: Path) -> str:
    return path.name if path == root else path.relative_to(root).as_posix()


def _text(value: dict) -> str:
    if "text" in value:
        return value["text"]
    import base64

    return base64.b64decode(value["bytes"]).decode("utf-8", errors="replace")


def _file_filter(glob: str):
    if not glob:
        return None
    import pathspec

    return pathspec.GitIgnoreSpec.from_lines([glob])


class GlobArgs(BaseModel):
    pattern: str = Field(description="e.g. **/*.py, src/*.ts")
    path: str = "."
    limit: int = Field(default=200, ge=1, le=1000)


@tool(
    kind="search",
    read_only=True,
    title=lambda a: f"Find {a.pattern}" + (f" in {a.path}" if a.path != "." else ""),
    paths=lambda a: [a.path],
)
async def glob(ctx: ToolContext, args: GlobArgs) -> ToolOutput:
    """Find files by glob (gitignore-style), with sizes; ignored files are skipped."""
    root = ctx.resolve(args.path)
    await ctx.check_read(root)
    if (remote := remote_of(ctx)) is not None:
        return _glob_output(ctx, root, args, *await _glob_remote(ctx, remote, root, args))
    if not root.is_dir():
        raise ToolError(f"{root} is not a directory.")
    only = _file_filter(args.pattern)

    def collect() -> tuple[list[str], int]:
        out: list[str] = []
        more = 0
        for path in walk(root, Ignore(_top(ctx, root))):
            if not only.match_file(path.relative_to(root).as_posix()):
                continue
            if len(out) >= args.limit:
                more += 1
                continue
            out.append(_describe(ctx, path))
        return out, more

    return _glob_output(ctx, root, args, *await asyncio.to_thread(collect))


def _glob_output(ctx: ToolContext, root: Path, args: GlobArgs, found: list[str], more: int) -> ToolOutput:
    if not found:
        return ToolOutput(f"No files in {shown(ctx, root)} match {args.pattern!r}.")
    text = "\n".join(found)
    if more:
        text += f"\n[{more} more files match; narrow the pattern or raise limit]"
    return ToolOutput(text)


async def _glob_remote(ctx: ToolContext, remote: Any, root: Path, args: GlobArgs) -> tuple[list[str], int]:
    if await remote.kind_of(root) != "dir":
        raise ToolError(f"{root} is not a directory.")
    only = _file_filter(args.pattern)
    out: list[str] = []
    more = 0
    for path, kind, size, target in await remote_walk(remote, root, _top(ctx, root)):
        if not only.match_file(path.relative_to(root).as_posix()):
            continue
        if len(out) >= args.limit:
            more += 1
            continue
        out.append(f"{shown(ctx, path)} -> {target}" if kind == "link" else f"{shown(ctx, path)}  {human_size(size)}")
    return out, more


def _describe(ctx: ToolContext, path: Path) -> str:
    try:
        if path.is_symlink():
            return f"{shown(ctx, path)} -> {os.readlink(path)}"
        return f"{shown(ctx, path)}  {human_size(path.stat().st_size)}"
    except OSError:
        return shown(ctx, path)


class ListDirArgs(BaseModel):
    path: str = "."
    depth: int = Field(default=1, ge=1, le=4)
    limit: int = Field(default=300, ge=1, le=2000)


@tool(kind="search", read_only=True, title=lambda a: f"List {a.path}", paths=lambda a: [a.path])
async def list_dir(ctx: ToolContext, args: ListDirArgs) -> ToolOutput:
    """List a directory (to depth levels): kinds, sizes, entry counts; ignored entries skipped."""
    root = ctx.resolve(args.path)
    await ctx.check_read(root)
    if (remote := remote_of(ctx)) is not None:
        if (kind := await remote.kind_of(root)) != "dir":
            raise ToolError(f"{root} is not a directory." + (" Use read_file for files." if kind == "file" else ""))
        return _list_output(*await remote_list(remote, root, _top(ctx, root), args.depth, args.limit))
    if not root.is_dir():
        raise ToolError(f"{root} is not a directory." + (" Use read_file for files." if root.is_file() else ""))
    ignore = Ignore(_top(ctx, root))

    def collect() -> tuple[list[str], int, list[str]]:
        out: list[str] = []
        skipped: list[str] = []
        more = 0

        def visit(directory: Path, level: int) -> None:
            nonlocal more
            try:
                entries = sorted(os.scandir(directory), key=lambda e: (not e.is_dir(follow_symlinks=False), e.name))
            except OSError:
                return
            for entry in entries:
                path, is_dir = Path(entry.path), entry.is_dir(follow_symlinks=False)
                if ignore.ignored(path, is_dir):
                    skipped.append(path.relative_to(root).as_posix() + ("/" if is_dir else ""))
                    continue
                if len(out) >= args.limit:
                    more += 1
                    continue
                indent = "  " * (level - 1)
                if entry.is_symlink():
                    out.append(f"{indent}{entry.name} -> {os.readlink(path)}")
                elif is_dir:
                    try:
                        count = sum(1 for e in os.scandir(path) if not ignore.ignored(Path(e.path), e.is_dir(follow_symlinks=False)))
                    except OSError:
                        count = 0
                    out.append(f"{indent}{entry.name}/  ({count} entries)")
                    if level < args.depth:
                        visit(path, level + 1)
                else:
                    out.append(f"{indent}{entry.name}  {human_size(entry.stat().st_size)}")

        visit(root, 1)
        return out, more, skipped

    return _list_output(*await asyncio.to_thread(collect))


def _list_output(lines: list[str], more: int, skipped: list[str]) -> ToolOutput:
    text = "\n".join(lines) if lines else "(empty directory)"
    if more:
        text += f"\n[{more} more entries not shown; raise limit or list a subdirectory]"
    if skipped:
        names = ", ".join(skipped[:5]) + (", ..." if len(skipped) > 5 else "")
        text += f"\n[{len(skipped)} ignored entries not shown: {names}]"
    return ToolOutput(text)
