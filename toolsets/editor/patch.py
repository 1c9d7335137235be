"""apply_patch: unified diffs over several files, created, deleted and renamed ones included.

Hunks are placed where their header says, else at the nearest offset where their lines are,
else with up to MAX_FUZZ context lines dropped at either end (line endings and trailing
whitespace never matter). Hunk counts that do not match their bodies, a common slip in
written diffs, are recounted. Nothing is written unless every hunk of every file applies.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, Field

from core.host.text_files import TextFile
from core.tools.context import ToolContext
from core.tools.diffs import FileChange
from core.tools.errors import ToolError
from core.tools.registry import ToolOutput, tool
from toolsets.editor.common import eol_of, existing_text, shown

__all__ = ["apply_patch", "patch_paths"]

MAX_FUZZ = 2
_HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@(.*)$")
_BARE_HEADER = re.compile(r"^@@\s*@@(.*)$")


class ApplyPatchArgs(BaseModel):
    patch: str = Field(description="unified diff (---/+++ headers, @@ hunks); /dev/null creates or deletes")


def patch_paths(text: str) -> list[str]:
    """The files a patch names (for the editor to follow), cheaply."""
    out = []
    for line in text.splitlines():
        if line.startswith(("+++ ", "--- ")):
            name = _strip_prefix(line[4:].split("\t")[0].strip())
            if name != "/dev/null" and name not in out:
                out.append(name)
    return out


@tool(
    kind="edit",
    read_only=False,
    title=lambda a: "Apply patch to " + ", ".join(patch_paths(a.patch)[:3]),
    paths=patch_paths,
)
async def apply_patch(ctx: ToolContext, args: ApplyPatchArgs) -> ToolOutput:
    """Apply a unified diff to one or more files, all or nothing."""
    from unidiff import PatchSet
    from unidiff.errors import UnidiffParseError

    try:
        patched = PatchSet(_recount(args.patch))
    except UnidiffParseError as exc:
        raise ToolError(f"The patch could not be parsed: {exc}. Send a unified diff with ---/+++ headers and @@ hunks.") from None
    if not len(patched):
        raise ToolError("The patch holds no file changes (it needs ---/+++ headers and @@ hunks).")
    states: dict[Path, _State] = {}
    order: list[_State] = []
    notes: list[str] = []
    for pf in patched:
        if pf.is_binary_file:
            raise ToolError(f"{pf.path}: binary patches are not supported.")
        source_name, target_name = _names(pf.source_file, pf.target_file)
        source = None if pf.is_added_file else ctx.resolve(source_name)
        target = None if pf.is_removed_file else ctx.resolve(target_name)
        path = source or target
        assert path is not None
        state = states.get(path)
        if state is None:
            before = await existing_text(ctx, path)
            state = states[path] = _State(path, before, before.text if before else None)
            order.append(state)
        label = shown(ctx, path)
        if pf.is_added_file:
            body = _apply_hunks(label, "", list(pf), "\n", notes)
            if state.text is not None and state.text != body:
                raise ToolError(f"{label}: the patch creates it, but it already exists with other content.")
            state.text = body
            continue
        if state.text is None:
            raise ToolError(f"{label}: the patch changes it, but it does not exist.")
        new_text = _apply_hunks(label, state.text, list(pf), eol_of(state.text), notes)
        if pf.is_removed_file:
            if new_text.strip():
                raise ToolError(f"{label}: the patch deletes it, but its hunks do not remove all of it.")
            state.text = None
        elif target is not None and target != path:
            if target.exists() or target in states:
                raise ToolError(f"{shown(ctx, target)}: the patch renames {label} to it, but it already exists.")
            state.text, state.move_to = new_text, target
        else:
            state.text = new_text
    changes = [
        FileChange(s.path, s.before, s.text, s.before.encoding if s.before else "utf-8", s.move_to)
        for s in order
        if s.move_to is not None or (s.before.text if s.before else None) != s.text
    ]
    if not changes:
        return ToolOutput("The patch is already applied; nothing changed.")
    diffs = await ctx.apply_changes(f"Apply patch to {len(changes)} file{'s' if len(changes) != 1 else ''}", changes)
    summary = []
    for change in changes:
        label = shown(ctx, change.path)
        if change.move_to is not None:
            summary.append(f"renamed {label} -> {shown(ctx, change.move_to)}")
        elif change.before is None:
            summary.append(f"created {label}")
        elif change.after is None:
            summary.append(f"deleted {label}")
        else:
            summary.append(f"patched {label}")
    text = "Applied: " + ", ".join(summary) + "."
    if notes:
        text += "\n" + "\n".join(notes)
    return ToolOutput(text, diffs=diffs)


@dataclass(slots=True)
class _State:
    path: Path
    before: TextFile | None
    text: str | None
    move_to: Path | None = None


@dataclass(slots=True)
class _Hunk:
    header: str
    start: int  # 0-based line the header names
    old: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    lead: int = 0  # context lines before the first change
    trail: int = 0  # context lines after the last change
    old_no_eol: bool = False
    new_no_eol: bool = False


def _strip_prefix(name: str) -> str:
    name = name.strip()
    return name[2:] if name.startswith(("a/", "b/")) else name


def _names(source: str, target: str) -> tuple[str, str]:
    """Paths without git's a/ and b/ prefixes (only when the patch uses them)."""
    source, target = source.split("\t")[0].strip(), target.split("\t")[0].strip()
    git_style = (source.startswith("a/") or source == "/dev/null") and (target.startswith("b/") or target == "/dev/null")
    if git_style:
        source = source[2:] if source.startswith("a/") else source
        target = target[2:] if target.startswith("b/") else target
    return source, target


def _recount(text: str) -> str:
    """Rewrite hunk headers from their bodies: written diffs often count lines wrong."""
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        header = _HEADER.match(line.rstrip("\r\n")) or _BARE_HEADER.match(line.rstrip("\r\n"))
        if not header:
            out.append(line)
            i += 1
            continue
        j, old, new = i + 1, 0, 0
        while j < len(lines):
            body = lines[j]
            if (
                body.startswith("@@")
                or body.startswith("diff ")
                or (body.startswith("--- ") and j + 1 < len(lines) and lines[j + 1].startswith("+++ "))
            ):
                break
            if body in ("\n", "\r\n"):
                body = lines[j] = " " + body  # a context line whose leading space was lost
            kind = body[:1]
            if kind not in (" ", "-", "+", "\\"):
                break
            old += kind in (" ", "-")
            new += kind in (" ", "+")
            j += 1
        if header.re is _HEADER:
            old_start, new_start, rest = int(header[1]), int(header[3]), header[5]
        else:
            old_start, new_start, rest = (1 if old else 0), (1 if new else 0), header[1]
        out.append(f"@@ -{old_start},{old} +{new_start},{new} @@{rest}\n")
        out.extend(lines[i + 1 : j])
        i = j
    return "".join(out)


def _hunks(raw: list) -> list[_Hunk]:
    hunks = []
    for h in raw:
        hunk = _Hunk(f"@@ -{h.source_start},{h.source_length} +{h.target_start},{h.target_length} @@", max(h.source_start - 1, 0))
        previous = None
        for line in h:
            kind, value = line.line_type, line.value.rstrip("\r\n")
            if kind == "\\":
                hunk.old_no_eol |= previous in (" ", "-")
                hunk.new_no_eol |= previous in (" ", "+")
                continue
            if kind in (" ", "-"):
                hunk.old.append(value)
            if kind in (" ", "+"):
                hunk.new.append(value)
            previous = kind
        kinds = [line.line_type for line in h if line.line_type != "\\"]
        hunk.lead = next((k for k, kind in enumerate(kinds) if kind != " "), len(kinds))
        hunk.trail = next((k for k, kind in enumerate(reversed(kinds)) if kind != " "), 0)
        hunks.append(hunk)
    return hunks


def _apply_hunks(label: str, text: str, raw: list, eol: str, notes: list[str]) -> str:
    lines = text.splitlines()
    ends_with_eol = text.endswith(("\n", "\r")) or not text
    delta, floor = 0, 0
    for number, hunk in enumerate(_hunks(raw), 1):
        expected = hunk.start + delta
        found = _place(lines, hunk, expected, floor)
        if found is None:
            if _place(lines, _Hunk(hunk.header, hunk.start, hunk.new, hunk.new, hunk.lead, hunk.trail), expected, floor) is not None:
                notes.append(f"{label}: hunk {number} was already applied; skipped.")
                continue
            first = next((line for line in hunk.old if line.strip()), "")
            raise ToolError(
                f"{label}: hunk {number} ({hunk.header}) does not apply: the lines it expects "
                f"(starting {first[:80]!r}) are not in the file. Nothing was changed; read the file and redo the patch."
            )
        at, fuzz = found
        lead_cut = min(fuzz, hunk.lead)
        trail_cut = min(fuzz, hunk.trail)
        old_len = len(hunk.old) - lead_cut - trail_cut
        new_lines = hunk.new[lead_cut : len(hunk.new) - trail_cut]
        if at != expected or fuzz:
            notes.append(
                f"{label}: hunk {number} applied at line {at + 1}"
                + (f" (offset {at - expected:+d})" if at != expected else "")
                + (f" with fuzz {fuzz}" if fuzz else "")
            )
        lines[at : at + old_len] = new_lines
        delta += len(new_lines) - old_len
        floor = at + len(new_lines)
        if at + len(new_lines) == len(lines):
            if hunk.new_no_eol:
                ends_with_eol = False
            elif hunk.old_no_eol or not lines:
                ends_with_eol = True
    if not lines:
        return ""
    return eol.join(lines) + (eol if ends_with_eol else "")


def _place(lines: list[str], hunk: _Hunk, expected: int, floor: int) -> tuple[int, int] | None:
    """Where the hunk's old lines are: (line, fuzz), nearest the expected line first."""
    for fuzz in range(MAX_FUZZ + 1):
        lead, trail = min(fuzz, hunk.lead), min(fuzz, hunk.trail)
        if fuzz and not (lead or trail):
            continue
        want = [line.rstrip() for line in hunk.old[lead : len(hunk.old) - trail]]
        if not want:
            return min(max(expected, floor), len(lines)), fuzz
        size = len(want)
        last = len(lines) - size
        for distance in range(0, max(last - floor, expected - floor, 0) + 1):
            for at in (expected + lead - distance, expected + lead + distance) if distance else (expected + lead,):
                if floor <= at <= last and lines[at].rstrip() == want[0] and [line.rstrip() for line in lines[at : at + size]] == want:
                    return at, fuzz
    return None
