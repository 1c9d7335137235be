"""What a command runs as text rather than as a program: ``sh -c TEXT``, ``eval``, ``source``,
inline interpreter code (``python -c``, ``perl -e``), code fed on stdin (a here-document, ``echo ... |
sh``) and code downloaded and run (``curl ... | sh``). Mixed into the judge in
``core.policy.command_rules``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from core.policy import command_code as code_
from core.policy.command_args import DANGEROUS, NORMAL, unchecked
from core.policy.command_tables import DOWNLOADERS, PYTHON_MODULES_CODE, names
from core.policy.commands import Script, SimpleCommand

if TYPE_CHECKING:
    from core.policy.command_args import Effects

# Where a command's arguments come from: ("input", replace-string) under xargs, ("placeholder", "{}")
# under find -exec and fd -x; None when they are its own.
Source = tuple[str, str | None] | None
_STDIN_INTERPRETERS = names("python python2 python3 pypy pypy3 perl ruby node nodejs php lua luajit osascript tclsh")


class RunsText:
    """Judging the code a command runs from text, mixed into the judge."""

    __slots__ = ()

    if TYPE_CHECKING:
        # What the judge supplies.
        network: bool

        def flag(self, level: int, reason: str) -> None: ...
        def apply(self, effects: Effects, cwd: Path, *, sends: bool = False) -> None: ...
        def nested_text(self, text: str, cwd: Path, privileged: bool) -> None: ...
        def _write(self, word: str, cwd: Path) -> None: ...
        def _path(self, word: str, cwd: Path) -> Path | None: ...
        def _inside(self, path: Path) -> bool: ...

    def _stdin(self, command: SimpleCommand, script: Script) -> tuple[str, str]:
        """What a program reading its code from stdin gets: ("literal", text), ("unknown", why) or ("none", "")."""
        for redirect in reversed(command.redirects):
            if redirect.op in ("<<", "<<-", "<<<"):
                return ("unknown", "a here-document with substitutions") if unchecked(redirect.target) else ("literal", redirect.target)
            if redirect.op in ("<", "<&", "<>"):
                return ("none", "") if redirect.target == "/dev/null" else ("unknown", f"the file {redirect.target}")
        pipeline = script.pipeline_of(command)
        at = pipeline.index(command)
        if at == 0:
            return "none", ""
        feeder = pipeline[at - 1]
        if not feeder.words:
            return "unknown", "what is piped into it"
        prog, words = os.path.basename(feeder.words[0]), feeder.words[1:]
        if prog == "cat" and words in ([], ["-"]):
            return self._stdin(feeder, script)
        if any(unchecked(w) for w in words):
            return "unknown", f"the output of {prog} with substitutions"
        if prog == "echo":
            while words and words[0] in ("-n", "-e", "-E", "-ne", "-en"):
                words = words[1:]
            if not any("\\" in w for w in words):
                return "literal", " ".join(words)
        if prog == "printf" and words:
            fmt, rest = words[0].replace("\\n", "\n"), words[1:]
            if fmt in ("%s\n", "%s"):
                return "literal", "".join(rest) if fmt == "%s" else "\n".join(rest)
            if "%" not in fmt and "\\" not in fmt:
                return "literal", fmt
        return "unknown", f"the output of {prog}"

    def _shell(self, argv: list[str], command: SimpleCommand, script: Script, cwd: Path, privileged: bool, source: Source = None) -> bool:
        """``sh -c TEXT``, ``eval TEXT``, a shell fed its script: judge what they run.

        True when the text it runs was judged (or flagged as unknowable); False when it runs a
        script file, which is graded as a program.
        """
        if argv[0] == "eval":
            if any(unchecked(w) for w in argv[1:]):
                self.flag(DANGEROUS, "a shell runs text that cannot be checked (eval of a substitution or a variable)")
            self.nested_text(" ".join(argv[1:]), cwd, privileged)
            return True
        stdin, operand, i = False, None, 1
        while i < len(argv):
            word = argv[i]
            if word == "--":
                operand = argv[i + 1] if i + 1 < len(argv) else None
                break
            if word in ("-o", "+o", "-O", "+O", "--rcfile", "--init-file"):
                i += 2
                continue
            if len(word) > 1 and word[0] in "-+" and not word.startswith("--"):
                if "c" in word[1:]:
                    text = next((w for w in argv[i + 1 :] if not w.startswith("-")), None)
                    if text is not None:
                        if source and source[1] and source[1] in text:
                            self.flag(DANGEROUS, f"it runs commands built from its input ({argv[0]} -c with {source[1]})")
                        if unchecked(text):
                            self.flag(DANGEROUS, f"a shell runs text that cannot be checked ({argv[0]} -c with a substitution)")
                        self.nested_text(text, cwd, privileged)
                    return True
                stdin |= "s" in word[1:]
            elif not word.startswith("--"):
                operand = word
                break
            i += 1
        if operand is not None and not stdin:
            if source and source[1] and source[1] in operand:
                self.flag(DANGEROUS, f"it runs the files it finds as scripts ({argv[0]} {source[1]})")
            if operand.startswith("<(") or unchecked(operand):
                self.flag(DANGEROUS, f"a shell runs text that cannot be checked ({argv[0]} {operand})")
                return True
            if operand not in ("/dev/stdin", "-") and not operand.startswith(("/dev/fd/", "/proc/self/fd/")):
                return False
        kind, text = self._stdin(command, script)
        if kind == "literal":
            self.nested_text(text, cwd, privileged)
            return True
        if kind == "unknown":
            self.flag(DANGEROUS, f"a shell runs text that cannot be checked ({text} fed to {argv[0]})")
            return True
        return False

    def _source(self, argv: list[str], command: SimpleCommand, script: Script) -> None:
        target = argv[1] if len(argv) > 1 else ""
        if (
            target.startswith("<(")
            or target in ("/dev/stdin", "-")
            or target.startswith(("/dev/fd/", "/proc/self/fd/"))
            or unchecked(target)
            and "$(" in target
        ):
            self.flag(DANGEROUS, f"a shell runs text that cannot be checked ({argv[0]} {target})")

    def _inline(self, argv: list[str], command: SimpleCommand, script: Script, cwd: Path, source: Source) -> bool:
        """``python -c``, ``perl -e``, ``node -e`` ... and interpreters fed code on stdin; True when it
        serves on the network (``python -m http.server``)."""
        prog = argv[0]
        found = code_.find_inline(prog, argv[1:])
        codes = list(found.codes)
        if found.encoded:
            self.flag(DANGEROUS, f"it runs encoded {found.lang} code, which cannot be checked")
        if not codes and not found.module and prog in _STDIN_INTERPRETERS and found.operands[:1] in ([], ["-"]):
            kind, text = self._stdin(command, script)
            if kind == "literal":
                codes.append(text)
            elif kind == "unknown":
                self.flag(DANGEROUS, f"{found.lang} runs code that cannot be checked ({text})")
        for code in codes:
            if source and source[1] and source[1] in code:
                self.flag(DANGEROUS, f"it runs {found.lang} code built from its input")
            if any(unchecked(a) and code in a for a in argv[1:]):
                self.flag(DANGEROUS, f"it runs {found.lang} code with substitutions, which cannot be checked")
            effects = code_.inline_effects(found.lang, code)
            for word in effects.writes:
                path = self._path(word, cwd)
                if path is not None and not self._inside(path):
                    self.flag(DANGEROUS, f"it runs inline {found.lang} code that writes outside the project ({path})")
            self.apply(effects, cwd)
        if not codes and any(set(a) & set(" ;(") for a in argv[1:]):
            # Options this parse does not know may still carry code: look at the words anyway.
            loose = code_.inline_effects(found.lang, " ".join(argv[1:]))
            if loose.level == DANGEROUS:
                self.flag(DANGEROUS, loose.reason.replace("inline", "what may be inline"))
        if found.in_place:
            self.flag(NORMAL, f"{prog} -i changes files")
            for word in found.operands:
                self._write(word, cwd)
        elif found.module and found.operands:
            module = found.operands[0]
            if module in PYTHON_MODULES_CODE:
                self.flag(NORMAL, f"it runs the project's code (python -m {module})")
            elif module == "http.server":
                return True
        return False

    def _interpreter_input(self, argv: list[str], command: SimpleCommand, script: Script) -> None:
        """Code fetched from the network and run: ``curl ... | sh``, ``sh -c "$(curl ...)"``."""
        fetched = any(runs(nested, DOWNLOADERS) for nested in command.nested)
        upstream = script.pipeline_of(command)
        fetched |= any(
            c is not command and c.words and os.path.basename(c.words[0]) in DOWNLOADERS for c in upstream[: upstream.index(command)]
        )
        if fetched:
            self.flag(DANGEROUS, f"it runs code downloaded from the network ({argv[0]})")


def runs(script: Script, programs: set[str] | frozenset[str]) -> bool:
    """Whether ``script`` or a script nested in it starts one of ``programs``."""
    return any(c.words and os.path.basename(c.words[0]) in programs for s in script.walk() for c in s.commands)
