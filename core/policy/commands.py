"""Shell command lines, parsed the way a shell splits them, so approvals judge structure, not text.

``parse`` handles quotes and escapes, pipes, ``&&`` ``||`` ``;`` ``&``, subshells and groups,
``$(...)``, backticks and process substitution, redirections and here-documents, function
definitions, ``if``/``for``/``case``. ``core.policy.command_rules.assess`` unwraps what runs other
commands (``sudo``, ``env``, ``sh -c``, ``eval``, ``xargs``, ``find -exec`` ...) and grades each
one: safe, normal, dangerous, or hard (never run, whatever the answer).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass, field

from core.policy.command_words import REDIRECTS, Lexer, ParseError, Token

__all__ = ["Redirect", "Script", "SimpleCommand", "parse"]

MAX_DEPTH = 8
_START_KEYWORDS = frozenset({"if", "then", "else", "elif", "do", "while", "until", "!", "fi", "done", "esac"})
_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")


@dataclass(slots=True)
class Redirect:
    op: str
    target: str  # a path, an fd number, or a here-document's body
    fd: str | None = None


@dataclass(slots=True)
class SimpleCommand:
    """One command as the shell would run it: words after quote removal, its redirections."""

    words: list[str]
    assignments: list[str] = field(default_factory=list)
    redirects: list[Redirect] = field(default_factory=list)
    # Scripts inside its words and redirections: $(...), `...`, <(...), here-document bodies.
    nested: list[Script] = field(default_factory=list)
    pipeline: int = 0
    background: bool = False
    function: str | None = None  # the function whose body holds it


@dataclass(slots=True)
class Script:
    commands: list[SimpleCommand] = field(default_factory=list)
    functions: set[str] = field(default_factory=set)

    def pipeline_of(self, command: SimpleCommand) -> list[SimpleCommand]:
        return [c for c in self.commands if c.pipeline == command.pipeline]

    def walk(self) -> Iterator[Script]:
        """Every script in this one, itself first."""
        yield self
        for command in self.commands:
            for nested in command.nested:
                yield from nested.walk()


def parse(text: str, depth: int = 0) -> Script:
    """Parse a command line; raises ParseError when a shell would refuse it too."""
    if depth > MAX_DEPTH:
        raise ParseError("commands nested too deeply")
    return _Builder(Lexer(text, depth, parse).tokens(), depth).build()


# --- building commands --------------------------------------------------------------------


class _Builder:
    def __init__(self, tokens: list[Token], depth: int) -> None:
        self.toks = tokens
        self.depth = depth
        self.script = Script()
        self.pipeline = 0
        self.functions: list[tuple[str, int]] = []  # (name, brace depth of its body)
        self.braces = 0
        self.pending_function: str | None = None
        self._reset()

    def _reset(self) -> None:
        self.words: list[str] = []
        self.assignments: list[str] = []
        self.redirects: list[Redirect] = []
        self.nested: list[Script] = []

    def _finish(self, *, background: bool = False, pipe: bool = False) -> None:
        if self.words or self.redirects or self.assignments:
            self.script.commands.append(
                SimpleCommand(
                    self.words,
                    self.assignments,
                    self.redirects,
                    self.nested,
                    self.pipeline,
                    background,
                    self.functions[-1][0] if self.functions else None,
                )
            )
        self._reset()
        if not pipe:
            self.pipeline += 1

    def build(self) -> Script:
        toks, i = self.toks, 0
        skipping: str | None = None  # "for": skip `NAME in WORDS` to the separator; "case": to `in`
        in_patterns = False  # reading a case clause's patterns, up to ")"
        cases = 0
        while i < len(toks):
            tok = toks[i]
            fd = None
            if tok[0] == "io":
                fd, i = tok[1], i + 1
                tok = toks[i] if i < len(toks) else ("nl",)
            if tok[0] == "op" and tok[1] in REDIRECTS:
                if i + 1 >= len(toks) or toks[i + 1][0] != "w":
                    raise ParseError(f"a redirection ({tok[1]}) without a target")
                target = toks[i + 1]
                self.redirects.append(Redirect(tok[1], target[1], fd))
                self.nested.extend(target[2])
                i += 2
                continue
            i += 1
            if skipping:
                if skipping == "case" and tok[0] == "w" and tok[3] == "in":
                    skipping, in_patterns = None, True
                elif skipping == "for" and (tok[0] == "nl" or tok[0] == "op" and tok[1] in (";", "&")):
                    skipping = None
                continue
            if in_patterns:
                if tok[0] == "w" and tok[3] == "esac":
                    in_patterns, cases = False, cases - 1
                elif tok[0] == "op" and tok[1] == ")":
                    in_patterns = False
                continue
            if tok[0] == "nl":
                self._finish()
            elif tok[0] == "op":
                op = tok[1]
                if op in ("|", "|&"):
                    self._finish(pipe=True)
                elif op == "(" and len(self.words) == 1 and not self.assignments and i < len(toks) and toks[i] == ("op", ")"):
                    self.pending_function = self.words[0]
                    self._reset()
                    i += 1
                else:
                    self._finish(background=op == "&")
                    in_patterns = cases > 0 and op in (";;", ";&")
            else:
                _, value, nested, raw = tok
                if not self.words and self._keyword(raw, value):
                    if raw in ("for", "select", "case"):
                        skipping = "case" if raw == "case" else "for"
                        cases += raw == "case"
                    elif raw == "esac":
                        cases -= 1
                    elif raw == "function" and i < len(toks) and toks[i][0] == "w":
                        self.pending_function = toks[i][3]
                        i += 1
                        if toks[i : i + 2] == [("op", "("), ("op", ")")]:
                            i += 2
                    continue
                if not self.words and _ASSIGNMENT.match(raw):
                    self.assignments.append(value)
                else:
                    self.words.extend(value.braces or [value])
                self.nested.extend(nested)
        self._finish()
        return self.script

    def _keyword(self, raw: str, value: str) -> bool:
        """Reserved words at a command's start; braces open and close groups and function bodies."""
        if raw != value:
            return False
        if raw == "{":
            self.braces += 1
            if self.pending_function:
                self.functions.append((self.pending_function, self.braces))
                self.script.functions.add(self.pending_function)
                self.pending_function = None
            return True
        if raw == "}":
            if self.functions and self.functions[-1][1] == self.braces:
                self.functions.pop()
            self.braces -= 1
            return True
        return raw in _START_KEYWORDS or raw in ("for", "select", "case", "function")
