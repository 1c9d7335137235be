"""Shell text cut into words and operators the way a shell cuts it: quotes and escapes, ``$'...'``,
``$(...)``, backticks, process substitution, here-documents, brace expansion. ``core.policy.commands``
builds commands from these tokens; the lexer hands the text of nested commands back to the parser.
"""

from __future__ import annotations

import glob as _glob
import re
from collections.abc import Callable
from typing import Any, Generic, TypeVar

S = TypeVar("S")  # what the parser makes of a nested command line
# A lexer token: ("w", word, nested scripts, raw text), ("op", operator), ("io", fd) or ("nl",).
Token = tuple[Any, ...]
_OPERATORS = (
    "&>>",
    "<<<",
    "<<-",
    "&&",
    "||",
    ";;",
    ";&",
    "|&",
    ">>",
    ">|",
    ">&",
    "<&",
    "<>",
    "&>",
    "<<",
    "|",
    "&",
    ";",
    "<",
    ">",
    "(",
    ")",
)
REDIRECTS = frozenset({"&>>", "<<<", "<<-", ">>", ">|", ">&", "<&", "<>", "&>", "<<", "<", ">"})
_ANSI_NUMERIC = re.compile(r"\\(?:x([0-9A-Fa-f]{1,2})|([0-7]{1,3})|[uU]([0-9A-Fa-f]{1,8}))")
_ANSI_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "e": "\x1b", "0": "\0"}


class ParseError(ValueError):
    """The line is not valid shell (an unterminated quote, say)."""


class Word(str):
    """A word after quote removal, remembering what this shell still does to it when it runs.

    ``glob`` is the word as a pattern when it holds unquoted ``*``, ``?`` or ``[`` (quoted ones
    escaped), else None; ``expanded`` is True when this shell substitutes into it (``$X``,
    ``$(...)``, backquotes outside single quotes), so its text is not known before it runs.
    """

    glob: str | None
    expanded: bool
    braces: list[Word] | None  # the words brace expansion makes of it (``{a,b}``), if any

    def __new__(cls, value: str = "", glob: str | None = None, expanded: bool = False) -> Word:
        word = super().__new__(cls, value)
        word.glob = glob
        word.expanded = expanded
        word.braces = None
        return word


def match_paren(s: str, i: int) -> int:
    """Index of the ``)`` closing the ``(`` at ``i`` (quotes and nesting respected), or -1."""
    depth, n = 0, len(s)
    while i < n:
        c = s[i]
        if c == "\\":
            i += 2
            continue
        if c == "'":
            j = s.find("'", i + 1)
            if j < 0:
                return -1
            i = j + 1
            continue
        if c == '"':
            i = _skip_double(s, i)
            if i < 0:
                return -1
            continue
        if c == "`":
            j = _find_backtick(s, i + 1)
            if j < 0:
                return -1
            i = j + 1
            continue
        if c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return -1


def _skip_double(s: str, i: int) -> int:
    i += 1
    while i < len(s):
        c = s[i]
        if c == "\\":
            i += 2
        elif c == '"':
            return i + 1
        elif c == "$" and s.startswith("$(", i):
            j = match_paren(s, i + 1)
            if j < 0:
                return -1
            i = j + 1
        elif c == "`":
            j = _find_backtick(s, i + 1)
            if j < 0:
                return -1
            i = j + 1
        else:
            i += 1
    return -1


def _find_backtick(s: str, i: int) -> int:
    while i < len(s):
        if s[i] == "\\":
            i += 2
        elif s[i] == "`":
            return i
        else:
            i += 1
    return -1


class Lexer(Generic[S]):
    """Turns text into tokens: ("w", value, nested, raw), ("op", op), ("io", fd), ("nl",)."""

    def __init__(self, text: str, depth: int, nest: Callable[[str, int], S]) -> None:
        self.s = text
        self.nest = nest
        self.i = 0
        self.depth = depth
        self.pending: list[tuple[int, str, bool, bool]] = []  # (token index, delimiter, strip tabs, quoted)
        self.out: list[Token] = []

    def tokens(self) -> list[Token]:
        s = self.s
        while True:
            while self.i < len(s) and s[self.i] in " \t\r":
                self.i += 1
            if self.i >= len(s):
                break
            c = s[self.i]
            if c == "\\" and s.startswith("\\\n", self.i):
                self.i += 2
            elif c == "\n":
                self.out.append(("nl",))
                self.i += 1
                self._heredoc_bodies()
            elif c == "#":
                end = s.find("\n", self.i)
                self.i = len(s) if end < 0 else end
            elif c in "<>" and s.startswith("(", self.i + 1):
                j = match_paren(s, self.i + 1)
                if j < 0:
                    raise ParseError("unterminated process substitution")
                nested = self.nest(s[self.i + 2 : j], self.depth + 1)
                self.out.append(("w", Word(s[self.i : j + 1], None, True), [nested], s[self.i : j + 1]))
                self.i = j + 1
            elif op := next((o for o in _OPERATORS if s.startswith(o, self.i)), None):
                self.i += len(op)
                self.out.append(("op", op))
                if op in ("<<", "<<-"):
                    self._heredoc_start(op == "<<-")
            else:
                start = self.i
                value, words_nested = self._word()
                raw = s[start : self.i]
                if raw.isdigit() and self.i < len(s) and s[self.i] in "<>":
                    self.out.append(("io", raw))
                else:
                    self.out.append(("w", value, words_nested, raw))
        if self.pending:
            self._heredoc_bodies()
        return self.out

    def _heredoc_start(self, strip_tabs: bool) -> None:
        while self.i < len(self.s) and self.s[self.i] in " \t":
            self.i += 1
        start = self.i
        value, _ = self._word()
        raw = self.s[start : self.i]
        self.pending.append((len(self.out), value, strip_tabs, raw != value))
        self.out.append(("w", value, [], raw))

    def _heredoc_bodies(self) -> None:
        s = self.s
        for index, delimiter, strip_tabs, quoted in self.pending:
            lines = []
            while self.i < len(s):
                end = s.find("\n", self.i)
                line = s[self.i :] if end < 0 else s[self.i : end]
                self.i = len(s) if end < 0 else end + 1
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                lines.append(line)
            body = "\n".join(lines)
            nested = [] if quoted else _body_substitutions(body, self.depth, self.nest)
            word = Word(body, None, not quoted and ("$" in body or "`" in body))
            self.out[index] = ("w", word, nested, body)
        self.pending = []

    def _word(self) -> tuple[Word, list[S]]:
        s = self.s
        nested: list[S] = []
        self.pieces: list[tuple[str, bool]] = []  # (text, whether its glob characters are live)
        self.expanded = False
        out = _Pieces(self, False)
        bare = _Pieces(self, True)
        while self.i < len(s):
            c = s[self.i]
            if c in " \t\r\n;&|<>()":
                break
            if c == "\\":
                nxt = s[self.i + 1 : self.i + 2]
                if nxt != "\n":
                    out.append(nxt)
                self.i += 2
            elif c == "'":
                j = s.find("'", self.i + 1)
                if j < 0:
                    raise ParseError("unterminated single quote")
                out.append(s[self.i + 1 : j])
                self.i = j + 1
            elif c == '"':
                self.i += 1
                self._double(out, nested)
            elif c == "$":
                self._dollar(out, nested)
            elif c == "`":
                self._backtick(out, nested)
            else:
                bare.append(c)
                self.i += 1
        word = _make_word(self.pieces, self.expanded)
        if any(on and "{" in text for text, on in self.pieces):
            escaped = "".join(text if on else "".join("\\" + ch for ch in text) for text, on in self.pieces)
            expansions = _expand_braces(escaped)
            if expansions != [escaped]:
                word.braces = [_make_word(_unescape(e), self.expanded) for e in expansions]
        return word, nested

    def _double(self, out: _Pieces, nested: list[S]) -> None:
        s = self.s
        while self.i < len(s):
            c = s[self.i]
            if c == '"':
                self.i += 1
                return
            if c == "\\":
                nxt = s[self.i + 1 : self.i + 2]
                if nxt in ('"', "\\", "$", "`"):
                    out.append(nxt)
                elif nxt != "\n":
                    out.append(c + nxt)
                self.i += 2
            elif c == "$":
                self._dollar(out, nested)
            elif c == "`":
                self._backtick(out, nested)
            else:
                out.append(c)
                self.i += 1
        raise ParseError("unterminated double quote")

    def _dollar(self, out: _Pieces, nested: list[S]) -> None:
        s, i = self.s, self.i
        if s.startswith("$((", i) or s.startswith("$(", i):
            j = match_paren(s, i + 1)
            if j < 0:
                raise ParseError("unterminated $(")
            if not s.startswith("$((", i):
                nested.append(self.nest(s[i + 2 : j], self.depth + 1))
            out.append(s[i : j + 1])  # kept as written, so that `sh -c` / eval can re-parse it
            self.expanded = True
            self.i = j + 1
        elif s.startswith("${", i):
            j = s.find("}", i)
            if j < 0:
                raise ParseError("unterminated ${")
            out.append(s[i : j + 1])
            self.expanded = True
            self.i = j + 1
        elif s.startswith("$'", i):
            self.i = i + 2
            while self.i < len(s) and s[self.i] != "'":
                if m := _ANSI_NUMERIC.match(s, self.i):  # \x72, \162, \u0072: bash decodes them
                    digits = m.group(1) or m.group(2) or m.group(3)
                    out.append(chr(int(digits, 8 if m.group(2) else 16) % 0x110000))
                    self.i = m.end()
                elif s[self.i] == "\\" and self.i + 1 < len(s):
                    out.append(_ANSI_ESCAPES.get(s[self.i + 1], "\\" + s[self.i + 1]))
                    self.i += 2
                else:
                    out.append(s[self.i])
                    self.i += 1
            if self.i >= len(s):
                raise ParseError("unterminated $'")
            self.i += 1
        else:
            out.append("$")
            nxt = s[i + 1 : i + 2]
            self.expanded |= bool(nxt) and (nxt.isalnum() or nxt in "_@*#?$!-")
            self.i += 1

    def _backtick(self, out: _Pieces, nested: list[S]) -> None:
        j = _find_backtick(self.s, self.i + 1)
        if j < 0:
            raise ParseError("unterminated backquote")
        nested.append(self.nest(self.s[self.i + 1 : j].replace("\\`", "`"), self.depth + 1))
        out.append(self.s[self.i : j + 1])
        self.expanded = True
        self.i = j + 1


class _Pieces:
    """Where a word's text goes while lexing: quoted text (glob characters inert) or bare."""

    def __init__(self, lexer: Lexer[Any], live: bool) -> None:
        self.lexer, self.live = lexer, live

    def append(self, text: str) -> None:
        self.lexer.pieces.append((text, self.live))


def _make_word(pieces: list[tuple[str, bool]], expanded: bool) -> Word:
    value = "".join(text for text, _ in pieces)
    live = any(on and any(ch in text for ch in "*?[") for text, on in pieces)
    pattern = "".join(text if on else _glob.escape(text) for text, on in pieces) if live else None
    return Word(value, pattern, expanded)


def _unescape(text: str) -> list[tuple[str, bool]]:
    """Pieces of a backslash-escaped word: escaped characters are quoted (glob-inert)."""
    pieces, i = [], 0
    while i < len(text):
        if text[i] == "\\" and i + 1 < len(text):
            pieces.append((text[i + 1], False))
            i += 2
        else:
            pieces.append((text[i], True))
            i += 1
    return pieces


_SEQUENCE = re.compile(r"(-?\d+)\.\.(-?\d+)(?:\.\.(-?\d+))?|([A-Za-z])\.\.([A-Za-z])")


def _expand_braces(s: str, limit: int = 256) -> list[str]:
    """Brace expansion as bash does it (``a{b,c}``, ``{1..3}``) on a backslash-escaped word."""
    i = 0
    while i < len(s):
        if s[i] == "\\":
            i += 2
            continue
        if s[i] == "{" and s[i - 1 : i] != "$":
            depth, j, commas = 0, i, []
            while j < len(s):
                if s[j] == "\\":
                    j += 2
                    continue
                depth += (s[j] == "{") - (s[j] == "}")
                if depth == 0:
                    break
                if s[j] == "," and depth == 1:
                    commas.append(j)
                j += 1
            if j >= len(s):
                return [s]
            inner = s[i + 1 : j]
            if commas:
                bounds = [i, *commas, j]
                parts = [s[a + 1 : b] for a, b in zip(bounds, bounds[1:])]
            elif m := _SEQUENCE.fullmatch(inner):
                if m.group(4):
                    a, b = ord(m.group(4)), ord(m.group(5))
                    parts = [chr(c) for c in range(a, b + (1 if b >= a else -1), 1 if b >= a else -1)][:limit]
                else:
                    a, b, step = int(m.group(1)), int(m.group(2)), abs(int(m.group(3) or 1)) or 1
                    parts = [str(n) for n in range(a, b + (1 if b >= a else -1), step if b >= a else -step)][:limit]
            else:
                i += 1
                continue
            out: list[str] = []
            for part in parts:
                out += _expand_braces(s[:i] + part + s[j + 1 :], limit - len(out))
                if len(out) >= limit:
                    return out[:limit]
            return out
        i += 1
    return [s]


def _body_substitutions(body: str, depth: int, nest: Callable[[str, int], S]) -> list[S]:
    """Commands a here-document runs when expanded: its $(...) and backquotes."""
    found: list[S] = []
    i = 0
    while i < len(body):
        if body.startswith("$(", i) and not body.startswith("$((", i):
            j = match_paren(body, i + 1)
            if j < 0:
                break
            found.append(nest(body[i + 2 : j], depth + 1))
            i = j + 1
        elif body[i] == "`":
            j = _find_backtick(body, i + 1)
            if j < 0:
                break
            found.append(nest(body[i + 1 : j], depth + 1))
            i = j + 1
        else:
            i += 1
    return found
