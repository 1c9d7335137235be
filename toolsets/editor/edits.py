"""edit_file: exact replacements first; when they miss, tolerant matching that says how it matched.

Strategies, in order: exact; line endings (CRLF vs LF); trailing whitespace; indentation shifted
as a block. A match must be unique unless ``replace_all``; ambiguity is an error listing the
candidate lines. An edit whose result is already in the file is a no-op, not an error.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from itertools import accumulate

from pydantic import BaseModel, Field, model_validator

from core.tools.context import ToolContext
from core.tools.diffs import FileChange
from core.tools.errors import ToolError
from core.tools.registry import ToolOutput, tool
from toolsets.editor.common import eol_of, read_text, shown, unified_diff, with_eol

__all__ = ["apply_edit", "edit_file"]


class Edit(BaseModel):
    old_string: str
    new_string: str
    replace_all: bool = False


class EditFileArgs(BaseModel):
    path: str
    old_string: str = Field(default="", description="exact text to replace, unique unless replace_all")
    new_string: str = ""
    replace_all: bool = False
    edits: list[Edit] = Field(default_factory=list, description="several replacements, in order, all or none")

    @model_validator(mode="after")
    def _some_edit(self) -> EditFileArgs:
        if not self.old_string and not self.edits:
            raise ValueError("give old_string and new_string, or edits (to create a file use write_file)")
        if self.old_string and "new_string" not in self.model_fields_set:
            raise ValueError('new_string is missing (use "" to delete the text)')
        return self

    def all_edits(self) -> list[Edit]:
        first = [Edit(old_string=self.old_string, new_string=self.new_string, replace_all=self.replace_all)] if self.old_string else []
        return first + list(self.edits)


@dataclass(frozen=True, slots=True)
class Applied:
    text: str
    note: str  # "exact at line 3", "already applied", ...
    changed: bool


@tool(kind="edit", read_only=False, title=lambda a: f"Edit {a.path}", paths=lambda a: [a.path])
async def edit_file(ctx: ToolContext, args: EditFileArgs) -> ToolOutput:
    """Replace text in a file: old_string -> new_string, or several edits at once (all or none)."""
    path = ctx.resolve(args.path)
    before = await read_text(ctx, path, record=False)
    text, notes = before.text, []
    edits = args.all_edits()
    for number, edit in enumerate(edits, 1):
        where = f" (edit {number} of {len(edits)}; nothing was changed)" if len(edits) > 1 else ""
        try:
            applied = apply_edit(text, edit.old_string, edit.new_string, replace_all=edit.replace_all)
        except ToolError as exc:
            raise ToolError(f"{shown(ctx, path)}: {exc}{where}") from None
        text = applied.text
        notes.append(applied.note)
    label = shown(ctx, path)
    summary = "; ".join(notes) if len(notes) > 1 else notes[0]
    if text == before.text:
        return ToolOutput(f"{label} already contains this change; nothing changed ({summary}).")
    diffs = await ctx.apply_changes(f"Edit {path}", [FileChange(path, before, text, before.encoding)])
    return ToolOutput(f"Edited {label}: {summary}.\n{unified_diff(before.text, text, label)}", diffs=diffs)


def apply_edit(text: str, old: str, new: str, *, replace_all: bool = False) -> Applied:
    """Apply one replacement to ``text``; raises ToolError when it cannot be placed."""
    if old == new:
        raise ToolError("old_string and new_string are the same")
    eol = eol_of(text)
    new = with_eol(new.replace("\r\n", "\n"), eol)
    table: _Lines | None = None

    def line_table() -> _Lines:
        nonlocal table
        table = table or _Lines(text)
        return table

    strategies = (
        lambda: _exact(text, old, new, eol),
        lambda: _line_endings(text, old, new, eol),
        lambda: _trailing_whitespace(line_table(), old, new, eol),
        lambda: _indentation(line_table(), old, new, eol),
    )
    for strategy in strategies:
        found = strategy()
        if found is None or not found[1]:
            continue
        name, spans = found
        if name == "exact" and _inside_new(text, old, new, spans):
            return Applied(text, "already applied", False)
        lines = [text.count("\n", 0, start) + 1 for start, _, _ in spans]
        if len(spans) > 1 and not replace_all:
            raise ToolError(
                f"old_string matches {len(spans)} times ({name}) at lines {', '.join(map(str, lines[:20]))}. "
                "Include more surrounding lines to make it unique, or set replace_all."
            )
        out, last = [], 0
        for start, end, replacement in spans:
            out.append(text[last:start])
            out.append(replacement)
            last = end
        out.append(text[last:])
        where = f"line {lines[0]}" if len(lines) == 1 else f"{len(lines)} places"
        return Applied("".join(out), f"{name} match at {where}", True)
    if _present(text, table or _Lines(text), new, eol):
        return Applied(text, "already applied", False)
    raise ToolError(f"old_string was not found (tried exact, line endings, trailing whitespace, indentation). {_closest(text, old)}")


Spans = list[tuple[int, int, str]]


def _find_all(text: str, needle: str) -> list[int]:
    found, start = [], 0
    while needle and (index := text.find(needle, start)) != -1:
        found.append(index)
        start = index + len(needle)
    return found


def _exact(text: str, old: str, new: str, eol: str) -> tuple[str, Spans]:
    return "exact", [(i, i + len(old), new) for i in _find_all(text, old)]


def _line_endings(text: str, old: str, new: str, eol: str) -> tuple[str, Spans] | None:
    converted = with_eol(old.replace("\r\n", "\n"), eol)
    if converted == old:
        return None
    return "line endings", [(i, i + len(converted), new) for i in _find_all(text, converted)]


def _inside_new(text: str, old: str, new: str, spans: Spans) -> bool:
    """The edit was applied already: every match of old lies inside a match of new."""
    if old not in new or not new:
        return False
    offset = new.find(old)
    starts = set(_find_all(text, new))
    return all(start - offset in starts for start, _, _ in spans)


def _split(text: str) -> list[str]:
    lines = text.replace("\r\n", "\n").split("\n")
    return lines[:-1] if len(lines) > 1 and lines[-1] == "" else lines


class _Lines:
    """A text's lines (no line endings) and where each starts, computed once per edit."""

    def __init__(self, text: str) -> None:
        raw = text.split("\n")
        if len(raw) > 1 and raw[-1] == "":
            raw.pop()
        self.starts = list(accumulate((len(line) + 1 for line in raw[:-1]), initial=0))
        self.lines = [line[:-1] if line.endswith("\r") else line for line in raw] if "\r" in text else raw
        self._keyed: dict[bool, list[str]] = {}

    def keyed(self, indent: bool) -> list[str]:
        if indent not in self._keyed:
            self._keyed[indent] = [line.strip() for line in self.lines] if indent else [line.rstrip() for line in self.lines]
        return self._keyed[indent]

    def span(self, first: int, last: int) -> tuple[int, int]:
        return self.starts[first], self.starts[last] + len(self.lines[last])


def _fuzzy(table: _Lines, old: str, new: str, eol: str, name: str, indent: bool) -> tuple[str, Spans] | None:
    old_lines, new_lines = _split(old), _split(new)
    first = next((k for k, line in enumerate(old_lines) if line.strip()), None)
    if first is None:
        return None
    want = [line.strip() if indent else line.rstrip() for line in old_lines]
    keyed, lines, count = table.keyed(indent), table.lines, len(old_lines)
    found: Spans = []
    at = first
    while True:
        try:
            at = keyed.index(want[first], at)  # jump to the next line like the first one
        except ValueError:
            break
        i, at = at - first, at + 1
        if i + count > len(lines) or keyed[i : i + count] != want:
            continue
        replacement = new_lines
        if indent:
            mapped = _reindent(lines[i : i + count], old_lines, new_lines, first)
            if mapped is None:
                continue
            replacement = mapped
            if not found:
                name = f"indentation ({len(_lead(lines[i + first])) - len(_lead(old_lines[first])):+d})"
        found.append((*table.span(i, i + count - 1), eol.join(replacement)))
    return name, found


def _lead(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _reindent(window: list[str], old_lines: list[str], new_lines: list[str], first: int) -> list[str] | None:
    """new_lines moved by the indentation the file has over old_lines, if that shift is uniform."""
    base_old, base_file = _lead(old_lines[first]), _lead(window[first])
    if base_old == base_file:
        return None  # same indentation: not this strategy's match
    for file_line, old_line in zip(window, old_lines):
        if old_line.strip() and (not old_line.startswith(base_old) or file_line.rstrip() != base_file + old_line.rstrip()[len(base_old) :]):
            return None
    return [base_file + line[len(base_old) :] if line.strip() and line.startswith(base_old) else line for line in new_lines]


def _trailing_whitespace(table: _Lines, old: str, new: str, eol: str) -> tuple[str, Spans] | None:
    return _fuzzy(table, old, new, eol, "trailing whitespace", indent=False)


def _indentation(table: _Lines, old: str, new: str, eol: str) -> tuple[str, Spans] | None:
    return _fuzzy(table, old, new, eol, "indentation", indent=True)


def _present(text: str, table: _Lines, new: str, eol: str) -> bool:
    # A short new_string ("x", ")") is found anywhere; only a distinctive one shows the edit was made.
    if len(new.strip()) < 4:
        return False
    if new in text:
        return True
    found = _fuzzy(table, new, new, eol, "", indent=False)
    return bool(found and found[1])


def _closest(text: str, old: str) -> str:
    first = next((line.strip() for line in _split(old) if line.strip()), "")
    lines = text.splitlines()
    if not first or len(lines) > 20_000:
        return "Read the file again and copy the text exactly, with its whitespace."
    stripped = [line.strip() for line in lines]
    close = difflib.get_close_matches(first, stripped, n=1, cutoff=0.6)
    if not close:
        return "Nothing like its first line is in the file; read the file again."
    number = stripped.index(close[0]) + 1
    return f"The closest line is {number}: {lines[number - 1].strip()[:200]!r}. Read around it and copy the text exactly."
